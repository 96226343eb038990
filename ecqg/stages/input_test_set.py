"""Stage `input_test_set@<name>`: record the SHA-256 and size of an input file named in params.

Why: DVC reruns a stage when a dependency changes, and a test set may live anywhere (``data/`` in mini,
``downloads/`` in the paper profile) under any name ``data.test_sets`` gives it. DVC cannot list a mapping's values
as one stage's dependencies, so each test set is the dependency of a stage of its own (``foreach``) whose output, this
digest, ``prepare`` depends on: an edited test set changes its digest and reruns ``prepare`` and what follows.

``python -m ecqg.stages.input_test_set <input file> <digest json>``
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ecqg.core import cli
from ecqg.core.io import write_json


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
    parser = cli.parser("ecqg.stages.input_test_set", __doc__)
    parser.add_argument("input", help="the input file (a test set params.yaml names)")
    parser.add_argument("digest", help="the json to write: path, bytes, sha256")
    args = parser.parse_args(argv)
    write_json(args.digest, digest(args.input))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
