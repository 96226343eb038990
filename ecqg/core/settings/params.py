"""The whole params tree, typed: :class:`Params` holds the run-wide settings, one typed block per params block and
one per retriever kind with settings of its own (``ecqg.core.settings.retrievers``: a new kind adds its block
there, not here). Built once at the edge (a stage's ``main``, a notebook's first cell) from the validated mapping;
functions below it take the block, or the values, they use."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ecqg.core.device import is_valid_setting
from ecqg.core.settings.blocks import (Attention, Bm25, Data, Distant, Evaluation, Filtering, Hybrid, Mixing, Pseudo,
                                       Retrieval, Tfidf, Yields)
from ecqg.core.settings.checks import nonneg
from ecqg.core.settings.models import Dpr, Mrc, Qg, TempQG
from ecqg.core.settings.retrievers import kind_blocks
from ecqg.core.settings.schema import Block, nested, setting

# The profiles are the presets in params/ (a new one is one file: its overlay of mini), found beside the package so a
# run from any directory knows them.
PROFILES = tuple(sorted(p.stem for p in (Path(__file__).resolve().parents[3] / "params").glob("*.yaml")))


def _processes(v) -> bool:
    return v == "auto" or (isinstance(v, int) and v > 0)


@dataclass(frozen=True)
class RunParams(Block):
    """The run-wide settings and the pipeline's blocks; :class:`Params` adds the retriever kinds' own."""

    profile: str = setting((str,), lambda v: v in PROFILES, f"one of {PROFILES}")
    seed: int = setting((int,), nonneg, "an integer >= 0")
    device: str = setting((str,), is_valid_setting, "auto, cpu, cuda or cuda:N")
    processes: int | str = setting((int, str), _processes,
                                   "an integer > 0, or auto (one process per CUDA GPU visible at run time; 1 on a "
                                   "CPU)")
    launcher_args: list | None = setting((list, type(None)),
                                         lambda v: v is None or all(isinstance(a, str) for a in v),
                                         "null or a list of torchrun arguments (strings)")
    collective_timeout_minutes: int = setting((int,), lambda v: v > 0,
                                              "an integer > 0 (minutes a process waits at a collective)")
    data: Data = nested(Data)
    bm25: Bm25 = nested(Bm25)
    tfidf: Tfidf = nested(Tfidf)
    retrieval: Retrieval = nested(Retrieval)
    distant: Distant = nested(Distant)
    dpr: Dpr = nested(Dpr)
    attention: Attention = nested(Attention)
    qg: Qg = nested(Qg)
    mrc: Mrc = nested(Mrc)
    filtering: Filtering = nested(Filtering)
    mixing: Mixing = nested(Mixing)
    yields: Yields = nested(Yields)
    pseudo: Pseudo = nested(Pseudo)
    tempqg: TempQG = nested(TempQG)
    hybrid: Hybrid = nested(Hybrid)
    evaluation: Evaluation = nested(Evaluation)

    @property
    def seeds(self) -> list[int]:
        """The training replicates' seeds (``dpr.seeds``)."""
        return list(self.dpr.seeds)

    @property
    def primary_seed(self) -> int:
        """The first replicate's seed, whose models feed the analyses that need one model per variant."""
        return self.dpr.seeds[0]


def params_class(kinds=None) -> type[RunParams]:
    """The whole tree's class: :class:`RunParams` and, after its blocks, a block per retriever kind with settings
    of its own (``kinds``: default ``ecqg.core.settings.retrievers.KINDS``; a test passes its toy kind's)."""
    blocks = [(name, block, nested(block)) for name, block in kind_blocks(kinds).items()]
    cls = dataclasses.make_dataclass("Params", blocks, bases=(RunParams,), frozen=True)
    cls.__module__ = __name__
    return cls


Params = params_class()
