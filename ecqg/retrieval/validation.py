"""DPR's "average rank" validation on held-out records (never the test set): the pool is every held-out record's
first positive plus all its hard negatives (deduplicated); metrics are the mean 1-based rank of the positive, top-k
accuracy within the pool and the mean NLL over it, under the retriever's retrieval score."""

from __future__ import annotations

import logging
from typing import Sequence

import torch
import torch.nn.functional as F

from ecqg.retrieval.retriever import Retriever

log = logging.getLogger(__name__)


def validation_pool(records: Sequence[dict]) -> tuple[list[str], list[dict], list[int]]:
    """Questions, the deduplicated pool (first positives + all hard negatives) and each question's positive index."""
    pool, index = [], {}

    def add(ctx: dict) -> int:
        pid = ctx.get("passage_id")
        key = ("id", str(pid)) if pid is not None else ("text", ctx.get("title", ""), ctx["text"])
        if key not in index:
            index[key] = len(pool)
            pool.append(ctx)
        return index[key]

    positives = [add(r["positive_ctxs"][0]) for r in records]
    for r in records:
        for ctx in r.get("hard_negative_ctxs") or []:
            add(ctx)
    return [r["question"] for r in records], pool, positives


def ranking_metrics(scores: torch.Tensor, positives: torch.Tensor, ks: Sequence[int] = (1, 5, 20)) -> dict[str, float]:
    """Rank of the positive (1 = best; ties count in its favour), top-k accuracy and mean NLL over the pool."""
    scores = scores.float()
    positive_scores = scores.gather(1, positives.view(-1, 1))
    ranks = (scores > positive_scores).sum(1) + 1
    out = {"val_avg_rank": ranks.float().mean().item()}
    for k in ks:
        out[f"val_top{k}"] = (ranks <= k).float().mean().item()
    out["val_nll"] = F.cross_entropy(scores, positives).item()
    out["val_questions"], out["val_pool"] = scores.shape[0], scores.shape[1]
    return out


@torch.no_grad()
def _encode_all(bi: Retriever, side: str, items: list, batch_size: int, device) -> torch.Tensor:
    parts = []
    for i in range(0, len(items), batch_size):
        chunk = items[i:i + batch_size]
        if side == "query":
            tok = bi.tokenize_queries(chunk)
        else:
            tok = bi.tokenize_passages([c.get("title", "") for c in chunk], [c["text"] for c in chunk])
        tok = {k: v.to(device) for k, v in tok.items()}
        parts.append((bi.encode_queries if side == "query" else bi.encode_passages)(tok).float())
    return torch.cat(parts)


def _encode_shared(bi: Retriever, side: str, items: list, batch_size: int, device, accelerator) -> torch.Tensor:
    """Every item's vector, each process encoding a contiguous share (the last ones padded to the same length),
    gathered in order on every process."""
    world, rank = accelerator.num_processes, accelerator.process_index
    share = -(-len(items) // world)
    mine = items[rank * share:(rank + 1) * share]
    vectors = _encode_all(bi, side, mine, batch_size, device) if mine else None
    width = (vectors if vectors is not None else _encode_all(bi, side, items[:1], 1, device)).shape[1]
    padded = torch.zeros(share, width, device=device)
    if vectors is not None:
        padded[:len(vectors)] = vectors
    return accelerator.gather(padded)[:len(items)]


def evaluate_biencoder(bi: Retriever, records: Sequence[dict], batch_size: int = 64, device=None,
                       accelerator=None) -> dict[str, float]:
    """DPR's average-rank validation on held-out records (eval mode, no dropout). With ``accelerator`` (several
    processes) each process encodes a share of the questions and of the pool and every one gets the metrics."""
    device = device or next(bi.parameters()).device
    questions, pool, positives = validation_pool(records)
    was_training = bi.training
    bi.eval()
    try:
        if accelerator is None:
            q = _encode_all(bi, "query", questions, batch_size, device)
            p = _encode_all(bi, "passage", pool, batch_size, device)
        else:
            q = _encode_shared(bi, "query", questions, batch_size, device, accelerator)
            p = _encode_shared(bi, "passage", pool, batch_size, device, accelerator)
    finally:
        bi.train(was_training)
    return ranking_metrics(bi.scores(q, p), torch.tensor(positives, device=q.device))
