"""Errors that tell the user exactly which input is wrong."""

from __future__ import annotations

from pathlib import Path


class DataFormatError(ValueError):
    """Malformed input: names the file, the record and the field.

    ``record`` is a 0-based position (shown 1-based, "record 1" for the first, like line numbers) or a ready phrase
    such as "line 12" or "question 'q17'".
    """

    def __init__(self, path: str | Path, record: int | str | None, field: str | None, problem: str):
        self.path, self.record, self.field, self.problem = str(path), record, field, problem
        where = [self.path]
        if record is not None:
            where.append(f"record {record + 1}" if isinstance(record, int) else str(record))
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {problem}")


class ConfigError(ValueError):
    """A bad value in params.yaml (or a preset), named by its dotted key."""
