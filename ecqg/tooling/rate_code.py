"""Which code each measured GPU rate of the cost model timed, and whether that code is still today's.

Why: the cost model prices most of its GPU-hours from device measurements of one day (``bench/results/``); the
trainer and the encoding loop changed after it (the unused pooler dropped, validation spread over the ranks), so a
rate can describe code the repository no longer runs. ``bench/gpu_check.py`` records, beside its figures, a digest
of the code each section timed (:func:`code_digests`); the cost model compares it with today's
(:func:`code_status`) and says per rate: *current*, *code changed since* or *code not recorded* (files written
before digests were). A digest, not a date, so the generated cost block in the docs is the same on every clone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The package folders whose code a rate times: the section's loop and everything it calls into.
TIMED_CODE = {
    "encoding": ("ecqg/retrieval", "ecqg/runtime"),
    "finetune": ("ecqg/retrieval", "ecqg/runtime"),
    "pretrain": ("ecqg/retrieval", "ecqg/runtime"),
    "sampling": ("ecqg/qg", "ecqg/runtime"),
    "reader": ("ecqg/filtering", "ecqg/runtime"),
}
CURRENT, CHANGED, NOT_RECORDED = "current", "code changed since", "code not recorded"


def digest(folders: tuple[str, ...], root: Path = ROOT) -> str:
    """sha256 over the ``.py`` files of ``folders`` (paths and contents, in sorted order), first 16 hex digits."""
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def code_digests(root: Path = ROOT) -> dict[str, str]:
    """What ``bench/gpu_check.py`` writes under ``code``: one digest per rate it can measure."""
    return {key: digest(folders, root) for key, folders in TIMED_CODE.items()}


def code_status(key: str, measurements: list[Mapping], root: Path = ROOT) -> str:
    """One rate's status over the files it is read from: current only when every file recorded today's code."""
    recorded = [m.get("code", {}).get(key) for m in measurements]
    if not recorded or any(r is None for r in recorded):
        return NOT_RECORDED
    return CURRENT if set(recorded) == {digest(TIMED_CODE[key], root)} else CHANGED
