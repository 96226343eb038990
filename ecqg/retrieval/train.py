"""DPR bi-encoder training: NLL over in-batch + BM25 hard negatives, gradient caching, multi-process, resumable.

What it does (Karpukhin et al. 2020, as used by the paper's baseline, UnCon-DPR and Mixed-DPR):

* **Loss.** A step takes ``batch_size`` DPR records (the *global* batch, over all processes). Its passages are the
  B positives (``positive_ctxs[0]``) followed by up to ``hard_negatives`` passages per record, sampled without
  replacement from ``hard_negative_ctxs`` with an RNG seeded by ``(seed, epoch, record index)``; a record with fewer
  hard negatives contributes fewer (counted per step in the history and logged once up front). Scores are ``Q @ P^T``
  over *all* passages of the global batch and the target of question i is its own positive.
* **Data order** is a permutation seeded by ``(seed, epoch)``, cut into global batches; process r takes slice r of
  each global batch. So the order, the negatives and hence the optimisation do not depend on the number of processes.
* **Gradient caching** (GradCache, Gao et al. 2021), ``grad_cache_chunk_size``: (1) encode queries and passages in
  chunks without a graph, capturing the RNG state before each chunk; (2) compute the full-batch loss on those
  representations as leaves and backprop to d loss / d representation; (3) re-encode each chunk with a graph after
  restoring its RNG state (same dropout masks) and backprop the cached gradients. The parameter gradients equal those
  of one full-batch graph, with memory for one chunk. (Gradient accumulation is *not* a substitute: it does not add
  in-batch negatives.)
* **Multi-process** (HF Accelerate). Representations are all-gathered and the local slice is put back with its graph;
  every process computes the *global* mean loss, so its gradient with respect to its own parameters' contribution is
  exact, and the per-process parameter gradients are **summed** with one explicit all-reduce. The result equals a
  single process running the global batch. DDP's own per-backward hooks cannot model GradCache's many forward /
  backward passes per step, so all passes run under ``no_sync`` and the all-reduce is done by hand.
  Launch the script (or ``-m module``) that calls :func:`train_biencoder` once per process; nothing else changes
  (same config: the batch size is global, so the data order and the step are those of one process)::

      accelerate launch --multi_gpu --num_processes 8 train_script.py ...          # 8 GPUs, one machine
      torchrun --standalone --nproc_per_node 8 train_script.py ...                 # the same without accelerate
      ACCELERATE_USE_CPU=1 torchrun --standalone --nproc_per_node 2 train_script.py  # 2 CPU processes (gloo)

  The last form is what ``tests/test_train.py::test_two_processes_match_one`` runs: two processes reproduce the
  single-process loss and gradients. (Plain ``torchrun`` without ``ACCELERATE_USE_CPU=1`` on a machine without GPUs
  gives N independent single-process runs.)

  Checkpoints need a file system shared by all processes (multi-node). DeepSpeed / FSDP sharded optimisers are not
  supported (the optimizer state is saved by the main process only).
* **Checkpoints** every ``checkpoint_every`` steps under ``output_dir/checkpoints/checkpoint-<step>``: model
  (BiEncoder.save, safetensors), optimizer and scheduler (``torch.save``, read back with ``weights_only=True``), each
  process's RNG states, step / epoch / position in the epoch and the history. Written into ``.checkpoint-<step>.tmp``
  and renamed, ``state.json`` last; only a ``checkpoint-<digits>`` directory holding ``state.json`` counts. The last
  ``keep_checkpoints`` are kept. ``resume=True`` continues from the latest one exactly (same data order, consumed
  batches skipped, RNG restored), after checking the trajectory-relevant config and a fingerprint of the data.
* **Validation** every ``eval_every`` steps and at the end, on held-out records (never the test set): DPR's "average
  rank" validation. The pool is every held-out record's first positive plus all its hard negatives (deduplicated);
  metrics: mean 1-based rank of the positive, top-1/5/20 accuracy within the pool, mean NLL over the pool.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ecqg.errors import DataFormatError
from ecqg.io import remove_directory, write_json, write_jsonl
from ecqg.retrieval.biencoder import BiEncoder

log = logging.getLogger(__name__)

TIMING_KEYS = ("examples_per_s", "step_seconds")  # history fields that vary from run to run


def without_timings(history: Sequence[dict]) -> list[dict]:
    """The history as saved with a model (a DVC-tracked output): the same steps, losses and validation figures, but
    no wall-clock fields, so retraining to identical weights leaves the output identical and reruns nothing
    downstream. The timings stay in the run directory's history and the stage metrics."""
    return [{k: v for k, v in entry.items() if k not in TIMING_KEYS} for entry in history]

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
STATE_FILE = "state.json"
# Config fields that do not change the training trajectory, so they may differ when resuming.
_RESUME_FREE = {"checkpoint_every", "keep_checkpoints", "eval_every", "eval_batch_size", "log_every"}


# --------------------------------------------------------------------------------------------------------------------
# configuration


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one training run (defaults: DPR's NQ fine-tuning, paper appendix for lr / batch)."""

    lr: float = 2e-5
    epochs: int = 40
    batch_size: int = 128                 # global: over all processes together
    hard_negatives: int = 1               # BM25 hard negatives per question
    warmup_steps: int | None = None       # wins over warmup_ratio when set
    warmup_ratio: float = 0.1
    weight_decay: float = 0.0             # not applied to biases and LayerNorm weights
    adam_eps: float = 1e-8
    max_grad_norm: float | None = 2.0     # None: no clipping
    seed: int = 0
    grad_cache_chunk_size: int | None = None  # None: plain full-batch graph
    length_bucket_size: int | None = None  # plain path: forward passages in length-sorted buckets of this many, each
                                           # padded to its own longest (same loss, less padding: CPU time); None: one
    checkpoint_every: int | None = 1000   # None: no intermediate checkpoints
    keep_checkpoints: int = 2
    eval_every: int | None = None         # None: validate at the end only
    eval_batch_size: int = 64
    max_steps: int | None = None          # caps epochs * steps_per_epoch (smoke runs); the schedule uses the cap
    drop_last: bool = True                # drop the epoch's incomplete last batch (fewer in-batch negatives)
    mixed_precision: str = "no"           # Accelerate: "no", "fp16", "bf16"; "auto": bf16 where native, else "no"
    log_every: int = 50

    def __post_init__(self):
        positive = ["lr", "epochs", "batch_size", "eval_batch_size", "keep_checkpoints", "log_every"]
        optional_positive = ["grad_cache_chunk_size", "length_bucket_size", "checkpoint_every", "eval_every",
                             "max_steps", "max_grad_norm"]
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"TrainConfig.{name} must be > 0, got {getattr(self, name)!r}")
        for name in optional_positive:
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"TrainConfig.{name} must be > 0 or None, got {value!r}")
        if self.hard_negatives < 0 or self.weight_decay < 0 or self.seed < 0 or (self.warmup_steps or 0) < 0:
            raise ValueError("TrainConfig.hard_negatives, weight_decay, seed and warmup_steps must be >= 0")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"TrainConfig.warmup_ratio must be in [0, 1), got {self.warmup_ratio!r}")
        if self.mixed_precision not in ("no", "fp16", "bf16", "auto"):
            raise ValueError(f"TrainConfig.mixed_precision must be no/fp16/bf16/auto, got {self.mixed_precision!r}")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "TrainConfig":
        """Build from a params mapping; unknown keys are an error (a typo must not be silently ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig keys {unknown}; known: {sorted(known)}")
        return cls(**values)


# --------------------------------------------------------------------------------------------------------------------
# records, splits, batches


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


def sample_hard_negatives(record: dict, k: int, seed: int, epoch: int, index: int) -> list[dict]:
    """Up to ``k`` distinct hard negatives, seeded per (seed, epoch, record index): independent of batch layout."""
    pool = record.get("hard_negative_ctxs") or []
    if k == 0 or not pool:
        return []
    picks = np.random.default_rng([seed, epoch, index]).choice(len(pool), size=min(k, len(pool)), replace=False)
    return [pool[j] for j in sorted(picks)]


@dataclass
class Batch:
    """One process's share of a step: questions, then passages laid out as [positives..., hard negatives...]."""

    questions: list[str]
    titles: list[str]
    texts: list[str]
    missing_hard_negatives: int = 0   # how many of the wanted hard negatives were not available


def make_batch(records: Sequence[dict], indices: Sequence[int], hard_negatives: int, seed: int, epoch: int) -> Batch:
    """Positive of question i is passage i (DPR trains on ``positive_ctxs[0]``)."""
    chosen = [records[i] for i in indices]
    ctxs = [r["positive_ctxs"][0] for r in chosen]
    negatives = [sample_hard_negatives(records[i], hard_negatives, seed, epoch, int(i)) for i in indices]
    for negs in negatives:
        ctxs.extend(negs)
    missing = sum(hard_negatives - len(negs) for negs in negatives)
    return Batch([r["question"] for r in chosen], [c.get("title", "") for c in ctxs], [c["text"] for c in ctxs],
                 missing)


# --------------------------------------------------------------------------------------------------------------------
# the contrastive step (plain or GradCache), distributed-aware


@dataclass
class RandState:
    """The RNG state before a chunk's forward pass, so the re-encoding in GradCache step 3 sees the same dropout."""

    cpu: torch.Tensor
    cuda: torch.Tensor | None = None
    device: torch.device | None = None

    @classmethod
    def capture(cls, device: torch.device) -> "RandState":
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(torch.get_rng_state(), cuda, device)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)


class EncoderModule(torch.nn.Module):
    """``forward(side, batch)`` around a BiEncoder, because DDP / Accelerate hook ``forward`` and BiEncoder has none."""

    def __init__(self, bi_encoder: BiEncoder):
        super().__init__()
        self.bi = bi_encoder

    def forward(self, side: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.bi.encode_queries(batch) if side == "query" else self.bi.encode_passages(batch)


def gather_with_grad(local: torch.Tensor, accelerator) -> tuple[torch.Tensor, list[int]]:
    """All-gather rows from every process (sizes may differ); the local slice keeps its graph.

    Returns the concatenation in rank order and the per-process row counts.
    """
    if accelerator.num_processes == 1:
        return local, [local.shape[0]]
    sizes = accelerator.gather(torch.tensor([local.shape[0]], device=local.device)).tolist()
    padded = local.new_zeros((max(sizes),) + tuple(local.shape[1:]))
    padded[:local.shape[0]] = local.detach()
    gathered = accelerator.gather(padded).view(len(sizes), max(sizes), *local.shape[1:])
    pieces = [gathered[r, :s] for r, s in enumerate(sizes)]
    pieces[accelerator.process_index] = local
    return torch.cat(pieces), sizes


def contrastive_loss(q_all: torch.Tensor, p_all: torch.Tensor, q_sizes: list[int], p_sizes: list[int]) -> torch.Tensor:
    """Mean NLL of each question's own positive among all passages; process r's question i -> r's passage i."""
    starts = np.cumsum([0] + p_sizes[:-1])
    targets = torch.cat([torch.arange(nq) + int(start) for nq, start in zip(q_sizes, starts)]).to(q_all.device)
    scores = BiEncoder.scores(q_all, p_all)
    if scores.dtype in (torch.float16, torch.bfloat16):   # mixed precision: softmax in float32
        scores = scores.float()
    return F.cross_entropy(scores, targets)


class ContrastiveStep:
    """Computes the parameter gradients of one step (no optimizer update), plainly or with gradient caching.

    Why a class: the trainer and the GradCache equivalence test must run the very same code.
    """

    def __init__(self, bi_encoder: BiEncoder, accelerator, module: torch.nn.Module | None = None,
                 chunk_size: int | None = None, length_bucket_size: int | None = None):
        self.bi, self.accelerator, self.chunk_size = bi_encoder, accelerator, chunk_size
        self.length_bucket_size = length_bucket_size
        self.module = module if module is not None else EncoderModule(bi_encoder)

    def _tokenized(self, side: str, batch: Batch, chunk: int | None) -> list[dict[str, torch.Tensor]]:
        """Tokenise per chunk, so each chunk is padded to its own longest sequence."""
        n = len(batch.questions) if side == "query" else len(batch.texts)
        size = chunk or n
        device = self.accelerator.device
        out = []
        for i in range(0, n, size):
            if side == "query":
                enc = self.bi.tokenize_queries(batch.questions[i:i + size])
            else:
                enc = self.bi.tokenize_passages(batch.titles[i:i + size], batch.texts[i:i + size])
            out.append({k: v.to(device) for k, v in enc.items()})
        return out

    def _loss_on(self, q_local: torch.Tensor, p_local: torch.Tensor) -> torch.Tensor:
        q_all, q_sizes = gather_with_grad(q_local, self.accelerator)
        p_all, p_sizes = gather_with_grad(p_local, self.accelerator)
        return contrastive_loss(q_all, p_all, q_sizes, p_sizes)

    def backward(self, batch: Batch) -> float:
        """Accumulate d(global loss)/d(params) into ``.grad`` of this process's parameters; return the loss."""
        with self.accelerator.no_sync(self.module):
            if self.chunk_size is None:
                return self._plain(batch)
            return self._cached(batch)

    def _plain(self, batch: Batch) -> float:
        (q_tok,) = self._tokenized("query", batch, None)
        loss = self._loss_on(self.module("query", q_tok), self._passages_with_graph(batch))
        self.accelerator.backward(loss)
        return loss.item()

    def _passages_with_graph(self, batch: Batch) -> torch.Tensor:
        """All passage vectors of the batch, in batch order, with their graph.

        With ``length_bucket_size`` the passages go through the encoder in buckets of similar length, each padded
        only to its own longest: a random batch of ~100-piece passages otherwise pads to its longest (~256), and on
        a CPU the padding is most of the compute. Padding is masked, so the vectors (and the loss) are the same.
        """
        if not self.length_bucket_size:
            (p_tok,) = self._tokenized("passage", batch, None)
            return self.module("passage", p_tok)
        lengths = [len(ids) for ids in self.bi.tokenizer(batch.titles, batch.texts, truncation="only_second",
                                                         max_length=self.bi.config.passage_max_length)["input_ids"]]
        order = np.argsort(lengths, kind="stable")
        device = self.accelerator.device
        parts = []
        for start in range(0, len(order), self.length_bucket_size):
            picked = order[start:start + self.length_bucket_size]
            tok = self.bi.tokenize_passages([batch.titles[i] for i in picked], [batch.texts[i] for i in picked])
            parts.append(self.module("passage", {k: v.to(device) for k, v in tok.items()}))
        inverse = torch.as_tensor(np.argsort(order), device=device)
        return torch.cat(parts).index_select(0, inverse)

    def _encode_without_graph(self, side: str, chunks: list[dict]) -> tuple[torch.Tensor, list[RandState]]:
        """GradCache step 1: representations as a leaf, and the RNG state before each chunk."""
        states, parts = [], []
        with torch.no_grad():
            for tok in chunks:
                states.append(RandState.capture(self.accelerator.device))
                parts.append(self.module(side, tok))
        rep = torch.cat(parts)
        if rep.dtype in (torch.float16, torch.bfloat16):    # mixed precision: fp32 leaf for the loss
            rep = rep.float()
        return rep.requires_grad_(), states

    def _cached(self, batch: Batch) -> float:
        sides = ("query", "passage")
        chunks = {s: self._tokenized(s, batch, self.chunk_size) for s in sides}
        encoded = {s: self._encode_without_graph(s, chunks[s]) for s in sides}
        loss = self._loss_on(encoded["query"][0], encoded["passage"][0])  # step 2: d loss / d representation
        self.accelerator.backward(loss)
        for s in sides:                                                    # step 3: re-encode, same dropout
            rep_leaf, states = encoded[s]
            grads = rep_leaf.grad.split([len(tok["input_ids"]) for tok in chunks[s]])
            for tok, state, grad in zip(chunks[s], states, grads):
                state.restore()
                rep = self.module(s, tok)
                rep.backward(gradient=grad.to(rep.dtype))
        return loss.item()


def all_reduce_gradients(parameters: Sequence[torch.nn.Parameter], accelerator, bucket: int = 1 << 24) -> None:
    """Sum gradients over processes (each holds its share of the global loss' gradient), in flat buckets."""
    if accelerator.num_processes == 1:
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    start = 0
    while start < len(grads):
        end, size = start, 0
        while end < len(grads) and (size == 0 or size + grads[end].numel() <= bucket):
            size += grads[end].numel()
            end += 1
        flat = torch.cat([g.reshape(-1) for g in grads[start:end]])
        torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM)
        offset = 0
        for g in grads[start:end]:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        start = end


# --------------------------------------------------------------------------------------------------------------------
# validation


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
def _encode_all(bi: BiEncoder, side: str, items: list, batch_size: int, device) -> torch.Tensor:
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


def evaluate_biencoder(bi: BiEncoder, records: Sequence[dict], batch_size: int = 64, device=None) -> dict[str, float]:
    """DPR's average-rank validation on held-out records (eval mode, no dropout)."""
    device = device or next(bi.parameters()).device
    questions, pool, positives = validation_pool(records)
    was_training = bi.training
    bi.eval()
    try:
        q = _encode_all(bi, "query", questions, batch_size, device)
        p = _encode_all(bi, "passage", pool, batch_size, device)
    finally:
        bi.train(was_training)
    return ranking_metrics(BiEncoder.scores(q, p), torch.tensor(positives, device=q.device))


# --------------------------------------------------------------------------------------------------------------------
# checkpoints


def rng_states() -> dict[str, Any]:
    """Every RNG a training step may touch, in types ``torch.load(weights_only=True)`` accepts."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "python": [version, list(internal), gauss],
            "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)]}


def set_rng_states(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))


def latest_checkpoint(directory: str | Path) -> Path | None:
    """The highest-step *complete* checkpoint: named ``checkpoint-<digits>`` and holding ``state.json``.

    Temporary ``.checkpoint-*.tmp`` directories (a save killed midway) never match.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in directory.iterdir()
             if (m := CHECKPOINT_RE.match(p.name)) and (p / STATE_FILE).is_file()]
    return max(found)[1] if found else None


def prune_checkpoints(directory: Path, keep: int) -> None:
    """Keep the ``keep`` highest-step complete checkpoints."""
    complete = sorted((int(m.group(1)), p) for p in directory.iterdir()
                      if (m := CHECKPOINT_RE.match(p.name)) and (p / STATE_FILE).is_file())
    for _, path in complete[:-keep]:
        remove_directory(path)


# --------------------------------------------------------------------------------------------------------------------
# the trainer


@dataclass
class _Progress:
    step: int = 0
    epoch: int = 0
    position: int = 0          # batches of the current epoch already consumed
    history: list[dict] = field(default_factory=list)


def _param_groups(module: torch.nn.Module, weight_decay: float) -> list[dict]:
    """BERT practice: no weight decay on biases and LayerNorm weights."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if param.requires_grad:
            (no_decay if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_accelerator(config: TrainConfig):
    """The Accelerator training expects (also picks up `accelerate launch` / torchrun settings from the env)."""
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, DistributedDataParallelKwargs

    from ecqg.hf_training import fresh_accelerator_state, resolve_mixed_precision

    precision = resolve_mixed_precision(config.mixed_precision)
    fresh_accelerator_state(precision)
    # split_batches: one scheduler step per optimiser step (our batch size is already global).
    # broadcast_buffers off: BERT's buffers are constant, and an in-place broadcast between the query and passage
    # forward passes would invalidate the saved position ids of the first graph.
    return Accelerator(mixed_precision=precision,
                       dataloader_config=DataLoaderConfiguration(split_batches=True),
                       kwargs_handlers=[DistributedDataParallelKwargs(broadcast_buffers=False)])


class _Trainer:
    def __init__(self, bi: BiEncoder, train_records, val_records, config: TrainConfig, output_dir: Path,
                 accelerator, progress: bool, callback):
        self.bi, self.train, self.val, self.cfg = bi, list(train_records), list(val_records or []), config
        self.out, self.acc, self.show_progress, self.callback = output_dir, accelerator, progress, callback
        self.ckpt_dir = output_dir / "checkpoints"
        self.steps_per_epoch = len(epoch_batches(len(self.train), config.batch_size, config.seed, 0, config.drop_last))
        if self.steps_per_epoch == 0:
            raise ValueError(f"{len(self.train)} training records make no batch of {config.batch_size} "
                             "(lower batch_size or set drop_last=False)")
        if config.batch_size < accelerator.num_processes:
            raise ValueError(f"batch_size {config.batch_size} < {accelerator.num_processes} processes")
        full = config.epochs * self.steps_per_epoch
        self.total_steps = min(full, config.max_steps) if config.max_steps else full
        self.fingerprint = data_fingerprint(self.train)

    # --- setup --------------------------------------------------------------------------------------------------
    def _setup(self, resume: bool) -> _Progress:
        from accelerate.utils import set_seed
        from transformers import get_linear_schedule_with_warmup

        set_seed(self.cfg.seed)
        checkpoint = latest_checkpoint(self.ckpt_dir) if resume else None
        state = self._read_state(checkpoint) if checkpoint else None
        if checkpoint:
            self._load_weights(checkpoint)
        self.bi.train()
        module = EncoderModule(self.bi)
        optimizer = torch.optim.AdamW(_param_groups(module, self.cfg.weight_decay), lr=self.cfg.lr,
                                      eps=self.cfg.adam_eps)
        warmup = self.cfg.warmup_steps if self.cfg.warmup_steps is not None else \
            int(self.cfg.warmup_ratio * self.total_steps)
        scheduler = get_linear_schedule_with_warmup(optimizer, warmup, self.total_steps)
        self.module, self.optimizer, self.scheduler = self.acc.prepare(module, optimizer, scheduler)
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        self.stepper = ContrastiveStep(self.bi, self.acc, self.module, self.cfg.grad_cache_chunk_size,
                                       self.cfg.length_bucket_size)
        if checkpoint:
            self._load_optimisation_state(checkpoint)
            log.info("resumed from %s (step %d)", checkpoint, state["step"])
            return _Progress(state["step"], state["epoch"], state["position"], state["history"])
        return _Progress()

    def _read_state(self, checkpoint: Path) -> dict:
        state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
        mine, theirs = dataclasses.asdict(self.cfg), state["config"]
        changed = sorted(k for k in set(mine) | set(theirs) if k not in _RESUME_FREE and mine.get(k) != theirs.get(k))
        if changed:
            raise ValueError(f"cannot resume from {checkpoint}: config differs in {changed}; "
                             "use a new output_dir or resume=False")
        if state["data_fingerprint"] != self.fingerprint:
            raise ValueError(f"cannot resume from {checkpoint}: the training records differ from that run's")
        return state

    def _load_weights(self, checkpoint: Path) -> None:
        saved = BiEncoder.load(checkpoint / "model")
        self.bi.query_encoder.load_state_dict(saved.query_encoder.state_dict())
        if not self.bi.config.shared:
            self.bi.passage_encoder.load_state_dict(saved.passage_encoder.state_dict())

    def _load_optimisation_state(self, checkpoint: Path) -> None:
        device = self.acc.device
        self.optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device, weights_only=True))
        self.scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=True))
        rng_file = checkpoint / f"rng-{self.acc.process_index}.pt"
        if rng_file.is_file():
            set_rng_states(torch.load(rng_file, weights_only=True))
        else:
            log.warning("%s missing (different number of processes?): dropout RNG not restored", rng_file.name)

    # --- checkpoints --------------------------------------------------------------------------------------------
    def _save_checkpoint(self, prog: _Progress) -> None:
        """All processes write their RNG file into one temp dir; the main process adds the rest and renames it."""
        name = f"checkpoint-{prog.step:08d}"
        tmp = self.ckpt_dir / f".{name}.tmp"
        if self.acc.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        self.acc.wait_for_everyone()
        torch.save(rng_states(), tmp / f"rng-{self.acc.process_index}.pt")
        self.acc.wait_for_everyone()
        if self.acc.is_main_process:
            self.bi.save(tmp / "model")
            torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
            torch.save(self.scheduler.state_dict(), tmp / "scheduler.pt")
            state = {"step": prog.step, "epoch": prog.epoch, "position": prog.position, "history": prog.history,
                     "config": dataclasses.asdict(self.cfg), "data_fingerprint": self.fingerprint,
                     "num_processes": self.acc.num_processes}
            write_json(tmp / STATE_FILE, state)       # last: its presence marks the checkpoint complete
            final = self.ckpt_dir / name
            if final.exists():
                remove_directory(final)
            os.replace(tmp, final)
            prune_checkpoints(self.ckpt_dir, self.cfg.keep_checkpoints)
            write_jsonl(self.out / "history.jsonl", prog.history)
        self.acc.wait_for_everyone()

    # --- loop ---------------------------------------------------------------------------------------------------
    def _remaining(self, prog: _Progress) -> Iterator[tuple[int, int, np.ndarray]]:
        """(epoch, position, global batch) from where ``prog`` stands; consumed batches are skipped, not replayed."""
        epoch, position = prog.epoch, prog.position
        while True:
            batches = epoch_batches(len(self.train), self.cfg.batch_size, self.cfg.seed, epoch, self.cfg.drop_last)
            for pos in range(position, len(batches)):
                yield epoch, pos, batches[pos]
            epoch, position = epoch + 1, 0

    def _local_batch(self, epoch: int, indices: np.ndarray) -> Batch:
        share = np.array_split(indices, self.acc.num_processes)[self.acc.process_index]
        return make_batch(self.train, share.tolist(), self.cfg.hard_negatives, self.cfg.seed, epoch)

    def _optimise(self, batch: Batch) -> tuple[float, float | None]:
        loss = self.stepper.backward(batch)
        all_reduce_gradients(self.params, self.acc)
        norm = None
        if self.cfg.max_grad_norm:
            norm = float(self.acc.clip_grad_norm_(self.params, self.cfg.max_grad_norm))
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss, norm

    def _validate(self) -> dict[str, float]:
        if not self.val or not self.acc.is_main_process:
            return {}
        return evaluate_biencoder(self.bi, self.val, self.cfg.eval_batch_size, self.acc.device)

    def run(self, resume: bool) -> list[dict]:
        from tqdm.auto import tqdm

        prog = self._setup(resume)
        self._log_hard_negative_shortfall()
        bar = tqdm(total=self.total_steps, initial=prog.step, desc="train DPR", dynamic_ncols=True,
                   disable=not (self.show_progress and self.acc.is_main_process))
        batches = self._remaining(prog)
        while prog.step < self.total_steps:
            epoch, pos, indices = next(batches)
            entry = self._train_step(epoch, indices, prog)
            prog.epoch, prog.position = (epoch, pos + 1) if pos + 1 < self.steps_per_epoch else (epoch + 1, 0)
            if self.cfg.eval_every and prog.step % self.cfg.eval_every == 0:
                entry.update(self._validate())
            prog.history.append(entry)
            if self.cfg.checkpoint_every and prog.step % self.cfg.checkpoint_every == 0:
                self._save_checkpoint(prog)
            bar.update(1)
            bar.set_postfix(loss=f"{entry['loss']:.4f}", ex_s=f"{entry['examples_per_s']:.1f}")
            if prog.step % self.cfg.log_every == 0:
                log.info("step %d/%d loss %.4f lr %.3g %.1f examples/s", prog.step, self.total_steps,
                         entry["loss"], entry["lr"], entry["examples_per_s"])
            if self.callback is not None:
                self.callback(entry)
        bar.close()
        return self._finish(prog)

    def _train_step(self, epoch: int, indices: np.ndarray, prog: _Progress) -> dict:
        start = time.perf_counter()
        batch = self._local_batch(epoch, indices)
        lr = self.scheduler.get_last_lr()[0]
        loss, norm = self._optimise(batch)
        seconds = time.perf_counter() - start
        prog.step += 1
        missing = batch.missing_hard_negatives
        if self.acc.num_processes > 1:
            missing = int(self.acc.reduce(torch.tensor(missing, device=self.acc.device), "sum").item())
        return {"step": prog.step, "epoch": epoch, "loss": loss, "lr": lr, "grad_norm": norm,
                "examples_per_s": len(indices) / seconds, "step_seconds": seconds,
                "missing_hard_negatives": missing}

    def _finish(self, prog: _Progress) -> list[dict]:
        if prog.history and "val_avg_rank" not in prog.history[-1]:
            prog.history[-1].update(self._validate())
        if self.acc.is_main_process:
            self.bi.save(self.out / "model")
            write_jsonl(self.out / "history.jsonl", prog.history)
            final = prog.history[-1] if prog.history else {}
            log.info("trained %d steps; final %s", prog.step,
                     {k: v for k, v in final.items() if k.startswith("val_")})
        self.acc.wait_for_everyone()
        return prog.history

    def _log_hard_negative_shortfall(self) -> None:
        """Counted once up front: which records cannot supply the configured number of hard negatives."""
        short = sum(len(r.get("hard_negative_ctxs") or []) < self.cfg.hard_negatives for r in self.train)
        if short:
            log.warning("%d of %d training records have fewer than %d hard negatives; their batches carry fewer",
                        short, len(self.train), self.cfg.hard_negatives)


def train_biencoder(model: BiEncoder, train_records: Sequence[dict], val_records: Sequence[dict] | None,
                    config: TrainConfig, output_dir: str | Path, resume: bool = True, progress: bool = True,
                    accelerator=None, callback: Callable[[dict], None] | None = None) -> list[dict]:
    """Train ``model`` in place; save it to ``output_dir/model``, the history to ``output_dir/history.jsonl``.

    ``resume``: continue from the latest complete checkpoint in ``output_dir/checkpoints`` (if any).
    ``callback(entry)`` runs after every step (after its checkpoint), e.g. to stop early by raising.
    Returns the history: one dict per step (step, epoch, loss, lr, grad_norm, examples_per_s, ...), with
    ``val_*`` metrics on validation steps.
    """
    check_records(train_records, "train records")
    if val_records:
        check_records(val_records, "validation records")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    accelerator = accelerator or make_accelerator(config)
    trainer = _Trainer(model, train_records, val_records, config, output_dir, accelerator, progress, callback)
    return trainer.run(resume)
