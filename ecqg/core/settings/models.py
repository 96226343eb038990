"""The params blocks of the trained models: the dense retriever (``dpr``), the question generators (``qg``), the
reader (``mrc``) and TempQG (``tempqg``). A DPR training block's settings are :class:`TrainConfig` fields with
TrainConfig's rules; a Hugging Face Trainer block's (``ecqg.runtime.hf_training``) are :class:`HfTrain`'s."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ecqg.core.device import MIXED_PRECISION
from ecqg.core.settings.checks import (AUTOCAST_EXPECTED, NUMBER, OPTIONAL_INT, autocast, nonneg, optional_positive,
                                       positive)
from ecqg.core.settings.retrievers import RETRIEVERS
from ecqg.core.settings.schema import Block, nested, setting, trained
from ecqg.core.train_config import TrainConfig
from ecqg.core.variants import ALL as VARIANTS_ALL
from ecqg.core.variants import TABLE as VARIANT_TABLE
from ecqg.core.variants import paper_variants

_MODEL_REF = "a model reference (bundled:minilm, a directory or a hub id)"
_OPTIONAL_COUNT = "null or an integer > 0"
_TRAIN_CONFIG_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


@dataclass(frozen=True)
class HfTrain(Block):
    """A Hugging Face Trainer block: the generators', the reader's, TempQG's generator's."""

    lr: float = setting((float,), positive, "a number > 0")
    epochs: int = setting((int,), positive, "an integer > 0")
    batch_size: int = setting((int,), lambda v: v >= 2, "an integer >= 2")
    warmup_ratio: float = setting(NUMBER, lambda v: 0 <= v < 1, "a number in [0, 1)")
    weight_decay: float = setting(NUMBER, nonneg, "a number >= 0")
    max_steps: int | None = setting(OPTIONAL_INT, optional_positive, "null or an integer > 0")
    checkpoint_every: int = setting((int,), positive, "an integer > 0")
    mixed_precision: str = setting((str,), lambda v: v in MIXED_PRECISION, f"one of {MIXED_PRECISION}")


@dataclass(frozen=True)
class QgTrain(HfTrain):
    max_examples: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)
    heldout: int = setting((int,), positive, "an integer > 0")


@dataclass(frozen=True)
class MrcTrain(HfTrain):
    max_examples: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)


@dataclass(frozen=True)
class DprTrain(Block):
    """The TrainConfig fields a DPR training block sets (the rest of a block selects data)."""

    lr: float = trained("lr")
    epochs: int = trained("epochs")
    batch_size: int = trained("batch_size")
    hard_negatives: int = trained("hard_negatives")
    warmup_ratio: float = trained("warmup_ratio")
    weight_decay: float = trained("weight_decay")
    max_steps: int | None = trained("max_steps")
    grad_cache_chunk_size: int | str | None = trained("grad_cache_chunk_size")
    length_bucket_size: int | None = trained("length_bucket_size")
    mixed_precision: str = trained("mixed_precision")
    checkpoint_every: int | None = trained("checkpoint_every")
    eval_every: int | None = trained("eval_every")

    def train_config(self, seed: int, timeout_minutes: int) -> TrainConfig:
        """The trainer's config of this block for one run (``seed``; ``collective_timeout_minutes``)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name in _TRAIN_CONFIG_FIELDS}
        return TrainConfig.from_dict({**values, "seed": seed, "dist_timeout_minutes": timeout_minutes})


@dataclass(frozen=True)
class DprFinetune(DprTrain):
    max_examples: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)
    heldout: int = setting((int,), positive, "an integer > 0")
    nq_dev_distant: bool = setting((bool,), None, "true or false")
    patience: int | None = trained("patience")
    select_metric: str = trained("select_metric")
    snapshot_steps: list = trained("snapshot_steps")
    validation: str = setting((str,), lambda v: v in ("pool", "corpus"), "pool or corpus")
    curve_runs: bool = setting((bool,), None, "true or false")
    curve_probe_passages: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)


@dataclass(frozen=True)
class DprPretrain(DprTrain):
    heldout: int = setting((int,), positive, "an integer > 0")


@dataclass(frozen=True)
class Encode(Block):
    batch_size: int = setting((int,), positive, "an integer > 0")
    autocast: str | None = setting((str, type(None)), autocast, AUTOCAST_EXPECTED)
    dtype: str = setting((str,), lambda v: v in ("float32", "float16"), "float32 or float16")


@dataclass(frozen=True)
class Index(Block):
    kind: str = setting((str,), lambda v: v in ("flat", "hnsw", "ivfpq"), "flat, hnsw or ivfpq")
    params: dict = setting((dict,), None, "a mapping of FAISS settings (may be empty)")


_VARIANT_NAMES = ", ".join(x.name for x in VARIANT_TABLE)


def _seed_list(v) -> bool:
    return bool(v) and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in v) and \
        len(set(v)) == len(v)


@dataclass(frozen=True)
class Dpr(Block):
    model: str = setting((str,), lambda v: v in RETRIEVERS, f"a retriever kind, one of {sorted(RETRIEVERS)}")
    base_model: str = setting((str,), bool, _MODEL_REF)
    shared_encoders: bool = setting((bool,), None, "true or false")
    pooling: str = setting((str,), lambda v: v in ("cls", "mean"), "cls or mean")
    seeds: list = setting((list,), _seed_list,
                          "a non-empty list of distinct integers >= 0 (training seeds; the first feeds stages 01, 03)")
    variants: str | list = setting((str, list), lambda v: v == VARIANTS_ALL or (
        len(set(v)) == len(v) and set(v) <= {x.name for x in VARIANT_TABLE} and set(paper_variants()) <= set(v)),
        f"'{VARIANTS_ALL}' or a list of distinct dense variants to train ({_VARIANT_NAMES}) "
        f"that has the paper's {', '.join(paper_variants())}")
    related_seeds: list = setting((list,), lambda v: bool(v) and all(isinstance(s, int) and not isinstance(s, bool)
                                                                     for s in v),
                                  "a non-empty list of integers (the related system's training seeds, a leading "
                                  "part of dpr.seeds)")
    query_max_length: int = setting((int,), lambda v: 8 <= v <= 512, "an integer in [8, 512]")
    passage_max_length: int = setting((int,), lambda v: 16 <= v <= 512, "an integer in [16, 512]")
    finetune: DprFinetune = nested(DprFinetune)
    pretrain: DprPretrain = nested(DprPretrain)
    encode: Encode = nested(Encode)
    index: Index = nested(Index)


@dataclass(frozen=True)
class Generate(Block):
    top_k: int = setting((int,), nonneg, "an integer >= 0 (0 = no top-k cut)")
    top_p: float = setting(NUMBER, lambda v: 0 < v <= 1, "a number in (0, 1]")
    samples: int = setting((int,), positive, "an integer > 0")
    batch_size: int = setting((int,), positive, "an integer > 0")
    max_new_tokens: int = setting((int,), positive, "an integer > 0")
    autocast: str | None = setting((str, type(None)), autocast, AUTOCAST_EXPECTED)
    uncon_passages: int = setting((int,), positive, "an integer > 0")
    per_replicate: bool = setting((bool,), None, "true (a set per seed of dpr.seeds) or false (one set for all)")


@dataclass(frozen=True)
class Qg(Block):
    model: str = setting((str,), bool, _MODEL_REF)
    architecture: str = setting((str,), lambda v: v in ("prefix_lm", "bert2bert", "cloze"),
                                "prefix_lm, bert2bert or cloze (rule-based: no qg.model, no training)")
    con_init: str = setting((str,), lambda v: v in ("model", "uncon"), "model or uncon")
    dropout: float | None = setting((int, float, type(None)), lambda v: v is None or 0 <= v < 1,
                                    "null or a number in [0, 1)")
    entity_marking: str = setting((str,), lambda v: v in ("markers", "segment"), "markers or segment")
    entity_placeholder: str | None = setting((str, type(None)), lambda v: v is None or (0 < len(v) <= 16
                                                                                     and " " not in v),
                                             "null or a token without spaces, e.g. [ENT]")
    source_max_length: int = setting((int,), lambda v: 16 <= v <= 1024, "an integer in [16, 1024]")
    window_words: int | None = setting(OPTIONAL_INT, lambda v: v is None or v >= 8, "null or an integer >= 8")
    target_max_length: int = setting((int,), lambda v: 8 <= v <= 256, "an integer in [8, 256]")
    train: QgTrain = nested(QgTrain)
    generate: Generate = nested(Generate)


@dataclass(frozen=True)
class Mrc(Block):
    model: str = setting((str,), bool, _MODEL_REF)
    train_model: bool = setting((bool,), None, "true or false")
    max_length: int = setting((int,), lambda v: 64 <= v <= 1024, "an integer in [64, 1024]")
    stride: int = setting((int,), positive, "an integer > 0")
    answer_windows_only: bool = setting((bool,), None, "true or false")
    max_answer_length: int = setting((int,), positive, "an integer > 0")
    null_threshold: float = setting(NUMBER, None, "a number")
    heldout_fraction: float = setting((float,), lambda v: 0 < v < 1, "a number in (0, 1)")
    eval_examples: int = setting((int,), positive, "an integer > 0")
    predict_batch_size: int = setting((int,), positive,
                                      "an integer > 0 (reader windows per forward pass, stage 03)")
    autocast: str | None = setting((str, type(None)), autocast, AUTOCAST_EXPECTED)
    train: MrcTrain = nested(MrcTrain)


@dataclass(frozen=True)
class SelectorTrain(Block):
    """TempQG's template selector is a Poly-DPR: its training settings are TrainConfig's."""

    lr: float = trained("lr")
    epochs: int = trained("epochs")
    batch_size: int = trained("batch_size")
    warmup_ratio: float = trained("warmup_ratio")
    weight_decay: float = trained("weight_decay")
    max_steps: int | None = trained("max_steps")
    checkpoint_every: int | None = trained("checkpoint_every")
    mixed_precision: str = trained("mixed_precision")


@dataclass(frozen=True)
class Selector(Block):
    heldout: int = setting((int,), positive, "an integer > 0")
    query_max_length: int = setting((int,), positive, "an integer > 0 (pieces of the passage the selector reads)")
    train: SelectorTrain = nested(SelectorTrain)


@dataclass(frozen=True)
class TempQG(Block):
    min_df: int = setting((int,), positive, "an integer > 0 (corpus passages an entity must be in to stay)")
    threshold: float = setting(NUMBER, lambda v: 0 < v <= 1, "a number in (0, 1]")
    representative: str = setting((str,), lambda v: v in ("shortest", "second_shortest"),
                                  "shortest or second_shortest")
    min_cluster_size: int = setting((int,), positive, "an integer > 0")
    samples: int = setting((int,), positive, "an integer > 0")
    stage1: str | None = setting((str, type(None)), lambda v: v in (None, "roundtrip", "answer_in_passage"),
                                 "null (filtering.stage1, as stage 03), roundtrip or answer_in_passage")
    selector: Selector = nested(Selector)
    train: HfTrain = nested(HfTrain)
