"""Check that the machine can run the pipeline, and say what is missing in plain words.

Run by ``make install`` (so a broken set-up fails at install time, not twenty minutes into ``dvc repro``) and by hand
with ``python -m ecqg.doctor``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence

from ecqg import cli


def java_major_version() -> int | None:
    """The major version of the ``java`` on the PATH (else in ``$JAVA_HOME/bin``, where pyjnius also looks)."""
    home = os.environ.get("JAVA_HOME")
    java = shutil.which("java") or (shutil.which("java", path=os.path.join(home, "bin")) if home else None)
    if java is None:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else None


def java_problem() -> str | None:
    """What is wrong with the Java runtime pyserini needs, in plain words, or None."""
    major = java_major_version()
    if major is None:
        return ("java not found: pyserini 0.25 (BM25 over Lucene) needs a Java 17 runtime on the PATH "
                "(apt-get install openjdk-17-jre-headless, or conda install openjdk=17)")
    if major < 17:
        return f"java {major} found: pyserini 0.25 needs Java 17 or newer"
    return None


@functools.lru_cache(maxsize=1)
def require_java() -> None:
    """Raise before pyserini is imported when Java is missing: pyserini's own error ("Unable to find javac") does
    not say what to install."""
    problem = java_problem()
    if problem is not None:
        raise RuntimeError(f"{problem} (python -m ecqg.doctor checks the whole set-up)")


def check() -> list[str]:
    """Return a list of problems (empty when everything needed is there)."""
    problems = []
    problem = java_problem()
    if problem is not None:
        problems.append(problem)
    from ecqg.models import bundled_encoder_path, load_spacy

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
    cli.parser("ecqg.doctor", __doc__, paragraphs=2).parse_args(argv)
    problems = check()
    for problem in problems:
        print(f"ecqg doctor: {problem}", file=sys.stderr)
    if not problems:
        print("ecqg doctor: java, bundled encoder and spaCy model found")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
