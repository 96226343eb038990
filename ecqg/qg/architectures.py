"""Building, saving and loading a generator through the registry of architectures (:mod:`ecqg.qg.generators`).

Offline there are no seq2seq weights, so an encoder-only checkpoint (``bundled:minilm``, ``bert-base-uncased``)
becomes a generator of ``qg.architecture``: ``prefix_lm`` (:mod:`ecqg.qg.prefix_lm`: source and target
in one pre-trained BERT, UniLM-style) or ``bert2bert`` (:mod:`ecqg.qg.seq2seq`: an ``EncoderDecoderModel`` warm
start whose cross-attention starts untrained). A checkpoint that already is a generator (``facebook/bart-large``,
``t5-base``, a saved prefix LM or BERT2BERT) loads as its own architecture. All save as ordinary HF checkpoints. The
comparison of the two: docs/design.md.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from transformers import AddedToken, AutoConfig, AutoTokenizer

from ecqg.core.io import atomic_path
from ecqg.qg.cloze import ClozeModel, is_cloze_checkpoint
from ecqg.qg.generators import encoder_architectures, generator_class, generator_for, is_rule_based, saved_generator
from ecqg.runtime.models import from_pretrained

log = logging.getLogger(__name__)

ARCHITECTURES = encoder_architectures()      # what qg.architecture may name (built from an encoder checkpoint)


def build_generator(ref: str, placeholder: str | None = None, architecture: str = "prefix_lm",
                    seed: int | None = None, **overrides):
    """``(model, tokenizer)`` for a model reference (``bundled:minilm``, a hub id, a local directory).

    A checkpoint that already is a generator (BART, T5, a saved BERT2BERT or prefix LM) loads as is; an encoder-only
    one becomes a generator of ``architecture`` (``prefix_lm``, or ``bert2bert``, whose decoder starts with [CLS] and
    stops at [SEP]). ``placeholder``: a token added to the vocabulary (and the embeddings) unless the tokenizer has
    it already. ``seed`` seeds torch before the model is built: the weights a warm start adds (the LM head's
    transform, a BERT2BERT's cross-attention, the placeholder's embedding) are drawn from torch's generator, whose
    own seed differs in every process. ``overrides`` go to the model config (e.g. dropout).
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown generator architecture {architecture!r}; known: {ARCHITECTURES}")
    if is_rule_based(architecture):
        return generator_class(architecture).build(), None      # ``ref`` and the placeholder mean nothing to it

    if is_cloze_checkpoint(ref):
        return ClozeModel.from_pretrained(ref), None
    config = from_pretrained(AutoConfig, ref)
    tokenizer = from_pretrained(AutoTokenizer, ref)
    if seed is not None:
        torch.manual_seed(seed)
    saved = saved_generator(config)
    if saved is not None:
        model = saved.load(ref, config, **overrides)
    else:
        model = generator_class(architecture).from_encoder(ref, tokenizer, **overrides)
    if placeholder:
        add_placeholder_token(model, tokenizer, placeholder)
    ensure_generation_ids(model, tokenizer)
    return model, tokenizer


def set_dropout(model, p: float) -> None:
    """Dropout probability ``p`` in every dropout layer of a generator built from a BERT-family encoder (prefix LM or
    BERT2BERT) and in its config. Why: the mini generators see each example fewer than two times, and without
    dropout they learn to use the passage faster (measured: docs/design.md, "Question generation")."""
    configs = generator_for(model).dropout_configs(model)
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
    if placeholder not in tokenizer.get_vocab():
        tokenizer.add_tokens([AddedToken(placeholder, normalized=False, special=False)])
    for part in generator_for(model).embedding_parts(model):
        if part.get_input_embeddings().num_embeddings < len(tokenizer):
            part.resize_token_embeddings(len(tokenizer))  # updates the part's config, which is the model's


def ensure_generation_ids(model, tokenizer) -> None:
    """Copy the model config's special ids into its generation config; callers pass ``max_new_tokens``."""
    gen, cfg = model.generation_config, model.config
    for name in ("decoder_start_token_id", "eos_token_id", "pad_token_id", "bos_token_id"):
        value = getattr(cfg, name, None)
        if value is not None:
            setattr(gen, name, value)
    if gen.pad_token_id is None:
        gen.pad_token_id = tokenizer.pad_token_id
    gen.max_length = None  # callers pass max_new_tokens


def save_generator(model, tokenizer, path: str | Path) -> Path:
    """An ordinary HF checkpoint + tokenizer, written atomically (a killed save leaves no complete-looking dir)."""
    with atomic_path(path) as tmp:
        model.save_pretrained(tmp)
        if tokenizer is not None:          # a rule-based generator has none
            tokenizer.save_pretrained(tmp)
    return Path(path)


def load_generator(path: str | Path):
    """``(model, tokenizer)`` from :func:`save_generator` output (or any seq2seq checkpoint); a placeholder token
    saved with the tokenizer comes back with it."""
    return build_generator(str(path))
