"""The conditioning schemes of the question generators, registered once: what a scheme's questions are conditioned on
besides the passage, how that goes into the generator's source, which stage trains and samples it, and where its
generator starts from.

Why a registry: "generator" names both an architecture (``ecqg.qg.generators``: prefix LM, bert2bert, seq2seq) and
what the study varies, the conditioning (unconditioned, entity-conditioned, template-conditioned); the second was
strings compared in a dozen places. Every record, file and DVC stage names a scheme by its ``name``; the checks and
the input builders read its entry (``tests/test_qg.py`` registers a toy scheme). Foundation-light: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

QUESTION_GENERATION = "question_generation"       # stage 02
TEMPQG_STAGE = "tempqg"                            # stage tempqg (notebook 08)


@dataclass(frozen=True)
class Scheme:
    """One conditioning scheme. ``condition``: the record field that carries what the questions are about besides
    the passage (None: nothing); ``marked``: the condition is marked in the passage of the source
    (``qg.entity_marking``); ``stage``: the stage that trains and samples it; ``starts_from``: its generator's
    starting point (``qg.model``, ``qg.con_init`` or another scheme's trained generator)."""

    name: str
    label: str
    condition: str | None = None
    marked: bool = False
    stage: str = QUESTION_GENERATION
    starts_from: str = "qg.model"

    @property
    def conditioned(self) -> bool:
        return self.condition is not None


SCHEMES: dict[str, Scheme] = {}


def register(scheme: Scheme) -> Scheme:
    """Make ``scheme`` known (a name registered twice is an error: every record names its scheme)."""
    if scheme.name in SCHEMES:
        raise ValueError(f"conditioning scheme '{scheme.name}' is registered twice")
    SCHEMES[scheme.name] = scheme
    return scheme


def get(name: str) -> Scheme:
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown conditioning scheme '{name}'; known: {', '.join(SCHEMES)}") from None


def names() -> tuple[str, ...]:
    """Every scheme, in registration order: the generators whose records the filters read."""
    return tuple(SCHEMES)


def of_stage(stage: str = QUESTION_GENERATION) -> tuple[str, ...]:
    """The schemes a stage trains and samples (stage 02: the paper's two)."""
    return tuple(name for name, s in SCHEMES.items() if s.stage == stage)


UNCON = register(Scheme("uncon", "unconditioned"))
CON = register(Scheme("con", "entity-conditioned", condition="entity", marked=True, starts_from="qg.con_init"))
TEMPQG = register(Scheme("tempqg", "template-conditioned (TempQG, Luo et al. 2022)", condition="template",
                         stage=TEMPQG_STAGE, starts_from="uncon"))
