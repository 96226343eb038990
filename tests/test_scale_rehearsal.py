"""bench/scale_rehearsal.py: the paper DAG's host-side steps at 2,000 passages (its 10k, 100k and 1M points are
bench runs), the growth fit and the docs block it writes."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import scale_rehearsal  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_fit_reads_growth_from_the_two_largest_sizes():
    # fixed cost at the smallest size; then time grows as n^1 and memory by 1 GB per 1M passages
    points = [{"passages": 1_000, "seconds": 20.0, "peak_rss_gb": 0.5},
              {"passages": 100_000, "seconds": 100.0, "peak_rss_gb": 1.0},
              {"passages": 1_000_000, "seconds": 1000.0, "peak_rss_gb": 1.9}]
    f = scale_rehearsal.fit(points)
    assert f["exponent"] == 1.0
    assert f["seconds_21m"] == pytest.approx(1000.0 * 21.015324, rel=1e-4)
    assert f["bytes_per_passage"] == pytest.approx(1000.0, rel=1e-6)
    assert f["rss_gb_21m"] == pytest.approx(1.9 + 20.015324, rel=1e-3)
    assert scale_rehearsal.fit(points[:1])["exponent"] is None


def test_the_16_core_projection_splits_a_step_by_its_measured_cpu_time():
    share = scale_rehearsal.parallel_share
    # 2 cores: 100 s wall, 150 s CPU -> serial 50 + parallel 100 (50 s of wall on 2 cores): half the wall parallel
    assert share({"seconds": 100.0, "cpu_seconds": 150.0}, 2, "mixing") == pytest.approx(0.5)
    assert share({"seconds": 100.0, "cpu_seconds": 200.0}, 2, "mixing") == 1.0     # both cores busy throughout
    assert share({"seconds": 100.0, "cpu_seconds": 60.0}, 2, "mixing") == 0.0      # waiting on the disk: serial
    assert share({"seconds": 100.0}, 2, "retrieve_bm25") == 1.0 and share({"seconds": 100.0}, 2, "mixing") == 0.0
    result = {"cpu": "cpu", "cores": 2, "date": "2026-12-02", "sizes": [10, 100], "steps": {"mixing": [
        {"passages": 10, "seconds": 1.0, "peak_rss_gb": 0.1},
        {"passages": 100, "seconds": 3600 * 100 / scale_rehearsal.PAPER_PASSAGES, "cpu_seconds": 0.0,
         "peak_rss_gb": 0.2}]}}
    result["steps"]["mixing"][1]["cpu_seconds"] = result["steps"]["mixing"][1]["seconds"] * 1.5
    row = scale_rehearsal.table(result).splitlines()[2]
    # the row: the 16-core hours are the 2-core hours x (0.5 serial + 0.5 parallel x 2 / 16)
    cells = [c.strip() for c in row.split("|")]
    hours, hours16 = float(cells[-5]), float(cells[-4])
    assert cells[5] == "0.50" and hours16 == pytest.approx(hours * (0.5 + 0.5 * 2 / 16), abs=0.06)


def test_write_docs_replaces_its_block_only(tmp_path):
    doc = tmp_path / "paper_profile.md"
    doc.write_text("# Paper\n\nbefore\n" + "\n".join(scale_rehearsal.MARKERS) + "\nafter\n")
    result = {"cpu": "cpu", "cores": 2, "date": "2026-12-01", "sizes": [10, 100],
              "steps": {"prepare": [{"passages": 10, "seconds": 1.0, "peak_rss_gb": 0.1},
                                    {"passages": 100, "seconds": 10.0, "peak_rss_gb": 0.2}]}}
    scale_rehearsal.write_docs(result, doc)
    scale_rehearsal.write_docs(result, doc)                  # a second write replaces, never appends
    text = doc.read_text()
    assert text.startswith("# Paper\n\nbefore\n") and text.count(scale_rehearsal.MARKERS[0]) == 1
    assert "| prepare | 1.0 / 0.10 | 10.0 / 0.20 | 1.00 | 0.00 (assumed) |" in text


@pytest.mark.slow
def test_rehearsal_at_2k_passages_runs_every_host_step(tmp_path, monkeypatch):
    # the question files a fifth of the bench's sizes (which stay fixed as the corpus grows): the same steps and
    # files, 13% less time (80 vs 92 s on 2 cores: each step's process, JVM and spaCy start are most of it)
    monkeypatch.setattr(scale_rehearsal, "TEST_QUESTIONS", 100)
    monkeypatch.setattr(scale_rehearsal, "NQ_DEV", 100)
    monkeypatch.setattr(scale_rehearsal, "TRAIN", 300)
    result = scale_rehearsal.rehearse(REPO / "data", tmp_path, [2_000], progress=lambda line: None)
    per_set = result["inputs"]["2000"]["questions_per_set"]
    assert per_set == 200 == scale_rehearsal.questions_per_set(2_000)    # the floor (1M per set at 21M: 95)
    assert scale_rehearsal.questions_per_set(10_000) == 476
    for step in scale_rehearsal.STEPS:
        (point,) = result["steps"][step]
        assert point["seconds"] > 0 and 0.01 < point["peak_rss_gb"] < 20, (step, point)
    work = tmp_path / "n2000"
    prepared = json.loads((work / "results/paper/stage_prepare.json").read_text())
    assert prepared["corpus_passages"] == 2_000 and prepared["train_triples"] == scale_rehearsal.TRAIN
    for name in ("uncon", "mixed"):
        assert len(json.loads((work / f"outputs/synthetic/{name}.json").read_text())) > 0.8 * per_set
    assert (work / "outputs/pseudo/etm.json").is_file() and (work / "outputs/pseudo/rsm.json").is_file()
    assert "| tempqg_templates |" in scale_rehearsal.render(result)
