"""Check that the machine can run the pipeline, and say what is missing in plain words.

Run by ``make install`` (so a broken set-up fails at install time, not twenty minutes into ``dvc repro``) and by hand
with ``python -m ecqg.doctor``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys


def java_major_version() -> int | None:
    java = shutil.which("java")
    if java is None:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else None


def check() -> list[str]:
    """Return a list of problems (empty when everything needed is there)."""
    problems = []
    major = java_major_version()
    if major is None:
        problems.append("java not found: pyserini 0.25 needs a Java 17 runtime (apt-get install openjdk-17-jre-headless)")
    elif major < 17:
        problems.append(f"java {major} found: pyserini 0.25 needs Java 17 or newer")
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


def main() -> int:
    problems = check()
    for problem in problems:
        print(f"ecqg doctor: {problem}", file=sys.stderr)
    if not problems:
        print("ecqg doctor: java, bundled encoder and spaCy model found")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
