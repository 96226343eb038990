"""DrQA-style TF-IDF (scikit-learn) on the hand-written fixture corpus."""

from pathlib import Path

import numpy as np
import pytest

from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_jsonl
from ecqg.retrieval.tfidf import TfidfIndex, build_tfidf_index, drqa_idf, top_k

FIXTURES = Path(__file__).parent / "fixtures" / "retrieval"
PASSAGES = [r for _, r in read_jsonl(FIXTURES / "passages.jsonl")]
QUERIES = {"paris": "What is the capital of France?", "ny": "New York", "lh": "lighthouse",
           "austen": "who wrote pride and prejudice", "none": "zzzqqq", "stop": "the of and"}


@pytest.fixture(scope="module")
def index():
    return TfidfIndex.build(PASSAGES, batch_size=5, progress=False)


def test_right_passage_ranks_first(index):
    run = index.search(QUERIES, k=3)
    assert run["paris"][0][0] == "wiki-paris-1"
    assert run["austen"][0][0] == "wiki-pp-film" and run["austen"][1][0] == "wiki-pp-novel"
    assert run["none"] == [] and run["stop"] == []
    assert 0 < run["paris"][0][1] <= 1.0  # l2-normalised: a cosine


def test_save_load_round_trip_is_identical(index, tmp_path):
    stats = build_tfidf_index(PASSAGES, tmp_path / "tfidf", batch_size=7, progress=False)
    assert stats["documents"] == 16 and stats["bytes"] > 0
    loaded = TfidfIndex.load(tmp_path / "tfidf")
    assert sorted(p.name for p in (tmp_path / "tfidf").iterdir()) == [
        "idf_features.npy", "idf_values.npy", "ids.json", "matrix.npz", "params.json"]
    assert loaded.ids == index.ids and loaded.params == index.params
    assert (loaded.matrix != index.matrix).nnz == 0
    assert loaded.search(QUERIES, k=5) == index.search(QUERIES, k=5)  # exact floats, same order


def test_bigram_ranks_the_phrase_above_the_words_apart(index):
    # the two passages have identical unigrams after stop-word removal; only wiki-nyc-1 has "new york"
    assert [pid for pid, _ in index.search({"q": "New York"}, k=2)["q"]] == ["wiki-nyc-1", "wiki-york-1"]
    unigram = TfidfIndex.build(PASSAGES, ngram_range=[1, 1], progress=False).search({"q": "New York"}, k=2)["q"]
    assert unigram[0][1] == unigram[1][1]  # a tie without bigrams ...
    assert [pid for pid, _ in unigram] == ["wiki-york-1", "wiki-nyc-1"]  # ... broken by corpus order


def test_ties_follow_corpus_order(index):
    run = index.search({"q": "lighthouse beacon"}, k=2)["q"]
    assert [pid for pid, _ in run] == ["dup-b", "dup-a"] and run[0][1] == run[1][1]


def test_top_k_keeps_all_ties_at_the_cut_then_orders_them():
    docs = np.array([9, 3, 5, 1, 7])
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.0], dtype=np.float32)
    got_docs, got_scores = top_k(docs, scores, 3)
    assert got_docs.tolist() == [3, 1, 5] and got_scores.tolist() == pytest.approx([0.9, 0.5, 0.5])
    assert top_k(docs, scores, 10)[0].tolist() == [3, 1, 5, 9]  # zero scores are not hits


def test_drqa_idf_and_sklearn_idf():
    assert drqa_idf(np.array([1.0, 5.0, 9.0]), 10).tolist() == pytest.approx([np.log(9.5 / 1.5), 0.0, 0.0])
    sk = TfidfIndex.build(PASSAGES, idf="sklearn", norm=None, progress=False)
    assert sk.search({"q": "what is the capital of france"}, k=1)["q"][0][0] == "wiki-paris-1"
    with pytest.raises(ValueError, match="idf must be"):
        TfidfIndex.build(PASSAGES, idf="bm42", progress=False)
    with pytest.raises(ValueError, match="unknown tfidf parameters"):
        TfidfIndex.build(PASSAGES, ngrams=2)


def test_bad_input_is_named(tmp_path):
    with pytest.raises(DataFormatError, match=r"record 2, field 'title'"):
        TfidfIndex.build([PASSAGES[0], {"id": "x", "text": "y"}], progress=False)
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "params.json").write_text('{"format_version": 99}')
    with pytest.raises(DataFormatError, match="format_version"):
        TfidfIndex.load(tmp_path / "idx")
