"""The base encoders a profile's dense models may start from, declared once: what each was trained on, how it pools,
and whether it has already learned retrieval, so every page can say what its verdicts can speak to.

Why a table: the paper's object is the [CLS] attention of a DPR trained from an MLM-only BERT. A base that was
already trained for retrieval (the bundled MiniLM) or that pools by the mean has no such object before training, and
a result on it says something else; the results pages, the scope block beside each verdict and the untrained row of
Table 3 all read this table instead of repeating the facts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Base:
    """``name``: how pages call it (and Table 3's untrained row); ``pooling``: the vector its training used;
    ``learned_retrieval``: trained on question-passage pairs before any training here; ``trained_on``: one clause."""

    name: str
    pooling: str
    learned_retrieval: bool
    trained_on: str


BASES: dict[str, Base] = {
    "bundled:minilm": Base(
        "MiniLM", "mean", True,
        "sentence-transformers all-MiniLM-L6-v2, trained contrastively (mean pooling) on about a billion pairs, "
        "among them Natural Questions, TriviaQA, SQuAD and the 64M synthetic PAQ questions"),
    "bundled:naive": Base(
        "naive base", "none", False,
        "a 4-layer, 256-wide BERT pre-trained here by masked-language modelling only, on the bundle's passages "
        "(`python -m ecqg.mlm.build`, `bases/naive-bert/build.json`)"),
    "bert-base-uncased": Base(
        "BERT-base", "none", False,
        "BERT-base (uncased), pre-trained by masked-language modelling and next-sentence prediction on BooksCorpus "
        "and English Wikipedia (the paper's base)"),
}


def describe(ref: str | None) -> Base | None:
    """The declared facts of a base model reference (None for one this table does not know, e.g. a local folder)."""
    return BASES.get(ref or "")


def base_name(ref: str | None) -> str:
    """What a page calls the base: its declared name, else the reference itself."""
    base = describe(ref)
    return base.name if base else (ref or "the base")


DEFAULT_BASE = "bundled:minilm"      # the CPU profiles' base, where a caller does not say which


def untrained_label(ref: str | None = None) -> str:
    """The label of Table 3's row (and the attention study's encoder) of the base checkpoint, not fine-tuned."""
    return f"{base_name(ref or DEFAULT_BASE)}, not fine-tuned"
