"""Benchmark: what a stage spends before its work starts. Each figure is a fresh interpreter (the way DVC starts a
stage), median of ``--repeat`` runs: bare Python; the imports every model stage pays (torch, transformers, spaCy and
its model); a ``python -m`` stage's own import (``ecqg.stages.retrieve_dense``); and a notebook stage's extra cost,
papermill starting a kernel for a one-cell notebook.

Prints figures; not a test. Run: ``.venv/bin/python bench/bench_startup.py [--repeat 3]``; one encoding of the
corpus is ``bench/bench_encode.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ecqg.core.device import cpu_name

SNIPPETS = {
    "python": "pass",
    "import torch": "import torch",
    "import transformers (AutoModel)": "from transformers import AutoModel",
    "import spacy + its model": "from ecqg.runtime.models import load_spacy; load_spacy()",
    "import a stage (retrieve_dense)": "import ecqg.stages.retrieve_dense",
}


def seconds(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 2)


def kernel_seconds(repeat: int) -> float:
    import nbformat

    with tempfile.TemporaryDirectory() as folder:
        notebook = Path(folder) / "one.ipynb"
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
        nbformat.write(nb, notebook)
        return seconds([sys.executable, "-m", "papermill", "-k", "python3", "--log-level", "ERROR", str(notebook),
                        str(Path(folder) / "out.ipynb")], repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    repeat = ap.parse_args().repeat
    out = {"cpu": cpu_name(), "repeat": repeat}
    for name, code in SNIPPETS.items():
        out[name] = seconds([sys.executable, "-c", code], repeat)
    out["papermill, a one-cell notebook"] = kernel_seconds(repeat)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
