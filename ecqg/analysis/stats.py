"""The study's statistics in one place: bootstrap intervals over questions, intervals over training runs, the smallest
effect a run could have detected, Holm's correction, and the verdict rule.

Why training runs are the unit: two trained models differ by their data *and* by the luck of their training (seed,
batch order, the pre-training run). Resampling the test questions measures the test set's noise only, so a difference
that clears a question-level bootstrap can still sit inside the spread of training runs (the study's DPR moved 3.1
NQ Top-1 points between two seeds). A difference between trained models therefore "holds" only when it holds over
independent training runs:

* :func:`hierarchical_bootstrap` resamples the runs of each arm, then the questions (or passages) within them; with
  one run per arm it *is* the question-level bootstrap of before (same draws, same numbers).
* :func:`welch_interval` / :func:`one_sample_interval` are t-intervals over the runs' means with the question-level
  variance added; with a handful of runs the bootstrap over runs is too narrow (three values have ten resamples), and
  the t-interval, wider, is the one to use (:func:`conservative`).
* :mod:`ecqg.analysis.power` holds the smallest true difference a row's test would have found 4 times in 5 (80%
  power), so "not shown" says whether an effect of the paper's size was within reach.
* :func:`holm` corrects the p-values within one declared family of claims.

Pure numpy and scipy: nothing here loads a model, so training code never depends on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
from scipy import stats as sps

ALPHA = 0.05             # two-sided, per family after Holm
POWER = 0.80             # for the smallest detectable effect
_BOOT_CHUNK_CELLS = 4_000_000  # resampled indices held at once (bounds memory; fixed so results depend on seed only)


# ----------------------------------------------------------------------------------------------- over questions
def bootstrap_means(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray | None:
    """``(n_boot, m)`` means of bootstrap resamples of the rows of ``values``; None when there are no rows."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    n = values.shape[0]
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if n == 0:
        return None
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, values.shape[1]))
    for start, stop in _chunks(n_boot, n):
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = values[idx].mean(axis=1)
    return out


def bootstrap_ci(values: np.ndarray, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Percentile-bootstrap CI of the column means of ``values`` (n x m), resampling rows (questions) jointly.

    Rows are resampled together so the columns (e.g. several k) share the same resamples. Empty input gives NaN.
    """
    means = bootstrap_means(values, n_boot, seed)
    if means is None:
        shape = np.shape(values)
        nan = np.full(shape[1] if len(shape) > 1 else 1, np.nan)
        return nan, nan.copy()
    alpha = (1.0 - confidence) / 2.0
    return np.quantile(means, alpha, axis=0), np.quantile(means, 1.0 - alpha, axis=0)


def _chunks(n_boot: int, n: int):
    chunk = max(1, _BOOT_CHUNK_CELLS // max(n, 1))
    for start in range(0, n_boot, chunk):
        yield start, min(n_boot, start + chunk)


def null_centred_p(boot: np.ndarray, observed: float) -> float:
    """Two-sided p-value: the share of null-centred resampled statistics at least as extreme as the observed one,
    with the +1 correction (never 0 from finitely many resamples: its floor is ``1 / (n_boot + 1)``)."""
    extreme = np.abs(boot - observed) >= abs(observed) - 1e-12
    return float((1 + extreme.sum()) / (1 + len(boot)))


# ----------------------------------------------------------------------------------------------- over runs
@dataclass(frozen=True)
class Interval:
    """A difference with its interval over training runs: ``method`` says how it was obtained, ``runs`` how many
    runs each arm had, ``se`` / ``df`` what the detectable effect is computed from (``df`` None: normal)."""

    diff: float
    low: float
    high: float
    p: float
    se: float
    df: float | None
    method: str
    runs: tuple[int, ...]
    n_boot: int | None = None          # a bootstrap's resamples (its p-value's floor is 1 / (n_boot + 1))
    run_se: float | None = None        # the part of ``se`` that training runs contribute (estimated from few runs)
    unit_se: float | None = None       # the part the test questions / passages contribute (taken as known)
    run_df: float | None = None        # the runs' own degrees of freedom (the range of the detectable effect)
    # a bootstrap's null-centred deviations |resample - observed|, sorted descending: what its p-value counts, so the
    # smallest difference it calls significant at a level is read off them (:func:`critical_difference`)
    null_deviations: tuple[float, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def width(self) -> float:
        return self.high - self.low

    def as_dict(self) -> dict:
        out = {**asdict(self), "runs": list(self.runs)}
        out.pop("null_deviations")
        return out


def t_quantile(confidence: float, df: float | None) -> float:
    q = 1.0 - (1.0 - confidence) / 2.0
    return float(sps.norm.ppf(q) if df is None or not math.isfinite(df) else sps.t.ppf(q, df))


def _p_two_sided(z: float, df: float | None) -> float:
    dist = sps.norm if df is None or not math.isfinite(df) else sps.t(df)
    return float(2.0 * dist.sf(abs(z)))


def t_interval(diff: float, se: float, df: float, confidence: float, method: str, runs: tuple[int, ...]
               ) -> Interval:
    """``diff`` +- t_{df} * ``se``, with its two-sided p-value (``se`` 0: a point, p 0 or 1)."""
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
        return Interval(diff, diff, diff, p, 0.0, df, method, runs)
    half = t_quantile(confidence, df) * se
    return Interval(diff, diff - half, diff + half, _p_two_sided(diff / se, df), se, df, method, runs)


def welch_interval(mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float, n_b: int,
                   question_se: float = 0.0, confidence: float = 0.95) -> Interval | None:
    """t-interval of ``mean_a - mean_b`` over two arms of independent training runs (each arm's runs: their mean and
    sd, n - 1), with the question-level standard error of the difference added in quadrature (the runs were scored on
    the same test questions, so their spread leaves out the test set's own noise). Welch-Satterthwaite degrees of
    freedom over the run terms. None with fewer than two runs in an arm: one run says nothing of training's spread.
    """
    if n_a < 2 or n_b < 2 or sd_a is None or sd_b is None:
        return None
    va, vb = sd_a ** 2 / n_a, sd_b ** 2 / n_b
    se = math.sqrt(va + vb + question_se ** 2)
    denominator = va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1)
    df = min((se ** 4 / denominator) if denominator > 0 else float(n_a + n_b - 2), 1e9)
    run_df = ((va + vb) ** 2 / denominator) if denominator > 0 else float(n_a + n_b - 2)
    return replace(t_interval(mean_a - mean_b, se, df, confidence, "unpaired: t over runs + units", (n_a, n_b)),
                   run_se=math.sqrt(va + vb), unit_se=question_se, run_df=run_df)


def one_sample_interval(values: Sequence[float], unit_se: float = 0.0, confidence: float = 0.95,
                        runs: tuple[int, ...] | None = None) -> Interval | None:
    """t-interval of the mean of per-run values (a per-run difference, or one model's per-run measure), with a
    within-run standard error (passages or questions) added in quadrature. None for fewer than two runs."""
    values = np.asarray([v for v in values if v is not None], dtype=float)
    n = len(values)
    if n < 2:
        return None
    run_variance = values.var(ddof=1) / n
    return replace(t_interval(float(values.mean()), *combined_se(run_variance, n - 1, unit_se), confidence,
                              "t over runs + units", runs or (n,)),
                   run_se=math.sqrt(run_variance), unit_se=unit_se, run_df=float(n - 1))


def combined_se(run_variance: float, run_df: float, unit_se: float = 0.0) -> tuple[float, float]:
    """``(se, df)`` of a mean whose variance is a part estimated from few runs (``run_variance`` with ``run_df``
    degrees of freedom) plus a part from many units (``unit_se``, taken as known): Satterthwaite's degrees of
    freedom, so the small-sample penalty falls on the runs' part only. (Power and the detectable effect use the runs'
    own degrees of freedom instead: :func:`detectable_effect` callers pass ``Interval.run_df``.)"""
    se = math.sqrt(run_variance + unit_se ** 2)
    df = se ** 4 / (run_variance ** 2 / run_df) if run_variance > 0 else float(run_df)
    return float(se), float(min(df, 1e9))


def hierarchical_bootstrap(a: np.ndarray, b: np.ndarray | None = None, *, paired_units: bool = True,
                           paired_runs: bool = False, n_boot: int = 2000, seed: int = 0,
                           confidence: float = 0.95) -> Interval:
    """Mean of ``a`` minus mean of ``b`` (``b`` None: the mean of ``a``), resampling runs, then units within them.

    ``a``, ``b``: units (questions, passages) x runs. ``paired_units``: a and b share their units (the same test
    questions), resampled jointly; else each arm's units on their own (two slices of a test set). ``paired_runs``: a
    and b come from the same runs (two measures of each model), resampled jointly; else independently (two
    variants). With one run per arm and paired units the unit draws are exactly those of :func:`bootstrap_means`, so
    the result equals the question-level paired bootstrap (tests/test_stats.py). Percentile interval, null-centred
    p-value (its floor is ``1 / (n_boot + 1)``), bootstrap sd as ``se``.
    """
    a = units_by_runs(a, "a")
    b = None if b is None else units_by_runs(b, "b")
    if b is not None and paired_units and len(a) != len(b):
        raise ValueError(f"paired units need the same units in both arms: {len(a)} vs {len(b)}")
    if b is not None and paired_runs and a.shape[1] != b.shape[1]:
        raise ValueError(f"paired runs need the same runs in both arms: {a.shape[1]} vs {b.shape[1]}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    observed = float(a.mean() - (b.mean() if b is not None else 0.0))
    runs = (a.shape[1],) if b is None else (a.shape[1], b.shape[1])
    if len(a) == 0 or (b is not None and len(b) == 0):
        nan = math.nan
        return Interval(nan, nan, nan, nan, nan, None, "bootstrap over runs, then units", runs)
    unit_rng, run_rng = np.random.default_rng(seed), np.random.default_rng([seed, 1])
    other_unit_rng = np.random.default_rng([seed, 2])
    boot = np.empty(n_boot)
    for start, stop in _chunks(n_boot, max(len(a), 1)):
        size = stop - start
        wa = _run_weights(run_rng, a.shape[1], size)
        if b is None:
            per_unit = a @ wa.T                                      # units x resamples
        else:
            wb = wa if paired_runs else _run_weights(run_rng, b.shape[1], size)
            per_unit_b = b @ wb.T
            per_unit = a @ wa.T if not paired_units else a @ wa.T - per_unit_b
        idx = unit_rng.integers(0, len(a), size=(size, len(a)))
        means = per_unit[idx, np.arange(size)[:, None]].mean(axis=1)
        if b is not None and not paired_units:
            idx_b = other_unit_rng.integers(0, len(b), size=(size, len(b)))
            means = means - per_unit_b[idx_b, np.arange(size)[:, None]].mean(axis=1)
        boot[start:stop] = means
    alpha = (1.0 - confidence) / 2.0
    deviations = tuple(float(x) for x in np.sort(np.abs(boot - observed))[::-1])
    return Interval(observed, float(np.quantile(boot, alpha)), float(np.quantile(boot, 1.0 - alpha)),
                    null_centred_p(boot, observed), float(boot.std(ddof=1)) if n_boot > 1 else 0.0, None,
                    "bootstrap over runs, then units", runs, n_boot, null_deviations=deviations)


def units_by_runs(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"{name}: expected units x runs, got shape {x.shape}")
    return x


def _run_weights(rng: np.random.Generator, runs: int, size: int) -> np.ndarray:
    """``(size, runs)``: how often each run is drawn in each resample, as weights summing to 1 (one run: always 1,
    and no random number is drawn, so one run leaves the unit draws untouched)."""
    if runs == 1:
        return np.ones((size, 1))
    draws = rng.integers(0, runs, size=(size, runs))
    counts = np.stack([(draws == r).sum(axis=1) for r in range(runs)], axis=1)
    return counts / runs


def conservative(*intervals: Interval | None) -> Interval | None:
    """The widest of the intervals given (None where a method does not apply): with few runs the t-interval, with
    many the bootstrap's, whichever is the more cautious."""
    present = [i for i in intervals if i is not None and math.isfinite(i.width)]
    return max(present, key=lambda i: i.width) if present else None


def se_from_ci(low: float | None, high: float | None, confidence: float = 0.95) -> float | None:
    """The standard error a symmetric normal interval of this width implies (for a percentile bootstrap CI: its
    approximate sd), to combine a stored question-level interval with the spread over runs."""
    if low is None or high is None:
        return None
    return (high - low) / (2.0 * t_quantile(confidence, None))


def holm_levels(p_values: Sequence[float | None], alpha: float = ALPHA) -> list[float | None]:
    """The level each test faces in Holm's step-down over one family: ``alpha / (m - r)`` for the test of rank r
    (0 = smallest p), so the power and the detectable effect of a row are those at the threshold that decides it
    (the first: ``alpha / m``). None stays None."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None and not math.isnan(p))
    m = len(tested)
    levels: list[float | None] = [None] * len(p_values)
    for rank, (_, i) in enumerate(tested):
        levels[i] = alpha / (m - rank)
    return levels


# ----------------------------------------------------------------------------------------------- families, verdicts
def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values (step-down, made monotone, capped at 1) for one family; None stays None and does not
    count in the family's size."""
    tested = [(p, i) for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    tested.sort()
    m = len(tested)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def p_floor_ok(n_boot: int, family_size: int, alpha: float = ALPHA) -> bool:
    """Can a bootstrap with ``n_boot`` resamples reach Holm's first threshold ``alpha / m``? Its smallest p-value is
    ``1 / (n_boot + 1)``."""
    return family_size < 1 or 1.0 / (n_boot + 1) < alpha / family_size


def holm_checked(intervals: Sequence[Interval | None], alpha: float = ALPHA) -> list[float | None]:
    """:func:`holm` over the intervals' p-values, refusing a bootstrap whose p-value floor cannot reach the family's
    first threshold (its verdicts would be "not shown" whatever the data)."""
    m = sum(i is not None for i in intervals)
    for i in intervals:
        if i is not None and i.n_boot is not None and not p_floor_ok(i.n_boot, m, alpha):
            raise ValueError(f"a bootstrap of {i.n_boot} resamples cannot give a p-value below {alpha} / {m} "
                             f"(Holm over {m} tests): raise evaluation.bootstrap_samples to at least "
                             f"{math.ceil(m / alpha)}")
    return holm([i.p if i is not None else None for i in intervals])


ONE_RUN = "one run"        # no interval over runs: an arm was trained once


def verdict(interval: Interval | None, p_adjusted: float | None, direction: float, overshoot: bool = False,
            alpha: float = ALPHA) -> str:
    """holds / reversed when the interval over runs excludes 0 *and* the Holm-adjusted p-value is below ``alpha``;
    otherwise not shown; :data:`ONE_RUN` where no interval over runs exists. ``direction``: the sign the claim
    predicts. ``overshoot``: the difference points the predicted way but lands past the target (a gap meant to
    shrink towards 0 that ends larger on the other side)."""
    if interval is None:
        return ONE_RUN
    excludes_zero = interval.low > 0 or interval.high < 0
    if not excludes_zero or p_adjusted is None or p_adjusted >= alpha:
        return "not shown"
    if interval.diff * direction <= 0:
        return "reversed"
    return "overshoots" if overshoot else "holds"


def summary_of(intervals: Mapping[str, Interval | None]) -> dict[str, dict | None]:
    """JSON-ready form of named intervals (for metrics files)."""
    return {name: None if i is None else i.as_dict() for name, i in intervals.items()}
