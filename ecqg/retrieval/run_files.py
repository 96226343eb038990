"""Retrieval runs as files: TREC run format (``qid Q0 docid rank score tag``) plus the list of questions whose
ranking is empty, written atomically and read back strictly.

Why strict: a corrupt run silently changes every number downstream, so reading checks six fields per line, the Q0
column, integer ranks 1..n per question, float scores that never increase with rank, and no passage twice for a
question. A run in memory is ``dict[question id, list[(passage id, score)]]``, best first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from ecqg.core.errors import DataFormatError
from ecqg.core.io import atomic_path, open_text, write_json

Run = dict[str, list[tuple[str, float]]]


class RunError(ValueError):
    """A run does not fit the questions it is evaluated on (missing question, unknown passage)."""


def write_trec_run(path: str | Path, run: Mapping[str, Sequence[tuple[str, float]]], tag: str = "ecqg") -> Path:
    """Write ``qid Q0 docid rank score tag`` lines, atomically, in the given order (ties keep their order).

    Scores must not increase with rank (trec_eval re-sorts by score; the two orders must agree). Scores are written
    with ``repr`` so they read back bit-identical. Ids with whitespace would break the format, so they are refused
    here rather than producing a file other tools misread.
    """
    _check_token(tag, "tag")
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as out:
        for qid, ranking in run.items():
            _check_token(str(qid), "question id")
            previous = math.inf
            for rank, (pid, score) in enumerate(ranking, start=1):
                _check_token(str(pid), f"passage id (question '{qid}', rank {rank})")
                score = float(score)
                if math.isnan(score) or score > previous:
                    raise RunError(f"question '{qid}', rank {rank}: score {score} is NaN or above the score at "
                                   f"rank {rank - 1}; a run must be best first")
                previous = score
                out.write(f"{qid} Q0 {pid} {rank} {score!r} {tag}\n")
    return path


def empty_rankings_file(path: str | Path) -> Path:
    """Where the ids of questions with no retrieved passage are kept (a TREC file cannot hold an empty ranking)."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(".trec") + ".empty.json")


def write_run(path: str | Path, run: Mapping[str, Sequence[tuple[str, float]]], tag: str = "ecqg") -> Path:
    """A TREC run plus the list of questions whose ranking is empty, so that a retriever returning nothing for a
    question is scored as a miss instead of looking like a question that was never searched."""
    write_trec_run(path, run, tag)
    write_json(empty_rankings_file(path), sorted(str(q) for q, ranking in run.items() if not ranking))
    return Path(path)


def read_run(path: str | Path) -> Run:
    """Read a run written by :func:`write_run`: the TREC rankings plus empty rankings for the listed questions."""
    run = read_trec_run(path)
    empty_path = empty_rankings_file(path)
    if not empty_path.is_file():
        raise RunError(f"{empty_path}: missing (written next to every run by write_run); rerun the retrieval stage")
    with open_text(empty_path) as handle:
        empty = json.load(handle)
    for i, qid in enumerate(empty):
        if qid in run:
            raise DataFormatError(empty_path, i, None, f"question '{qid}' is listed as empty but has a ranking")
        run[qid] = []
    return run


def _check_token(value: str, what: str) -> None:
    if not value or any(ch.isspace() for ch in value):
        raise RunError(f"{what} {value!r} is empty or contains whitespace; TREC run files are space-separated")


def read_trec_run(path: str | Path) -> Run:
    """Read a TREC run; each question's ranking comes back ordered by rank.

    Validated, because a corrupt run silently changes every number downstream: six fields per line, Q0 column,
    integer rank >= 1, float score, no passage twice for a question, ranks exactly 1..n per question, and scores that
    do not increase with rank (otherwise rank-based and score-based tools would disagree on the ranking).
    """
    entries: dict[str, list[tuple[int, str, float, int]]] = {}
    with open_text(path) as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            qid, pid, rank, score = _parse_trec_line(path, line_no, line)
            entries.setdefault(qid, []).append((rank, pid, score, line_no))
    return {qid: _ordered_ranking(path, qid, rows) for qid, rows in entries.items()}


def _parse_trec_line(path, line_no: int, line: str) -> tuple[str, str, int, float]:
    where = f"line {line_no}"
    fields = line.split()
    if len(fields) != 6:
        raise DataFormatError(path, where, None, f"expected 6 fields 'qid Q0 docid rank score tag', got {len(fields)}")
    qid, q0, pid, rank_s, score_s, _tag = fields
    if q0 != "Q0":
        raise DataFormatError(path, where, "Q0", f"expected 'Q0', got {q0!r}")
    try:
        rank = int(rank_s)
    except ValueError:
        raise DataFormatError(path, where, "rank", f"not an integer: {rank_s!r}") from None
    if rank < 1:
        raise DataFormatError(path, where, "rank", f"must be >= 1, got {rank}")
    try:
        score = float(score_s)
    except ValueError:
        raise DataFormatError(path, where, "score", f"not a number: {score_s!r}") from None
    if math.isnan(score):
        raise DataFormatError(path, where, "score", "is NaN")
    return qid, pid, rank, score


def _ordered_ranking(path, qid: str, rows: list[tuple[int, str, float, int]]) -> list[tuple[str, float]]:
    """Sort one question's lines by rank and check they form a consistent ranking."""
    rows = sorted(rows, key=lambda r: r[0])
    seen: dict[str, int] = {}
    for expected, (rank, pid, score, line_no) in enumerate(rows, start=1):
        where = f"line {line_no}"
        if rank != expected:
            problem = "duplicate" if rank < expected else f"missing rank {expected}"
            raise DataFormatError(path, where, "rank", f"question '{qid}': rank {rank} ({problem}); ranks must be 1..n")
        if pid in seen:
            raise DataFormatError(path, where, "docid",
                                  f"question '{qid}': passage '{pid}' also at line {seen[pid]}")
        seen[pid] = line_no
        if expected > 1 and score > rows[expected - 2][2]:
            raise DataFormatError(path, where, "score", f"question '{qid}': score {score} at rank {rank} is above "
                                  f"the score at rank {rank - 1}; rank and score orders must agree")
    return [(pid, score) for _, pid, score, _ in rows]
