"""DVC's plots draw every system (issue 57, item 4): ``dvc plots show`` on the committed plot data, with the
dvc.yaml `python -m ecqg.tooling.dag write` writes for the profile, warns of nothing and renders a line for every system
column of the Top-k and answer-position files (the answer-position plot named a column the file lacks, and the Top-k
plot named none, so DVC drew only a file's last column)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ecqg.core import config, settings
from ecqg.tooling import dag
from ecqg.stages import results

REPO = Path(__file__).resolve().parents[1]
DVC = shutil.which("dvc", path=str(Path(sys.executable).parent)) or "dvc"


def profile_params(profile: str) -> dict:
    return yaml.safe_load(config.render_profile(profile, REPO / config.PRESETS_DIR))


@pytest.mark.parametrize("profile", config.PROFILES)
def test_the_plotted_systems_are_table_3_s_rows(profile):
    """dag.py (the library layer) lists the systems the stages' Table 3 has, in its order."""
    tree = settings.of(profile_params(profile))
    blocks = (tree.dpr, tree.mixing, tree.hybrid)
    assert dag.plotted_systems(*blocks) == results.table3_systems(*blocks)


def _columns(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return next(csv.reader(handle))


# mini: the committed dvc.yaml's profile; replicates: another committed profile run on the current presets (study's
# committed results predate its preset's current variants and doses, so its files have other columns)
@pytest.mark.parametrize("profile", ["mini", "replicates"])
def test_dvc_plots_show_draws_every_system_of_the_committed_results(profile, tmp_path):
    params = profile_params(profile)
    subprocess.run([DVC, "init", "--no-scm", "-q"], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "params.yaml").write_text(config.render_profile(profile, REPO / config.PRESETS_DIR), encoding="utf-8")
    (tmp_path / "dvc.yaml").write_text(dag.render(settings.of(params)), encoding="utf-8")
    plots = Path("results") / profile / "plots"
    shutil.copytree(REPO / plots, tmp_path / plots)

    run = subprocess.run([DVC, "plots", "show", "--json"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "DVC_NO_ANALYTICS": "1"}, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "WARNING" not in run.stderr and "ERROR" not in run.stderr, run.stderr
    shown = json.loads(run.stdout)
    assert not shown.get("errors"), shown["errors"]

    drawn = {}
    for name, renders in shown["data"].items():
        values = renders[0]["content"]["data"]["values"]
        drawn[name] = {v["field"] for v in values if "field" in v}
    by_system = sorted((tmp_path / plots).glob("topk/*.csv")) + [tmp_path / plots / "position_top5.csv"]
    assert len(by_system) > 1
    for path in by_system:
        name = path.relative_to(tmp_path).as_posix()
        systems = _columns(path)[1:]
        assert name in drawn, f"{name}: not among DVC's plots"
        assert drawn[name] == set(systems), f"{name}: DVC draws {sorted(drawn[name])}, the file has {systems}"
    for run_file in (tmp_path / plots).glob("training/*.csv"):
        assert run_file.relative_to(tmp_path).as_posix() in shown["data"]
