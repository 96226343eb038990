"""The environment the pipeline needs: the repository root for notebooks opened in Jupyter, and a clear error when
Java is missing."""

import os
import subprocess
import sys
from pathlib import Path

from ecqg.core import env

REPO = Path(__file__).resolve().parents[1]


def test_a_jupyter_kernel_below_the_root_moves_to_the_root(tmp_path, monkeypatch):
    root = tmp_path / "checkout"
    (root / "notebooks").mkdir(parents=True)
    (root / "dvc.yaml").write_text("stages: {}\n")
    (root / "params.yaml").write_text("profile: mini\n")
    monkeypatch.chdir(root / "notebooks")
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    assert env.move_to_repository_root() is None and Path.cwd() == root / "notebooks"   # not a kernel: no change
    monkeypatch.setitem(sys.modules, "ipykernel", object())
    assert env.move_to_repository_root() == root and Path.cwd() == root
    assert env.move_to_repository_root() is None                                          # already there
    monkeypatch.chdir(tmp_path)
    assert env.move_to_repository_root() is None and Path.cwd() == tmp_path              # outside any checkout


def test_answer_matching_needs_no_java_and_bm25_says_plainly_that_it_does():
    """DPR answer matching (pyserini's pure-Python DrQA code) runs where Java is absent, e.g. a GPU node that only
    samples or encodes; BM25 names what to install instead of failing with 'Unable to find javac'."""
    code = ("import ecqg.data.text as t; assert t.has_answer('The Eiffel Tower is in Paris.', ['paris']); "
            "from ecqg.retrieval import bm25; bm25.index_doc_count('nowhere')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PATH": "/nonexistent", "HOME": os.environ.get("HOME", "/tmp")}, cwd=REPO)
    assert run.returncode != 0 and "AssertionError" not in run.stderr, run.stderr[-800:]
    assert "java not found: pyserini 0.25" in run.stderr and "JavaException" not in run.stderr, run.stderr[-800:]


def test_make_lab_starts_jupyter_as_root_too():
    """Jupyter refuses to run as root without --allow-root (containers run as root): `make lab` adds it then only."""
    dry = subprocess.run(["make", "-n", "lab", "STAMP="], cwd=REPO, capture_output=True, text=True, check=True).stdout
    line = next(line for line in dry.splitlines() if "jupyter lab" in line)
    assert ("--allow-root" in line) == (os.getuid() == 0), line
