"""Field validation shared by every loader: a missing field, a wrong type or an empty value raises
:class:`ecqg.core.errors.DataFormatError` naming the file, the record and the field. Passage ids are checked here too
(:func:`require_passage_id`, with :class:`SeenIds` to refuse a repeated one).

Why a module of its own: every format module (``records``, ``wiki``, ``dpr``, ``squad``, ...) validates with these,
and ``records`` also dispatches to ``wiki``; keeping the helpers here leaves no import cycle between them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from ecqg.core.errors import DataFormatError


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


_WHITESPACE = re.compile(r"\s")


def require_passage_id(pid: str, path: str | Path, where: int | str, seen: SeenIds | None = None) -> str:
    """Return ``pid`` after checking it is a usable passage id: not empty, no whitespace (an id is one token in
    run files and never silently stripped) and, given ``seen`` (which collects them), not met before in this file."""
    if not pid:
        raise DataFormatError(path, where, "id", "empty id")
    if _WHITESPACE.search(pid):
        raise DataFormatError(path, where, "id", f"id {pid!r} contains whitespace")
    if seen is not None and not seen.add(pid):
        raise DataFormatError(path, where, "id", f"duplicate id {pid!r} (met earlier in the file)")
    return pid


class SeenIds:
    """The passage ids met so far in one pass over a corpus: refuses a duplicate, answers "is it in the corpus?".

    Memory, for DPR's psgs_w100 (21M ids, the numbers 1..21,015,324): a plain ``set`` of ``str`` would take about
    2 GB (a ~57-byte string plus ~40 bytes of hash table per id). Here a plain decimal id (no sign, no leading zero)
    is one bit of a bytearray instead: 2.6 MB for psgs_w100, 32 MB at most (ids below 2**28). Any other id (``"01"``,
    ``"doc-7"``, larger numbers) goes to a plain set, so distinct strings never share a slot.
    """

    BIT_LIMIT = 1 << 28

    def __init__(self, ids: Iterable[str] = ()):
        self._bits = bytearray()
        self._others: set[str] = set()
        self._count = 0
        for pid in ids:
            self.add(pid)

    def _number(self, pid: str) -> int | None:
        if pid.isascii() and pid.isdigit() and (pid[0] != "0" or pid == "0") and len(pid) < 10:
            number = int(pid)
            return number if number < self.BIT_LIMIT else None
        return None

    def add(self, pid: str) -> bool:
        """Add ``pid``; False when it was already there."""
        number = self._number(pid)
        if number is None:
            if pid in self._others:
                return False
            self._others.add(pid)
        else:
            byte, bit = number >> 3, 1 << (number & 7)
            if byte >= len(self._bits):   # grow by doubling: amortised O(1)
                self._bits.extend(bytes(max(byte + 1 - len(self._bits), len(self._bits))))
            if self._bits[byte] & bit:
                return False
            self._bits[byte] |= bit
        self._count += 1
        return True

    def __contains__(self, pid: object) -> bool:
        if not isinstance(pid, str):
            return False
        number = self._number(pid)
        if number is None:
            return pid in self._others
        byte = number >> 3
        return byte < len(self._bits) and bool(self._bits[byte] & (1 << (number & 7)))

    def __len__(self) -> int:
        return self._count
