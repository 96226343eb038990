"""The bundle build (on a tiny raw-like fixture directory) and its answer-search helpers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ecqg.data import bundle
from ecqg.data.records import (
    check_answer_offset,
    read_corpus,
    read_nq_dev,
    read_squad2_unanswerable,
    read_test_questions,
    read_train_gold,
)
from ecqg.data.text import answer_regex_match, dpr_tokens, has_answer

RAW = Path(__file__).parent / "fixtures" / "data" / "raw"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle_a")
    manifest = bundle.build_bundle(RAW, out, progress=False)
    return out, manifest


def test_build_is_deterministic(built, tmp_path):
    out_a, manifest_a = built
    out_b = tmp_path / "bundle_b"
    manifest_b = bundle.build_bundle(RAW, out_b, progress=False)
    assert manifest_a == manifest_b
    names = sorted(p.name for p in out_a.iterdir())
    assert names == sorted(p.name for p in out_b.iterdir())
    assert set(bundle.OUTPUT_FILES) | {"manifest.json"} == set(names)
    for name in names:
        assert (out_a / name).read_bytes() == (out_b / name).read_bytes(), name


def test_fixture_bundle_contents(built):
    out, manifest = built
    corpus = {p["id"]: p for p in read_corpus(out / "corpus.jsonl.gz")}
    assert manifest["counts"]["corpus_total"] == len(corpus)
    sources = {p["source"] for p in corpus.values()}
    assert {"nq-gold-pon", "vital-articles", "psgs-haystack-dpr", "psgs-primeqa", "wiki18-flashrag",
            "squad2-dev"} <= sources
    for p in corpus.values():
        assert p["text"] == " ".join(p["text"].split())
        assert "_" not in p["title"] and not p["title"].startswith('"')
    nq = list(read_test_questions(out / "nq_test.jsonl.gz"))
    assert nq and all(q["gold_ids"] and all(g in corpus for g in q["gold_ids"]) for q in nq)
    assert nq[0]["id"] == "nq-test-0000" and nq[0]["question"] == "who got the first nobel prize in physics"
    # the PoN passage of question 0 is LitM's clean long answer, with LitM's title
    p0 = corpus[nq[0]["gold_ids"][0]]
    assert p0["title"] == "List of Nobel laureates in Physics" and "Röntgen, of Germany" in p0["text"]
    for name in ("wq_test", "tqa_test"):
        for q in read_test_questions(out / f"{name}.jsonl.gz"):
            assert any(has_answer(p["text"], q["answers"]) for p in corpus.values())
    for q in read_test_questions(out / "trec_test.jsonl.gz"):
        assert q["answer_type"] == "regex"
        assert any(answer_regex_match(p["text"], a) for p in corpus.values() for a in q["answers"])
    for t in read_train_gold(out / "train_gold.jsonl.gz"):
        check_answer_offset(t, corpus[t["passage_id"]]["text"], "train_gold", t["id"])
    for u in read_squad2_unanswerable(out / "squad2_unanswerable.jsonl.gz"):
        assert u["passage_id"] in corpus
    assert list(read_nq_dev(out / "nq_dev.jsonl.gz"))


def test_build_rejects_missing_raw_file(tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    (raw / bundle.RAW_FILES["xquad"]).unlink()
    with pytest.raises(FileNotFoundError, match="xquad.en.json"):
        bundle.build_bundle(raw, tmp_path / "out", progress=False)


def test_answer_index_agrees_with_has_answer():
    texts = ["The first Nobel Prize in Physics was awarded in 1901 to Wilhelm Conrad Röntgen, of Germany.",
             "Deadpool 2 is scheduled to be released in the United States on May 18, 2018.",
             "The Thirties were a decade; the '30s began in 1930."]
    index = bundle.AnswerIndex(texts, progress=False)
    answers = ["Wilhelm Conrad Röntgen", "wilhelm conrad", "May 18 , 2018", "Physics was", "1930s", "'30s",
               "the", "Germany.", "Röntgen of", "Thirties", "United Kingdom", "roentgen"]
    for a in answers:
        found = index.find(dpr_tokens(a))
        expected = [i for i, t in enumerate(texts) if has_answer(t, [a])]
        assert (found is not None) == bool(expected), a
        if found is not None:
            assert found == expected[0]


def test_regex_searcher_agrees_with_answer_regex_match():
    texts = ["Mount McKinley is 20,320 feet tall.", "China is the most populous country.",
             "Line one ends here", "Anxiety and benzodiazepines"]
    searcher = bundle.RegexSearcher(texts)
    patterns = [r"20\s?,?\s?(32|40)0\s?-?\s?f(ee|oo)t", "China", r"here\s+Anxiety", r"^Anxiety", r".*anxi.*",
                r"(unclosed", "Japan"]
    for p in patterns:
        found = searcher.find(p)
        expected = [i for i, t in enumerate(texts) if answer_regex_match(t, p)]
        assert (found is not None) == bool(expected), p
        if found is not None:
            assert found == expected[0]
