"""DPR training records: validation, the held-out split, a fingerprint of the data, seeded epoch batches and hard
negatives (a batch's passages are its positives followed by the sampled hard negatives)."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ecqg.core.errors import DataFormatError

log = logging.getLogger(__name__)


def split_records(records: Sequence[dict], held_out: float | int, seed: int) -> tuple[list[dict], list[dict]]:
    """Deterministic train / held-out split: a seeded choice of ``held_out`` records (a fraction or a count).

    Both parts keep the input order, so the split depends on the seed and the input only.
    """
    n = len(records)
    count = int(round(held_out * n)) if isinstance(held_out, float) else int(held_out)
    if not 0 <= count <= n:
        raise ValueError(f"held_out={held_out!r} selects {count} of {n} records")
    chosen = np.zeros(n, dtype=bool)
    chosen[np.random.default_rng([seed, 7]).permutation(n)[:count]] = True
    return [r for r, c in zip(records, chosen) if not c], [r for r, c in zip(records, chosen) if c]


def _describe(record: Any, index: int) -> str:
    question = record.get("question") if isinstance(record, dict) else None
    return f"record {index + 1}" + (f" (question {str(question)[:80]!r})" if question else "")


def check_records(records: Sequence[dict], source: str) -> None:
    """Fail fast, naming the record, on anything training would trip over later (no positive, bad ctx)."""
    for i, rec in enumerate(records):
        where = _describe(rec, i)
        if not isinstance(rec, dict) or not isinstance(rec.get("question"), str) or not rec["question"].strip():
            raise DataFormatError(source, where, "question", "missing or empty question")
        positives = rec.get("positive_ctxs")
        if not isinstance(positives, list) or not positives:
            raise DataFormatError(source, where, "positive_ctxs", "no positive passage (training needs one)")
        for name in ("positive_ctxs", "hard_negative_ctxs"):
            ctxs = rec.get(name) or []
            if not isinstance(ctxs, list):
                raise DataFormatError(source, where, name, "expected a list of ctx objects")
            for j, ctx in enumerate(ctxs):
                if not isinstance(ctx, dict) or not isinstance(ctx.get("text"), str) or \
                        not isinstance(ctx.get("title", ""), str):
                    raise DataFormatError(source, where, f"{name}[{j}]", "a ctx needs string 'text' and 'title'")


def data_fingerprint(records: Sequence[dict]) -> str:
    """A hash of the questions and first positives: resuming on different data must fail, not silently continue."""
    digest = hashlib.sha256()
    for rec in records:
        digest.update(rec["question"].encode("utf-8") + b"\0")
        digest.update(rec["positive_ctxs"][0]["text"].encode("utf-8") + b"\1")
    return digest.hexdigest()[:16]


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int, drop_last: bool = True) -> list[np.ndarray]:
    """The epoch's global batches of record indices: a permutation seeded by (seed, epoch), cut in order."""
    order = np.random.default_rng([seed, epoch]).permutation(n)
    batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
    if batches and drop_last and len(batches[-1]) < batch_size:
        batches.pop()
    return batches


def _negative_picks(pool_size: int, k: int, seed: int, epoch: int, index: int) -> list[int]:
    if k == 0 or not pool_size:
        return []
    picks = np.random.default_rng([seed, epoch, index]).choice(pool_size, size=min(k, pool_size), replace=False)
    return sorted(int(j) for j in picks)


def sample_hard_negatives(record: dict, k: int, seed: int, epoch: int, index: int) -> list[dict]:
    """Up to ``k`` distinct hard negatives, seeded per (seed, epoch, record index): independent of batch layout."""
    pool = record.get("hard_negative_ctxs") or []
    return [pool[j] for j in _negative_picks(len(pool), k, seed, epoch, index)]


@dataclass
class Batch:
    """One process's share of a step: questions, then passages laid out as [positives..., hard negatives...].

    With the training set tokenised up front (:class:`ecqg.retrieval.tokens.TrainingTokens`) the batch also carries
    the unpadded features of both sides, and nothing is tokenised during the step."""

    questions: list[str]
    titles: list[str]
    texts: list[str]
    missing_hard_negatives: int = 0   # how many of the wanted hard negatives were not available
    query_features: list[dict] | None = None
    passage_features: list[dict] | None = None


def make_batch(records: Sequence[dict], indices: Sequence[int], hard_negatives: int, seed: int, epoch: int,
               tokens: Any = None) -> Batch:
    """Positive of question i is passage i (DPR trains on ``positive_ctxs[0]``); ``tokens`` (the records'
    :class:`~ecqg.retrieval.tokens.TrainingTokens`) adds the ready features."""
    indices = [int(i) for i in indices]
    chosen = [records[i] for i in indices]
    picks = [_negative_picks(len(records[i].get("hard_negative_ctxs") or []), hard_negatives, seed, epoch, i)
             for i in indices]
    ctxs = [r["positive_ctxs"][0] for r in chosen]
    for i, picked in zip(indices, picks):
        ctxs.extend(records[i]["hard_negative_ctxs"][j] for j in picked)
    missing = sum(hard_negatives - len(p) for p in picks)
    batch = Batch([r["question"] for r in chosen], [c.get("title", "") for c in ctxs], [c["text"] for c in ctxs],
                  missing)
    if tokens is not None:
        rows = [int(tokens.positive_rows[i]) for i in indices]
        rows += [int(tokens.negative_rows(i)[j]) for i, picked in zip(indices, picks) for j in picked]
        batch.query_features = tokens.questions.features(tokens.question_rows[indices])
        batch.passage_features = tokens.passages.features(rows)
    return batch
