"""The base's architecture and its masked-LM loss computed where it is needed.

Why a loss of its own: ``BertForMaskedLM`` scores every position against the whole vocabulary, although only the 15%
masked positions carry a label; for a small model that vocabulary projection is most of a step. Scoring the masked
positions alone (as fairseq's RoBERTa does) gives the same loss for a fraction of the work (``bench/bench_mlm.py``
measures it). The weights and their names are ``BertForMaskedLM``'s, so the saved model loads as one, and as a
``BertModel`` wherever a base model is accepted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM
from transformers.modeling_outputs import MaskedLMOutput


@dataclass(frozen=True)
class Architecture:
    """A small BERT: ``layers`` x ``hidden`` wide, ``hidden // 64`` heads, a 4x feed-forward, positions up to
    ``max_positions`` (the retriever's passages: title + text, at most 256 pieces)."""

    layers: int = 4
    hidden: int = 256
    vocab_size: int = 16384
    max_positions: int = 256

    def __post_init__(self):
        if self.hidden % 64:
            raise ValueError(f"hidden must be a multiple of 64 (64-wide heads), got {self.hidden}")
        if self.layers < 1 or self.vocab_size < 100 or self.max_positions < 16:
            raise ValueError(f"implausible architecture {asdict(self)}")

    def config(self, tokenizer) -> BertConfig:
        return BertConfig(vocab_size=len(tokenizer), hidden_size=self.hidden, num_hidden_layers=self.layers,
                          num_attention_heads=self.hidden // 64, intermediate_size=4 * self.hidden,
                          max_position_embeddings=self.max_positions, pad_token_id=tokenizer.pad_token_id,
                          architectures=["BertForMaskedLM"])


class SparseMaskedLM(BertForMaskedLM):
    """``BertForMaskedLM`` whose loss scores only the labelled (masked) positions; the same parameters."""

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
        if labels is None:
            return MaskedLMOutput(logits=self.cls(hidden))
        chosen = labels != -100
        logits = self.cls(hidden[chosen])
        loss = F.cross_entropy(logits.float(), labels[chosen]) if chosen.any() else hidden.sum() * 0.0
        return MaskedLMOutput(loss=loss)


def new_model(architecture: Architecture, tokenizer, seed: int) -> SparseMaskedLM:
    torch.manual_seed(seed)
    return SparseMaskedLM(architecture.config(tokenizer))
