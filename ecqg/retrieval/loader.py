"""Training batches built beside the training loop: a DataLoader whose workers turn each step's global batch into this
process's padded tensors, pinned, so the step only copies them to the device (non-blocking) and launches kernels.

Why: the loop used to gather, pad and copy every batch itself between two steps (a synchronous host-to-device copy
per tensor, each a stream sync on a GPU), so the device waited for the host at every step. Here a step's inputs are
a pure function of ``(epoch, position)``: the seeded permutation of the epoch (:func:`~ecqg.retrieval.train_data.
epoch_batches`), this process's slice of the global batch, its hard negatives drawn with the per-record RNG
(:func:`~ecqg.retrieval.train_data.make_batch`'s ``(seed, epoch, record)`` seeds) and the padding / chunking /
length buckets :class:`~ecqg.retrieval.contrastive.ContrastiveStep` used to make itself. So workers can build steps
ahead in any number, a resumed run starts at the first step it has not trained, and the tensors are bit for bit the
ones the in-loop path made (``tests/test_train.py`` compares the two, and trains with and without workers).

The workers read only arrays (:class:`~ecqg.retrieval.tokens.TrainingTokens`, memory-mapped from its Arrow cache
where there is one), never the records: a forked worker that touched a Python object per record would copy the
trainer's memory page by page. The sizes of every process's share are computed here too (they follow from the
global batch and the hard-negative pools), so the step all-gathers representations without first gathering sizes.
"""

from __future__ import annotations

import dataclasses
import gc
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch

from ecqg.retrieval.tokens import tokenize_threads
from ecqg.retrieval.train_data import _negative_picks, epoch_batches


@dataclass
class StepInputs:
    """One process's share of a step, as the encoders take it: ``queries`` and ``passages`` are lists of padded
    tensor dicts (one each; GradCache chunks; or length-sorted passage buckets, then ``passage_order`` puts the
    encoded passages back in batch order). ``query_sizes`` / ``passage_sizes``: every process's rows, rank order
    (None when only this process's batch is known); ``missing_hard_negatives`` over the global batch."""

    queries: list[dict[str, torch.Tensor]]
    passages: list[dict[str, torch.Tensor]]
    passage_order: torch.Tensor | None = None
    query_sizes: list[int] | None = None
    passage_sizes: list[int] | None = None
    missing_hard_negatives: int = 0
    examples: int = 0

    def _map(self, fn) -> "StepInputs":
        return dataclasses.replace(
            self, queries=[{k: fn(v) for k, v in t.items()} for t in self.queries],
            passages=[{k: fn(v) for k, v in t.items()} for t in self.passages],
            passage_order=None if self.passage_order is None else fn(self.passage_order))

    def pin_memory(self) -> "StepInputs":
        """Page-locked copies (the DataLoader's pinning thread calls this), so the copy to the GPU can be async."""
        return self._map(lambda t: t.pin_memory())

    def to(self, device: torch.device, non_blocking: bool = False) -> "StepInputs":
        if all(v.device == device for t in self.queries + self.passages for v in t.values()):
            return self
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))


def arrange(pad_queries, pad_passages, queries, passages, chunk_size: int | None, bucket_size: int | None,
            lengths=None) -> tuple[list, list, torch.Tensor | None]:
    """``(query tensors, passage tensors, passage_order)`` of one batch, laid out as the step runs it. ``queries`` /
    ``passages``: the batch's features (lists) or store rows (arrays), in batch order; ``pad_queries(part)`` /
    ``pad_passages(part)`` pad a slice of them. GradCache cuts both sides into ``chunk_size`` chunks in batch order;
    else ``bucket_size`` sorts the passages by length (stable) into buckets, each padded to its own longest, and
    ``passage_order`` is the inverse permutation; else one tensor per side."""
    if chunk_size:
        return ([pad_queries(queries[i:i + chunk_size]) for i in range(0, len(queries), chunk_size)],
                [pad_passages(passages[i:i + chunk_size]) for i in range(0, len(passages), chunk_size)], None)
    padded_queries = [pad_queries(queries)]
    if not bucket_size:
        return padded_queries, [pad_passages(passages)], None
    return (padded_queries, *length_buckets(pad_passages, passages, bucket_size, lengths))


def length_buckets(pad, passages, bucket_size: int, lengths=None) -> tuple[list, torch.Tensor]:
    """Passages sorted by length (stable), cut into buckets of ``bucket_size``, each padded to its own longest, and
    the inverse permutation that puts the encoded buckets back in batch order."""
    if lengths is None:
        lengths = [len(f["input_ids"]) for f in passages]
    order = np.argsort(lengths, kind="stable")
    buckets = [pad(_take(passages, order[lo:lo + bucket_size])) for lo in range(0, len(passages), bucket_size)]
    return buckets, torch.from_numpy(np.argsort(order).astype(np.int64))


def _take(items, positions):
    return items[positions] if isinstance(items, np.ndarray) else [items[int(i)] for i in positions]


class StepPlan:
    """What a step's inputs are made of, as arrays only (picklable, fork-safe): the token stores and record rows, the
    batch settings and this process's place among ``world``."""

    def __init__(self, tokens, *, batch_size: int, seed: int, drop_last: bool, hard_negatives: int, rank: int,
                 world: int, chunk_size: int | None, bucket_size: int | None, pad_id: int, side: str):
        self.tokens, self.n = tokens, len(tokens.positive_rows)
        self.batch_size, self.seed, self.drop_last, self.hard_negatives = batch_size, seed, drop_last, hard_negatives
        self.rank, self.world, self.chunk_size, self.bucket_size = rank, world, chunk_size, bucket_size
        self.pad_id, self.side = pad_id, side
        self.pool_sizes = tokens.pool_sizes
        self._epoch: tuple[int, list[np.ndarray]] | None = None

    def batches(self, epoch: int) -> list[np.ndarray]:
        if self._epoch is None or self._epoch[0] != epoch:
            self._epoch = (epoch, epoch_batches(self.n, self.batch_size, self.seed, epoch, self.drop_last))
        return self._epoch[1]

    def inputs(self, epoch: int, indices: np.ndarray) -> StepInputs:
        """This process's tensors of the global batch ``indices`` of ``epoch`` (CPU, not pinned)."""
        tokens, k = self.tokens, self.hard_negatives
        shares = np.array_split(np.asarray(indices, dtype=np.int64), self.world)
        drawn = np.minimum(self.pool_sizes[np.asarray(indices, dtype=np.int64)], k) if k else None
        query_sizes = [len(s) for s in shares]
        passage_sizes = [len(s) + (int(np.minimum(self.pool_sizes[s], k).sum()) if k else 0) for s in shares]
        share = shares[self.rank]
        rows = [int(r) for r in tokens.positive_rows[share]]
        for i in share:
            i = int(i)
            picked = _negative_picks(int(self.pool_sizes[i]), k, self.seed, epoch, i)
            if picked:
                negatives = tokens.negative_rows(i)
                rows += [int(negatives[j]) for j in picked]
        rows = np.asarray(rows, dtype=np.int64)
        questions, passages = tokens.questions, tokens.passages
        queries, padded, order = arrange(
            lambda part: questions.padded(part, self.pad_id, self.side),
            lambda part: passages.padded(part, self.pad_id, self.side),
            tokens.question_rows[share], rows, self.chunk_size, self.bucket_size,
            lengths=passages.lengths(rows) if self.bucket_size and not self.chunk_size else None)
        missing = int(len(indices) * k - drawn.sum()) if k else 0
        return StepInputs(queries, padded, order, query_sizes, passage_sizes, missing, len(indices))


class StepDataset(torch.utils.data.Dataset):
    """Item ``j``: ``(epoch, position, StepInputs)`` of the ``j``-th step after ``(epoch, position)``."""

    def __init__(self, plan: StepPlan, epoch: int, position: int, steps: int, steps_per_epoch: int):
        self.plan, self.epoch, self.position, self.steps, self.per_epoch = plan, epoch, position, steps, steps_per_epoch

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, j: int):
        at = self.position + int(j)
        epoch, position = self.epoch + at // self.per_epoch, at % self.per_epoch
        return epoch, position, self.plan.inputs(epoch, self.plan.batches(epoch)[position])


def _identity(item):
    return item


def default_workers(device: torch.device) -> int:
    """DataLoader workers per training process: on a GPU this process's share of the host's cores less one for the
    loop, at most 4 (a worker builds a paper-size step in milliseconds: ``bench/bench_loader.py``); on a CPU none,
    the cores are the compute."""
    if device.type != "cuda":
        return 0
    return max(1, min(4, tokenize_threads()))


def iterate_steps(plan: StepPlan, epoch: int, position: int, steps: int, steps_per_epoch: int, device: torch.device,
                  workers: int) -> Iterator[tuple[int, int, StepInputs]]:
    """The remaining steps' inputs, in order, on ``device`` (copied without blocking from pinned memory on a GPU).

    The DataLoader gets a generator of its own: its iterator draws a base seed at start, which from the global RNG
    would move every dropout mask of the run (the CPU runs stay bit-identical to the in-loop batches). Forked
    workers (``fork``: the token arrays are inherited, not pickled) start after ``gc.freeze()``, so their garbage
    collector does not write to, and copy, every page of the trainer's objects."""
    if steps <= 0:
        return
    pin = device.type == "cuda"
    loader = torch.utils.data.DataLoader(
        StepDataset(plan, epoch, position, steps, steps_per_epoch), batch_size=None, shuffle=False,
        num_workers=workers, collate_fn=_identity, pin_memory=pin, generator=torch.Generator(),
        prefetch_factor=4 if workers else None, multiprocessing_context="fork" if workers else None)
    if workers:
        gc.freeze()
    try:
        iterator = iter(loader)
    finally:
        if workers:
            gc.unfreeze()
    try:
        for epoch_at, position_at, inputs in iterator:
            yield epoch_at, position_at, inputs.to(device, non_blocking=pin)
    finally:
        del iterator            # shuts the workers down, also when the loop stops early (patience, a kill)
