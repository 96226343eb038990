"""Intervals over training runs from per-unit, per-run values (units x runs): the claims tables' rule, applied.

Why apart from :mod:`ecqg.analysis.stats`: these take the committed per-run evidence (``ecqg.analysis.run_evidence``)
as it is, question by question and run by run, and decide how the arms pair: by seed where the design pairs them,
against one fixed model, or as two independent arms. :func:`over_runs` is the printed rule: the t-interval over runs
with the units' noise added, or the hierarchical bootstrap over runs then units, whichever is wider.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ecqg.analysis.stats import (Interval, units_by_runs, conservative, hierarchical_bootstrap, one_sample_interval,
                                 welch_interval)


def runs_difference(a: np.ndarray, b: np.ndarray | None = None, *, paired_runs: bool = False,
                    paired_units: bool = True, with_units: bool = True,
                    confidence: float = 0.95) -> Interval | None:
    """The t-interval over training runs of mean(a) - mean(b) from per-unit, per-run values (units x runs).

    * ``paired_runs`` (the same seeds in both arms, in the same column order; the design pairs them: a seed fixes the
      gold sub-sample, the held-out split and the batch order in every arm): the per-seed differences, then a
      one-sample t over them;
    * ``b`` one run against ``a``'s several (``b`` a fixed model, e.g. the untrained base): ``a``'s per-run values
      minus ``b``'s, a one-sample t;
    * otherwise two independent arms: Welch's t over the runs' means;
    * ``b`` None: the mean of one model's measure over its runs.

    In every case the units' noise (test questions or passages, which every run shares) is added in quadrature: the
    SE over units of the run-averaged per-unit difference (``paired_units``), or of each arm's own units (two slices
    of a test set), unless ``with_units`` is False (the runs' spread alone: one of the tests a fragile verdict is
    checked against). Degrees of freedom: Satterthwaite's (:func:`combined_se`). None with fewer than two runs
    where the interval needs them."""
    a = units_by_runs(a, "a")
    b = None if b is None else units_by_runs(b, "b")
    per_run_a = a.mean(axis=0)
    units = "units" if with_units else "no units"
    if b is None:
        return replace(one_sample_interval(per_run_a, _unit_se(a.mean(axis=1)) if with_units else 0.0, confidence,
                                           runs=(a.shape[1],)),
                       method=f"one model: t over runs + {units}") if a.shape[1] >= 2 else None
    if paired_units and len(a) != len(b):
        raise ValueError(f"paired units need the same units in both arms: {len(a)} vs {len(b)}")
    unit_se = (_unit_se(a.mean(axis=1) - b.mean(axis=1)) if paired_units
               else math.hypot(_unit_se(a.mean(axis=1)), _unit_se(b.mean(axis=1))))
    unit_se = unit_se if with_units else 0.0
    per_run_b = b.mean(axis=0)
    runs = (a.shape[1], b.shape[1])
    if paired_runs:
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"paired runs need the same runs in both arms: {a.shape[1]} vs {b.shape[1]}")
        if a.shape[1] < 2:
            return None
        return replace(one_sample_interval(per_run_a - per_run_b, unit_se, confidence, runs=runs),
                       method=f"paired by seed: t over runs + {units}")
    if b.shape[1] == 1:
        if a.shape[1] < 2:
            return None
        return replace(one_sample_interval(per_run_a - per_run_b[0], unit_se, confidence, runs=runs),
                       method=f"against one model: t over runs + {units}")
    if min(runs) < 2:
        return None
    return welch_interval(float(per_run_a.mean()), float(per_run_a.std(ddof=1)), a.shape[1],
                          float(per_run_b.mean()), float(per_run_b.std(ddof=1)), b.shape[1], unit_se, confidence)


def _unit_se(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=float)
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


# The defensible tests of one comparison: the printed rule takes the wider of the first and the last; a verdict that
# changes between them is fragile (the claims table marks it).
TESTS = ("t over runs + units", "t over runs only", "bootstrap over runs, then units")


def defensible_tests(a: np.ndarray, b: np.ndarray | None = None, *, paired_runs: bool = False, paired_units: bool = True,
             n_boot: int = 2000, seed: int = 0, confidence: float = 0.95) -> dict[str, Interval] | None:
    """Each test of :data:`TESTS` on the same data, paired the same way; None where the t-interval has too few runs
    (one run per arm says nothing of training's spread, whatever a bootstrap over its questions says)."""
    t = runs_difference(a, b, paired_runs=paired_runs, paired_units=paired_units, confidence=confidence)
    if t is None:
        return None
    runs_only = runs_difference(a, b, paired_runs=paired_runs, paired_units=paired_units, with_units=False,
                                confidence=confidence)
    boot = hierarchical_bootstrap(a, b, paired_units=paired_units, paired_runs=paired_runs, n_boot=n_boot,
                                  seed=seed, confidence=confidence)
    boot = replace(boot, method=t.method.split(":")[0] + ": bootstrap over runs, then units", run_se=t.run_se,
                   unit_se=t.unit_se, run_df=t.run_df)
    return dict(zip(TESTS, (t, runs_only, boot)))


def over_runs(a: np.ndarray, b: np.ndarray | None = None, *, paired_runs: bool = False, paired_units: bool = True,
              n_boot: int = 2000, seed: int = 0, confidence: float = 0.95) -> Interval | None:
    """The rule the claims tables print, applied: the t-interval over runs with the units' noise added
    (:func:`runs_difference`) or the hierarchical bootstrap over runs, then units (:func:`hierarchical_bootstrap`,
    paired the same way), whichever is wider. None where the t-interval has too few runs."""
    tests = defensible_tests(a, b, paired_runs=paired_runs, paired_units=paired_units, n_boot=n_boot, seed=seed,
                     confidence=confidence)
    return None if tests is None else printed_rule(tests)


def printed_rule(tests: dict[str, Interval]) -> Interval | None:
    """The wider of the t-interval with the units' noise and the hierarchical bootstrap."""
    return conservative(tests[TESTS[0]], tests[TESTS[2]])
