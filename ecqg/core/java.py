"""The Java runtime pyserini needs: found, new enough, and said in plain words before pyserini is imported.

Why in the core: BM25 (research code) checks it before every Lucene call, and the doctor (the repository's machinery)
lists it with the other set-up problems; neither should import the other.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess


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
        raise RuntimeError(f"{problem} (python -m ecqg.tooling.doctor checks the whole set-up)")
