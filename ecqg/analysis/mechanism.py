"""Evaluations aimed at where entity-conditioned pre-training should act (notebook 07, ``mechanism.json``).

Why: on a small corpus, Table 3's totals barely move (Top-1 is saturated by BM25), and the paper's claim is specific:
a [CLS] passage vector under-represents entities that sit late in the passage or draw little attention, and
questions about them retrieve worse; conditioning synthetic questions on those entities should help exactly there.
So the evaluations slice NQ test questions by where the answer sits in its gold passage and by how much the baseline
attends to the answer entity, and probe the encoders with the same passage in two sentence orders:

* **Answer position** (after SQuAD-PosQ, Zeng et al. 2025): the sentence of the gold passage where an answer first
  occurs (``sentence 1`` / ``sentence 2`` / ``sentence 3+``), Top-k per bucket, and the position sensitivity index
  PSI = 1 - min / max accuracy over the buckets (0: position does not matter).
* **Entity attention**: questions whose answer is a named entity of its gold passage, split by the baseline DPR's
  [CLS] attention rank of that entity among the passage's entities (most / middle / least attended third).
* **Moved-sentence probe** (the design of Fayyaz et al., ACL 2025): the question scored against its gold passage
  with the answer sentence moved to the front and to the end; the gap front - end measures position bias in the
  score itself, paired per passage. The paper's mechanism predicts a smaller gap for Mixed-DPR.

Locating the answers and building the moved-sentence pairs is :mod:`ecqg.retrieval.probes` (training scores the probe at its
snapshots); this module holds what is computed over them: the buckets' masks, PSI with its stratified bootstrap, the
entity-attention thirds and the probe's gaps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ecqg.retrieval.probes import BUCKETS
from ecqg.data.text import Analysis, dpr_tokens

log = logging.getLogger(__name__)

THIRDS = ("most attended", "middle", "least attended")
_BOOT_CHUNK = 500  # bootstrap resamples drawn at once (bounds memory; results depend on the seed only)


def bucket_masks(locations: pd.DataFrame, column: str = "bucket", labels: Sequence[str] = BUCKETS) -> dict:
    """``{label: boolean mask over the questions}`` for each label present in ``column`` (order of ``labels``)."""
    values = locations[column].to_numpy()
    return {label: values == label for label in labels if (values == label).any()}


# ============================================================================================================ PSI
def _stratified_means(values: np.ndarray, groups: Sequence[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """``(n_boot, n_groups, m)``: column means of ``values`` over resamples drawn within each group separately."""
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, len(groups), values.shape[1]))
    for g, idx in enumerate(groups):
        for start in range(0, n_boot, _BOOT_CHUNK):
            stop = min(n_boot, start + _BOOT_CHUNK)
            draw = idx[rng.integers(0, len(idx), size=(stop - start, len(idx)))]
            out[start:stop, g] = values[draw].mean(axis=1)
    return out


def psi(accuracies: np.ndarray) -> np.ndarray:
    """Position sensitivity index over the last axis (buckets): 1 - min / max; NaN when every bucket is 0."""
    accuracies = np.asarray(accuracies, dtype=float)
    top = accuracies.max(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(top > 0, 1.0 - accuracies.min(axis=-1) / top, np.nan)


def position_sensitivity(at_k: Mapping[str, np.ndarray], masks: Mapping[str, np.ndarray],
                         pairs: Sequence[tuple[str, str]] = (), n_boot: int = 2000, seed: int = 0,
                         confidence: float = 0.95) -> pd.DataFrame:
    """PSI per system with a stratified bootstrap CI, and PSI differences A - B for ``pairs`` (paired: the same
    resampled questions for both systems) with a CI and a two-sided p-value.

    ``at_k``: system -> per-question hit within the top k (0/1, or a seed-mean in [0, 1]); ``masks``: bucket ->
    question mask. Rows: kind ("system" | "paired"), system, reference, psi, ci_low, ci_high, p_value.
    """
    groups = [np.flatnonzero(m) for m in masks.values()]
    if len(groups) < 2:
        raise ValueError(f"PSI needs at least two non-empty buckets, got {list(masks)}")
    systems = list(at_k)
    values = np.column_stack([np.asarray(at_k[s], dtype=float) for s in systems])
    boot = psi(np.moveaxis(_stratified_means(values, groups, n_boot, seed), 1, 2))   # (n_boot, systems)
    observed = psi(np.array([[values[idx, j].mean() for idx in groups] for j in range(len(systems))]))
    alpha = (1.0 - confidence) / 2.0

    def interval(samples: np.ndarray) -> tuple[float, float]:
        samples = samples[np.isfinite(samples)]   # a resample with every bucket at 0 has no PSI
        if not len(samples):
            return math.nan, math.nan
        return float(np.quantile(samples, alpha)), float(np.quantile(samples, 1 - alpha))

    rows = []
    for j, system in enumerate(systems):
        low, high = interval(boot[:, j])
        rows.append({"kind": "system", "system": system, "reference": None, "psi": float(observed[j]),
                     "ci_low": low, "ci_high": high, "p_value": math.nan})
    for a, b in pairs:
        ja, jb = systems.index(a), systems.index(b)
        diff, obs = boot[:, ja] - boot[:, jb], float(observed[ja] - observed[jb])
        low, high = interval(diff)
        diff = diff[np.isfinite(diff)]
        p = (1 + np.sum(np.abs(diff - obs) >= abs(obs) - 1e-12)) / (1 + len(diff)) if len(diff) and \
            math.isfinite(obs) else math.nan
        rows.append({"kind": "paired", "system": a, "reference": b, "psi": obs, "ci_low": low, "ci_high": high,
                     "p_value": float(p)})
    return pd.DataFrame(rows)


# ============================================================================================= entity attention
def answer_entity(analysis: Analysis, answers: Sequence[str]) -> int | None:
    """Index (in ``analysis.entities``) of the entity whose surface form IS one of the answers (same DrQA tokens),
    the earliest in the passage when several are; None when the answer is not a named entity of the passage."""
    needles = {tuple(dpr_tokens(a)) for a in answers} - {()}
    matches = [i for i, e in enumerate(analysis.entities) if tuple(dpr_tokens(e.text)) in needles]
    return min(matches, key=lambda i: analysis.entities[i].start_char) if matches else None


def attention_third(rank: int, n: int) -> str:
    """The third of a passage's entities that attention rank ``rank`` (0 = most attended, of ``n``) falls in.

    Symmetric around the median rank: relative rank ``rank / (n - 1)`` below 1/3 is the most attended third, above
    2/3 the least attended, the rest (both bounds included) the middle; integers only, so no rounding decides.
    """
    if n < 2:
        raise ValueError(f"attention thirds need at least 2 entities, got {n}")
    if not 0 <= rank < n:
        raise ValueError(f"rank {rank} is outside 0..{n - 1}")
    return THIRDS[0] if 3 * rank < n - 1 else THIRDS[2] if 3 * rank > 2 * (n - 1) else THIRDS[1]


def entity_attention_ranks(entity_rows: Sequence[Sequence[Mapping]], answer_index: Sequence[int | None],
                           min_entities: int = 3) -> pd.DataFrame:
    """Per question: where its answer entity ranks by the encoder's attention among its passage's entities.

    ``entity_rows[i]``: ``ecqg.analysis.attention.entity_scores`` of question i's gold passage (one record per unique
    entity, in ``Analysis.entities`` order); ``answer_index[i]``: ``answer_entity`` of it. Only entities encoded
    whole count (``eligible``); rank 0 is the most attended (ties: the earlier entity first). Columns: status
    ("ok", "answer_not_an_entity", "answer_entity_truncated", "too_few_entities"), rank, n_entities, third.
    """
    rows = []
    for scores, index in zip(entity_rows, answer_index):
        row = {"status": "ok", "rank": -1, "n_entities": 0, "third": None, "attention": math.nan}
        if index is None:
            rows.append({**row, "status": "answer_not_an_entity"})
            continue
        eligible = [i for i, e in enumerate(scores) if e["eligible"] and not math.isnan(e["attention"])]
        row["n_entities"] = len(eligible)
        if index not in eligible:
            rows.append({**row, "status": "answer_entity_truncated"})
            continue
        if len(eligible) < min_entities:
            rows.append({**row, "status": "too_few_entities"})
            continue
        order = sorted(eligible, key=lambda i: (-scores[i]["attention"], scores[i]["start_char"]))
        rank = order.index(index)
        rows.append({**row, "rank": rank, "third": attention_third(rank, len(eligible)),
                     "attention": float(scores[index]["attention"])})
    return pd.DataFrame(rows, columns=["status", "rank", "n_entities", "third", "attention"])


def summarise_gaps(gaps: Mapping[str, np.ndarray], pairs: Sequence[tuple[str, str]] = (), n_boot: int = 2000,
                   seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Mean front - end score gap per system (``gaps``: system -> per-passage gaps, seeds x passages for a system
    trained with several seeds) with a CI over passages, the spread over seeds, and paired differences A - B.

    A system's per-passage gap is its seed-mean, so its CI resamples passages and its ``seed_sd`` is the sd of the
    per-seed mean gaps. Rows: kind ("system" | "paired"), system, reference, n, gap, ci_low, ci_high, p_value,
    seeds, seed_sd, share_front_higher (% of passages where the front version scores higher).
    """
    # encoder_comparison brings scipy (through stats); only this summary needs it
    from ecqg.analysis.encoder_comparison import paired_mean_difference

    rows, per_passage = [], {}
    for system, g in gaps.items():
        g = np.atleast_2d(np.asarray(g, dtype=float))
        mean = g.mean(axis=0)
        per_passage[system] = mean
        res = paired_mean_difference(mean, n_boot, seed, confidence)
        per_seed = g.mean(axis=1)
        rows.append({"kind": "system", "system": system, "reference": None, "n": res["n"], "gap": res["difference"],
                     "ci_low": res["ci_low"], "ci_high": res["ci_high"], "p_value": res["p_value"],
                     "seeds": len(g), "seed_sd": float(np.std(per_seed, ddof=1)) if len(g) > 1 else math.nan,
                     "share_front_higher": float(100 * (mean > 0).mean()) if len(mean) else math.nan})
    for a, b in pairs:
        if a not in per_passage or b not in per_passage:
            continue
        res = paired_mean_difference(per_passage[a] - per_passage[b], n_boot, seed, confidence)
        rows.append({"kind": "paired", "system": a, "reference": b, "n": res["n"], "gap": res["difference"],
                     "ci_low": res["ci_low"], "ci_high": res["ci_high"], "p_value": res["p_value"],
                     "seeds": math.nan, "seed_sd": math.nan, "share_front_higher": math.nan})
    return pd.DataFrame(rows)


