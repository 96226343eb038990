"""bench/study_sweep.py's bookkeeping: the job plan, choosing a cut run's rest, ranks <-> hits, and the summary's
pairing over the seeds two systems share (the GPU work itself runs only on a device machine)."""

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import study_sweep  # noqa: E402


def test_plan_puts_pretraining_first_and_fine_tunings_after_what_they_need():
    jobs = study_sweep.plan([2022, 2023], poly=True)
    names = [j["name"] for j in jobs]
    assert names[:2] == ["uncon-pre", "mixed-pre"]
    assert names[2:5] == ["uncon-2022", "mixed-2022", "baseline-2022"]
    needs = {j["name"]: j["needs"] for j in jobs}
    assert needs["mixed-2023"] == ["mixed-pre"] and needs["baseline-2023"] == []
    assert needs["poly_mixed-2022"] == ["poly_mixed-pre"] and needs["poly_baseline-2022"] == []
    assert "poly_mixed-2023" not in names          # Poly-DPR at the first seed only
    assert not any(n.startswith("poly") for n in (j["name"] for j in study_sweep.plan([2022], poly=False)))


def test_select_jobs_adds_the_pretrainings_and_refuses_unknown_names():
    jobs = study_sweep.plan([2022, 2024], poly=False)
    chosen = [j["name"] for j in study_sweep.select_jobs(jobs, ["mixed-2024", "baseline-2022"])]
    assert chosen == ["mixed-pre", "baseline-2022", "mixed-2024"]
    with pytest.raises(ValueError, match="no such job: mixed-2030"):
        study_sweep.select_jobs(jobs, ["mixed-2030"])


def test_as_hits_keeps_top_k_of_first_hit_ranks():
    hits = study_sweep.as_hits([0, 1, 5, 20])
    assert hits.shape == (4, study_sweep.K_MAX) and hits.sum() == 3
    top5 = np.logical_or.accumulate(hits, axis=1)[:, 4]
    assert top5.tolist() == [False, True, True, False]


def _job(variant, seed, ranks, phase="finetune"):
    return {"variant": variant, "phase": phase, "seed": seed, "train_s": 1.0, "examples_per_s_median": 1.0,
            "summary": {"steps": 1}, "ranks": {"nq": ranks}, "curve": {}}


def test_summary_pairs_over_the_seeds_both_systems_have(tmp_path, capsys):
    n = 400
    base = [1] * (n // 2) + [0] * (n // 2)              # Top-1 50% at both seeds
    better = [1] * (n // 2 + 40) + [0] * (n // 2 - 40)  # +10 points, at seed 2023 only
    sweep = {"device": "cpu", "torch": "x", "date": "d", "skipped": [], "failed": {}, "elapsed_s": 1, "sets": ["nq"],
             "seeds": [2022, 2023], "jobs": {"baseline-2022": _job("baseline", 2022, base),
                                            "baseline-2023": _job("baseline", 2023, base),
                                            "uncon-2023": _job("uncon", 2023, better)}}
    path = tmp_path / "sweep.json.gz"
    path.write_bytes(gzip.compress(json.dumps(sweep).encode()))
    study_sweep.summarize([path])
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if "uncon - baseline" in line and line.split()[4] == "1")
    assert row[5] == "1" and float(row[6]) == 10.0      # one shared seed, +10.0 points at Top-1
    assert float(row[-1]) < 0.01


def test_merged_sweeps_keep_the_first_copy_and_refuse_another_study():
    a = {"question_ids": {"nq": ["1"]}, "seeds": [1], "sets": ["nq"], "profile": "study",
         "jobs": {"x-1": {"from": "a"}}}
    b = {**a, "jobs": {"x-1": {"from": "b"}, "y-1": {"from": "b"}}}
    both = study_sweep.merged([a, b])["jobs"]
    assert both == {"x-1": {"from": "a"}, "y-1": {"from": "b"}}
    with pytest.raises(ValueError, match="differ in seeds"):
        study_sweep.merged([a, {**b, "seeds": [2]}])
