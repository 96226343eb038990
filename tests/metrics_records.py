"""Metrics files for the report's tests, built through their types (``ecqg.core.metrics_files``): a test names
the fields it is about, the type's other required fields are empty, and a field older records lack may be left
out (the file then reads as such a record does)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ecqg.core import metrics_files
from ecqg.core.io import write_json

_EMPTY = {"Mapping": dict, "list": list, "str": str, "int": int, "bool": bool}


def write_record(folder: Path, record: type[metrics_files.MetricsFile], **fields) -> Path:
    for field in dataclasses.fields(record):
        if field.name in fields or field.default is not dataclasses.MISSING:
            continue
        kind = str(field.type)
        fields[field.name] = None if "None" in kind else _EMPTY[kind.split(" | ")[0]]()
    return write_json(folder / record.FILE, record(**fields).as_dict())
