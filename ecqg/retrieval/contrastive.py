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


def contrastive_loss(q_all: torch.Tensor, p_all: torch.Tensor, q_sizes: list[int], p_sizes: list[int],
                     score: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Mean NLL of each question's own positive among all passages; process r's question i -> r's passage i.
    ``score``: the retriever's ``train_scores`` (default: the dot product of single vectors)."""
    starts = np.cumsum([0] + p_sizes[:-1])
    targets = torch.cat([torch.arange(nq) + int(start) for nq, start in zip(q_sizes, starts)]).to(q_all.device)
    scores = score(q_all, p_all) if score is not None else q_all @ p_all.T
    if scores.dtype in (torch.float16, torch.bfloat16):   # mixed precision: softmax in float32
        scores = scores.float()
    return F.cross_entropy(scores, targets)


class ContrastiveStep:
    """Computes the parameter gradients of one step (no optimizer update), plainly or with gradient caching.

    Why a class: the trainer and the GradCache equivalence test must run the very same code.
    """

    def __init__(self, bi_encoder: Retriever, accelerator, module: torch.nn.Module | None = None,
                 chunk_size: int | None = None, length_bucket_size: int | None = None):
        self.bi, self.accelerator, self.chunk_size = bi_encoder, accelerator, chunk_size
        self.length_bucket_size = length_bucket_size
        self.module = module if module is not None else EncoderModule(bi_encoder)

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

    def _loss_on(self, q_local: torch.Tensor, p_local: torch.Tensor) -> torch.Tensor:
        q_all, q_sizes = gather_with_grad(q_local, self.accelerator)
        p_all, p_sizes = gather_with_grad(p_local, self.accelerator)
        return contrastive_loss(q_all, p_all, q_sizes, p_sizes, self.bi.train_scores)

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
        features = batch.passage_features or self.bi.passage_features(batch.titles, batch.texts)
        order = np.argsort([len(f["input_ids"]) for f in features], kind="stable")
        device = self.accelerator.device
        parts = []
        for start in range(0, len(order), self.length_bucket_size):
            tok = self.bi.pad([features[i] for i in order[start:start + self.length_bucket_size]])
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
