"""Generated-question records (written by the QG stage), validated: every filter reads them through here.

Record::

    {"id", "passage_id", "entity": str | None, "entity_label": str | None, "question", "answer",
     "generator": "uncon" | "con" | "tempqg", "sample_score", "sample"}  (+ "template" for tempqg; + "replicate",
     the seed, where each replicate has its own set; + "answer_start" from a rule-based generator)

Passage text always comes from the corpus (``passages``: id -> ``{"title", "text"}``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping


from ecqg.data.fields import require, require_nonempty_str
from ecqg.data.records import _read_validated
from ecqg.core.errors import DataFormatError

log = logging.getLogger(__name__)

from ecqg.core import schemes


def validate_generated(rec: Mapping[str, Any], path: str | Path, where: int | str) -> dict[str, Any]:
    """Check one generated-question record; returns a copy (extra keys, e.g. earlier filter scores, are kept)."""
    generator = require(rec, "generator", str, path, where)
    if generator not in schemes.SCHEMES:
        raise DataFormatError(path, where, "generator", f"must be one of {schemes.names()}, got {generator!r}")
    scheme = schemes.get(generator)
    out = dict(rec)
    for name in ("id", "passage_id", "question", "answer"):
        out[name] = require_nonempty_str(rec, name, path, where)
    entity = require(rec, "entity", str, path, where, optional=True)
    if scheme.condition == "entity" and not (entity and entity.strip()):
        raise DataFormatError(path, where, "entity", f"an {scheme.label} ('{generator}') question needs its entity")
    out["entity"] = entity
    if scheme.condition not in (None, "entity"):
        out[scheme.condition] = require_nonempty_str(rec, scheme.condition, path, where)
    out["entity_label"] = require(rec, "entity_label", str, path, where, optional=True)
    require(rec, "sample_score", (int, float), path, where, optional=True)
    require(rec, "sample", int, path, where, optional=True)
    require(rec, "replicate", int, path, where, optional=True)
    return out


def read_generated(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream validated generated-question records from a jsonl(.gz) file (ids unique, errors name the line)."""
    return _read_validated(path, validate_generated)


def check_generated(records: Iterable[Mapping], where: str = "generated questions") -> list[dict[str, Any]]:
    """Validate in-memory records (errors name ``where`` and the record index); ids must be unique."""
    out, seen = [], set()
    for i, rec in enumerate(records):
        rec = validate_generated(rec, where, i)
        if rec["id"] in seen:
            raise DataFormatError(where, i, "id", f"duplicate id {rec['id']!r}")
        seen.add(rec["id"])
        out.append(rec)
    return out


def passage_of(passages: Mapping[str, Mapping], pid: str, where: str, index: int) -> Mapping:
    try:
        passage = passages[pid]
    except KeyError:
        raise DataFormatError(where, index, "passage_id", f"passage {pid!r} is not in the corpus") from None
    if not isinstance(passage.get("text"), str):
        raise DataFormatError(where, index, "passage_id", f"passage {pid!r} has no text")
    return passage


def filter_stats(records, kept, rejected, reasons) -> dict[str, Any]:
    stats: dict[str, Any] = {"in": len(records), "kept": len(kept),
                             "rejected": {r: sum(x["reason"] == r for x in rejected) for r in reasons}}
    stage02 = schemes.of_stage()
    for g in (g for g in schemes.names() if g in stage02 or any(r["generator"] == g for r in records)):
        stats[f"{g}_in"] = sum(r["generator"] == g for r in records)
        stats[f"{g}_kept"] = sum(r["generator"] == g for r in kept)
    return stats
