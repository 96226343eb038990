"""Sharing outputs as DVC users do: a remote (here a local folder), `dvc push` after a run, `dvc pull` in a clone.

The README's "Sharing outputs" section documents these commands; this runs them on a one-stage pipeline in a scratch
repository, so the round trip is DVC's own, not a mock."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(cwd: Path, *args: str) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_push_then_pull_restores_a_stage_output(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is needed for a DVC repository")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "dvc remote add -d" in readme and "dvc push" in readme and "dvc pull" in readme
    work, remote, clone = tmp_path / "work", tmp_path / "remote", tmp_path / "clone"
    work.mkdir()
    _run(work, "git", "init", "-q")
    _run(work, "dvc", "init", "-q")
    (work / "make.py").write_text("from pathlib import Path\nPath('out').mkdir(exist_ok=True)\n"
                                  "Path('out/model.txt').write_text('weights')\n")
    _run(work, "dvc", "stage", "add", "-q", "-n", "train", "-d", "make.py", "-o", "out", "python make.py")
    _run(work, "dvc", "repro", "-q")
    _run(work, "dvc", "remote", "add", "-d", "shared", str(remote))
    _run(work, "git", "add", "-A")
    _run(work, "git", "commit", "-qm", "run")
    _run(work, "dvc", "push", "-q")
    _run(tmp_path, "git", "clone", "-q", str(work), str(clone))
    assert not (clone / "out").exists()
    _run(clone, "dvc", "pull", "-q")
    assert (clone / "out" / "model.txt").read_text() == "weights"
    assert "up to date" in _run(clone, "dvc", "status").lower() or "Data and pipelines" in _run(clone, "dvc", "status")
