"""Hybrid retrieval: fusing a sparse and a dense run (Luo et al. 2022, §3.3), and reciprocal-rank fusion.

* ``normalized_sum``: each run's top ``depth`` (the paper: 100) is min-max normalised per question to [0, 1] (all
  equal scores -> 1, as pyserini), a passage missing from a run scores 0 there, the scores are summed (optionally
  weighted) and the passages re-ranked by the sum (ties by passage id).
* ``reciprocal_rank_fusion``: score = sum over runs of 1 / (k + rank) (Cormack et al. 2009; k = 60).

pyserini ships the same pieces (``TrecRun.rescore(NORMALIZE)`` + ``TrecRun.merge(SUM)``, and
``pyserini.fusion.reciprocal_rank_fusion``); ``tests/test_fusion.py`` checks these functions give their rankings and
scores. They are reimplemented here over the in-memory runs because pyserini's DataFrame version rescans the whole
run for every question (minutes for thousands of questions). A run is ``{qid: [(passage id, score), ...]}``, best
first (:mod:`ecqg.retrieval.run_files`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Run = dict[str, list[tuple[str, float]]]


def _questions(runs: Sequence[Mapping]) -> list[str]:
    return list(dict.fromkeys(q for run in runs for q in run))


def _ranked(scores: Mapping[str, float], k: int | None) -> list[tuple[str, float]]:
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return ranked if k is None else ranked[:k]


def min_max(ranking: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Scores scaled to [0, 1] within one question's ranking (every score 1 when they are all equal)."""
    if not ranking:
        return {}
    scores = [s for _, s in ranking]
    low, high = min(scores), max(scores)
    if high == low:
        return {pid: 1.0 for pid, _ in ranking}
    return {pid: (s - low) / (high - low) for pid, s in ranking}


def normalized_sum(runs: Sequence[Mapping], depth: int | None = 100, k: int | None = None,
                   weights: Sequence[float] | None = None) -> Run:
    """The paper's hybrid: min-max normalise each run's top ``depth`` per question, sum (``weights`` per run,
    default 1 each), re-rank; ``k`` cuts the fused list (None: every passage of any run)."""
    if len(runs) < 2:
        raise ValueError("fusion needs at least two runs")
    weights = [1.0] * len(runs) if weights is None else list(weights)
    if len(weights) != len(runs):
        raise ValueError(f"{len(weights)} weights for {len(runs)} runs")
    fused: Run = {}
    for qid in _questions(runs):
        total: dict[str, float] = {}
        for run, weight in zip(runs, weights):
            ranking = run.get(qid, [])
            for pid, score in min_max(ranking[:depth] if depth else ranking).items():
                total[pid] = total.get(pid, 0.0) + weight * score
        fused[qid] = _ranked(total, k)
    return fused


def reciprocal_rank_fusion(runs: Sequence[Mapping], rrf_k: int = 60, depth: int | None = None,
                           k: int | None = None) -> Run:
    """Sum over runs of ``1 / (rrf_k + rank)`` (rank from 1) over each run's top ``depth``; re-rank."""
    if len(runs) < 2:
        raise ValueError("fusion needs at least two runs")
    fused: Run = {}
    for qid in _questions(runs):
        total: dict[str, float] = {}
        for run in runs:
            ranking = run.get(qid, [])
            for rank, (pid, _) in enumerate(ranking[:depth] if depth else ranking, start=1):
                total[pid] = total.get(pid, 0.0) + 1.0 / (rrf_k + rank)
        fused[qid] = _ranked(total, k)
    return fused
