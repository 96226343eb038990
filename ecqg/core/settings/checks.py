"""The small checks the settings blocks share (a rule's second element)."""

from __future__ import annotations

AUTOCAST = (None, "bfloat16", "float16", "auto")
AUTOCAST_EXPECTED = "null (float32), bfloat16, float16 or auto (bfloat16 where the hardware has it)"


def positive(v) -> bool:
    return v > 0


def nonneg(v) -> bool:
    return v >= 0


def prob(v) -> bool:
    return 0 < v < 1


def optional_positive(v) -> bool:
    return v is None or v > 0


def ks(v) -> bool:
    return bool(v) and all(isinstance(k, int) and k > 0 for k in v) and list(v) == sorted(set(v))


def paths(v) -> bool:
    return bool(v) and all(isinstance(k, str) and isinstance(p, str) and p for k, p in v.items())


def positive_ints(v) -> bool:
    return bool(v) and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in v)


def autocast(v) -> bool:
    return v in AUTOCAST


OPTIONAL_INT = (int, type(None))
NUMBER = (int, float)
