"""The settings of one DPR training run with their rules, declared once: the trainer builds its config from them and
the typed settings of the DPR training blocks (``ecqg.core.settings``: ``dpr.finetune``, ``dpr.pretrain``,
``tempqg.selector.train``), which params validation reads, declare their fields with the same rules.

Why here and not in :mod:`ecqg.retrieval.train`: params validation runs before any stage and must not import torch;
and a rule written twice (it was: patience had one rule in ``config.py`` and another in the trainer) drifts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ecqg.core.device import MIXED_PRECISION

RULE = "rule"           # field metadata: (allowed types, check or None, what a valid value looks like)
AUTO = "auto"           # grad_cache_chunk_size: decided at run time from the device's memory
SELECT_METRICS = ("val_top1", "val_top5", "val_top20")
Rule = tuple[tuple[type, ...], Callable[[Any], bool] | None, str]


def _rule(default, types: tuple[type, ...], check: Callable[[Any], bool] | None, expected: str):
    return field(default=default, metadata={RULE: (types, check, expected)})


def _positive(v) -> bool:
    return v > 0


def _optional_positive(v) -> bool:
    return v is None or v > 0


_NUMBER = (int, float)
_OPTIONAL_INT = (int, type(None))


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one training run (defaults: DPR's NQ fine-tuning, paper appendix for lr / batch)."""

    lr: float = _rule(2e-5, _NUMBER, _positive, "a number > 0")
    epochs: int = _rule(40, (int,), _positive, "an integer > 0")
    batch_size: int = _rule(128, (int,), lambda v: v >= 2, "an integer >= 2 (global: over all processes together)")
    hard_negatives: int = _rule(1, (int,), lambda v: v >= 0, "an integer >= 0 (BM25 hard negatives per question)")
    warmup_steps: int | None = _rule(None, _OPTIONAL_INT, lambda v: v is None or v >= 0,
                                     "null or an integer >= 0 (wins over warmup_ratio)")
    warmup_ratio: float = _rule(0.1, _NUMBER, lambda v: 0 <= v < 1, "a number in [0, 1)")
    weight_decay: float = _rule(0.0, _NUMBER, lambda v: v >= 0, "a number >= 0 (not on biases and LayerNorm)")
    adam_eps: float = _rule(1e-8, _NUMBER, _positive, "a number > 0")
    max_grad_norm: float | None = _rule(2.0, (int, float, type(None)), _optional_positive,
                                        "null (no clipping) or a number > 0")
    seed: int = _rule(0, (int,), lambda v: v >= 0, "an integer >= 0")
    grad_cache_chunk_size: int | str | None = _rule(
        None, (int, str, type(None)), lambda v: v is None or v == AUTO or (isinstance(v, int) and v > 0),
        "null (one full-batch graph), an integer > 0 (GradCache chunks), or auto (GradCache only when the per-device "
        "batch would not fit the device's memory by ecqg.retrieval.train_memory's estimate; then the largest "
        "power-of-two chunk that fits)")
    length_bucket_size: int | None = _rule(None, _OPTIONAL_INT, _optional_positive,
                                           "null (one padded batch) or an integer > 0 (length-sorted buckets)")
    checkpoint_every: int | None = _rule(1000, _OPTIONAL_INT, _optional_positive,
                                         "null (no intermediate checkpoints) or an integer > 0")
    keep_checkpoints: int = _rule(2, (int,), _positive, "an integer > 0")
    eval_every: int | None = _rule(None, _OPTIONAL_INT, _optional_positive,
                                   "null (validate at the end only) or an integer > 0")
    eval_batch_size: int = _rule(64, (int,), _positive, "an integer > 0")
    max_steps: int | None = _rule(None, _OPTIONAL_INT, _optional_positive,
                                  "null or an integer > 0 (caps epochs x steps per epoch)")
    drop_last: bool = _rule(True, (bool,), None, "true or false")
    mixed_precision: str = _rule("no", (str,), lambda v: v in MIXED_PRECISION, f"one of {MIXED_PRECISION}")
    log_every: int = _rule(50, (int,), _positive, "an integer > 0 (also how often the step losses are read back from "
                                                  "the device: the one host sync of a step)")
    loader_workers: int | None = _rule(None, _OPTIONAL_INT, lambda v: v is None or v >= 0,
                                       "null (auto: on a GPU up to 4 DataLoader workers per process, on a CPU none) "
                                       "or an integer >= 0 (0: batches built in the training process)")
    patience: int | None = _rule(None, _OPTIONAL_INT, lambda v: v is None or v >= 1,
                                 "null (every epoch) or an integer >= 1 (epoch ends without a better select_metric)")
    select_metric: str = _rule("val_top20", (str,), lambda v: v in SELECT_METRICS, f"one of {SELECT_METRICS}")
    dist_timeout_minutes: int = _rule(60, (int,), _positive,
                                      "an integer > 0 (how long a process waits at a collective before the job fails: "
                                      "torch's default is 10)")
    snapshot_steps: tuple[int, ...] = _rule((), (list, tuple), lambda v: all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in v), "a list of steps >= 1 (may be empty)")

    def __post_init__(self):
        for f in dataclasses.fields(self):
            problem = check(f.name, getattr(self, f.name))
            if problem:
                raise ValueError(f"TrainConfig.{f.name} is {getattr(self, f.name)!r}; expected {problem}")
        object.__setattr__(self, "snapshot_steps", tuple(self.snapshot_steps or ()))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "TrainConfig":
        """Build from a params mapping; unknown keys are an error (a typo must not be silently ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig keys {unknown}; known: {sorted(known)}")
        return cls(**values)


def rule(name: str) -> Rule:
    return next(f.metadata[RULE] for f in dataclasses.fields(TrainConfig) if f.name == name)


def check(name: str, value) -> str | None:
    """What a valid ``name`` looks like when ``value`` is not one (None when it is)."""
    types, ok, expected = rule(name)
    if isinstance(value, bool) and bool not in types:
        return expected
    if not isinstance(value, types) or (ok is not None and not ok(value)):
        return expected
    return None
