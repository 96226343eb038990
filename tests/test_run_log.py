"""`make repro` logs each session's machine where git does not look (issue 57, item 5): the line goes to the
git-ignored ``outputs/runs.log``, so a run leaves a clean clone clean (it was appended to the committed
``results/<profile>/runs.log``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAKEFILE = REPO / "Makefile"

pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None,
                                reason="needs make and git")


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


def test_the_run_log_leaves_a_clean_clone_clean(tmp_path):
    clone = tmp_path / "clone"
    (clone / "results" / "mini").mkdir(parents=True)
    shutil.copy(REPO / ".gitignore", clone / ".gitignore")
    (clone / "params.yaml").write_text("profile: mini   # the line make reads the profile from\nseed: 1\n")
    (clone / "results" / "mini" / "runs.log").write_text("2026-12-02T03:51:00Z commit a9a3686 | history\n")
    _git("init", "-q", cwd=clone)
    _git("add", ".", cwd=clone)
    _git("commit", "-q", "-m", "a clone", cwd=clone)
    commit = _git("rev-parse", "--short", "HEAD", cwd=clone).strip()

    for _ in range(2):   # two sessions
        subprocess.run(["make", "--no-print-directory", "-f", str(MAKEFILE), "run-log"], cwd=clone, check=True,
                       capture_output=True, text=True)

    lines = (clone / "outputs" / "runs.log").read_text().splitlines()
    assert len(lines) == 2
    assert all(f"profile mini | commit {commit} | " in line and " cores | " in line for line in lines), lines
    assert (clone / "results" / "mini" / "runs.log").read_text().count("\n") == 1      # history kept, not appended
    assert _git("status", "--porcelain", "--untracked-files=all", cwd=clone) == ""


def test_make_repro_writes_that_line_and_nothing_under_results():
    text = MAKEFILE.read_text(encoding="utf-8")
    recipe = text.split("\nrepro:")[1].split("\n\n")[0]
    lines = [line.strip() for line in recipe.splitlines()[1:]]
    assert lines.index("@$(RUN_LOG)") < lines.index("dvc repro")
    log_line = text.split("\nRUN_LOG = ")[1].split("\nrun-log:")[0]
    assert ">> outputs/runs.log" in log_line and "results/" not in log_line
    assert not [line for line in text.splitlines() if "runs.log" in line and not line.startswith("#")
                and ">> outputs/runs.log" not in line]
