"""The per-run evidence files and the intervals computed from them: paired where seeds pair, the printed rule (t or
hierarchical bootstrap, the wider), Holm-aware power, one family per comparison, and the recompute command."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ecqg.analysis import run_evidence
from ecqg.analysis.over_runs import over_runs, runs_difference
from ecqg.analysis.power import detectable, detectable_range, power_of, sd_factors
from ecqg.analysis.stats import hierarchical_bootstrap, holm, holm_levels

SEEDS = (2022, 2023, 2024)


def _seeded_arms(rng, questions=3000, runs=5, gap=0.02, seed_sd=0.03, arm_sd=0.004):
    """Two arms whose runs share a per-seed effect (the design's pairing) of sd ``seed_sd``, plus an arm-own run
    effect of ``arm_sd``; questions differ in difficulty. Returns units x runs probabilities' draws (0/1)."""
    difficulty = rng.normal(0, 1.2, questions)
    seed_effect = rng.normal(0, seed_sd, runs)
    logistic = (lambda x: 1 / (1 + np.exp(-x)))
    arm = [logistic(difficulty[:, None] + 4 * (seed_effect + rng.normal(0, arm_sd, runs) + shift))
           for shift in (gap, 0.0)]
    return [(rng.random(p.shape) < p).astype(float) for p in arm]


def test_pairing_by_seed_removes_the_shared_seed_effect():
    a, b = _seeded_arms(np.random.default_rng(1))
    paired = runs_difference(a, b, paired_runs=True)
    unpaired = runs_difference(a, b, paired_runs=False)
    assert paired.method.startswith("paired by seed") and unpaired.method.startswith("unpaired")
    assert paired.diff == pytest.approx(unpaired.diff)
    assert paired.width < 0.6 * unpaired.width          # the seed effect (sd 0.03 x 4) cancels in the pairs
    assert paired.low > 0                                 # a true gap the unpaired test cannot see
    assert unpaired.low < 0


def test_against_one_model_and_one_model():
    rng = np.random.default_rng(2)
    a = (rng.random((2000, 4)) < 0.6).astype(float)
    fixed = (rng.random((2000, 1)) < 0.5).astype(float)
    got = runs_difference(a, fixed)
    assert got.method.startswith("against one model") and got.runs == (4, 1) and got.low > 0
    alone = runs_difference(a)
    assert alone.method.startswith("one model") and alone.diff == pytest.approx(a.mean())
    assert runs_difference(a[:, :1], fixed) is None          # one run against one run: no interval over runs


def test_bootstrap_and_t_agree_on_a_case_of_known_variance():
    """Many runs with a known run-level spread: the t-interval over runs (units' noise added) and the hierarchical
    bootstrap estimate the same SE, and both near the truth sqrt(run_var / n + unit_var / m)."""
    rng = np.random.default_rng(3)
    runs, units, run_sd, unit_sd = 40, 400, 0.5, 2.0
    values = rng.normal(0, run_sd, runs)[None, :] + rng.normal(0, unit_sd, (units, 1)) \
        + rng.normal(0, 0.01, (units, runs))
    truth = math.sqrt(run_sd ** 2 / runs + unit_sd ** 2 / units)
    t = runs_difference(values)
    boot = hierarchical_bootstrap(values, n_boot=3000, seed=0)
    assert t.se == pytest.approx(truth, rel=0.3)
    assert boot.se == pytest.approx(t.se, rel=0.15)
    assert over_runs(values, n_boot=3000).width == pytest.approx(max(t.width, boot.width))


def test_the_printed_rule_takes_the_wider_interval():
    a, b = _seeded_arms(np.random.default_rng(4), runs=3)
    chosen = over_runs(a, b, paired_runs=True, n_boot=500)
    t = runs_difference(a, b, paired_runs=True)
    boot = hierarchical_bootstrap(a, b, paired_runs=True, n_boot=500, seed=0)
    assert chosen.width == pytest.approx(max(t.width, boot.width))
    assert chosen.run_se == pytest.approx(t.run_se) and chosen.run_df == t.run_df == 2


def test_power_at_the_holm_level_on_the_tests_own_scale():
    assert holm_levels([0.01, 0.2, None, 0.03]) == [0.05 / 3, 0.05 / 1, None, 0.05 / 2]
    low, high = sd_factors(4)
    assert (round(low, 2), round(high, 2)) == (0.6, 2.87)
    a, b = _seeded_arms(np.random.default_rng(5))
    interval = runs_difference(a, b, paired_runs=True)
    assert interval.run_df == 4 and interval.df > interval.run_df      # Satterthwaite credits the questions
    at_holm = detectable(interval, 0.05 / 15)
    assert at_holm > detectable(interval, 0.05)
    lo, hi = detectable_range(interval, 0.05 / 15)
    assert lo < at_holm < hi
    assert power_of(interval, 0.016, 0.05 / 15) < power_of(interval, 0.016, 0.05)


def test_ranks_round_trip_through_the_committed_files(tmp_path, monkeypatch):
    rng = np.random.default_rng(6)
    hits = {("dpr_x", "nq"): rng.random((30, 3, 10)) < 0.2, ("bm25", "nq"): rng.random((30, 10)) < 0.2}
    frame = run_evidence.ranks_frame(hits, {"dpr_x": [f"dpr_x_s{s}" for s in SEEDS]})
    run_evidence.write(frame, tmp_path / "evidence" / run_evidence.RANKS)
    ev = run_evidence.Evidence.load(tmp_path)
    got, seeds = ev.hits("dpr_x", "nq", 5)
    expected = np.logical_or.reduce(hits[("dpr_x", "nq")][:, :, :5], axis=-1)
    assert seeds == SEEDS and (got == expected).all()
    assert ev.seeds("bm25") == (run_evidence.UNTRAINED_SEED,)
    with pytest.raises(ValueError, match="3 runs in its hits but 2 run names"):
        run_evidence.ranks_frame(hits, {"dpr_x": ["dpr_x_s1", "dpr_x_s2"]})


# ------------------------------------------------------------------------------------------ a profile's fixture
SYSTEMS = {"dpr_baseline": 0.0, "dpr_uncon": 0.02, "dpr_mixed": 0.12, "dpr_uncon_pre": -0.02, "dpr_mixed_pre": 0.0,
           "dpr_uncon_d100_pre": -0.01, "dpr_mixed_d100_pre": 0.0}


def _profile(folder, rng):
    """A results folder with per-run ranks only: 3 seeds per trained system, the untrained base once."""
    questions = 1500
    difficulty = rng.normal(0, 1, questions)
    seed_effect = dict(zip(SEEDS, rng.normal(0, 0.05, 3)))
    hits, runs = {}, {}
    for system, shift in {**SYSTEMS, "minilm_untrained": 0.0}.items():
        seeds = SEEDS if system != "minilm_untrained" else (None,)
        stack = []
        for seed in seeds:
            p = 1 / (1 + np.exp(-(difficulty + 3 * (shift + (seed_effect[seed] if seed else 0)))))
            first = np.where(rng.random(questions) < p, 1, rng.integers(2, 30, questions))
            stack.append(np.arange(1, 31)[None, :] == first[:, None])
        hits[(system, "nq")] = np.stack(stack, axis=1) if len(stack) > 1 else stack[0]
        runs[system] = [f"{system}_s{s}" for s in seeds] if seeds[0] else [system]
    run_evidence.write(run_evidence.ranks_frame(hits, runs), folder / "evidence" / run_evidence.RANKS)
    (folder / "table3.json").write_text(json.dumps({"accuracy": {s: {} for s in hits_systems(hits)}}))
    return folder


def hits_systems(hits):
    return list(dict.fromkeys(system for system, _ in hits))


def test_each_comparison_has_one_family_and_one_p(tmp_path):
    from ecqg.report.claim import CLAIMS_FAMILY, DOSE_FAMILY, claim_rows
    from ecqg.report.dose import dose_rows
    from ecqg.report.evidence import claim_inputs

    inputs = claim_inputs(_profile(tmp_path, np.random.default_rng(7)))
    claims = claim_rows(inputs)
    assert {r["source"] for r in claims} == {"per-run files"}
    assert all(r["runs"].method.startswith("paired by seed") for r in claims)
    rows = dose_rows(inputs["table3"], None, inputs["evidence"], claims)
    fine_tuned = [r for r in rows if r["stage"] == "fine-tuned"]
    assert len(fine_tuned) == 4 and {r["family"] for r in fine_tuned} == {CLAIMS_FAMILY}
    by_key = {(r["pair"], r["k"]): r["p_holm"] for r in claims}
    assert all(by_key[(r["pair"], r["k"])] == r["p_holm"] for r in fine_tuned)
    own = [r for r in rows if r["stage"] != "fine-tuned"]
    assert {r["family"] for r in own} == {DOSE_FAMILY}
    assert [r["p_holm"] for r in own] == holm([r["runs"].p for r in own])
    mixed = next(r for r in claims if r["claim"].startswith("Table 3, NQ Top-1: Mixed-DPR - UnCon-DPR"))
    assert mixed["verdict"] == "holds" and mixed["p_holm"] < 0.05


def test_recompute_prints_every_row_from_the_files_alone(tmp_path, capsys):
    from ecqg.report import recompute

    folder = _profile(tmp_path / "fixture", np.random.default_rng(8))
    assert recompute.main([str(folder), "--json", str(tmp_path / "rows.json")]) == 0
    printed = capsys.readouterr().out
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert len(rows) == 6 + 12                     # Table 3's six claims; two dose points (100, full) x 6 rows
    assert {r["source"] for r in rows} == {"per-run files"}
    assert "== the claims table" in printed and "== the dose curve's pre-training rows" in printed
    assert printed.count("paired by seed") == 6 + 4 and printed.count("against one model") == 8
    assert recompute.main([str(tmp_path / "nowhere")]) == 2


def test_the_page_says_how_each_row_was_compared(tmp_path):
    from ecqg.report.claims_table import render_claim
    from ecqg.report.evidence import claim_inputs

    text = render_claim(claim_inputs(_profile(tmp_path, np.random.default_rng(9))))
    assert "paired by seed" in text and "(summaries)" not in text
    assert "Holm-corrected over the 6 rows of the claims table" in text


def test_values_frame_numbers_units_once_over_runs():
    frame = pd.DataFrame({"encoder": ["x", "x", "x", "x"], "passage_id": ["p2", "p1", "p1", "p2"],
                          "seed": [1, 1, 2, 2], "entropy": [2.0, 1.0, 1.5, 2.5]})
    values = run_evidence.values_frame(frame, ["entropy"])
    wide = values.pivot(index="unit", columns="seed", values="value")
    assert wide.loc[0].tolist() == [2.0, 2.5] and wide.loc[1].tolist() == [1.0, 1.5]
