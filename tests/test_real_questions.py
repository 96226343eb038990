"""The real-question arm's selection (issue 67, item 4) on a hand-made fixture: which gold questions are about a
least-attended entity, a control of the same size from the same passages, and neither left in fine-tuning."""

import pytest

from ecqg.core.errors import DataFormatError
from ecqg.stages.real_questions import ANSWER, MENTION, least_attended_match, select

TEXT = "Rollo led the Normans from Denmark to Normandy in 911, and Charles III granted them land near Rouen."


def entity(name: str, rank: int) -> dict:
    start = TEXT.index(name)
    return {"entity": name, "start_char": start, "end_char": start + len(name), "rank": rank, "attention": rank / 10}


# p1's three least-attended entities (ascending attention); p2 has its own; p3 was not studied
CONDITIONING = [{"passage_id": "p1", "entities": [entity("Rouen", 1), entity("911", 2), entity("Denmark", 3)]},
                {"passage_id": "p2", "entities": [entity("Normandy", 1)]}]


def record(rid: str, question: str, answer: str, passage: str = "p1") -> dict:
    start = TEXT.find(answer)
    return {"id": rid, "question": question, "answer": answer, "answer_start": start, "passage_id": passage,
            "text": TEXT}


RECORDS = [
    record("a1", "Near which city was the Normans' land?", "Rouen"),                 # answer = lowest entity
    record("a2", "Where did the Normans come from before Denmark?", "Rollo"),       # mentions one
    record("n1", "Who led the Normans?", "Rollo"),
    record("n2", "Who granted the Normans land?", "Charles III"),
    record("n3", "What people did Rollo lead?", "the Normans"),
    record("a3", "In what year did they reach Normandy?", "911"),                   # answer span overlaps
    record("n4", "Whom did Rollo lead?", "the Normans"),
    record("b1", "Who led the Normans to Normandy?", "Rollo", passage="p2"),        # mentions p2's lowest
    record("b2", "Who granted land near Rouen?", "Charles III", passage="p2"),
    record("c1", "What did Charles III grant?", "land", passage="p3"),              # not studied: never chosen
]


def test_the_answer_or_a_mention_makes_a_question_about_a_least_attended_entity():
    lowest = CONDITIONING[0]["entities"]
    assert least_attended_match(RECORDS[0], lowest) == {"reason": ANSWER, "entity": "Rouen", "rank": 1}
    assert least_attended_match(RECORDS[1], lowest) == {"reason": MENTION, "entity": "Denmark", "rank": 3}
    assert least_attended_match(RECORDS[5], lowest)["reason"] == ANSWER
    assert least_attended_match(RECORDS[2], lowest) is None              # about Rollo: not among the lowest
    # a mention is whole words: "Denmarkian" does not mention Denmark
    assert least_attended_match(record("x", "Who is Denmarkian?", "Rollo"), lowest) is None
    # the answer's text alone (no span, another passage's copy) still matches
    assert least_attended_match({"question": "Which year?", "answer": "911", "answer_start": None}, lowest)


def test_the_control_matches_the_arm_in_size_comes_from_the_same_passages_and_fine_tuning_keeps_neither():
    chosen = select(RECORDS, CONDITIONING, seed=7)
    arm = {r["id"] for r in chosen.arm}
    control = {r["id"] for r in chosen.control}
    assert arm == {"a1", "a2", "a3", "b1"}
    assert len(control) == len(arm) and control <= {"n1", "n2", "n3", "n4", "b2"}
    assert {r["id"] for r in chosen.fine_tuning} == {r["id"] for r in RECORDS} - arm - control
    assert "c1" in {r["id"] for r in chosen.fine_tuning}
    assert chosen.counts() == {"arm": 4, "control": 4, "fine_tuning": 2, "arm_by_answer": 2, "arm_by_mention": 2}
    assert select(RECORDS, CONDITIONING, seed=7) == chosen                   # seeded, and the seed draws it
    assert len({tuple(r["id"] for r in select(RECORDS, CONDITIONING, seed=s).control) for s in range(8)}) > 1


def test_a_control_that_cannot_match_the_arm_and_a_record_without_its_fields_are_refused():
    with pytest.raises(ValueError, match="3 questions about least-attended entities but only 2 other"):
        select([RECORDS[i] for i in (0, 1, 2, 3, 5)], CONDITIONING, seed=1)
    broken = [dict(RECORDS[0]), {k: v for k, v in RECORDS[1].items() if k != "answer"}]
    with pytest.raises(DataFormatError, match="answer"):
        select(broken, CONDITIONING, seed=1, source="train_gold.jsonl")
