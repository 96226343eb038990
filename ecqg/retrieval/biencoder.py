"""The DPR bi-encoder: separate query and passage encoders initialised from one checkpoint, [CLS] pooling, dot product.

Why a thin wrapper rather than a custom model class: each encoder stays an ordinary transformers model, saved with
``save_pretrained`` (safetensors) under ``<dir>/query_encoder`` and ``<dir>/passage_encoder``, so
``AutoModel.from_pretrained`` loads either one without this package. ``bi_encoder.json`` records the pooling and
maximum lengths; the tokenizer is saved once at the top level.

Passages are encoded as DPR does: ``[CLS] title [SEP] text [SEP]`` (a sentence pair; only the text is truncated).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import torch
from transformers import AutoModel, AutoTokenizer

from ecqg.io import atomic_path
from ecqg.models import from_pretrained

CONFIG_FILE = "bi_encoder.json"
POOLINGS = ("cls", "mean")


@dataclass(frozen=True)
class BiEncoderConfig:
    base_model: str                 # the params reference it was initialised from (hub id, path or bundled:...)
    shared: bool = False            # one encoder for both sides (DPR: separate)
    pooling: str = "cls"            # DPR: the [CLS] vector of the last layer
    query_max_length: int = 64
    passage_max_length: int = 256


class BiEncoder(torch.nn.Module):
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
        config_path = directory / CONFIG_FILE
        if not config_path.is_file():
            raise FileNotFoundError(f"{directory}: not a saved bi-encoder (no {CONFIG_FILE})")
        config = BiEncoderConfig(**json.loads(config_path.read_text(encoding="utf-8")))
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
            (tmp / CONFIG_FILE).write_text(json.dumps(asdict(self.config), indent=2) + "\n", encoding="utf-8")
        return Path(directory)

    # --- tokenisation -------------------------------------------------------------------------------------------
    def tokenize_queries(self, questions: Sequence[str]):
        return self.tokenizer(list(questions), padding=True, truncation=True,
                              max_length=self.config.query_max_length, return_tensors="pt")

    def tokenize_passages(self, titles: Sequence[str], texts: Sequence[str]):
        """``[CLS] title [SEP] text [SEP]``; only the text is cut when the pair is too long."""
        return self.tokenizer(list(titles), list(texts), padding=True, truncation="only_second",
                              max_length=self.config.passage_max_length, return_tensors="pt")

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

    @staticmethod
    def scores(query_vectors: torch.Tensor, passage_vectors: torch.Tensor) -> torch.Tensor:
        """Dot-product similarity, DPR's choice (no normalisation)."""
        return query_vectors @ passage_vectors.T
