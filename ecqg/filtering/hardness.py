"""Stage 2 (hardness): the paper keeps the pairs the *baseline* DPR finds hard, i.e. scores low; a synthetic question
the baseline already ranks perfectly teaches it little. :func:`dpr_hardness` gives each question its baseline score
with its own passage and that passage's rank in the dense index; :func:`hardness_filter` keeps the lowest-scored
fraction per generator (``lowest_score``) or those whose own passage is not already in the top ``max_rank``
(``rank``). The cut-off is a parameter: the paper gives no number for it."""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ecqg.core.errors import DataFormatError

from ecqg.filtering.generated import check_generated, filter_stats, passage_of

log = logging.getLogger(__name__)

HARDNESS_MODES = ("lowest_score", "rank")


def dpr_hardness(bi_encoder, records: Iterable[Mapping], passages: Mapping[str, Mapping], index, ids: Sequence[str],
                 depth: int = 100, batch_size: int = 64, progress: bool = True,
                 where: str = "generated questions", autocast: str | None = None) -> dict[str, dict[str, Any]]:
    """Baseline DPR view of each question: ``{id: {"score", "rank"}}``.

    ``score`` = dot product of the question vector and its own passage's vector (re-encoded, so any FAISS index kind
    works); ``rank`` = 1-based position of the own passage in the top ``depth`` of a search of ``index`` (with its
    passage ``ids``), None when it is not there.
    ``autocast``: the encoders' (:func:`ecqg.runtime.models.inference`; None = float32, ``auto`` = bf16 where native).
    """
    # dense retrieval brings torch and FAISS: the package's other filters import without them
    from ecqg.retrieval.dense import encode_passages, encode_queries
    from ecqg.retrieval.faiss_index import search

    records = check_generated(records, where)
    for i, rec in enumerate(records):
        passage_of(passages, rec["passage_id"], where, i)
    own = sorted({r["passage_id"] for r in records})
    pids, p_vecs = encode_passages(bi_encoder, [{"id": p, "title": passages[p].get("title") or "",
                                                 "text": passages[p]["text"]} for p in own],
                                   batch_size=batch_size, progress=progress, autocast=autocast)
    row = {p: k for k, p in enumerate(pids)}
    q_vecs = encode_queries(bi_encoder, [r["question"] for r in records], batch_size=max(batch_size, 128),
                            progress=progress, autocast=autocast)
    run = search(index, ids, q_vecs, k=depth, qids=[r["id"] for r in records], progress=progress)
    out = {}
    for k, rec in enumerate(records):
        ranked = [pid for pid, _ in run[rec["id"]]]
        rank = ranked.index(rec["passage_id"]) + 1 if rec["passage_id"] in ranked else None
        own_vec = p_vecs[row[rec["passage_id"]]]
        # one vector per passage: the plain dot product (the scores this filter has always kept); several: the
        # retriever's own retrieval score
        score = q_vecs[k] @ own_vec if own_vec.ndim == 1 else bi_encoder.pair_scores(q_vecs[k][None], own_vec[None])[0]
        out[rec["id"]] = {"score": round(float(score), 5), "rank": rank}
    return out


def hardness_filter(records: Iterable[Mapping], scores: Mapping[str, Mapping], mode: str = "lowest_score",
                    keep_fraction: float = 0.5, max_rank: int = 1, where: str = "generated questions"
                    ) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Keep the questions the baseline finds hard: ``(kept, rejected, stats)``, input order kept.

    * ``lowest_score``: per generator (and per replicate, where each has its own set), the ``keep_fraction`` with
      the lowest baseline score (ties by id), so every set loses the same share; rejected reason ``easy_score``.
    * ``rank``: those whose own passage is *not* in the baseline's top ``max_rank`` (1: not already first), or not
      retrieved at all; rejected reason ``easy_rank``.
    Records gain ``dpr_score`` and ``dpr_rank``.
    """
    if mode not in HARDNESS_MODES:
        raise ValueError(f"hardness mode must be one of {HARDNESS_MODES}, not {mode!r}")
    if mode == "lowest_score" and not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction}")
    if mode == "rank" and (not isinstance(max_rank, int) or max_rank < 1):
        raise ValueError(f"max_rank must be a positive integer, got {max_rank!r}")
    records = check_generated(records, where)
    scored = []
    for i, rec in enumerate(records):
        if rec["id"] not in scores:
            raise DataFormatError(where, i, "id", f"no DPR hardness score for question {rec['id']!r}")
        s = scores[rec["id"]]
        scored.append({**rec, "dpr_score": float(s["score"]), "dpr_rank": s["rank"]})
    if mode == "lowest_score":
        keep_ids = set()
        for key in dict.fromkeys((r["generator"], r.get("replicate")) for r in scored):
            group = sorted((r for r in scored if (r["generator"], r.get("replicate")) == key),
                           key=lambda r: (r["dpr_score"], r["id"]))   # each set keeps its own hardest share
            keep_ids.update(r["id"] for r in group[:int(keep_fraction * len(group) + 0.5)])
        is_hard = [r["id"] in keep_ids for r in scored]
        reason = "easy_score"
    else:
        is_hard = [r["dpr_rank"] is None or r["dpr_rank"] > max_rank for r in scored]
        reason = "easy_rank"
    kept = [r for r, h in zip(scored, is_hard) if h]
    rejected = [{**r, "reason": reason} for r, h in zip(scored, is_hard) if not h]
    stats = filter_stats(scored, kept, rejected, (reason,))
    stats.update(mode=mode, keep_fraction=keep_fraction if mode == "lowest_score" else None,
                 max_rank=max_rank if mode == "rank" else None,
                 own_passage_at_rank_1=sum(r["dpr_rank"] == 1 for r in scored),
                 mean_score_kept=round(float(np.mean([r["dpr_score"] for r in kept])), 4) if kept else None,
                 mean_score_rejected=round(float(np.mean([r["dpr_score"] for r in rejected])), 4) if rejected
                 else None)
    log.info("hardness filter (%s): kept %d of %d", mode, len(kept), len(scored))
    return kept, rejected, stats
