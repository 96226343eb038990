"""DPR: separate query and passage encoders initialised from one checkpoint, [CLS] pooling, dot product.

Why a thin wrapper rather than a custom model class: each encoder stays an ordinary transformers model, saved with
``save_pretrained`` (safetensors) under ``<dir>/query_encoder`` and ``<dir>/passage_encoder``, so
``AutoModel.from_pretrained`` loads either one without this package. ``retriever.json`` records the kind, the pooling
and the maximum lengths; the tokenizer is saved once at the top level. Tokenisation and similarity are the
:class:`~ecqg.retrieval.retriever.Retriever` defaults (one vector per passage, the dot product).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

from ecqg.io import atomic_path
from ecqg.models import from_pretrained
from ecqg.retrieval.retriever import CONFIG_FILE, LEGACY_CONFIG_FILE, Retriever, register

POOLINGS = ("cls", "mean")


@dataclass(frozen=True)
class BiEncoderConfig:
    base_model: str                 # the params reference it was initialised from (hub id, path or bundled:...)
    shared: bool = False            # one encoder for both sides (DPR: separate)
    pooling: str = "cls"            # DPR: the [CLS] vector of the last layer
    query_max_length: int = 64
    passage_max_length: int = 256


@register
class BiEncoder(Retriever):
    kind = "biencoder"

    def __init__(self, query_encoder, passage_encoder, tokenizer, config: BiEncoderConfig):
        super().__init__()
        if config.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, not {config.pooling!r}")
        self.query_encoder = query_encoder
        self.passage_encoder = query_encoder if config.shared else passage_encoder
        self.tokenizer = tokenizer
        self.config = config

    @classmethod
    def from_base(cls, ref: str, shared: bool = False, pooling: str = "cls", query_max_length: int = 64,
                  passage_max_length: int = 256, **model_kwargs) -> "BiEncoder":
        """Both encoders from one checkpoint (``ref``: hub id, directory or ``bundled:minilm``)."""
        tokenizer = from_pretrained(AutoTokenizer, ref)
        query = from_pretrained(AutoModel, ref, **model_kwargs)
        passage = query if shared else from_pretrained(AutoModel, ref, **model_kwargs)
        return cls(query, passage, tokenizer,
                   BiEncoderConfig(ref, shared, pooling, query_max_length, passage_max_length))

    @classmethod
    def load(cls, directory: str | Path, **model_kwargs) -> "BiEncoder":
        """Load a bi-encoder saved by :meth:`save` (e.g. ``attn_implementation="eager"`` to read attentions)."""
        directory = Path(directory)
        path = directory / CONFIG_FILE if (directory / CONFIG_FILE).is_file() else directory / LEGACY_CONFIG_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{directory}: not a saved bi-encoder (no {CONFIG_FILE})")
        settings = json.loads(path.read_text(encoding="utf-8"))
        settings.pop("kind", None)
        config = BiEncoderConfig(**settings)
        tokenizer = AutoTokenizer.from_pretrained(directory)
        query = AutoModel.from_pretrained(directory / "query_encoder", **model_kwargs)
        passage = query if config.shared else AutoModel.from_pretrained(directory / "passage_encoder", **model_kwargs)
        return cls(query, passage, tokenizer, config)

    def save(self, directory: str | Path) -> Path:
        """Write both encoders (safetensors), the tokenizer and the config atomically into ``directory``."""
        with atomic_path(directory) as tmp:
            tmp.mkdir(parents=True)
            self.query_encoder.save_pretrained(tmp / "query_encoder")
            if not self.config.shared:
                self.passage_encoder.save_pretrained(tmp / "passage_encoder")
            self.tokenizer.save_pretrained(tmp)
            (tmp / CONFIG_FILE).write_text(json.dumps({"kind": self.kind, **asdict(self.config)}, indent=2) + "\n",
                                           encoding="utf-8")
        return Path(directory)

    # --- encoding -----------------------------------------------------------------------------------------------
    def _pool(self, output, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = output.last_hidden_state
        if self.config.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

    def encode_queries(self, batch) -> torch.Tensor:
        return self._pool(self.query_encoder(**batch), batch["attention_mask"])

    def encode_passages(self, batch) -> torch.Tensor:
        return self._pool(self.passage_encoder(**batch), batch["attention_mask"])
