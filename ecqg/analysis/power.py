"""Power on the scale of the test that decides a row: the smallest difference it calls significant, the difference it
finds with 80% power, its power at a given effect, and the paper's effect carried to this testbed's accuracy level.

Why apart from :mod:`ecqg.analysis.stats`: the intervals and the verdict rule are one idea, what a run could have
detected is another (issue 64: the two must be computed on one scale, and this module takes the interval the verdict
was read from, with its own standard error and degrees of freedom).
"""

from __future__ import annotations

import math

from scipy import stats as sps

from ecqg.analysis.stats import ALPHA, POWER, Interval, t_quantile

# Every figure of power is computed on the scale of the test that decides the row (issue 64): the interval's own
# standard error and degrees of freedom (Satterthwaite's for the t-interval with the units' noise, the normal for a
# bootstrap), at the level Holm's step-down makes the row face. A significant row therefore always lies at or beyond
# its critical difference (tests/test_stats.py); it may lie below its 80%-power detectable effect, as any test
# detects an effect exactly at its threshold about half the time.
def detectable_effect(se: float, df: float | None, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference a two-sided test at ``alpha`` finds with probability ``power``, given the
    standard error of the difference and its degrees of freedom: ``(t_{1-alpha/2} + t_{power}) * se``."""
    if se is None or not math.isfinite(se):
        return math.nan
    if df is None or not math.isfinite(df):
        return float((sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)) * se)
    return float((sps.t.ppf(1 - alpha / 2, df) + sps.t.ppf(power, df)) * se)


def power_at(effect: float, se: float, df: float | None, alpha: float = ALPHA) -> float:
    """The probability that a two-sided test at ``alpha`` finds a true difference of ``effect`` (noncentral t; the
    normal where df is None)."""
    if se is None or not math.isfinite(se) or se <= 0:
        return math.nan
    shift = abs(effect) / se
    if df is None or not math.isfinite(df):
        crit = sps.norm.ppf(1 - alpha / 2)
        return float(sps.norm.sf(crit - shift) + sps.norm.cdf(-crit - shift))
    crit = sps.t.ppf(1 - alpha / 2, df)
    value = float(sps.nct.sf(crit, df, shift) + sps.nct.cdf(-crit, df, shift))
    # scipy's noncentral t gives NaN far in its tail (shift of many SEs): there the power is the shifted central t's
    return value if math.isfinite(value) else float(sps.t.sf(crit - shift, df))


def critical_difference(interval: Interval, alpha: float = ALPHA) -> float:
    """The smallest |difference| the row's own test calls significant at ``alpha``: ``t_{1-alpha/2, df} * se`` for a
    t-interval; for a bootstrap, the deviation its null-centred p-value must exceed (``p < alpha`` exactly when more
    than all but ``ceil(alpha * (n_boot + 1) - 1) - 1`` of the null deviations lie below |difference|); infinite
    where the bootstrap's p-value floor cannot reach ``alpha``."""
    deviations = interval.null_deviations
    if deviations:
        allowed = math.ceil(alpha * (len(deviations) + 1) - 1) - 1      # deviations >= |diff| a significant p allows
        return float(deviations[allowed]) if 0 <= allowed < len(deviations) else math.inf
    if interval.se is None or not math.isfinite(interval.se):
        return math.nan
    return float(t_quantile(1.0 - alpha, interval.df) * interval.se)


def detectable(interval: Interval, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference the row's own test finds with probability ``power`` at ``alpha``: its critical
    difference plus the ``power`` quantile of its sampling distribution (t with its df; normal for a bootstrap)."""
    if interval.null_deviations:
        return critical_difference(interval, alpha) + float(sps.norm.ppf(power)) * interval.se
    return detectable_effect(interval.se, interval.df, alpha, power)


def power_of(interval: Interval, effect: float, alpha: float = ALPHA) -> float:
    """The chance the row's own test finds a true difference of ``effect`` at ``alpha`` (a bootstrap: the normal
    with its sd, beyond its critical difference)."""
    if interval.null_deviations:
        crit, se = critical_difference(interval, alpha), interval.se
        if not se or not math.isfinite(crit):
            return math.nan
        return float(sps.norm.sf((crit - abs(effect)) / se) + sps.norm.cdf((-crit - abs(effect)) / se))
    return power_at(effect, interval.se, interval.df, alpha)


def sd_factors(df: float | None, confidence: float = 0.95) -> tuple[float, float]:
    """How far the true sd may lie from one estimated with ``df`` degrees of freedom: the chi-square interval's
    factors ``(low, high)`` (df 4, five runs: x0.60 to x2.87). ``(1, 1)`` for a normal (known) spread."""
    if df is None or not math.isfinite(df):
        return 1.0, 1.0
    tail = (1.0 - confidence) / 2.0
    return (float(math.sqrt(df / sps.chi2.ppf(1.0 - tail, df))), float(math.sqrt(df / sps.chi2.ppf(tail, df))))


def detectable_range(interval: Interval, alpha: float = ALPHA, power: float = POWER,
                     confidence: float = 0.95) -> tuple[float, float]:
    """:func:`detectable` with the runs' part of the SE at either end of its sd's chi-square interval (the runs'
    own degrees of freedom, :func:`sd_factors`), the units' part as measured: how uncertain "detectable" is when a
    handful of runs gave the spread."""
    value = detectable(interval, alpha, power)
    if interval.run_se is None or not interval.se:
        return value, value
    unit = interval.unit_se or 0.0
    ends = [math.hypot(f * interval.run_se, unit) / interval.se for f in sd_factors(interval.run_df, confidence)]
    return tuple(value * factor for factor in ends)


def translated_effect(paper_diff: float, paper_reference: float, here_reference: float) -> float:
    """A difference in accuracy points carried to this testbed's accuracy level as the same relative error
    reduction: the paper's ``paper_diff`` took ``paper_reference`` (its arm B, %) that share of the way to 100; the
    same share of the way from ``here_reference``. (The paper's +1.6 at DPR's 44.3 is 2.9% of the errors; at a DPR of
    77.8 that is 0.64 points.)"""
    if paper_reference >= 100.0:
        raise ValueError(f"a reference accuracy of {paper_reference} leaves no errors to reduce")
    return paper_diff * (100.0 - here_reference) / (100.0 - paper_reference)
