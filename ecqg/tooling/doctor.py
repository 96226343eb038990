"""Check that the machine can run the pipeline, and say what is missing in plain words.

Run by ``make install`` (so a broken set-up fails at install time, not twenty minutes into ``dvc repro``) and by hand
with ``python -m ecqg.tooling.doctor``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ecqg.core import cli
from ecqg.core.java import java_problem


def check() -> list[str]:
    """Return a list of problems (empty when everything needed is there)."""
    problems = []
    problem = java_problem()
    if problem is not None:
        problems.append(problem)
    from ecqg.runtime.models import bundled_encoder_path, load_spacy

    try:
        bundled_encoder_path()
    except Exception as exc:  # report, don't crash: doctor lists every problem at once
        problems.append(str(exc))
    try:
        load_spacy()
    except Exception as exc:
        problems.append(str(exc))
    return problems


def main(argv: Sequence[str] = ()) -> int:
    cli.parser("ecqg.tooling.doctor", __doc__, paragraphs=2).parse_args(argv)
    problems = check()
    for problem in problems:
        print(f"ecqg doctor: {problem}", file=sys.stderr)
    if not problems:
        print("ecqg doctor: java, bundled encoder and spaCy model found")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
