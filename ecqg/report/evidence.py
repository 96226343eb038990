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
from dataclasses import dataclass

from ecqg.analysis.stats import (Interval, combined_se, conservative, one_sample_interval, se_from_ci, t_interval,
                        welch_interval)


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
    return t_interval(a.mean - fixed, *combined_se(a.sd ** 2 / a.runs, a.runs - 1, question_se), confidence,
                      "t over runs + questions", (a.runs,))


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
    return one_sample_interval(values, unit_se, confidence, runs=(len(values),) * 2), values


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
        return one_sample_interval([x - y for x, y in zip(sa.values, sb.values)], question_se, confidence,
                                   runs=(len(sa.values),))
    if sa.runs < 2 or sa.sd is None or sb.sd is None:
        return None
    spread = (sa.sd + sb.sd) ** 2 / sa.runs                 # sd(X - Y) <= sd(X) + sd(Y)
    return t_interval(sa.mean - sb.mean, *combined_se(spread, sa.runs - 1, question_se), confidence,
                      "t over runs (spread bounded) + questions", (sa.runs,))
