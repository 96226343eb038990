"""Sharing outputs as DVC users do: a remote (here a local folder), `dvc push` after a run, `dvc pull` in a clone.

docs/team.md (linked from the README) documents these commands; this runs them on a one-stage pipeline in a scratch
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
    readme = (REPO / "docs" / "team.md").read_text(encoding="utf-8")
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


def test_a_training_stage_comes_back_from_the_run_cache_locally_and_in_a_clone(tmp_path):
    """docs/team.md's promise for the trainings: a stage that keeps resumable state outside its outputs (as
    ``outputs/checkpoints/`` is kept) enters DVC's run cache, so switching a parameter back checks the earlier
    outputs out instead of rerunning; in a clone, ``dvc pull --run-cache`` and ``dvc fetch --all-commits`` give the
    same for every committed and pushed run (git carrying ``.dvc/config``, ``dvc.lock`` and the params)."""
    if shutil.which("git") is None:
        pytest.skip("git is needed for a DVC repository")
    readme = (REPO / "docs" / "team.md").read_text(encoding="utf-8")
    for command in ("git add .dvc/config", "dvc push --run-cache", "dvc pull --run-cache", "dvc fetch --all-commits"):
        assert command in readme
    work, remote, clone = tmp_path / "work", tmp_path / "remote", tmp_path / "clone"
    work.mkdir()
    _run(work, "git", "init", "-q")
    _run(work, "dvc", "init", "-q")
    (work / ".gitignore").write_text("checkpoints/\nruns.log\n")
    (work / "params.yaml").write_text("lr: 1\n")
    (work / "train.py").write_text(
        "import yaml\nfrom pathlib import Path\nlr = yaml.safe_load(open('params.yaml'))['lr']\n"
        "Path('checkpoints').mkdir(exist_ok=True)\nPath(f'checkpoints/state-{lr}').write_text('resumable')\n"
        "Path('model').mkdir(exist_ok=True)\nPath('model/w.txt').write_text(f'lr {lr}')\n"
        "with open('runs.log', 'a') as f:\n    f.write(f'{lr}\\n')\n")
    _run(work, "dvc", "stage", "add", "-q", "-n", "train", "-d", "train.py", "-p", "lr", "-o", "model",
         "python train.py")
    _run(work, "dvc", "remote", "add", "-d", "shared", str(remote))
    for lr in (1, 2):                                    # two committed runs, each pushed as docs/team.md says
        (work / "params.yaml").write_text(f"lr: {lr}\n")
        _run(work, "dvc", "repro", "-q")
        _run(work, "git", "add", "-A")
        _run(work, "git", "commit", "-qm", f"run at lr {lr}")
        _run(work, "dvc", "push", "-q", "--run-cache")
    (work / "params.yaml").write_text("lr: 1\n")
    _run(work, "dvc", "repro")
    assert (work / "runs.log").read_text().split() == ["1", "2"], "switching back retrained"
    assert (work / "model" / "w.txt").read_text() == "lr 1"
    _run(tmp_path, "git", "clone", "-q", str(work), str(clone))
    _run(clone, "dvc", "pull", "-q", "--run-cache")
    assert (clone / "model" / "w.txt").read_text() == "lr 2"
    _run(clone, "dvc", "fetch", "-q", "--all-commits")
    (clone / "params.yaml").write_text("lr: 1\n")
    _run(clone, "dvc", "repro")
    assert not (clone / "runs.log").exists(), "the clone retrained a run the remote holds"
    assert (clone / "model" / "w.txt").read_text() == "lr 1"
