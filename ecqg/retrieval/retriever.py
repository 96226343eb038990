"""The dense-retriever interface every part of the pipeline goes through, and the registry that names retrievers.

Why (after Tevatron's ``EncoderModel``, whose subclasses own ``encode_*`` and the similarity): training, corpus
encoding, FAISS search, the attention study and the probes all need the same few things from a retriever, so a new
retriever is one module with one class and one registry entry, and nothing else changes.

A retriever

* tokenises (``tokenize_queries`` / ``tokenize_passages``, padded tensors; ``query_features`` /
  ``passage_features``, unpadded, for length-sorted batches): passages as ``[CLS] title [SEP] text [SEP]``, only the
  text cut, as DPR;
* encodes: ``encode_queries(batch) -> (B, d)``; ``encode_passages(batch) -> (B, d)``, or ``(B, K, d)`` when it
  gives each passage ``K = vectors_per_passage`` vectors;
* scores: ``train_scores(q, p)`` is the score the training loss uses, ``scores(q, p)`` the retrieval score
  (``Bq x Bp``; a multi-vector retriever's is ``max_k q . v_k``, what a search over all ``K x N`` vectors gives),
  ``pair_scores(q, p)`` the retrieval score of aligned pairs (probes);
* exposes ``passage_encoder`` (a transformers model: the attention analyses read its [CLS] attention), ``tokenizer``
  and ``config`` (``base_model``, ``query_max_length``, ``passage_max_length``);
* saves and loads itself, in the base class: each encoder an ordinary transformers checkpoint (safetensors) under
  ``query_encoder/`` and ``passage_encoder/`` (``AutoModel.from_pretrained`` loads either one without this package),
  the tokenizer once at the top level, and ``retriever.json``: the ``kind`` that names the class and its settings
  (``config_class``, a frozen dataclass). A subclass adds only its own state (``save_extra`` / ``load_extra``:
  Poly-DPR's code vectors) and its encoding.

The search side maps vectors back to passages (``ecqg.retrieval.dense``): with ``K`` vectors per passage the index
holds ``K x N`` rows and each passage keeps its best.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np
import torch

from ecqg.core.io import atomic_path
from ecqg.core.registry import Registry
from ecqg.core.settings.retrievers import RETRIEVERS
from ecqg.retrieval.tokens import passage_features
from ecqg.runtime.models import from_pretrained

CONFIG_FILE = "retriever.json"
LEGACY_CONFIG_FILE = "bi_encoder.json"      # models saved before the registry: always a bi-encoder
# Registry name -> the module that defines (and registers) it; imported on first use, so naming a retriever in
# params costs nothing until it is built. A new retriever: one module with one @register class, one entry there
# (ecqg.core.settings.retrievers.KINDS, with its settings block if it has one).
BUILTIN = RETRIEVERS
REGISTRY = Registry("retriever", BUILTIN)
register = REGISTRY.register
retriever_class = REGISTRY.get


def saved_settings(directory: str | Path) -> dict[str, Any]:
    """``retriever.json`` of a saved retriever, ``kind`` included (an older ``bi_encoder.json`` is a bi-encoder)."""
    directory = Path(directory)
    if (directory / CONFIG_FILE).is_file():
        return json.loads((directory / CONFIG_FILE).read_text(encoding="utf-8"))
    if (directory / LEGACY_CONFIG_FILE).is_file():
        return {**json.loads((directory / LEGACY_CONFIG_FILE).read_text(encoding="utf-8")), "kind": "biencoder"}
    raise FileNotFoundError(f"{directory}: not a saved retriever (no {CONFIG_FILE})")


def saved_kind(directory: str | Path) -> str:
    """The ``kind`` of a saved retriever."""
    return saved_settings(directory)["kind"]


def is_saved_retriever(directory: str | Path) -> bool:
    directory = Path(directory)
    return (directory / CONFIG_FILE).is_file() or (directory / LEGACY_CONFIG_FILE).is_file()


def load_retriever(directory: str | Path, **model_kwargs) -> "Retriever":
    """Load any saved retriever (``model_kwargs``: e.g. ``attn_implementation="eager"`` to read attentions)."""
    return retriever_class(saved_kind(directory)).load(directory, **model_kwargs)


def build_retriever(kind: str, base_model: str, **settings: Any) -> "Retriever":
    """A new retriever of ``kind`` initialised from ``base_model`` (hub id, directory or ``bundled:minilm``)."""
    return retriever_class(kind).from_base(base_model, **settings)


# Model types whose ``AutoModel`` takes ``add_pooling_layer``: built without the pooler from the start (no "newly
# initialised" weights reported on every load). Any other encoder that has one loses it in :func:`without_pooler`.
_POOLER_FLAG = frozenset({"bert", "roberta", "xlm-roberta", "camembert", "ernie"})


def _no_pooler_kwargs(config) -> dict[str, Any]:
    return {"add_pooling_layer": False} if getattr(config, "model_type", None) in _POOLER_FLAG else {}


def without_pooler(encoder):
    """The encoder with BERT's pooler (a dense layer over [CLS] for next-sentence prediction) removed. Why: a
    retriever pools the last hidden states itself, so the pooler never gets a gradient; its parameters, registered
    last, fill the first gradient bucket, which then never completes, so no all-reduce could start during the
    backward pass (``GradientReducer``; tests/test_train.py counts the buckets launched). Saved checkpoints have
    no pooler; a checkpoint saved with one loads without it."""
    if getattr(encoder, "pooler", None) is not None:
        encoder.pooler = None
    return encoder


class Retriever(torch.nn.Module):
    """Base class: holds the two encoders, the tokenizer and the settings, builds them from one checkpoint, saves and
    loads them. A subclass sets ``kind`` and ``config_class`` and implements the two encoders; it overrides
    ``save_extra`` / ``load_extra`` only for state of its own."""

    kind: ClassVar[str] = ""
    # A frozen dataclass whose first field is ``base_model`` and which has ``shared``, ``query_max_length`` and
    # ``passage_max_length``; every field is saved in retriever.json.
    config_class: ClassVar[type]
    # Settings of a new build that differ from the dataclass defaults, which stay what older checkpoints imply.
    new_defaults: ClassVar[dict[str, Any]] = {}
    # Settings of other retrievers that ``from_base`` accepts and ignores (params pass one set to every kind).
    ignored_settings: ClassVar[tuple[str, ...]] = ()
    query_encoder: torch.nn.Module
    passage_encoder: torch.nn.Module

    def __init__(self, query_encoder, passage_encoder, tokenizer, config):
        super().__init__()
        self.query_encoder = without_pooler(query_encoder)
        self.passage_encoder = query_encoder if config.shared else without_pooler(passage_encoder)
        self.tokenizer = tokenizer
        self.config = config

    # --- build, save, load ------------------------------------------------------------------------------------------
    @classmethod
    def from_base(cls, ref: str, **settings: Any) -> "Retriever":
        """Both encoders from one checkpoint (``ref``: hub id, directory or ``bundled:minilm``); ``settings`` are the
        config's fields, anything else goes to ``from_pretrained`` (e.g. ``attn_implementation="eager"``)."""
        # transformers loads when an encoder is built or loaded, not for the --help of every stage importing this
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        fields = {f.name for f in dataclasses.fields(cls.config_class)} - {"base_model"}
        chosen = {**cls.new_defaults, **{k: v for k, v in settings.items() if k in fields}}
        model_kwargs = {k: v for k, v in settings.items() if k not in fields and k not in cls.ignored_settings}
        config = cls.config_class(ref, **chosen)
        tokenizer = from_pretrained(AutoTokenizer, ref)
        model_kwargs = {**_no_pooler_kwargs(from_pretrained(AutoConfig, ref)), **model_kwargs}
        query = from_pretrained(AutoModel, ref, **model_kwargs)
        passage = query if config.shared else from_pretrained(AutoModel, ref, **model_kwargs)
        return cls(query, passage, tokenizer, config)

    def save(self, directory: str | Path) -> Path:
        """Write the encoders (safetensors), the tokenizer, the subclass's own state and the settings atomically."""
        with atomic_path(directory) as tmp:
            tmp.mkdir(parents=True)
            self.query_encoder.save_pretrained(tmp / "query_encoder")
            if not self.config.shared:
                self.passage_encoder.save_pretrained(tmp / "passage_encoder")
            self.tokenizer.save_pretrained(tmp)
            self.save_extra(tmp)
            (tmp / CONFIG_FILE).write_text(json.dumps({"kind": self.kind, **dataclasses.asdict(self.config)},
                                                      indent=2) + "\n", encoding="utf-8")
        return Path(directory)

    @classmethod
    def load(cls, directory: str | Path, **model_kwargs) -> "Retriever":
        """Load what :meth:`save` wrote (``model_kwargs``: e.g. ``attn_implementation="eager"`` to read attentions)."""
        # transformers loads when an encoder is built or loaded
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        directory = Path(directory)
        settings = saved_settings(directory)
        kind = settings.pop("kind")
        if kind != cls.kind:
            raise ValueError(f"{directory}: a saved {kind!r} retriever, not a {cls.kind!r} one")
        config = cls.config_class(**settings)
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model_kwargs = {**_no_pooler_kwargs(AutoConfig.from_pretrained(directory / "query_encoder")), **model_kwargs}
        query = AutoModel.from_pretrained(directory / "query_encoder", **model_kwargs)
        passage = query if config.shared else AutoModel.from_pretrained(directory / "passage_encoder", **model_kwargs)
        return cls(query, passage, tokenizer, config, **cls.load_extra(directory))

    def save_extra(self, directory: Path) -> None:
        """Write state of a subclass's own beside the encoders (nothing here)."""

    @classmethod
    def load_extra(cls, directory: Path) -> dict[str, Any]:
        """Keyword arguments of the subclass's constructor read back from what :meth:`save_extra` wrote."""
        return {}

    # --- what a subclass provides -------------------------------------------------------------------------------
    def encode_queries(self, batch) -> torch.Tensor:
        raise NotImplementedError

    def encode_passages(self, batch) -> torch.Tensor:
        raise NotImplementedError

    # --- shape ---------------------------------------------------------------------------------------------------
    @property
    def vectors_per_passage(self) -> int:
        return 1

    @property
    def dim(self) -> int:
        return int(self.passage_encoder.config.hidden_size)

    # --- tokenisation ----------------------------------------------------------------------------------------------
    def tokenize_queries(self, questions: Sequence[str]):
        return self.tokenizer(list(questions), padding=True, truncation=True,
                              max_length=self.config.query_max_length, return_tensors="pt")

    def tokenize_passages(self, titles: Sequence[str], texts: Sequence[str]):
        """``[CLS] title [SEP] text [SEP]``; only the text is cut when the pair is too long."""
        return self.tokenizer(list(titles), list(texts), padding=True, truncation="only_second",
                              max_length=self.config.passage_max_length, return_tensors="pt")

    def query_features(self, questions: Sequence[str]) -> list[dict[str, list[int]]]:
        """As :meth:`tokenize_queries`, unpadded, one dict per question (``tokenizer.pad`` takes them)."""
        return _features(self.tokenizer(list(questions), truncation=True, max_length=self.config.query_max_length))

    def passage_features(self, titles: Sequence[str], texts: Sequence[str]) -> list[dict[str, list[int]]]:
        """As :meth:`tokenize_passages`, unpadded, one dict per passage."""
        return passage_features(self.tokenizer, titles, texts, self.config.passage_max_length)

    def pad(self, features: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        """Pad unpadded features into tensors, as ``tokenizer.pad`` does (pad id for ``input_ids``, 0 elsewhere, on
        the tokenizer's padding side) but in numpy: ``tokenizer.pad`` on a list of dicts is pure Python per token
        and, on a GPU, was a large part of the host work that kept the accelerator waiting."""
        return pad_features(features, self.tokenizer.pad_token_id or 0, self.tokenizer.padding_side)

    # --- similarity ------------------------------------------------------------------------------------------------
    def scores(self, q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        """Retrieval score of every question against every passage (``Bq x Bp``): the dot product, or for several
        vectors per passage the best of them (what a search over all of them returns)."""
        if p.dim() == 2:
            return q @ p.T
        return torch.einsum("qd,pkd->qpk", q, p).amax(dim=-1)

    def train_scores(self, q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        """The score the training loss uses; the retrieval score unless a retriever trains on another one."""
        return self.scores(q, p)

    def pair_scores(self, q, p):
        """Retrieval score of aligned pairs, question i against passage i (``B``); numpy arrays (the encoders'
        output in ``ecqg.retrieval.dense``) or tensors."""
        if p.ndim == 2:
            return (q * p).sum(-1)
        if isinstance(p, np.ndarray):
            return np.einsum("bd,bkd->bk", q, p).max(axis=-1)
        return torch.einsum("bd,bkd->bk", q, p).amax(dim=-1)


def pad_features(features: list[dict[str, list[int]]], pad_id: int, side: str = "right") -> dict[str, torch.Tensor]:
    """Unpadded features (one dict of int lists per text) -> ``{key: LongTensor (B, longest)}``."""
    width = max(len(f["input_ids"]) for f in features)
    out = {}
    for key in features[0]:
        array = np.full((len(features), width), pad_id if key == "input_ids" else 0, dtype=np.int64)
        for row, f in enumerate(features):
            values = f[key]
            if side == "left":
                array[row, width - len(values):] = values
            else:
                array[row, :len(values)] = values
        out[key] = torch.from_numpy(array)
    return out


def _features(encoding) -> list[dict[str, list[int]]]:
    keys = list(encoding.keys())
    return [{k: encoding[k][i] for k in keys} for i in range(len(encoding["input_ids"]))]
