"""Encoder-decoder generators: a seq2seq checkpoint as shipped (``seq2seq``: the paper's BART, T5) and the BERT2BERT
warm start (``bert2bert``: an ``EncoderDecoderModel`` made of one BERT checkpoint, Rothe et al. 2020, whose
cross-attention starts untrained). Both sample through transformers' ``generate``.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AutoModelForSeq2SeqLM, DataCollatorForSeq2Seq, EncoderDecoderModel

from ecqg.qg.generators import Generator, register
from ecqg.runtime.models import from_pretrained, resolve_model

# A checkpoint's shipped generation config (facebook/bart-large: num_beams 4, no_repeat_ngram_size 3, early stopping)
# is for summarisation-style beam search; the paper samples questions with top-k / top-p, one sequence per sample.
# Passed explicitly, these win over whatever the checkpoint ships (beam sampling failed with "size 4 vs 8").
PLAIN_SAMPLING = {"num_beams": 1, "no_repeat_ngram_size": 0, "min_new_tokens": 0,
                  "length_penalty": 1.0, "repetition_penalty": 1.0, "early_stopping": False}


def _is_bert2bert(config) -> bool:
    return getattr(config, "model_type", None) == "encoder-decoder"


@register
class Seq2SeqGenerator(Generator):
    """A seq2seq checkpoint (BART, T5): its tokenizer's own target format, its own generation ids."""

    kind = "seq2seq"
    description = "a seq2seq checkpoint (the paper's BART) fine-tuned on the gold triples"

    @classmethod
    def recognises(cls, config) -> bool:
        return bool(getattr(config, "is_encoder_decoder", False)) and not _is_bert2bert(config)

    @classmethod
    def handles(cls, model) -> bool:
        return cls.recognises(model.config)

    @classmethod
    def load(cls, ref: str, config, **overrides: Any):
        return from_pretrained(AutoModelForSeq2SeqLM, ref, **overrides)

    @classmethod
    def labels(cls, model, tokenizer, targets: list[str], target_max_length: int) -> list[list[int]]:
        return tokenizer(text_target=targets, max_length=target_max_length, truncation=True)["input_ids"]

    @classmethod
    def training_items(cls, model, tokenizer, sources: dict, targets: list[str],
                       target_max_length: int) -> list[dict[str, list[int]]]:
        labels = cls.labels(model, tokenizer, targets, target_max_length)
        return [{"input_ids": i, "attention_mask": m, "labels": lab}
                for i, m, lab in zip(sources["input_ids"], sources["attention_mask"], labels)]

    @classmethod
    def collator(cls, model, tokenizer):
        """Pads; labels padded with -100, from which the model makes its ``decoder_input_ids``."""
        return DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100, padding=True)

    @classmethod
    def pad_id(cls, model, tokenizer) -> int:
        return model.generation_config.pad_token_id

    @classmethod
    def sample(cls, model, tokenizer, enc, seed: int, *, top_k: int, top_p: float, samples: int,
               max_new_tokens: int):
        torch.manual_seed(seed)
        out = model.generate(**enc, do_sample=True, top_k=top_k, top_p=top_p, num_return_sequences=samples,
                             max_new_tokens=max_new_tokens, output_logits=True, return_dict_in_generate=True,
                             **PLAIN_SAMPLING)
        scores = model.compute_transition_scores(out.sequences, out.logits, normalize_logits=True)
        return out.sequences[:, -scores.shape[1]:], scores


@register
class Bert2BertGenerator(Seq2SeqGenerator):
    """An encoder-decoder warm start from one BERT checkpoint: the decoder starts with [CLS], its labels are
    ``target [SEP]``; encoder and decoder have their own configs and embeddings."""

    kind = "bert2bert"
    description = ("an encoder-decoder warm-started from the base encoder (Rothe et al. 2020), its cross-attention "
                   "trained from scratch on the gold triples")
    builds_from_encoder = True

    @classmethod
    def recognises(cls, config) -> bool:
        return _is_bert2bert(config)

    @classmethod
    def load(cls, ref: str, config, **overrides: Any):
        return from_pretrained(EncoderDecoderModel, ref, **overrides)

    @classmethod
    def from_encoder(cls, ref: str, tokenizer, **overrides: Any):
        path = resolve_model(ref)
        kwargs = {f"{part}_{k}": v for k, v in overrides.items() for part in ("encoder", "decoder")}
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(path, path, **kwargs)
        configure_bert2bert(model, tokenizer)
        return model

    @classmethod
    def labels(cls, model, tokenizer, targets: list[str], target_max_length: int) -> list[list[int]]:
        raw = tokenizer(targets, add_special_tokens=False, max_length=target_max_length - 1,
                        truncation=True)["input_ids"]
        return [ids + [model.config.eos_token_id] for ids in raw]

    @classmethod
    def dropout_configs(cls, model) -> list:
        return [model.encoder.config, model.decoder.config]

    @classmethod
    def embedding_parts(cls, model) -> tuple:
        return (model.encoder, model.decoder)


def configure_bert2bert(model, tokenizer) -> None:
    """Set a BERT2BERT's special ids: decoder starts with [CLS], stops at [SEP], pads with [PAD] (model config,
    decoder config and generation config), as Rothe et al. / the HF BERT2BERT recipe do."""
    # circular at load: architectures fills its registry at import, which imports this module
    from ecqg.qg.architectures import ensure_generation_ids

    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    stop = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if start is None or stop is None or tokenizer.pad_token_id is None:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no [CLS]/[SEP]/[PAD] (or bos/eos/pad) tokens: "
                         "cannot build a BERT2BERT generator from it")
    for cfg in (model.config, model.config.decoder):
        cfg.decoder_start_token_id, cfg.bos_token_id = start, start
        cfg.eos_token_id, cfg.pad_token_id = stop, tokenizer.pad_token_id
    ensure_generation_ids(model, tokenizer)
