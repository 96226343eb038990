"""Whether a training step's per-device batch fits the device without GradCache (``grad_cache_chunk_size: auto``), by
an estimate of its peak memory, and the chunk to use when it does not.

Why an estimate, not a trial: a trial step that runs out of memory leaves the CUDA allocator fragmented and, under
torchrun, one rank's failure kills the job; the estimate is decided the same way on every rank from the same numbers.

The estimate (bytes) is ``static + per_token x tokens``:

* ``static``: 18 bytes per trainable parameter (float32 weights, gradients and AdamW's two moments, and the 16-bit
  copies autocast keeps of the weights);
* ``per_token``: per encoder layer ``72 x hidden + 6 x heads x length`` bytes (the activations a transformer layer
  keeps for its backward pass, Korthikanti et al. 2022's ``34 h + 5 a s`` for 16-bit activations, doubled for the
  float32 copies autocast keeps, rounded up);
* ``tokens``: what one graph holds: without GradCache every query and passage of the per-device batch, each padded
  to the longest text of the training set (a batch never pads further); with GradCache the larger side's chunk.

Checked against the committed H100 gpu_check run (``bench/results/``), with GradCache and without, the estimate
lies above the measured peak: on the safe side. A device is taken to hold ``FILL`` of its memory.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

STATIC_BYTES_PER_PARAMETER = 18
HIDDEN_BYTES = 72          # per hidden unit, per layer, per token
ATTENTION_BYTES = 6        # per head x sequence position, per layer, per token
FILL = 0.9                 # of the device's memory a step may plan to use (the allocator's slack, NCCL buffers)


@dataclass(frozen=True)
class Shape:
    """A per-device step: rows per side and the longest text per side (pieces)."""

    queries: int
    passages: int
    query_length: int
    passage_length: int


def _encoder(module) -> tuple[int, int, int]:
    config = module.config
    return int(config.num_hidden_layers), int(config.hidden_size), int(config.num_attention_heads)


def per_token_bytes(encoder, length: int) -> int:
    layers, hidden, heads = _encoder(encoder)
    return layers * (HIDDEN_BYTES * hidden + ATTENTION_BYTES * heads * length)


def static_bytes(model) -> int:
    return STATIC_BYTES_PER_PARAMETER * sum(p.numel() for p in model.parameters() if p.requires_grad)


def step_bytes(model, shape: Shape, chunk: int | None = None) -> int:
    """The estimated peak of one step of ``model`` (a :class:`~ecqg.retrieval.retriever.Retriever`) at ``shape``,
    without GradCache (``chunk`` None) or with chunks of ``chunk`` rows per side."""
    queries = shape.queries if chunk is None else min(chunk, shape.queries)
    passages = shape.passages if chunk is None else min(chunk, shape.passages)
    q = queries * shape.query_length * per_token_bytes(model.query_encoder, shape.query_length)
    p = passages * shape.passage_length * per_token_bytes(model.passage_encoder, shape.passage_length)
    graph = q + p if chunk is None else max(q, p)
    return static_bytes(model) + graph


def resolve_chunk(model, shape: Shape, memory_bytes: int | None) -> tuple[int | None, str]:
    """``(grad_cache_chunk_size, why)`` for ``auto``: None when the whole per-device batch fits ``FILL`` of
    ``memory_bytes`` (or there is no device memory to plan for: a CPU), else the largest power-of-two chunk that
    fits (at least 1)."""
    if memory_bytes is None:
        return None, "no device memory to plan for (CPU): one full-batch graph"
    budget = FILL * memory_bytes
    whole = step_bytes(model, shape)
    if whole <= budget:
        return None, (f"the per-device batch ({shape.queries} questions, {shape.passages} passages) needs ~"
                      f"{whole / 1e9:.1f} GB of the device's {memory_bytes / 1e9:.1f} GB: no GradCache")
    chunk = 1
    while chunk * 2 < max(shape.queries, shape.passages) and step_bytes(model, shape, chunk * 2) <= budget:
        chunk *= 2
    return chunk, (f"the per-device batch ({shape.queries} questions, {shape.passages} passages) would need ~"
                   f"{whole / 1e9:.1f} GB of the device's {memory_bytes / 1e9:.1f} GB: GradCache in chunks of {chunk} "
                   f"(~{step_bytes(model, shape, chunk) / 1e9:.1f} GB)")


def device_memory(device) -> int | None:
    """Total memory of a CUDA device in bytes; None elsewhere."""
    # torch only to read the device's memory: the planning above is torch-free
    import torch

    if getattr(device, "type", str(device)) != "cuda" or not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(device).total_memory)
