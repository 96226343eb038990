"""DPR-style distant supervision from BM25 on the hand-written fixture corpus."""

from pathlib import Path

import pytest

from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_jsonl
from ecqg.retrieval.bm25 import BM25Searcher, build_bm25_index
from ecqg.retrieval.distant import bm25_distant_supervision, distant_supervision
from ecqg.data.text import has_answer

FIXTURES = Path(__file__).parent / "fixtures" / "retrieval"
PASSAGES = [r for _, r in read_jsonl(FIXTURES / "passages.jsonl")]
QUESTIONS = [r for _, r in read_jsonl(FIXTURES / "questions.jsonl")]
BY_ID = {p["id"]: p for p in PASSAGES}


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tmp_path_factory.mktemp("bm25d") / "index"
    build_bm25_index(PASSAGES, path, threads=1)  # default: no raw stored, so passages come from the corpus
    searcher = BM25Searcher(path)
    assert not searcher.stores_raw
    with pytest.raises(ValueError, match="store_raw"):
        bm25_distant_supervision(QUESTIONS, searcher)
    with pytest.raises(ValueError, match="store_raw"):
        searcher.passage("wiki-paris-1")
    return bm25_distant_supervision(QUESTIONS, searcher, depth=100, n_hard=1, passages=BY_ID, progress=False)


def test_positive_is_the_top_answer_bearing_passage_and_negative_lacks_the_answer(result):
    records, _ = result
    austen = next(r for r in records if r["question"] == "who wrote pride and prejudice")
    assert [c["passage_id"] for c in austen["positive_ctxs"]] == ["wiki-pp-novel"]
    assert [c["passage_id"] for c in austen["hard_negative_ctxs"]] == ["wiki-pp-film"]  # BM25 rank 1, no answer
    negative = austen["hard_negative_ctxs"][0]
    assert not has_answer(negative["text"], austen["answers"])
    assert negative["score"] > austen["positive_ctxs"][0]["score"]
    assert austen["positive_ctxs"][0]["title"] == "Pride and Prejudice"
    assert set(austen) == {"dataset", "question", "answers", "positive_ctxs", "negative_ctxs", "hard_negative_ctxs"}
    assert austen["dataset"] == "nq_dev" and austen["negative_ctxs"] == []


def test_question_without_answer_anywhere_is_dropped_and_counted(result):
    records, stats = result
    assert [r["question"] for r in records] == [q["question"] for q in QUESTIONS[:3]]
    assert stats["questions_in"] == 4 and stats["kept"] == 3 and stats["dropped_no_positive"] == 1
    assert stats["mean_positive_rank"] == pytest.approx((1 + 2 + 1) / 3, abs=1e-3)  # paris 1, austen 2, everest 1


def test_depth_limits_the_search_for_a_positive():
    run = {"q": [("wiki-pp-film", 3.9), ("wiki-pp-novel", 2.7), ("wiki-hamlet-1", 0.5)]}
    question = [{"id": "q", "question": "who wrote pride and prejudice", "answers": ["Jane Austen"]}]
    _, shallow = distant_supervision(question, run, BY_ID, depth=1, progress=False)
    records, deep = distant_supervision(question, run, BY_ID, depth=3, n_hard=2, progress=False)
    assert shallow["kept"] == 0 and deep["kept"] == 1
    assert [c["passage_id"] for c in records[0]["hard_negative_ctxs"]] == ["wiki-pp-film", "wiki-hamlet-1"]


def test_answer_in_title_only_does_not_count():
    run = {"q": [("wiki-paris-1", 2.0)]}
    question = [{"id": "q", "question": "x", "answers": ["Paris"]}]
    assert distant_supervision(question, run, BY_ID, progress=False)[1]["kept"] == 1
    title_only = {"wiki-paris-1": {"title": "Paris", "text": "The capital of France."}}
    assert distant_supervision(question, run, title_only, progress=False)[1]["kept"] == 0


def test_bad_questions_are_named():
    with pytest.raises(DataFormatError, match=r"record 1, field 'answers'"):
        distant_supervision([{"id": "q", "question": "x", "answers": "Paris"}], {"q": []}, BY_ID, progress=False)
    with pytest.raises(DataFormatError, match="has no BM25 run"):
        distant_supervision([{"id": "q", "question": "x", "answers": []}], {}, BY_ID, progress=False)


def test_gold_records_take_the_annotated_positive_and_answer_free_negatives():
    from ecqg.retrieval.distant import gold_training_records

    passages = {
        "p1": {"title": "Hamlet", "text": "Hamlet is a tragedy written by William Shakespeare."},
        "p2": {"title": "Macbeth", "text": "Macbeth is a tragedy; Shakespeare wrote it around 1606."},
        "p3": {"title": "Globe", "text": "The Globe Theatre was built in 1599 in London."},
    }
    triple = {"id": "t1", "question": "who wrote hamlet", "answer": "William Shakespeare", "answer_start": 31,
              "passage_id": "p1", "title": "Hamlet", "text": passages["p1"]["text"], "source": "squad2-dev"}
    run = {"t1": [("p1", 9.0), ("p2", 5.0), ("p3", 1.0)]}
    records, stats = gold_training_records([triple], run, passages, n_hard=2, progress=False)
    (record,) = records
    assert record["positive_ctxs"][0]["passage_id"] == "p1"
    # p2 mentions "Shakespeare" but not the answer "William Shakespeare": a valid hard negative, as in DPR.
    assert [c["passage_id"] for c in record["hard_negative_ctxs"]] == ["p2", "p3"]
    assert stats == {"triples_in": 1, "fewer_hard_negatives": 0, "n_hard": 2, "kept": 1}
    records, stats = gold_training_records([triple], {"t1": [("p1", 9.0)]}, passages, n_hard=1, progress=False)
    assert records[0]["hard_negative_ctxs"] == [] and stats["fewer_hard_negatives"] == 1
    with pytest.raises(DataFormatError, match="has no BM25 run"):
        gold_training_records([triple], {}, passages, progress=False)
