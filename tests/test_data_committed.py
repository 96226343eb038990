"""The committed mini bundle in data/ agrees with its manifest and is internally consistent."""

from __future__ import annotations

import json
from collections import Counter
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

DATA = Path(__file__).resolve().parents[1] / "data"

pytestmark = pytest.mark.skipif(not (DATA / "manifest.json").is_file(), reason="no committed bundle in data/")


@pytest.fixture(scope="module")
def manifest():
    return json.loads((DATA / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def corpus():
    return {p["id"]: p for p in read_corpus(DATA / "corpus.jsonl.gz")}


def test_files_match_manifest(manifest):
    assert manifest["build_command"] == bundle.BUILD_COMMAND
    assert set(manifest["files"]) == set(bundle.OUTPUT_FILES)
    total = 0
    for name, info in manifest["files"].items():
        path = DATA / name
        assert bundle.sha256_of(path) == info["sha256"], f"{name} changed since the manifest was written"
        total += path.stat().st_size
    assert total < 25 * 2**20
    assert (DATA / "README.md").is_file()


def test_counts_and_references(manifest, corpus):
    counts = manifest["counts"]
    assert len(corpus) == counts["corpus_total"] == manifest["files"]["corpus.jsonl.gz"]["records"]
    assert dict(Counter(p["source"] for p in corpus.values())) == counts["corpus_by_source"]

    nq = list(read_test_questions(DATA / "nq_test.jsonl.gz"))
    assert len(nq) == counts["questions"]["nq_test"]
    assert dict(Counter(s for q in nq for s in q["subsets"])) == counts["nq_test_subsets"]
    for q in nq:
        assert q["gold_ids"], q["id"]
        for g in q["gold_ids"]:
            assert g in corpus, f"{q['id']}: gold passage {g} not in corpus"
    for name in ("wq_test", "tqa_test", "trec_test"):
        qs = list(read_test_questions(DATA / f"{name}.jsonl.gz"))
        assert len(qs) == counts["questions"][name]
        assert all(q["answer_type"] == ("regex" if name == "trec_test" else "text") for q in qs)

    triples = list(read_train_gold(DATA / "train_gold.jsonl.gz"))
    assert dict(Counter(t["source"] for t in triples)) == counts["train_gold_by_source"]
    for t in triples:
        assert t["passage_id"] in corpus, t["id"]
        check_answer_offset(t, corpus[t["passage_id"]]["text"], DATA / "train_gold.jsonl.gz", t["id"])
    unans = list(read_squad2_unanswerable(DATA / "squad2_unanswerable.jsonl.gz"))
    assert len(unans) == counts["squad2_unanswerable"]
    assert all(u["passage_id"] in corpus for u in unans)
    assert len(list(read_nq_dev(DATA / "nq_dev.jsonl.gz"))) == counts["questions"]["nq_dev"]


def test_no_training_question_is_a_test_question():
    from ecqg.data.records import question_key

    test_keys = {question_key(q["question"]) for name in ("nq_test", "wq_test", "tqa_test", "trec_test")
                 for q in read_test_questions(DATA / f"{name}.jsonl.gz")}
    train = [t["question"] for t in read_train_gold(DATA / "train_gold.jsonl.gz")]
    train += [q["question"] for q in read_nq_dev(DATA / "nq_dev.jsonl.gz")]
    assert not [q for q in train if question_key(q) in test_keys]
