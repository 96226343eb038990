"""Lewis et al. (2020) test-train overlap annotations (facebookresearch/QA-Overlap ``nq-annotations.jsonl``).

One ``{"id": int, "labels": [str]}`` per line, ``id`` = 0-based position of the question in the NQ test order
(``topics.dpr.nq.test.txt`` / ``NQ-open.dev.jsonl``). Labels: ``total``, ``question_overlap``,
``no_question_overlap``, ``answer_overlap``, ``no_answer_overlap``, ``answer_overlap_only``.

Subsets are taken from the explicit labels, as QA-Overlap's own evaluation does. ``no_answer_overlap`` (1,313 on NQ)
is exactly the complement of ``answer_overlap`` (checked). ``no_question_overlap`` (672 on NQ) is NOT the complement of
``question_overlap`` (324 questions): it is Lewis et al.'s strict "no overlap" set, so deriving it as "questions
without the question_overlap label" would give 3,286 and be wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ecqg.data.fields import require, require_str_list
from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_jsonl

KNOWN_LABELS = frozenset(
    {"total", "question_overlap", "no_question_overlap", "answer_overlap", "no_answer_overlap", "answer_overlap_only"}
)
SUBSETS = ("no_answer_overlap", "no_question_overlap")


def read_overlap_annotations(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield ``{"id": int, "labels": [str]}``; ids must run 0, 1, 2, ... and labels must be known and consistent."""
    expected = 0
    for line_no, rec in read_jsonl(path):
        where = f"line {line_no}"
        qid = require(rec, "id", int, path, where)
        if qid != expected:
            raise DataFormatError(path, where, "id", f"expected id {expected} (ids follow the test order), got {qid}")
        labels = require_str_list(rec, "labels", path, where)
        unknown = sorted(set(labels) - KNOWN_LABELS)
        if unknown:
            raise DataFormatError(path, where, "labels", f"unknown label(s) {unknown}")
        if ("answer_overlap" in labels) == ("no_answer_overlap" in labels):
            raise DataFormatError(path, where, "labels", "exactly one of answer_overlap / no_answer_overlap expected")
        if "question_overlap" in labels and "no_question_overlap" in labels:
            raise DataFormatError(path, where, "labels", "both question_overlap and no_question_overlap")
        yield {"id": qid, "labels": labels}
        expected += 1


def subsets_of(labels: list[str]) -> list[str]:
    """The subset names a question belongs to: its labels except ``total``, sorted."""
    return sorted(set(labels) - {"total"})


def subset_members(path: str | Path) -> dict[str, set[int]]:
    """``{subset_name: {question index}}`` for every label except ``total``."""
    members: dict[str, set[int]] = {name: set() for name in sorted(KNOWN_LABELS - {"total"})}
    for rec in read_overlap_annotations(path):
        for name in subsets_of(rec["labels"]):
            members[name].add(rec["id"])
    return members
