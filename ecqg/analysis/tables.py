"""Accuracy tables and paired comparisons over the hit matrices of :mod:`ecqg.retrieval.evaluation`: Top-k with bootstrap
CIs per subset, the paired question-level bootstrap, and JSON-ready records.

Why apart from :mod:`ecqg.retrieval.evaluation`: the hit matrix is what training's validation needs too; the statistics over
it are analysis (``ecqg.analysis``), so an edit here reruns the stages that report, never a training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ecqg.analysis.stats import bootstrap_ci, bootstrap_means, null_centred_p
from ecqg.retrieval.evaluation import DEFAULT_KS, hit_matrix, hits_at_k, seed_hits_at_k, slice_masks


def accuracy_table(
    hits: np.ndarray,
    questions: Sequence[Mapping],
    ks: Sequence[int] = DEFAULT_KS,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    system: str = "",
    dataset: str = "",
    masks: Mapping[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Top-k accuracy with percentile-bootstrap CIs, for the full set and each subset (one row per subset and k).

    Columns: system, dataset, subset, n, k, hits, accuracy, ci_low, ci_high, n_boot, seed, seeds, seed_sd, seed_min,
    seed_max. Accuracies are fractions (0..1). Each subset is resampled on its own, with the same seed, so a table is
    reproducible from its params. ``hits`` may be a seed stack (questions x seeds x ranks): accuracy and ``hits`` are
    then means over seeds, the CI resamples questions with their seed-mean, and ``seed_sd`` (n-1) / ``seed_min`` /
    ``seed_max`` describe the per-seed accuracies (NaN sd for one seed). ``masks`` (name -> boolean row mask)
    replaces the questions' own subsets, e.g. to slice by where the answer sits in its passage.
    """
    if len(hits) != len(questions):
        raise ValueError(f"hits has {len(hits)} rows but there are {len(questions)} questions")
    per_seed = seed_hits_at_k(hits, ks)
    at_k = per_seed.mean(axis=1)
    rows = []
    for subset, mask in slice_masks(questions, masks).items():
        sub = at_k[mask]
        low, high = bootstrap_ci(sub, n_boot, seed, confidence)
        seed_acc = per_seed[mask].mean(axis=0) if mask.any() else np.full(per_seed.shape[1:], np.nan)  # seeds x ks
        for j, k in enumerate(ks):
            n_hits = float(sub[:, j].sum())
            acc = n_hits / len(sub) if len(sub) else math.nan
            spread = seed_acc[:, j]
            rows.append(dict(system=system, dataset=dataset, subset=subset, n=int(len(sub)), k=int(k),
                             hits=int(n_hits) if n_hits.is_integer() else n_hits, accuracy=acc,
                             ci_low=float(low[j]), ci_high=float(high[j]), n_boot=int(n_boot), seed=int(seed),
                             seeds=int(len(spread)),
                             seed_sd=float(np.std(spread, ddof=1)) if len(spread) > 1 else math.nan,
                             seed_min=float(spread.min()), seed_max=float(spread.max())))
    return pd.DataFrame(rows)


def paired_bootstrap(
    hits_a: np.ndarray, hits_b: np.ndarray, k: int, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95
) -> dict:
    """Top-k accuracy difference A - B on the same questions, with a paired percentile CI and two-sided p-value.

    Questions are resampled jointly for both systems (the pairing removes between-question variance). The p-value is
    the share of null-centred resampled differences at least as extreme as the observed one, with the +1 correction
    (so it is never 0 from a finite number of resamples). Accepts hit matrices (n x ranks), seed stacks
    (n x seeds x ranks: each question counts with its seed-mean) or per-question hit vectors already at k.
    """
    a, b = _at_k_vector(hits_a, k), _at_k_vector(hits_b, k)
    if a.shape != b.shape:
        raise ValueError(f"paired bootstrap needs the same questions: {a.shape[0]} vs {b.shape[0]} rows")
    diff = a.astype(float) - b.astype(float)
    observed = float(diff.mean()) if len(diff) else math.nan
    means = bootstrap_means(diff, n_boot, seed)
    if means is None:
        return dict(k=int(k), n=0, accuracy_a=math.nan, accuracy_b=math.nan, difference=math.nan,
                    ci_low=math.nan, ci_high=math.nan, p_value=math.nan, n_boot=int(n_boot), seed=int(seed))
    boot = means[:, 0]
    alpha = (1.0 - confidence) / 2.0
    return dict(k=int(k), n=int(len(diff)), accuracy_a=float(a.mean()), accuracy_b=float(b.mean()),
                difference=observed, ci_low=float(np.quantile(boot, alpha)),
                ci_high=float(np.quantile(boot, 1.0 - alpha)),
                p_value=null_centred_p(boot, observed), n_boot=int(n_boot), seed=int(seed))


def _at_k_vector(hits: np.ndarray, k: int) -> np.ndarray:
    """Per question: hit within the top k (bool), or the share of seeds with one (float) for a seed stack."""
    hits = np.asarray(hits)
    if hits.ndim == 1:
        return hits
    return hits_at_k(hits, [k])[:, 0]


def paired_table(
    hits_a: np.ndarray,
    hits_b: np.ndarray,
    questions: Sequence[Mapping],
    ks: Sequence[int] = DEFAULT_KS,
    n_boot: int = 10000,
    seed: int = 0,
    system_a: str = "",
    system_b: str = "",
    dataset: str = "",
    masks: Mapping[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """``paired_bootstrap`` for every subset and k, as a tidy table (system_a, system_b, dataset, subset, k, ...);
    ``masks`` as in :func:`accuracy_table`."""
    if not len(hits_a) == len(hits_b) == len(questions):
        raise ValueError(f"hits ({len(hits_a)}, {len(hits_b)} rows) must match the {len(questions)} questions")
    rows = []
    for subset, mask in slice_masks(questions, masks).items():
        for k in ks:
            res = paired_bootstrap(np.asarray(hits_a)[mask], np.asarray(hits_b)[mask], k, n_boot, seed)
            rows.append(dict(system_a=system_a, system_b=system_b, dataset=dataset, subset=subset, **res))
    return pd.DataFrame(rows)


def paired_summary(diffs: pd.DataFrame, labels: Mapping[str, str] | None = None,
                   columns: Sequence[str] = ("dataset", "subset"), titles: Mapping[tuple, str] | None = None,
                   alpha: float = 0.05) -> pd.DataFrame:
    """Question-level paired differences folded to one line per comparison and k, one column per test set /
    subset: ``+1.2*`` is A - B in points, ``*`` where its own bootstrap p is below ``alpha`` (uncorrected:
    exploratory); ``titles`` names a column's panel by its ``columns`` values. A notebook shows this and the long
    table behind it (:func:`full_table_html`): the 780-row long table alone was cut by pandas to ten rows."""
    labels, titles = labels or {}, titles or {}
    if not len(diffs):
        return pd.DataFrame()
    frame = diffs.assign(
        comparison=[f"{labels.get(a, a)} - {labels.get(b, b)}" for a, b in zip(diffs.system_a, diffs.system_b)],
        cell=[f"{100 * d:+.1f}" + ("*" if p < alpha else "") for d, p in zip(diffs.difference, diffs.p_value)],
        panel=[titles.get(key, " ".join(str(x) for x in key if x not in ("", None)))
               for key in zip(*(diffs[c] for c in columns))])
    order = list(dict.fromkeys(frame.comparison))
    table = frame.pivot_table(index=["comparison", "k"], columns="panel", values="cell", aggfunc="first", sort=False)
    return table.reindex(order, level=0).reindex(columns=list(dict.fromkeys(frame.panel)))


def full_table_html(frame: pd.DataFrame, summary: str) -> str:
    """Every row of a long table in a collapsed HTML block (``summary`` is its one-line title): nothing cut."""
    return f"<details><summary>{summary} ({len(frame):,} rows)</summary>{frame.to_html(index=False)}</details>"


def table_records(table: pd.DataFrame) -> list[dict]:
    """JSON-ready rows (plain Python scalars; NaN becomes None) for metrics files."""
    records = table.astype(object).where(table.notna(), None).to_dict(orient="records")
    return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()} for r in records]


def evaluate_run(
    run: Mapping[str, Sequence[tuple[str, float]]],
    questions: Sequence[Mapping],
    text_of: Callable[[str], str] | Mapping[str, str],
    ks: Sequence[int] = DEFAULT_KS,
    n_boot: int = 1000,
    seed: int = 0,
    system: str = "",
    dataset: str = "",
) -> tuple[np.ndarray, pd.DataFrame]:
    """``hit_matrix`` then ``accuracy_table``: the hits (kept for paired tests) and the tidy accuracy table."""
    hits = hit_matrix(run, questions, text_of, k_max=max(ks))
    return hits, accuracy_table(hits, questions, ks, n_boot, seed, system=system, dataset=dataset)
