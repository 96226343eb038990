"""The retriever kinds params may name (``dpr.model``, a variant's ``kind``), each declared once: the module that
defines and registers its class (imported on first use), what the pipeline asks of it, and the settings block of
its own where it has one (a top-level params block named after the kind, whose fields carry their rules). A new
kind is its module, one entry here and its block's values in ``params/mini.yaml``. Torch-free, so params
validation, the DAG writer and the registry all read it without importing a model."""

from __future__ import annotations

from dataclasses import dataclass

from ecqg.core.settings.checks import positive
from ecqg.core.settings.schema import Block, setting


@dataclass(frozen=True)
class PolyDpr(Block):
    codes: int = setting((int,), positive, "an integer > 0 (K code vectors per passage; 1 = a single-vector control)")
    attend: str = setting((str,), lambda v: v in ("content", "all"), "content or all")


@dataclass(frozen=True)
class RetrieverKind:
    """``module`` defines and registers the class; ``settings``: its own block (the kind's constructor takes the
    block's keys; its stages depend on the block); ``one_vector``: a passage is one [CLS] vector whose attention
    stage 06 analyses and the Table 1 probe scores; ``seeded_init``: it adds weights drawn from the training seed
    when built (the constructor takes ``code_seed``)."""

    module: str
    settings: type[Block] | None = None
    one_vector: bool = True
    seeded_init: bool = False


KINDS = {
    "biencoder": RetrieverKind("ecqg.retrieval.biencoder"),   # DPR: one [CLS] vector per passage, dot product
    "polydpr": RetrieverKind("ecqg.retrieval.polydpr", PolyDpr, one_vector=False, seeded_init=True),  # Poly-DPR:
    # K code-pooled vectors per passage, the best one scores
}
RETRIEVERS = {name: kind.module for name, kind in KINDS.items()}


def traits(name: str) -> RetrieverKind:
    """What the pipeline asks of kind ``name``, so that no stage compares kind strings."""
    if name not in KINDS:
        raise ValueError(f"unknown retriever kind {name!r}; known: {sorted(KINDS)}")
    return KINDS[name]


def settings_block(name: str) -> str | None:
    """The params block of kind ``name``'s own settings (named after the kind), or None."""
    return name if traits(name).settings else None


def kind_blocks(kinds=None) -> dict[str, type[Block]]:
    """Every kind with settings of its own -> its block class: the top-level blocks :class:`Params` adds."""
    return {name: k.settings for name, k in (KINDS if kinds is None else kinds).items() if k.settings}
