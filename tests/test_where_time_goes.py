"""bench/where_time_goes.py, bench/reader_curve.py and bench/bench_startup.py, the instruments of issue 68's 'measure
first': the time of a committed run split by kind, with a notebook's glue and an encoding's start-up apart;
checkpoints found by step; a notebook kernel's start-up timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import bench_startup  # noqa: E402
import reader_curve  # noqa: E402
import where_time_goes  # noqa: E402


def _stage(folder: Path, name: str, seconds: float, **extra) -> None:
    record = {"stage": name, "wall_time_s": seconds, "host": {"cpu": "test CPU", "cores": 2}, **extra}
    (folder / f"stage_{name}.json").write_text(json.dumps(record))


def test_a_run_is_split_by_kind_with_the_time_outside_the_work(tmp_path):
    (tmp_path / "notebooks").mkdir()
    _stage(tmp_path, "03_filtering", 100.0)
    _stage(tmp_path, "05_dpr_training.mixed-pre-2022", 60.0)
    _stage(tmp_path, "05_dpr_training.mixed-2022", 30.0)
    _stage(tmp_path, "retrieve_dense_mixed-2022", 50.0, encode_s=40.0)
    _stage(tmp_path, "prepare", 10.0)
    cells = [{"cell_type": "code", "source": ["reader = train()\n"], "metadata": {"papermill": {"duration": 80.0}}},
             {"cell_type": "markdown", "source": ["text"], "metadata": {}}]
    (tmp_path / "notebooks" / "03_filtering.ipynb").write_text(json.dumps({"cells": cells}))
    out = subprocess.run([sys.executable, str(REPO / "bench" / "where_time_goes.py"), str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    assert "5 timed stages, 4.2 min of stages; host(s): test CPU, 2 cores" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line[:1].isalpha()}
    assert rows["notebook"][1:3] == ["1", "1.7"] and rows["notebook"][-1] == "0.3"        # 100 s - 80 s of cells
    assert rows["encoding"][-1] == "0.2" and rows["pre-training"][1] == "1"               # 50 s - 40 s encoding
    assert "1.3 min  03_filtering: reader = train()" in out


def test_the_reader_curve_orders_checkpoints_by_step():
    assert reader_curve.step_of(Path("/x/checkpoint-700")) == 700
    with pytest.raises(SystemExit, match="not an HF Trainer checkpoint folder"):
        reader_curve.step_of(Path("/x/mrc_model"))
    assert where_time_goes.stage_kind("retrieve_dense_untrained") == "encoding + search"


def test_the_startup_bench_starts_a_notebook_kernel():
    """papermill needs the kernel named for a notebook without kernel metadata: without ``-k`` the bench failed
    before printing anything (it had never been run until 6 Dec)."""
    assert 0 < bench_startup.kernel_seconds(1) < 120
