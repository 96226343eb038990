"""A UniLM-style sequence-to-sequence generator on one BERT encoder (Dong et al. 2019): the offline QG default.

Why: offline there are no seq2seq weights, only the bundled MiniLM encoder. A BERT2BERT warm start (Rothe et al.
2020) adds cross-attention that starts untrained, and on a CPU budget of a few hundred steps it does not learn to use
the passage: its questions are a passage-independent language model ("who was the name of the treaty?"). Here the
source and the target share one pre-trained encoder, so every attention weight the target uses to read the source is
pre-trained (only the output transform of the LM head is new): the same idea as UniLM's seq2seq fine-tuning, with
next-token prediction instead of UniLM's masked target tokens.

One sequence per example, ``[CLS] source [SEP] [CLS] target`` (token types 0 for the source, 1 for the target),
predicting ``target [SEP]``. The attention mask follows from the token types: source tokens see the whole source
(bidirectional, as the encoder was pre-trained); target tokens see the source and the target tokens up to themselves.
The LM head is computed only at target positions (a 30k-vocabulary projection at every source position would be
wasted work). Generation keeps a key/value cache: the source is encoded once, then one token per step.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import (AutoConfig, BertLMHeadModel, DataCollatorForTokenClassification, DynamicCache,
                          LogitsProcessorList, TopPLogitsWarper)
from transformers.modeling_outputs import CausalLMOutput

from ecqg.qg.generators import Generator, register
from ecqg.runtime.models import from_pretrained, resolve_model

ARCHITECTURE = "BertPrefixLM"
SOURCE, TARGET = 0, 1   # token types


def prefix_lm_mask(token_type_ids: torch.Tensor, attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive 4D mask ``(batch, 1, query, key)``: key ``k`` is visible from query ``q`` when ``k`` is not
    padding and is a source token, or a target token at or before ``q`` seen from a target token."""
    length = token_type_ids.shape[1]
    valid = attention_mask.bool()[:, None, :]                                   # (B, 1, K)
    key_is_source = (token_type_ids == SOURCE)[:, None, :]                     # (B, 1, K)
    query_is_target = (token_type_ids == TARGET)[:, :, None]                   # (B, Q, 1)
    causal = torch.ones(length, length, dtype=torch.bool, device=token_type_ids.device).tril()[None]
    allowed = valid & (key_is_source | (query_is_target & causal))
    return _additive(allowed[:, None], dtype)


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


class BertPrefixLM(BertLMHeadModel):
    """A BERT with its LM head, trained as a prefix LM (see the module docstring). Saves and loads like any
    transformers model (``architectures: ["BertPrefixLM"]`` in its config tells :func:`ecqg.qg.build_generator`)."""

    def __init__(self, config):
        config.is_decoder = True      # lets BertModel keep a key/value cache; the mask below is always explicit
        super().__init__(config)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, labels=None,
                **kwargs) -> CausalLMOutput:
        """Training forward: ``labels`` holds the next token at each target position and -100 elsewhere; logits
        and the loss cover the labelled positions only (``logits`` is ``(n_labelled, vocab)``)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            raise ValueError("BertPrefixLM needs token_type_ids: 0 marks the source, 1 the target")
        mask = prefix_lm_mask(token_type_ids, attention_mask, self.dtype)
        hidden = self.bert(input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids,
                           position_ids=position_ids, use_cache=False).last_hidden_state
        if labels is None:
            return CausalLMOutput(logits=self.cls(hidden))
        where = labels != -100
        logits = self.cls(hidden[where])
        loss = torch.nn.functional.cross_entropy(logits.float(), labels[where])
        return CausalLMOutput(loss=loss, logits=logits)


def example_features(source_ids: list[int], target_ids: list[int], start_id: int, stop_id: int) -> dict[str, list]:
    """One training sequence: ``source_ids`` (already ``[CLS] ... [SEP]``), then ``start_id`` + the target;
    labels are ``target + [stop_id]`` on the target positions and -100 on the source."""
    n_src, n_tgt = len(source_ids), len(target_ids) + 1
    return {"input_ids": [*source_ids, start_id, *target_ids],
            "token_type_ids": [SOURCE] * n_src + [TARGET] * n_tgt,
            "attention_mask": [1] * (n_src + n_tgt),
            "labels": [-100] * n_src + [*target_ids, stop_id]}


@torch.inference_mode()
def sample(model: BertPrefixLM, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, start_id: int, stop_id: int,
           pad_id: int, samples: int = 1, top_k: int = 10, top_p: float = 0.9, max_new_tokens: int = 32,
           generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k / top-p samples for a batch of right-padded sources (``[CLS] ... [SEP]``).

    Returns ``(tokens, log_probs)``, both ``(batch * samples, steps)``, the samples of an input consecutive:
    generated tokens (``stop_id`` ends a sample, ``pad_id`` after it) and each token's log-probability under the
    model before top-k / top-p (``-inf`` after the stop). ``top_k`` 0 / ``top_p`` 1 switch that cut off."""
    device = input_ids.device
    ids = input_ids.repeat_interleave(samples, 0)
    valid = attention_mask.repeat_interleave(samples, 0).bool()
    n = ids.shape[0]
    source_types = torch.full_like(ids, SOURCE)
    cache = DynamicCache(config=model.config)
    dtype = model.dtype
    model.bert(input_ids=ids, attention_mask=prefix_lm_mask(source_types, valid, dtype), token_type_ids=source_types,
               past_key_values=cache, use_cache=True)
    warpers = LogitsProcessorList([TopPLogitsWarper(top_p)] if top_p < 1 else [])   # without a top-k cut only
    position = valid.sum(1, keepdim=True)                                      # the next position of each row
    token = torch.full((n, 1), start_id, dtype=torch.long, device=device)
    target_type = torch.full((n, 1), TARGET, dtype=torch.long, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    tokens, log_probs = [], []
    for _ in range(max_new_tokens):
        valid = torch.cat([valid, torch.ones(n, 1, dtype=torch.bool, device=device)], 1)
        hidden = model.bert(input_ids=token, attention_mask=_additive(valid[:, None, None, :], dtype),
                            token_type_ids=target_type, position_ids=position, past_key_values=cache,
                            use_cache=True).last_hidden_state
        logits = model.cls(hidden[:, -1]).float()
        scores = torch.log_softmax(logits, -1)
        if top_k > 0:
            choice = _sample_top_k_top_p(logits, top_k, top_p, generator)
        else:
            choice = torch.multinomial(torch.softmax(warpers(ids, logits), -1), 1, generator=generator).squeeze(1)
        choice = choice.masked_fill(done, pad_id)
        log_probs.append(scores.gather(1, choice[:, None]).squeeze(1).masked_fill(done, float("-inf")))
        tokens.append(choice)
        done = done | (choice == stop_id)
        if bool(done.all()):
            break
        token, position = choice[:, None], position + 1
    return torch.stack(tokens, 1), torch.stack(log_probs, 1)


def top_k_top_p_probs(logits: torch.Tensor, top_k: int, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(probs, ids)``, both ``(rows, k)``: the top-k then top-p distribution over each row's k best tokens, the
    same distribution as transformers' ``TopKLogitsWarper`` followed by ``TopPLogitsWarper`` (tests check)."""
    top_logits, top_ids = logits.topk(min(top_k, logits.shape[-1]), dim=-1)   # descending
    if top_p < 1:   # transformers' own nucleus cut, applied to the (rows, k) logits: a warper needs no vocabulary
        top_logits = TopPLogitsWarper(top_p)(None, top_logits)
    return torch.softmax(top_logits, -1), top_ids


def _sample_top_k_top_p(logits: torch.Tensor, top_k: int, top_p: float, generator: torch.Generator | None
                        ) -> torch.Tensor:
    """One token per row, drawn among the k best only. Why: a draw over the whole vocabulary (30k exponentials per
    row, and a full sort for top-p) is a large share of a sampling step."""
    probs, ids = top_k_top_p_probs(logits, top_k, top_p)
    return ids.gather(1, torch.multinomial(probs, 1, generator=generator)).squeeze(1)


def from_encoder(path: str, **overrides: Any) -> BertPrefixLM:
    """A prefix LM warm-started from an encoder checkpoint (BERT family); its LM head's transform starts untrained
    unless the checkpoint has one (``bert-base-uncased`` does, the bundled sentence encoder does not)."""
    config = AutoConfig.from_pretrained(path, **overrides)
    if config.model_type != "bert":
        raise ValueError(f"the prefix-LM generator needs a BERT-family encoder, got model_type {config.model_type!r} "
                         f"from {path}; use qg.architecture: bert2bert, or a seq2seq checkpoint")
    config.architectures = [ARCHITECTURE]
    return BertPrefixLM.from_pretrained(path, config=config)


@register
class PrefixLMGenerator(Generator):
    """The prefix LM as a generator architecture: one sequence per example, its own sampler (a key/value cache,
    top-k / top-p among the k best logits), the tokenizer's [PAD] after a sample ends."""

    kind = "prefix_lm"
    description = ("a prefix language model warm-started from the base encoder (source and target in one BERT,"
                   " UniLM-style), trained here on the gold triples")
    builds_from_encoder = True

    @classmethod
    def recognises(cls, config) -> bool:
        return ARCHITECTURE in (getattr(config, "architectures", None) or [])

    @classmethod
    def handles(cls, model) -> bool:
        return isinstance(model, BertPrefixLM)

    @classmethod
    def load(cls, ref: str, config, **overrides: Any) -> BertPrefixLM:
        return from_pretrained(BertPrefixLM, ref, **overrides)

    @classmethod
    def from_encoder(cls, ref: str, tokenizer, **overrides: Any) -> BertPrefixLM:
        return from_encoder(resolve_model(ref), **overrides)

    @classmethod
    def training_items(cls, model, tokenizer, sources: dict, targets: list[str],
                       target_max_length: int) -> list[dict[str, list[int]]]:
        raw = tokenizer(targets, add_special_tokens=False, max_length=target_max_length - 1,
                        truncation=True)["input_ids"]
        return [example_features(src, tgt, tokenizer.cls_token_id, tokenizer.sep_token_id)
                for src, tgt in zip(sources["input_ids"], raw)]

    @classmethod
    def collator(cls, model, tokenizer):
        """Pads; a prefix LM's labels are as long as its inputs and padded with them (-100)."""
        return DataCollatorForTokenClassification(tokenizer, label_pad_token_id=-100, padding=True)

    @classmethod
    def dropout_configs(cls, model) -> list:
        return [model.config]

    @classmethod
    def pad_id(cls, model, tokenizer) -> int:
        return tokenizer.pad_token_id

    @classmethod
    def sample(cls, model, tokenizer, enc, seed: int, *, top_k: int, top_p: float, samples: int,
               max_new_tokens: int):
        generator = torch.Generator(device=enc["input_ids"].device).manual_seed(seed)
        return sample(model, enc["input_ids"], enc["attention_mask"], start_id=tokenizer.cls_token_id,
                      stop_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id, samples=samples, top_k=top_k,
                      top_p=top_p, max_new_tokens=max_new_tokens, generator=generator)
