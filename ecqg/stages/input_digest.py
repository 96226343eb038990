"""Stage `input_test_set@<name>`: record the SHA-256 and size of an input file named in params.

Why: DVC reruns a stage when a dependency changes, and a test set may live anywhere (``data/`` in mini,
``downloads/`` in the paper profile) under any name ``data.test_sets`` gives it. DVC cannot list a mapping's values
as one stage's dependencies, so each test set is the dependency of a stage of its own (``foreach``) whose output, this
digest, ``prepare`` depends on: an edited test set changes its digest and reruns ``prepare`` and what follows.

``python -m ecqg.stages.input_digest <input file> <digest json>``
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from ecqg.io import write_json


def digest(path: str | Path, chunk: int = 1 << 20) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: input file not found (named in params.yaml)")
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            sha.update(block)
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": sha.hexdigest()}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m ecqg.stages.input_digest <input file> <digest json>", file=sys.stderr)
        return 2
    write_json(args[1], digest(args[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
