"""Differences between trained models with their intervals over training runs, read from a profile's metrics.

Why a module of its own: the metrics files keep, for every system trained more than once, the mean over its runs,
their spread (``<measure>_seed_sd``, n - 1) and, from this version on, each run's value (``<measure>_s<seed>``), and
for every paired comparison its question-level bootstrap and (stage 06 / 07) the hierarchical bootstrap over runs
(``<measure>_runs_*``). The claims table and the related system's comparisons both turn these into one interval over
runs per row (:mod:`ecqg.analysis.stats`), the more conservative of the t-interval and the bootstrap where both
exist. Older metrics without per-run values still give the t-interval (it needs only mean, sd and count per arm).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ecqg.analysis.over_runs import defensible_tests, printed_rule
from ecqg.analysis.run_evidence import UNTRAINED_SEED, Evidence
from ecqg.analysis.stats import (Interval, bootstrap_ci, combined_se, conservative, one_sample_interval, se_from_ci,
                                 t_interval, welch_interval)
from ecqg.report.markdown import load_metrics


@dataclass(frozen=True)
class Arm:
    """One system's measure over its training runs."""

    mean: float
    sd: float | None
    runs: int
    values: tuple[float, ...] = ()      # each run's value, where the metrics keep them


def arm(node: Mapping | None, key: str) -> Arm | None:
    """``key``'s mean, spread and count over runs from an accuracy-like node (``seeds`` absent: one run)."""
    if not isinstance(node, Mapping) or node.get(key) is None:
        return None
    values = tuple(v for k, v in sorted(node.items()) if re.fullmatch(rf"{re.escape(key)}_s\d+", k)
                   and v is not None)
    runs = int(node.get("seeds", len(values) or 1))
    return Arm(float(node[key]), node.get(f"{key}_seed_sd"), runs, values)


def stored_bootstrap(node: Mapping | None, key: str, runs: tuple[int, ...]) -> Interval | None:
    """The hierarchical bootstrap stage 06 / 07 stored beside a paired difference (``<key>_runs_ci_low`` ...), where
    both arms have more than one run (with one, it is the question-level bootstrap and says nothing of training)."""
    if not isinstance(node, Mapping) or node.get(f"{key}_runs_ci_low") is None or min(runs) < 2:
        return None
    return Interval(node.get(f"{key}_runs_diff", node.get(f"{key}_diff")), node[f"{key}_runs_ci_low"],
                    node[f"{key}_runs_ci_high"], node[f"{key}_runs_p"], node[f"{key}_runs_se"], None,
                    "bootstrap over runs, then units", runs, node.get(f"{key}_runs_n_boot"))


def between_models(a: Arm | None, b: Arm | None, paired: Mapping | None, key: str, paired_key: str,
                   confidence: float = 0.95) -> Interval | None:
    """A - B over two arms of independent runs: Welch's t over the runs with the question-level SE of the paired
    difference added (from its stored CI), or the stored hierarchical bootstrap, whichever is wider."""
    if a is None or b is None:
        return None
    paired = paired or {}
    question_se = se_from_ci(paired.get(f"{paired_key}_ci_low"), paired.get(f"{paired_key}_ci_high"),
                             confidence) or 0.0
    t = welch_interval(a.mean, a.sd, a.runs, b.mean, b.sd, b.runs, question_se, confidence)
    return conservative(t, stored_bootstrap(paired, paired_key, (a.runs, b.runs)))


def against_fixed(a: Arm | None, fixed: float, paired: Mapping | None, key: str,
                  confidence: float = 0.95) -> Interval | None:
    """A - F, F one fixed model (the untrained base: no training, so no spread over runs): a t-interval over A's
    runs minus F, with the question-level SE of the paired difference added. None for fewer than two runs."""
    if a is None or a.runs < 2:
        return None
    paired = paired or {}
    question_se = se_from_ci(paired.get(f"{key}_ci_low"), paired.get(f"{key}_ci_high"), confidence) or 0.0
    if len(a.values) == a.runs:
        return one_sample_interval([v - fixed for v in a.values], question_se, confidence, runs=(a.runs,))
    if a.sd is None:
        return None
    return replace(t_interval(a.mean - fixed, *combined_se(a.sd ** 2 / a.runs, a.runs - 1, question_se), confidence,
                              "against one model: t over runs + questions", (a.runs,)),
                   run_se=a.sd / math.sqrt(a.runs), unit_se=question_se, run_df=float(a.runs - 1))


def per_run(block: Mapping | None, measure: str, ci: str | None = None, confidence: float = 0.95
            ) -> tuple[Interval | None, list[float]]:
    """The mean of a measure taken run by run (``s<seed>`` entries with ``<measure>`` and its within-run CI
    ``<ci>_ci_low`` / ``<ci>_ci_high``, ``ci`` defaulting to ``measure``): a t-interval over the runs with the mean
    within-run SE (over passages or questions) added; and the runs' values."""
    ci = ci or measure
    runs = [v for k, v in sorted((block or {}).items()) if re.fullmatch(r"s\d+", k) and isinstance(v, Mapping)
            and v.get(measure) is not None]
    values = [float(r[measure]) for r in runs]
    ses = [se_from_ci(r.get(f"{ci}_ci_low"), r.get(f"{ci}_ci_high"), confidence) for r in runs]
    ses = [s for s in ses if s is not None]
    unit_se = sum(ses) / len(ses) if ses else 0.0
    interval = one_sample_interval(values, unit_se, confidence, runs=(len(values),) * 2)
    return (None if interval is None else replace(interval, method="paired by seed: t over runs + units")), values


def between_slices(node: Mapping | None, a: str, b: str, key: str, confidence: float = 0.95) -> Interval | None:
    """Slice A - slice B of one system (e.g. its accuracy on questions about its least- and most-attended entities):
    the same runs, different questions. With each run's values: a t-interval over the runs' differences; without
    them, the runs' spread of the difference is bounded by the sum of the slices' spreads (conservative). The slices'
    question-level SEs add in quadrature (unpaired questions)."""
    sa, sb = arm((node or {}).get(a), key), arm((node or {}).get(b), key)
    if sa is None or sb is None:
        return None
    ses = [se_from_ci((node[s] or {}).get(f"{key}_ci_low"), (node[s] or {}).get(f"{key}_ci_high"), confidence)
           for s in (a, b)]
    question_se = math.sqrt(sum(s ** 2 for s in ses if s is not None))
    if sa.values and len(sa.values) == len(sb.values):
        return replace(one_sample_interval([x - y for x, y in zip(sa.values, sb.values)], question_se, confidence,
                                           runs=(len(sa.values),)), method="same runs: t over runs + questions")
    if sa.runs < 2 or sa.sd is None or sb.sd is None:
        return None
    spread = (sa.sd + sb.sd) ** 2 / sa.runs                 # sd(X - Y) <= sd(X) + sd(Y)
    return replace(t_interval(sa.mean - sb.mean, *combined_se(spread, sa.runs - 1, question_se), confidence,
                              "same runs: t over runs (spread bounded) + questions", (sa.runs,)),
                   run_se=math.sqrt(spread), unit_se=question_se, run_df=float(sa.runs - 1))


# ------------------------------------------------------------------------------ from the committed per-run evidence
# Where a profile commits its per-run files (``results/<profile>/evidence/``), every row is computed from them: the
# arms pair by seed where both have the same seeds (the design pairs them), one fixed model is compared run by run,
# and other arms are independent (:func:`ecqg.analysis.over_runs.over_runs`, the rule the tables print).
N_BOOT, BOOT_SEED = 2000, 0          # the hierarchical bootstrap's resamples (fixed: a recomputed row is the same row)


@dataclass(frozen=True)
class Measured:
    """One row's interval from the evidence, with the question-level view of the same data: the run-averaged
    difference, resampling units only (for every row the same meaning)."""

    interval: Interval | None
    arm_runs: tuple[int, ...]
    q_diff: float
    q_low: float
    q_high: float
    n: int
    per_run: tuple[float, ...] = ()     # each run's A - B, where the runs pair (same seeds, or the same runs)
    tests: Mapping[str, Interval] | None = None   # every defensible test (``over_runs.TESTS``): is the verdict fragile?


def pairing(seeds_a: tuple[int, ...], seeds_b: tuple[int, ...]) -> bool:
    """The design pairs two arms when they ran with the same training seeds (more than one, none untrained)."""
    return seeds_a == seeds_b and len(seeds_a) > 1 and UNTRAINED_SEED not in seeds_a


def measured(a: np.ndarray, seeds_a: tuple[int, ...], b: np.ndarray | None = None, seeds_b: tuple[int, ...] = (),
             paired_units: bool = True, same_runs: bool | None = None, scale: float = 1.0,
             confidence: float = 0.95) -> Measured:
    """A - B (or A alone) over runs and over units, from units x runs matrices; ``same_runs``: the two matrices are
    two measures of the same runs (two slices of one model), paired by construction."""
    a, b = a * scale, None if b is None else b * scale
    if b is None:
        a = a[~np.isnan(a).any(axis=1)]
    elif paired_units:                         # the units every run of both arms measured (a share needs 2+ sentences)
        keep = ~(np.isnan(a).any(axis=1) | np.isnan(b).any(axis=1))
        a, b = a[keep], b[keep]
    paired = same_runs if same_runs is not None else (b is not None and pairing(seeds_a, seeds_b))
    tests = defensible_tests(a, b, paired_runs=paired, paired_units=paired_units, n_boot=N_BOOT, seed=BOOT_SEED,
                     confidence=confidence)
    interval = None if tests is None else printed_rule(tests)
    if b is None or paired_units:
        per_unit = a.mean(axis=1) - (0.0 if b is None else b.mean(axis=1))
        low, high = bootstrap_ci(per_unit, N_BOOT, BOOT_SEED, confidence)
        q_diff, n = float(per_unit.mean()), len(per_unit)
    else:
        ua, ub = a.mean(axis=1), b.mean(axis=1)
        la, ha = bootstrap_ci(ua, N_BOOT, BOOT_SEED, confidence)
        lb, hb = bootstrap_ci(ub, N_BOOT, BOOT_SEED + 1, confidence)
        q_diff, n = float(ua.mean() - ub.mean()), len(ua) + len(ub)
        half = math.hypot((ha[0] - la[0]) / 2, (hb[0] - lb[0]) / 2)
        low, high = np.array([q_diff - half]), np.array([q_diff + half])
    runs = (a.shape[1],) if b is None or same_runs else (a.shape[1], b.shape[1])
    per_run = (np.nanmean(a, axis=0) - np.nanmean(b, axis=0)) if b is not None and paired else ()
    return Measured(interval, runs, q_diff, float(low[0]), float(high[0]), n, tuple(float(x) for x in per_run),
                    tests)


def topk_difference(ev, a: str, b: str, k: int, dataset: str = "nq", questions: np.ndarray | None = None
                    ) -> Measured | None:
    """Top-k of A - B in points over the test questions (or a slice of them), from first-hit ranks."""
    ha, hb = ev.hits(a, dataset, k, questions), ev.hits(b, dataset, k, questions)
    if ha is None or hb is None:
        return None
    return measured(ha[0], ha[1], hb[0], hb[1], scale=100.0)


def values_difference(ev, measure: str, a: str, b: str | None = None) -> Measured | None:
    """A per-unit measure's A - B (or A's mean) over the same units (passages, questions)."""
    va = ev.unit_values(measure, a)
    vb = None if b is None else ev.unit_values(measure, b)
    if va is None or (b is not None and vb is None):
        return None
    if vb is None:
        return measured(va[0], va[1])
    return measured(va[0], va[1], vb[0], vb[1])


def slices_difference(ev, system: str, kind: str, first: str, second: str, k: int, dataset: str = "nq"
                      ) -> Measured | None:
    """One system's Top-k on slice ``first`` minus on slice ``second``: the same runs, different questions."""
    qa, qb = ev.slice_questions(kind, first, dataset), ev.slice_questions(kind, second, dataset)
    if qa is None or qb is None:
        return None
    ha, hb = ev.hits(system, dataset, k, qa), ev.hits(system, dataset, k, qb)
    if ha is None or hb is None:
        return None
    return measured(ha[0], ha[1], hb[0], hb[1], paired_units=False, same_runs=True, scale=100.0)


def claim_inputs(metrics_dir: Path) -> dict:
    """Everything the claims table and the dose curve read from one profile's committed results: the metrics files
    and, where the profile has them, the per-run files (``evidence``)."""
    return {"table3": load_metrics(metrics_dir, "table3.json"),
            "comparison": load_metrics(metrics_dir, "encoder_comparison.json"),
            "bias": load_metrics(metrics_dir, "attention_bias.json"),
            "mechanism": load_metrics(metrics_dir, "mechanism.json"),
            "mixing": load_metrics(metrics_dir, "mixing.json"),
            "filtering": load_metrics(metrics_dir, "filtering.json"),
            "evidence": Evidence.load(metrics_dir)}
