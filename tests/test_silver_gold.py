"""Silver gold passages for test questions without gold ids (DPR's csv test sets)."""

import pytest

from ecqg.retrieval.silver_gold import SOURCE, with_silver_gold

CORPUS = [{"id": "1", "title": "A", "text": "Paris is the capital of France."},
          {"id": "2", "title": "B", "text": "Berlin is the capital of Germany."},
          {"id": "3", "title": "C", "text": "The Rhine flows through Germany and Switzerland."}]
QUESTIONS = [{"id": "q1", "question": "capital of germany?", "answers": ["Berlin"], "gold_ids": []},
             {"id": "q2", "question": "a river?", "answers": ["Danube"], "gold_ids": []},
             {"id": "q3", "question": "annotated", "answers": ["Paris"], "gold_ids": ["1"]}]
RUN = {"q1": [("1", 9.0), ("3", 8.0), ("2", 7.0)], "q2": [("3", 5.0), ("1", 4.0)], "q3": [("2", 1.0)]}


def test_first_answer_bearing_passage_of_the_run_becomes_the_gold():
    out, counts = with_silver_gold(QUESTIONS, RUN, iter(CORPUS))
    assert out[0]["gold_ids"] == ["2"] and out[0]["gold_source"] == SOURCE          # rank 3, the first with Berlin
    assert out[1]["gold_ids"] == [] and "gold_source" not in out[1]                # no answer in its ranking
    assert out[2] == QUESTIONS[2]                                                    # annotated ids are kept
    assert counts == {"annotated": 1, "silver": 1, "none": 1}
    assert QUESTIONS[0]["gold_ids"] == []                                            # the input is not modified


def test_depth_limits_the_search_and_a_missing_ranking_is_an_error():
    out, counts = with_silver_gold(QUESTIONS, RUN, iter(CORPUS), depth=2)
    assert out[0]["gold_ids"] == [] and counts["none"] == 2
    with pytest.raises(ValueError, match="no ranking for question 'q2'.*retrieve@bm25"):
        with_silver_gold(QUESTIONS, {"q1": RUN["q1"]}, iter(CORPUS))
