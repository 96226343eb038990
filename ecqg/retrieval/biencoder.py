"""DPR: separate query and passage encoders initialised from one checkpoint, [CLS] pooling, dot product.

Why a thin wrapper rather than a custom model class: each encoder stays an ordinary transformers model, so
``AutoModel.from_pretrained`` loads either one without this package. Building, saving and loading, tokenisation and
similarity are the :class:`~ecqg.retrieval.retriever.Retriever` base's (one vector per passage, the dot product);
this class adds the pooling.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ecqg.retrieval.retriever import Retriever, register

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
    config_class = BiEncoderConfig

    def __init__(self, query_encoder, passage_encoder, tokenizer, config: BiEncoderConfig):
        if config.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, not {config.pooling!r}")
        super().__init__(query_encoder, passage_encoder, tokenizer, config)

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
