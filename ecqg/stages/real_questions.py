"""The real-question arm (issue 67, item 4): gold questions about their passage's least-attended entities, against a
size-matched random set of gold questions on the same passages.

Why: the paper's remedy pre-trains on *generated* questions about the entities a DPR attends least. Pre-training on
*real* questions chosen by the same rule separates the two things a synthetic arm mixes: which entities the
questions are about, and how good a generator's questions are. If real questions about least-attended entities do
not beat real questions about any entity of the same passages, better generated ones would not either.

A gold record enters the arm when its answer, or an entity its question mentions, is among its passage's
least-attended entities (stage 01's conditioning records, :func:`ecqg.stages.attention_bias.qg_entities`: per
passage the ``attention.lowest_entities`` lowest, attention summed over word pieces as the method conditions). The
control is a seeded sample of the same size from the other gold records on the same passages, so that the two sets
differ in which entities they ask about, not in which passages they come from. Both leave the fine-tuning sample.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ecqg.core.errors import DataFormatError

ANSWER, MENTION = "answer", "mention"       # why a record entered the arm


def _normal(text: str) -> str:
    """Lower case, punctuation to spaces. Not SQuAD's ``normalize_answer`` (which deletes punctuation): a mention
    is matched by whole words, and "Denmark's" must still name Denmark."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _mentions(question: str, entity: str) -> bool:
    """The entity's words appear in the question as whole words (case and punctuation ignored)."""
    words = _normal(entity)
    return bool(words) and f" {words} " in f" {_normal(question)} "


def least_attended_match(record: Mapping, entities: Sequence[Mapping]) -> dict | None:
    """Why ``record`` (a gold record: question, answer, answer_start) is about one of ``entities`` (its passage's
    least-attended, ascending attention): its answer span overlaps the entity's span in the passage text, or its
    answer is the entity's text, or its question mentions the entity. None when it is about none of them. The
    answer is checked first: a question asks about its answer more than about what it names."""
    start = record.get("answer_start")
    answer = record["answer"]
    for entity in entities:
        overlaps = start is not None and start >= 0 and start < entity["end_char"] \
            and start + len(answer) > entity["start_char"]
        if overlaps or _normal(answer) == _normal(entity["entity"]):
            return {"reason": ANSWER, "entity": entity["entity"], "rank": int(entity["rank"])}
    for entity in entities:
        if _mentions(record["question"], entity["entity"]):
            return {"reason": MENTION, "entity": entity["entity"], "rank": int(entity["rank"])}
    return None


@dataclass(frozen=True)
class ArmSelection:
    """The arm, its control and the fine-tuning sample left after both (records in input order); ``matches``: the
    arm's reason per record id."""

    arm: list[dict]
    control: list[dict]
    fine_tuning: list[dict]
    matches: dict[str, dict] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        reasons = [m["reason"] for m in self.matches.values()]
        return {"arm": len(self.arm), "control": len(self.control), "fine_tuning": len(self.fine_tuning),
                "arm_by_answer": reasons.count(ANSWER), "arm_by_mention": reasons.count(MENTION)}


def select(records: Sequence[Mapping], conditioning: Sequence[Mapping], seed: int,
           source: str = "gold records") -> ArmSelection:
    """Split gold ``records`` into the arm, a size-matched control and the rest (see the module docstring).

    ``conditioning``: stage 01's records (``passage_id``, ``entities``: the least-attended, with ``entity``,
    ``start_char``, ``end_char``, ``rank``). Only records on those passages can enter either set. Raises when the
    passages' other records are fewer than the arm: the control would not match its size."""
    lowest = {c["passage_id"]: c["entities"] for c in conditioning}
    matches, arm_ids, candidates = {}, set(), []
    for i, record in enumerate(records):
        for key in ("id", "question", "answer", "passage_id"):
            if key not in record:
                raise DataFormatError(source, i, key, "missing: every gold record needs it")
        if record["passage_id"] not in lowest:
            continue
        match = least_attended_match(record, lowest[record["passage_id"]])
        if match is None:
            candidates.append(record["id"])
        else:
            matches[record["id"]] = match
            arm_ids.add(record["id"])
    if len(candidates) < len(arm_ids):
        raise ValueError(f"{source}: {len(arm_ids)} questions about least-attended entities but only "
                         f"{len(candidates)} other questions on the same passages: no size-matched control")
    control_ids = set(random.Random(f"{seed}-real-question-control").sample(candidates, len(arm_ids)))
    arm = [dict(r) for r in records if r["id"] in arm_ids]
    control = [dict(r) for r in records if r["id"] in control_ids]
    rest = [dict(r) for r in records if r["id"] not in arm_ids and r["id"] not in control_ids]
    return ArmSelection(arm, control, rest, matches)
