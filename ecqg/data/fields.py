"""Field validation shared by every loader: a missing field, a wrong type or an empty value raises
:class:`ecqg.errors.DataFormatError` naming the file, the record and the field.

Why a module of its own: every format module (``records``, ``wiki``, ``dpr``, ``squad``, ...) validates with these,
and ``records`` also dispatches to ``wiki``; keeping the helpers here leaves no import cycle between them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ecqg.errors import DataFormatError


def require(
    record: Mapping[str, Any], name: str, kind: type | tuple[type, ...], path: str | Path, where: int | str,
    *, optional: bool = False, default: Any = None,
) -> Any:
    """Return ``record[name]`` after checking it exists and has the right type (bool is never an int here)."""
    if not isinstance(record, Mapping):
        raise DataFormatError(path, where, None, f"expected an object, got {type(record).__name__}")
    if name not in record or record[name] is None:
        if optional:
            return default
        raise DataFormatError(path, where, name, "missing field")
    value = record[name]
    if (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))) or not isinstance(
        value, kind
    ):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataFormatError(path, where, name, f"expected {want}, got {type(value).__name__}")
    return value


def require_str_list(
    record: Mapping[str, Any], name: str, path: str | Path, where: int | str, *, nonempty: bool = False,
    optional: bool = False,
) -> list[str]:
    value = require(record, name, list, path, where, optional=optional, default=[])
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise DataFormatError(path, where, name, f"item {i} is {type(item).__name__}, expected str")
    if nonempty and not value:
        raise DataFormatError(path, where, name, "empty list")
    return value


def require_nonempty_str(record: Mapping[str, Any], name: str, path: str | Path, where: int | str) -> str:
    value = require(record, name, str, path, where)
    if not value.strip():
        raise DataFormatError(path, where, name, "empty string")
    return value
