"""Question generators: one class per architecture, and the registry that names them (as
:mod:`ecqg.retrieval.retriever` names retrievers).

Why: a generator is an ordinary transformers model and its tokenizer (HF's Trainer trains it, ``save_pretrained``
saves it), but what its training examples look like, how it samples and which configs a setting touches differ by
architecture. Those differences live in the architecture's class and nowhere else: the pipeline hands a model to
:func:`generator_for` and calls what the class provides. A new architecture is one module with one ``@register``
class and one line in ``BUILTIN`` (a toy one in ``tests/`` shows it).

A class is never instantiated: every method takes the model (and tokenizer) it works on.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ecqg.core.registry import Registry

# Registry name -> the module that defines (and registers) it, imported on first use. ``qg.architecture`` names
# one that builds from an encoder-only checkpoint; a checkpoint that already is a generator names its own.
BUILTIN = {
    "prefix_lm": "ecqg.qg.prefix_lm",     # source and target in one pre-trained BERT (UniLM-style)
    "bert2bert": "ecqg.qg.seq2seq",       # an encoder-decoder warm start from one BERT (Rothe et al. 2020)
    "seq2seq": "ecqg.qg.seq2seq",         # a seq2seq checkpoint as shipped (the paper's BART, T5)
    "cloze": "ecqg.qg.cloze",             # rule-based cloze translation (Lewis et al. 2019): no weights, no training
}
REGISTRY = Registry("generator architecture", BUILTIN)
register = REGISTRY.register
generator_class = REGISTRY.get


def generator_for(model) -> type["Generator"]:
    """The class of a generator model (built or loaded)."""
    found = REGISTRY.claimants(lambda cls: cls.handles(model))
    if not found:
        raise ValueError(f"{type(model).__name__} is no registered generator architecture "
                         f"({sorted(REGISTRY.classes)})")
    return found[0]


def saved_generator(config) -> type["Generator"] | None:
    """The class whose checkpoints look like ``config`` (a transformers config), or None for a checkpoint that is no
    generator yet (an encoder to build one from)."""
    found = REGISTRY.claimants(lambda cls: cls.recognises(config))
    return found[0] if found else None


def encoder_architectures() -> tuple[str, ...]:
    """The names ``qg.architecture`` may give: the architectures built from an encoder-only checkpoint, and the
    rule-based ones (which need no checkpoint)."""
    return tuple(cls.kind for cls in REGISTRY.every() if cls.builds_from_encoder or cls.rule_based)


def describe(architecture: str) -> str:
    """A page's name for the generator of ``qg.architecture`` (or of a saved checkpoint's kind)."""
    cls = generator_class(architecture)
    return cls.description or f"a `{architecture}` generator"


def by_construction(architecture: str) -> frozenset[str]:
    """The quality measures that hold by construction for this architecture's questions."""
    return generator_class(architecture).by_construction


def construction_note(architecture: str) -> str:
    return generator_class(architecture).construction_note


def is_rule_based(architecture: str) -> bool:
    """Whether ``qg.architecture`` names a generator with no weights (nothing to train)."""
    return generator_class(architecture).rule_based


class Generator:
    """What an architecture provides. ``kind`` names it; ``builds_from_encoder`` says whether an encoder-only
    checkpoint can become one (``qg.architecture``)."""

    kind: ClassVar[str] = ""
    builds_from_encoder: ClassVar[bool] = False
    rule_based: ClassVar[bool] = False       # True: no weights; ``build()`` makes it, ``sample_records`` samples
    # What it is, for the pages (one clause, honest about its limits), and which measures of ``ecqg.qg.quality``
    # hold by construction for its questions: those say nothing about it and are marked so beside its rows.
    description: ClassVar[str] = ""
    by_construction: ClassVar[frozenset[str]] = frozenset()
    construction_note: ClassVar[str] = ""    # what a page adds about a check that is only partly independent of it

    # --- which checkpoints and models ---------------------------------------------------------------------------
    @classmethod
    def recognises(cls, config) -> bool:
        """Whether a saved checkpoint with this transformers config is a generator of this architecture."""
        raise NotImplementedError

    @classmethod
    def handles(cls, model) -> bool:
        """Whether a model in memory is of this architecture."""
        raise NotImplementedError

    # --- build and load -----------------------------------------------------------------------------------------
    @classmethod
    def load(cls, ref: str, config, **overrides: Any):
        """The model of a checkpoint this class :meth:`recognises` (``overrides`` go to the model config)."""
        raise NotImplementedError

    @classmethod
    def from_encoder(cls, ref: str, tokenizer, **overrides: Any):
        """A new generator warm-started from an encoder-only checkpoint."""
        raise ValueError(f"a {cls.kind} generator is not built from an encoder checkpoint: give a {cls.kind} "
                         "checkpoint as qg.model")

    # --- training -----------------------------------------------------------------------------------------------
    @classmethod
    def training_items(cls, model, tokenizer, sources: dict, targets: list[str],
                       target_max_length: int) -> list[dict[str, list[int]]]:
        """Unpadded ``input_ids`` / ``attention_mask`` / ``labels`` (and whatever else the model reads) per example,
        from the tokenised sources (``tokenizer(sources)``) and the target texts."""
        raise NotImplementedError

    @classmethod
    def collator(cls, model, tokenizer):
        """Pads a batch of :meth:`training_items`; labels padded with -100."""
        raise NotImplementedError

    @classmethod
    def dropout_configs(cls, model) -> list:
        """The configs whose dropout ``qg.dropout`` sets."""
        raise ValueError(f"qg.dropout applies to generators built from a BERT-family encoder, not to "
                         f"{model.config.model_type!r}: set it to null (the checkpoint's own dropout)")

    @classmethod
    def embedding_parts(cls, model) -> tuple:
        """The modules whose input embeddings grow when a token is added (the placeholder)."""
        return (model,)

    # --- sampling -----------------------------------------------------------------------------------------------
    @classmethod
    def pad_id(cls, model, tokenizer) -> int:
        """The id that fills a sample after it ended."""
        raise NotImplementedError

    @classmethod
    def sample(cls, model, tokenizer, enc, seed: int, *, top_k: int, top_p: float, samples: int,
               max_new_tokens: int):
        """``(tokens, log_probs)`` of ``samples`` top-k / top-p samples per source, consecutive per source: the
        generated tokens and their log-probabilities under the model before top-k / top-p (padding after a sample
        ends), seeded by ``seed``."""
        raise NotImplementedError
