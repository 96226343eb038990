"""Poly-DPR (Luo et al., "Improving Biomedical Information Retrieval with Neural Retrievers", AAAI 2022, §3.2): the
passage gets K vectors instead of one [CLS] vector, so one vector need not hold every entity of a passage.

* Passage: K learned code vectors ``m_i``; passage vector ``v_i = sum_n softmax_n(m_i . h_n) h_n`` over the last
  layer's hidden states ``h_n`` of the passage encoder. Attended tokens (the paper does not say; ``attend``):
  ``content`` = the title's and the text's word pieces of ``[CLS] title [SEP] text [SEP]``, or ``all`` = every
  non-padding token, [CLS] and [SEP] included. ``all`` makes very short passages hubs, because their pooled vector
  is mostly [CLS] / [SEP] states that any [CLS] query vector resembles (with the bundled MiniLM one two-word passage
  came first for many NQ test questions); ``content`` does not. Checkpoints saved before the option existed load as ``all``. Codes start
  as random normal vectors with the encoder's initializer range (BERT: 0.02) from a seeded generator, so codes
  start distinct and the run is reproducible (the paper does not say either; ParlAI's poly-encoder also learns codes
  from a random start; a collapse of the codes shows in their similarity, which the analyses report).
* Query: the [CLS] vector ``q`` of the query encoder, as DPR.
* Training score: ``q . v_q`` with ``v_q = sum_k softmax_k(q . v_k) v_k`` (a softmax-weighted mix of the codes, so
  every code gets gradient), under DPR's NLL loss. Retrieval score: ``max_k q . v_k``, so a FAISS search runs over
  all K x N vectors and each passage keeps its best one (:mod:`ecqg.retrieval.faiss_index`). The training score is a
  convex combination of the ``q . v_k``, never above the retrieval score (a test checks).
* K = 1 is the control: one attention-pooled vector per passage, trained and searched like DPR.

Saved as a bi-encoder is (the :class:`~ecqg.retrieval.retriever.Retriever` base: transformers checkpoints,
tokenizer, settings in ``retriever.json``) plus its own ``poly_codes.safetensors``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ecqg.retrieval.retriever import Retriever, register

CODES_FILE = "poly_codes.safetensors"
ATTEND = ("content", "all")


@dataclass(frozen=True)
class PolyConfig:
    base_model: str
    codes: int = 6                  # K vectors per passage (the paper: 6; 12 was better on short contexts)
    shared: bool = False            # one encoder for both sides (DPR: separate)
    query_max_length: int = 64
    passage_max_length: int = 256
    code_seed: int = 0              # seeds the codes' random start
    attend: str = "all"             # tokens the codes attend to: "content" (title and text pieces) or "all"


@register
class PolyDPR(Retriever):
    kind = "polydpr"
    config_class = PolyConfig
    new_defaults = {"attend": "content"}       # checkpoints saved before the option existed attended to "all"
    ignored_settings = ("pooling",)            # the query pools with [CLS], the passage with its codes

    def __init__(self, query_encoder, passage_encoder, tokenizer, config: PolyConfig,
                 codes: torch.Tensor | None = None):
        if config.codes < 1:
            raise ValueError(f"Poly-DPR needs at least one code vector, got {config.codes}")
        if config.attend not in ATTEND:
            raise ValueError(f"Poly-DPR attend must be one of {ATTEND}, not {config.attend!r}")
        super().__init__(query_encoder, passage_encoder, tokenizer, config)
        hidden = int(self.passage_encoder.config.hidden_size)
        if codes is None:
            std = float(getattr(self.passage_encoder.config, "initializer_range", 0.02))
            generator = torch.Generator().manual_seed(config.code_seed)
            codes = torch.randn(config.codes, hidden, generator=generator) * std
        if tuple(codes.shape) != (config.codes, hidden):
            raise ValueError(f"codes of shape {tuple(codes.shape)}, expected ({config.codes}, {hidden})")
        self.codes = torch.nn.Parameter(codes.clone())

    @property
    def vectors_per_passage(self) -> int:
        return self.config.codes

    # --- its own state ------------------------------------------------------------------------------------------------
    def save_extra(self, directory: Path) -> None:
        save_file({"codes": self.codes.detach().cpu().contiguous()}, str(directory / CODES_FILE))

    @classmethod
    def load_extra(cls, directory: Path) -> dict:
        return {"codes": load_file(str(directory / CODES_FILE))["codes"]}

    # --- encoding ----------------------------------------------------------------------------------------------------
    def encode_queries(self, batch) -> torch.Tensor:
        return self.query_encoder(**batch).last_hidden_state[:, 0]

    def code_attention(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``(B, K, n)``: each code's attention over the passage's tokens (padding gets none)."""
        logits = torch.einsum("kd,bnd->bkn", self.codes.to(hidden.dtype), hidden)
        logits = logits.masked_fill(attention_mask[:, None, :] == 0, torch.finfo(logits.dtype).min)
        return torch.softmax(logits.float(), dim=-1).to(hidden.dtype)

    def attended_mask(self, batch) -> torch.Tensor:
        """``(B, n)``: 1 where the codes may attend (``attend``: the content pieces, or every non-padding token)."""
        mask = batch["attention_mask"]
        if self.config.attend == "all":
            return mask
        ids = batch["input_ids"]
        special = torch.zeros_like(ids, dtype=torch.bool)
        for token_id in {self.tokenizer.cls_token_id, self.tokenizer.sep_token_id, self.tokenizer.pad_token_id}:
            if token_id is not None:
                special |= ids == token_id
        content = mask.masked_fill(special, 0)
        # a passage with no content piece (empty title and text) falls back to its special tokens, never to nothing
        return torch.where(content.sum(1, keepdim=True) > 0, content, mask)

    def encode_passages(self, batch) -> torch.Tensor:
        hidden = self.passage_encoder(**batch).last_hidden_state
        return torch.einsum("bkn,bnd->bkd", self.code_attention(hidden, self.attended_mask(batch)), hidden)

    # --- similarity --------------------------------------------------------------------------------------------------
    def train_scores(self, q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        """``q . v_q`` with ``v_q = sum_k softmax_k(q . v_k) v_k``, for every question against every passage."""
        per_code = torch.einsum("qd,pkd->qpk", q, p)
        return (torch.softmax(per_code.float(), dim=-1).to(per_code.dtype) * per_code).sum(dim=-1)
