"""Building, saving and loading a generator of the configured architecture.

Offline there are no seq2seq weights, so an encoder-only checkpoint (``bundled:minilm``, ``bert-base-uncased``)
becomes a generator of ``qg.architecture``: ``prefix_lm`` (the default; :mod:`ecqg.qg.prefix_lm`: source and target
in one pre-trained BERT, UniLM-style) or ``bert2bert`` (an ``EncoderDecoderModel`` warm start, Rothe et al. 2020,
whose cross-attention starts untrained). A seq2seq hub id (``facebook/bart-large``, ``t5-base``) loads through
``AutoModelForSeq2SeqLM``. All save as ordinary HF checkpoints. The comparison of the two: docs/design.md.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

ARCHITECTURES = ("prefix_lm", "bert2bert")      # for encoder-only checkpoints


def _is_seq2seq(config) -> bool:
    return bool(getattr(config, "is_encoder_decoder", False))


def build_generator(ref: str, placeholder: str | None = None, architecture: str = "prefix_lm",
                    seed: int | None = None, **overrides):
    """``(model, tokenizer)`` for a model reference (``bundled:minilm``, a hub id, a local directory).

    A seq2seq checkpoint (BART, T5, a saved BERT2BERT) or a saved prefix LM loads as is; an encoder-only one becomes
    a generator of ``architecture`` (``prefix_lm``, or ``bert2bert``, whose decoder starts with [CLS] and stops at
    [SEP]). ``placeholder``: a token added to the vocabulary (and the embeddings) unless the tokenizer has it
    already. ``seed`` seeds torch before the model is built: the weights a warm start adds (the LM head's transform,
    a BERT2BERT's cross-attention, the placeholder's embedding) are drawn from torch's generator, whose own seed
    differs in every process. ``overrides`` go to the model config (e.g. dropout).
    """
    import torch
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer, EncoderDecoderModel

    from ecqg.qg import prefix_lm
    from ecqg.models import from_pretrained, resolve_model

    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown generator architecture {architecture!r}; known: {ARCHITECTURES}")
    config = from_pretrained(AutoConfig, ref)
    tokenizer = from_pretrained(AutoTokenizer, ref)
    if seed is not None:
        torch.manual_seed(seed)
    if _is_seq2seq(config):
        loader = EncoderDecoderModel if config.model_type == "encoder-decoder" else AutoModelForSeq2SeqLM
        model = from_pretrained(loader, ref, **overrides)
    elif prefix_lm.ARCHITECTURE in (config.architectures or []):
        model = from_pretrained(prefix_lm.BertPrefixLM, ref, **overrides)
    elif architecture == "prefix_lm":
        model = prefix_lm.from_encoder(resolve_model(ref), **overrides)
    else:
        path = resolve_model(ref)
        kwargs = {f"{part}_{k}": v for k, v in overrides.items() for part in ("encoder", "decoder")}
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(path, path, **kwargs)
        configure_bert2bert(model, tokenizer)
    if placeholder:
        add_placeholder_token(model, tokenizer, placeholder)
    _ensure_generation_ids(model, tokenizer)
    return model, tokenizer


def set_dropout(model, p: float) -> None:
    """Dropout probability ``p`` in every dropout layer of a generator built from a BERT-family encoder (prefix LM or
    BERT2BERT) and in its config. Why: the mini generators see each example fewer than two times, and without
    dropout they learn to use the passage faster (measured: docs/design.md, "Question generation")."""
    import torch

    if is_prefix_lm(model):
        configs = [model.config]
    elif is_bert2bert(model):
        configs = [model.encoder.config, model.decoder.config]
    else:
        raise ValueError(f"qg.dropout applies to generators built from a BERT-family encoder, not to "
                         f"{model.config.model_type!r}: set it to null (the checkpoint's own dropout)")
    if not 0 <= p < 1:
        raise ValueError(f"dropout must be in [0, 1), got {p!r}")
    for config in configs:
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = p
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p


def add_placeholder_token(model, tokenizer, placeholder: str) -> None:
    """Make ``placeholder`` one token (kept when decoding) and give it an embedding row, in every embedding the
    model has (a BERT2BERT's encoder and decoder are resized separately)."""
    from transformers import AddedToken

    if placeholder not in tokenizer.get_vocab():
        tokenizer.add_tokens([AddedToken(placeholder, normalized=False, special=False)])
    parts = (model.encoder, model.decoder) if is_bert2bert(model) else (model,)
    for part in parts:
        if part.get_input_embeddings().num_embeddings < len(tokenizer):
            part.resize_token_embeddings(len(tokenizer))  # updates the part's config, which is the model's


def configure_bert2bert(model, tokenizer) -> None:
    """Set a BERT2BERT's special ids: decoder starts with [CLS], stops at [SEP], pads with [PAD] (model config,
    decoder config and generation config), as Rothe et al. / the HF BERT2BERT recipe do."""
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    stop = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if start is None or stop is None or tokenizer.pad_token_id is None:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no [CLS]/[SEP]/[PAD] (or bos/eos/pad) tokens: "
                         "cannot build a BERT2BERT generator from it")
    for cfg in (model.config, model.config.decoder):
        cfg.decoder_start_token_id, cfg.bos_token_id = start, start
        cfg.eos_token_id, cfg.pad_token_id = stop, tokenizer.pad_token_id
    _ensure_generation_ids(model, tokenizer)


def _ensure_generation_ids(model, tokenizer) -> None:
    gen, cfg = model.generation_config, model.config
    for name in ("decoder_start_token_id", "eos_token_id", "pad_token_id", "bos_token_id"):
        value = getattr(cfg, name, None)
        if value is not None:
            setattr(gen, name, value)
    if gen.pad_token_id is None:
        gen.pad_token_id = tokenizer.pad_token_id
    gen.max_length = None  # callers pass max_new_tokens


def is_bert2bert(model) -> bool:
    return getattr(model.config, "model_type", None) == "encoder-decoder"


def is_prefix_lm(model) -> bool:
    from ecqg.qg.prefix_lm import BertPrefixLM

    return isinstance(model, BertPrefixLM)


def save_generator(model, tokenizer, path: str | Path) -> Path:
    """An ordinary HF checkpoint + tokenizer, written atomically (a killed save leaves no complete-looking dir)."""
    from ecqg.io import atomic_path

    with atomic_path(path) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(path)


def load_generator(path: str | Path):
    """``(model, tokenizer)`` from :func:`save_generator` output (or any seq2seq checkpoint); a placeholder token
    saved with the tokenizer comes back with it."""
    return build_generator(str(path))
