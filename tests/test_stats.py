"""The statistics of verdicts: the hierarchical bootstrap (runs, then questions), the t-intervals over runs, the
detectable effect, Holm, and the verdict rule that counts training runs, not questions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ecqg.analysis.tables import paired_bootstrap
from ecqg.analysis.power import detectable_effect, power_at
from ecqg.analysis.stats import (ONE_RUN, Interval, conservative, hierarchical_bootstrap, holm,
                        holm_checked, one_sample_interval, p_floor_ok, se_from_ci, verdict,
                        welch_interval)


def test_one_run_per_arm_is_the_question_level_paired_bootstrap():
    rng = np.random.default_rng(3)
    a, b = rng.random(500) < 0.7, rng.random(500) < 0.6
    old = paired_bootstrap(a, b, k=1, n_boot=1500, seed=11)
    new = hierarchical_bootstrap(a[:, None], b[:, None], paired_units=True, n_boot=1500, seed=11)
    assert new.runs == (1, 1)
    assert new.diff == pytest.approx(old["difference"], abs=1e-15)
    assert (new.low, new.high) == pytest.approx((old["ci_low"], old["ci_high"]), abs=1e-12)
    assert new.p == old["p_value"]


def _arms(effect: float, run_sd: float, runs: int, n: int = 800, seed: int = 0):
    """Per-question 0/1 hits of two arms whose runs scatter around a base rate (run_sd) with a true effect."""
    rng = np.random.default_rng(seed)
    base = rng.random(n)                                        # how easy each question is

    def arm(shift: float) -> np.ndarray:
        levels = 0.6 + shift + rng.normal(0, run_sd, size=runs)
        return np.stack([(base < level).astype(float) for level in levels], axis=1)
    return arm(effect), arm(0.0)


def test_runs_that_disagree_show_nothing_though_every_question_level_test_would():
    a, b = _arms(effect=0.01, run_sd=0.03, runs=3, seed=1)
    question_level = paired_bootstrap(a.mean(axis=1), b.mean(axis=1), k=1, n_boot=2000, seed=0)
    boot = hierarchical_bootstrap(a, b, n_boot=2000, seed=0)
    t = welch_interval(a.mean(0).mean(), a.mean(0).std(ddof=1), 3, b.mean(0).mean(), b.mean(0).std(ddof=1), 3,
                       question_se=se_from_ci(question_level["ci_low"], question_level["ci_high"]))
    chosen = conservative(boot, t)
    assert boot.width > question_level["ci_high"] - question_level["ci_low"]   # runs widen the interval
    assert chosen is t and chosen.low < 0 < chosen.high                        # three runs: t is the cautious one
    assert verdict(chosen, holm([chosen.p])[0], +1.0) == "not shown"


def test_runs_that_all_agree_on_a_large_effect_hold():
    a, b = _arms(effect=0.15, run_sd=0.005, runs=5, seed=2)
    boot = hierarchical_bootstrap(a, b, n_boot=2000, seed=0)
    t = welch_interval(a.mean(0).mean(), a.mean(0).std(ddof=1), 5, b.mean(0).mean(), b.mean(0).std(ddof=1), 5)
    chosen = conservative(boot, t)
    assert chosen.low > 0 and verdict(chosen, holm([chosen.p])[0], +1.0) == "holds"
    assert verdict(chosen, holm([chosen.p])[0], -1.0) == "reversed"


def test_the_bootstrap_is_seeded_and_resamples_runs_independently_unless_paired():
    a, b = _arms(effect=0.0, run_sd=0.05, runs=4, seed=3)
    one = hierarchical_bootstrap(a, b, n_boot=300, seed=5)
    assert one == hierarchical_bootstrap(a, b, n_boot=300, seed=5)
    assert one != hierarchical_bootstrap(a, b, n_boot=300, seed=6)
    # the same runs measured twice (two slices of one model): a paired draw cancels the run-to-run spread
    paired = hierarchical_bootstrap(a, a + 0.01, paired_runs=True, n_boot=300, seed=5)
    unpaired = hierarchical_bootstrap(a, a + 0.01, paired_runs=False, n_boot=300, seed=5)
    assert paired.width < 1e-9 < unpaired.width
    with pytest.raises(ValueError, match="same units"):
        hierarchical_bootstrap(a, b[:10], n_boot=10)
    with pytest.raises(ValueError, match="same runs"):
        hierarchical_bootstrap(a, b[:, :2], paired_runs=True, n_boot=10)


def test_unpaired_units_resample_each_slice_on_its_own():
    rng = np.random.default_rng(0)
    least, most = rng.random((200, 3)) < 0.7, rng.random((500, 3)) < 0.72
    res = hierarchical_bootstrap(least, most, paired_units=False, paired_runs=True, n_boot=500, seed=1)
    assert res.diff == pytest.approx(least.mean() - most.mean())
    assert res.low < res.diff < res.high


def test_t_intervals_need_two_runs_and_add_the_question_noise():
    assert welch_interval(1.0, 0.5, 1, 0.0, 0.5, 3) is None
    assert one_sample_interval([0.3]) is None
    no_q = welch_interval(69.3, 1.65, 3, 67.5, 1.03, 3)
    with_q = welch_interval(69.3, 1.65, 3, 67.5, 1.03, 3, question_se=0.42)
    assert with_q.low < 0 < with_q.high                                  # the study's Mixed - DPR: not shown
    assert no_q.df == pytest.approx((1.65**2/3 + 1.03**2/3) ** 2 / ((1.65**2/3) ** 2 / 2 + (1.03**2/3) ** 2 / 2))
    # the question noise adds to the SE, but it is known from thousands of questions: Satterthwaite gives it no
    # small-sample penalty, so the degrees of freedom grow with it
    assert with_q.se > no_q.se and with_q.df > no_q.df
    one = one_sample_interval([1.86, 1.08, 1.67], unit_se=0.2)
    assert one.diff == pytest.approx(np.mean([1.86, 1.08, 1.67])) and one.df > 2 and one.low > 0
    assert one_sample_interval([1.86, 1.08, 1.67]).df == pytest.approx(2)


def test_detectable_effect_and_power_agree():
    mde = detectable_effect(1.0, None)
    assert mde == pytest.approx(1.96 + 0.8416, abs=1e-3)
    assert power_at(mde, 1.0, None) == pytest.approx(0.80, abs=0.005)
    small_df = detectable_effect(1.0, 2.0)
    assert small_df > mde                                       # few runs: a wider net
    # (t_{1-a/2} + t_{power}) * se is the usual approximation; at 2 degrees of freedom it is a little optimistic
    assert power_at(small_df, 1.0, 2.0) == pytest.approx(0.80, abs=0.05)
    assert math.isnan(detectable_effect(math.nan, 3))


def test_holm_is_step_down_monotone_and_skips_untested_rows():
    adjusted = holm([0.01, None, 0.04, 0.03])
    assert adjusted[1] is None
    assert adjusted[0] == pytest.approx(0.03) and adjusted[3] == pytest.approx(0.06) and adjusted[2] == \
        pytest.approx(0.06)
    assert holm([0.02, 0.9]) == [pytest.approx(0.04), pytest.approx(0.9)]
    assert holm([0.5, 0.9]) == [1.0, 1.0]                       # capped at 1, and never below an earlier step
    assert p_floor_ok(2000, 20) and not p_floor_ok(2000, 120)   # 1/2001 = 0.0005 vs 0.05 / 120 = 0.0004
    boot = Interval(1.0, 0.5, 1.5, 0.0005, 0.2, None, "bootstrap", (3, 3), n_boot=2000)
    assert holm_checked([boot, None]) == [pytest.approx(0.0005), None]
    with pytest.raises(ValueError, match="raise evaluation.bootstrap_samples to at least 2400"):
        holm_checked([boot] * 120)


def test_verdict_rule():
    interval = Interval(1.0, 0.2, 1.8, 0.01, 0.4, 4.0, "t", (3, 3))
    assert verdict(None, None, 1.0) == ONE_RUN
    assert verdict(interval, 0.01, 1.0) == "holds" and verdict(interval, 0.01, -1.0) == "reversed"
    assert verdict(interval, 0.08, 1.0) == "not shown"           # Holm took it back
    assert verdict(interval, 0.01, 1.0, overshoot=True) == "overshoots"
    wide = Interval(1.0, -0.2, 2.2, 0.01, 0.6, 4.0, "t", (3, 3))
    assert verdict(wide, 0.01, 1.0) == "not shown"               # the interval over runs must exclude 0


def test_bootstrap_ci_of_no_rows_is_nan_per_column():
    from ecqg.analysis.stats import bootstrap_ci

    low, high = bootstrap_ci(np.zeros((0, 3)), n_boot=10)
    assert low.shape == (3,) and np.isnan(low).all() and np.isnan(high).all()
    assert bootstrap_ci(np.zeros(0), n_boot=10)[0].shape == (1,)
