"""One training step's gradients for a retriever: NLL of each question's positive among all passages of the global
batch (in-batch + hard negatives), computed plainly, over length-sorted buckets, or with gradient caching
(GradCache, Gao et al. 2021), and exact across processes (all-gather with the local slice keeping its graph, then one
explicit all-reduce of the gradients). The loop around it is :mod:`ecqg.retrieval.train`; the method in full is in
that module's docstring."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ecqg.retrieval.loader import StepInputs, length_buckets
from ecqg.retrieval.retriever import Retriever
from ecqg.retrieval.train_data import Batch

log = logging.getLogger(__name__)


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
    """``forward(side, batch)`` around a retriever, because DDP / Accelerate hook ``forward`` and a retriever has
    none."""

    def __init__(self, bi_encoder: Retriever):
        super().__init__()
        self.bi = bi_encoder

    def forward(self, side: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.bi.encode_queries(batch) if side == "query" else self.bi.encode_passages(batch)


def gather_with_grad(local: torch.Tensor, accelerator, sizes: Sequence[int] | None = None
                     ) -> tuple[torch.Tensor, list[int]]:
    """All-gather rows from every process (sizes may differ); the local slice keeps its graph.

    Returns the concatenation in rank order and the per-process row counts. ``sizes``: those counts when the caller
    knows them (the loader does: :class:`~ecqg.retrieval.loader.StepInputs`), else gathered first (a host sync).
    """
    if accelerator.num_processes == 1:
        return local, [local.shape[0]]
    if sizes is None:
        sizes = accelerator.gather(torch.tensor([local.shape[0]], device=local.device)).tolist()
    sizes = [int(n) for n in sizes]
    if sizes[accelerator.process_index] != local.shape[0]:
        raise ValueError(f"process {accelerator.process_index} holds {local.shape[0]} rows, its planned share is "
                         f"{sizes[accelerator.process_index]} ({sizes})")
    padded = local.new_zeros((max(sizes),) + tuple(local.shape[1:]))
    padded[:local.shape[0]] = local.detach()
    gathered = accelerator.gather(padded).view(len(sizes), max(sizes), *local.shape[1:])
    pieces = [gathered[r, :s] for r, s in enumerate(sizes)]
    pieces[accelerator.process_index] = local
    return torch.cat(pieces), sizes


def contrastive_loss(q_all: torch.Tensor, p_all: torch.Tensor, q_sizes: list[int], p_sizes: list[int],
                     score: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Mean NLL of each question's own positive among all passages; process r's question i -> r's passage i.
    ``score``: the retriever's ``train_scores`` (default: the dot product of single vectors)."""
    starts = np.cumsum([0] + list(p_sizes[:-1]))
    # built on the device: a tensor copied from host memory would be a host sync (a blocking copy) every step
    targets = torch.cat([torch.arange(int(nq), device=q_all.device) + int(start)
                         for nq, start in zip(q_sizes, starts)])
    scores = score(q_all, p_all) if score is not None else q_all @ p_all.T
    if scores.dtype in (torch.float16, torch.bfloat16):   # mixed precision: softmax in float32
        scores = scores.float()
    return F.cross_entropy(scores, targets)


class ContrastiveStep:
    """Computes the parameter gradients of one step (no optimizer update), plainly or with gradient caching.

    Why a class: the trainer and the GradCache equivalence test must run the very same code.
    """

    def __init__(self, bi_encoder: Retriever, accelerator, module: torch.nn.Module | None = None,
                 chunk_size: int | None = None, length_bucket_size: int | None = None, reducer=None):
        self.bi, self.accelerator, self.chunk_size = bi_encoder, accelerator, chunk_size
        self.length_bucket_size = length_bucket_size
        self.module = module if module is not None else EncoderModule(bi_encoder)
        self.reducer = reducer              # a GradientReducer: armed before the step's last backward pass

    def _tokenized(self, side: str, batch: Batch, chunk: int | None) -> list[dict[str, torch.Tensor]]:
        """Padded tensors per chunk, so each chunk is padded to its own longest sequence: the batch's ready
        features where it carries them (the trainer tokenises the set once), else tokenised here."""
        n = len(batch.questions) if side == "query" else len(batch.texts)
        size = chunk or n
        ready = batch.query_features if side == "query" else batch.passage_features
        device = self.accelerator.device
        out = []
        for i in range(0, n, size):
            if ready is not None:
                enc = self.bi.pad(ready[i:i + size])
            elif side == "query":
                enc = self.bi.tokenize_queries(batch.questions[i:i + size])
            else:
                enc = self.bi.tokenize_passages(batch.titles[i:i + size], batch.texts[i:i + size])
            out.append({k: v.to(device) for k, v in enc.items()})
        return out

    def inputs(self, batch: Batch) -> StepInputs:
        """A :class:`Batch` laid out as the step runs it (chunks, length buckets or one tensor per side), on the
        device: what the trainer's loader builds in its workers, made here for a batch given directly."""
        if self.chunk_size or not self.length_bucket_size:
            queries = self._tokenized("query", batch, self.chunk_size)
            passages = self._tokenized("passage", batch, self.chunk_size)
            return StepInputs(queries, passages, examples=len(batch.questions),
                              missing_hard_negatives=batch.missing_hard_negatives)
        (queries,) = self._tokenized("query", batch, None)
        features = batch.passage_features or self.bi.passage_features(batch.titles, batch.texts)
        passages, order = length_buckets(self.bi.pad, features, self.length_bucket_size)
        device = self.accelerator.device
        return StepInputs([queries], [{k: v.to(device) for k, v in t.items()} for t in passages], order.to(device),
                          examples=len(batch.questions), missing_hard_negatives=batch.missing_hard_negatives)

    def _loss_on(self, q_local: torch.Tensor, p_local: torch.Tensor, inputs: StepInputs) -> torch.Tensor:
        q_all, q_sizes = gather_with_grad(q_local, self.accelerator, inputs.query_sizes)
        p_all, p_sizes = gather_with_grad(p_local, self.accelerator, inputs.passage_sizes)
        return contrastive_loss(q_all, p_all, q_sizes, p_sizes, self.bi.train_scores)

    def backward(self, batch: Batch) -> float:
        """Accumulate d(global loss)/d(params) into ``.grad`` of this process's parameters; return the loss."""
        return self.backward_inputs(self.inputs(batch)).item()

    def backward_inputs(self, inputs: StepInputs) -> torch.Tensor:
        """As :meth:`backward` on ready (device) inputs; the loss stays on the device (detached): reading it is a
        host sync, which the trainer does at its log steps only."""
        with self.accelerator.no_sync(self.module):
            if self.chunk_size is None:
                return self._plain(inputs)
            return self._cached(inputs)

    def _arm(self) -> None:
        if self.reducer is not None:
            self.reducer.arm()

    def _plain(self, inputs: StepInputs) -> torch.Tensor:
        (q_tok,) = inputs.queries
        loss = self._loss_on(self.module("query", q_tok), self._passages_with_graph(inputs), inputs)
        self._arm()
        self.accelerator.backward(loss)
        return loss.detach()

    def _passages_with_graph(self, inputs: StepInputs) -> torch.Tensor:
        """All passage vectors of the batch, in batch order, with their graph.

        With ``length_bucket_size`` the passages go through the encoder in buckets of similar length, each padded
        only to its own longest: a random batch of ~100-piece passages otherwise pads to its longest (~256), and on
        a CPU the padding is most of the compute. Padding is masked, so the vectors (and the loss) are the same.
        """
        if inputs.passage_order is None:
            (p_tok,) = inputs.passages
            return self.module("passage", p_tok)
        parts = [self.module("passage", tok) for tok in inputs.passages]
        return torch.cat(parts).index_select(0, inputs.passage_order)

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

    def _cached(self, inputs: StepInputs) -> torch.Tensor:
        sides = ("query", "passage")
        chunks = {"query": inputs.queries, "passage": inputs.passages}
        encoded = {s: self._encode_without_graph(s, chunks[s]) for s in sides}
        loss = self._loss_on(encoded["query"][0], encoded["passage"][0], inputs)  # step 2: d loss / d representation
        self.accelerator.backward(loss)
        last = (sides[-1], len(chunks[sides[-1]]) - 1)
        for s in sides:                                                    # step 3: re-encode, same dropout
            rep_leaf, states = encoded[s]
            grads = rep_leaf.grad.split([len(tok["input_ids"]) for tok in chunks[s]])
            for i, (tok, state, grad) in enumerate(zip(chunks[s], states, grads)):
                state.restore()
                rep = self.module(s, tok)
                if (s, i) == last:
                    self._arm()
                rep.backward(gradient=grad.to(rep.dtype))
        return loss.detach()


class GradientReducer:
    """Sums every process's parameter gradients (each holds its share of the global loss' gradient) while the step's
    last backward pass is still running: DDP's bucketing, done here because the step runs under ``no_sync``.

    Why not DDP's own reducer: it averages instead of summing, expects every parameter to get a gradient in each
    synchronised backward (the unused BERT pooler, and GradCache's many backward passes per step, break that), and
    cannot tell which of GradCache's passes is the last. Here parameters are grouped into buckets of about
    ``bucket_bytes`` in reverse registration order (the order their gradients become final, as DDP does); the step
    :meth:`arm` s the reducer right before its last backward pass; a parameter's post-accumulate hook marks it done,
    and each bucket whose parameters are all done is launched as an asynchronous all-reduce, strictly in bucket order,
    so every process issues the same collectives in the same order. :meth:`finish` launches the rest (parameters
    that got no gradient in the last pass: GradCache's query encoder, unused ones), waits, and writes the sums back.
    The sums are the ones :func:`all_reduce_gradients` computes (``tests/test_parallel.py``, ``tests/test_train.py``).
    """

    def __init__(self, parameters: Sequence[torch.nn.Parameter], accelerator, bucket_bytes: int = 25 << 20):
        self.world = accelerator.num_processes
        self.params = list(parameters)
        self.buckets: list[list[torch.nn.Parameter]] = []
        self.handles = []
        self.armed = False
        if self.world == 1:
            return
        size = 0
        for param in reversed(self.params):
            nbytes = param.numel() * param.element_size()
            if not self.buckets or size + nbytes > bucket_bytes:
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(param)
            size += nbytes
        self.bucket_of = {id(p): b for b, bucket in enumerate(self.buckets) for p in bucket}
        self.handles = [p.register_post_accumulate_grad_hook(self._done) for p in self.params]
        self._reset()

    def _reset(self) -> None:
        self.waiting = [len(bucket) for bucket in self.buckets]
        self.next = 0
        self.launched: list = []

    def arm(self) -> None:
        """The next backward pass is the step's last: launch buckets as they complete."""
        if self.world > 1:
            self._reset()
            self.armed = True

    def _done(self, param: torch.nn.Parameter) -> None:
        if not self.armed:
            return
        self.waiting[self.bucket_of[id(param)]] -= 1
        while self.next < len(self.buckets) and self.waiting[self.next] == 0:
            self._launch(self.next)

    def _launch(self, b: int) -> None:
        grads = [p.grad for p in self.buckets[b] if p.grad is not None]
        self.next = b + 1
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        work = torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM, async_op=True)
        self.launched.append((work, flat, grads))

    def finish(self) -> None:
        """After the step's backward passes: launch what is left (in bucket order), wait, write the sums back."""
        if self.world == 1:
            return
        self.armed = False
        while self.next < len(self.buckets):
            self._launch(self.next)
        for work, flat, grads in self.launched:
            work.wait()
            offset = 0
            for g in grads:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()
        self._reset()

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


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
