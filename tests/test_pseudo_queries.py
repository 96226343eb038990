"""ETM / RSM pseudo-queries: a passage's own highest tf-idf words (with its title, or from one of its sentences)."""

import pytest

from ecqg.retrieval import pseudo_queries as pq
from ecqg.core.errors import DataFormatError

PASSAGES = {
    "a": {"title": "Danube", "text": "The Danube flows through Vienna. Barges carry grain downstream past Budapest."},
    "b": {"title": "Danube", "text": "The Danube delta hosts pelicans. Fishermen work the reed beds."},
    "c": {"title": "Rhine", "text": "The Rhine flows past Cologne. Castles line the gorge near Koblenz."},
}
SENTENCES = {pid: [s.strip() + "." for s in p["text"].split(".") if s.strip()] for pid, p in PASSAGES.items()}


@pytest.fixture(scope="module")
def weights():
    return pq.TermWeights([p["text"] for p in PASSAGES.values()])


def test_streamed_idf_is_scikit_learns(weights):
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [p["text"] for p in PASSAGES.values()] + ["Vienna and Vienna again, with the barges of Vienna."]
    fitted = TfidfVectorizer(lowercase=True, stop_words="english", sublinear_tf=True,
                             token_pattern=pq._WORD.pattern).fit(texts)
    streamed = pq.TermWeights(iter(texts))
    assert streamed.vocabulary == fitted.vocabulary_
    assert streamed.idf.tolist() == fitted.idf_.tolist()          # bit for bit


def test_top_words_are_the_rarest_content_words_in_text_order(weights):
    words = weights.top_words(PASSAGES["a"]["text"], 3)
    assert len(words) == 3 and "the" not in words and "danube" not in words       # stop word; in 2 of 3 passages
    text = PASSAGES["a"]["text"].lower()
    assert words == sorted(words, key=text.index)


def test_etm_query_is_the_title_then_new_words(weights):
    query = pq.etm_query(PASSAGES["a"], weights, 4)
    assert query.startswith("Danube ") and query.lower().count("danube") == 1 and len(query.split()) == 5


def test_rsm_is_seeded_per_passage_and_falls_back_to_the_richest_sentence(weights):
    records, counts = pq.build("rsm", ["a", "b", "c"], PASSAGES, weights, 3, seed=7, sentences=SENTENCES)
    again, _ = pq.build("rsm", ["a", "b", "c"], PASSAGES, weights, 3, seed=7, sentences=SENTENCES)
    assert records == again and counts["queries"] == 3 and counts["short_queries"] == 0
    for r in records:
        words = r["question"].split()
        assert len(words) == 3 and any(set(words) <= set(s.lower().replace(".", "").split())
                                       for s in SENTENCES[r["passage_id"]])
    short, counts = pq.build("rsm", ["a"], PASSAGES, weights, 20, seed=7, sentences=SENTENCES)
    assert len(short) == 1 and counts["short_queries"] == 1 and 0 < len(short[0]["question"].split()) < 20
    with pytest.raises(ValueError, match="etm"):
        pq.build("xyz", ["a"], PASSAGES, weights, 3, seed=0)


@pytest.mark.parametrize("kind", pq.KINDS)
def test_a_repeated_passage_gets_a_different_query_each_time(weights, kind):
    pool = ["a", "c", "a", "a"]
    records, counts = pq.build(kind, pool, PASSAGES, weights, 2, seed=3, sentences=SENTENCES)
    assert [r["passage_id"] for r in records] == pool and counts["repeated_passage"] == 2
    assert len({r["id"] for r in records}) == 4
    first, second = records[0]["question"], records[2]["question"]
    assert first != second                                   # the next sentence (RSM) or a resample (ETM)
    if kind == "etm":
        assert first == pq.etm_query(PASSAGES["a"], weights, 2)   # the first query is the paper's


def test_an_unknown_passage_is_named():
    weights = pq.TermWeights([p["text"] for p in PASSAGES.values()])
    with pytest.raises(DataFormatError, match="'zz'.*not in the corpus"):
        pq.build("etm", ["a", "zz"], PASSAGES, weights, 2, seed=0)
    with pytest.raises(DataFormatError, match="sentences of passage 'a'"):
        pq.build("rsm", ["a"], PASSAGES, weights, 2, seed=0)


def test_same_title_passages_are_never_negatives():
    excluded = pq.same_title_guard(PASSAGES)
    assert excluded("a", "b") and not excluded("a", "c") and not excluded("c", "a")


def test_hard_negatives_skip_the_positive_and_its_title():
    records = [{"id": "etm-a-0", "question": "Danube vienna", "passage_id": "a", "generator": "etm"},
               {"id": "etm-c-0", "question": "Rhine cologne", "passage_id": "c", "generator": "etm"}]
    run = {"etm-a-0": [("b", 9.0), ("a", 8.0), ("c", 1.0)], "etm-c-0": [("c", 5.0)]}
    examples, stats = pq.dpr_examples(records, run, PASSAGES, n_hard=1)
    assert [n["passage_id"] for n in examples[0]["hard_negative_ctxs"]] == ["c"]       # "b" shares the title
    assert examples[0]["positive_ctxs"][0]["passage_id"] == "a" and examples[0]["answers"] == []
    assert examples[1]["hard_negative_ctxs"] == []
    assert stats == {"questions": 2, "n_hard": 1, "fewer_hard_negatives": 1, "same_title_skipped": 1,
                     "positive_bm25_top1": 1}
    with pytest.raises(DataFormatError, match="etm-c-0"):
        pq.dpr_examples(records, {"etm-a-0": []}, PASSAGES)


def test_the_m_sweep_searches_every_entry_of_a_small_pool_and_a_seeded_sample_of_a_large_one():
    from ecqg.stages.pseudo_queries import sweep_sample

    assert sweep_sample(800, 20_000, 2022) == list(range(800))        # mini's and the study's pools: all, in order
    sample = sweep_sample(1_000_000, 20_000, 2022)
    assert len(sample) == len(set(sample)) == 20_000 and sample == sorted(sample)
    assert sample == sweep_sample(1_000_000, 20_000, 2022) != sweep_sample(1_000_000, 20_000, 2023)


def test_rsm_sentences_split_over_processes_are_the_one_process_sentences(monkeypatch):
    import ecqg.data.text
    from ecqg.core import config
    from ecqg.stages import pseudo_queries as pseudo

    ids = ["a", "b", "c", "a"]
    one = pseudo.sentence_texts(PASSAGES, ids)
    monkeypatch.setattr(pseudo, "SPACY_TEXTS_PER_PROCESS", 1)         # 3 distinct passages: 2 workers on 2 cores
    monkeypatch.setattr(config, "host_cores", lambda: 2)
    real, processes = ecqg.data.text.analyze, []

    def counted(texts, **kwargs):
        processes.append(kwargs["n_process"])
        return real(texts, **kwargs)

    monkeypatch.setattr(ecqg.data.text, "analyze", counted)
    assert pseudo.sentence_texts(PASSAGES, ids) == one and processes == [2]
