"""Typed settings: one frozen dataclass per ``params.yaml`` block, each field carrying its validation rule.

``ecqg.core.config`` validates a params file with the rules declared here (:meth:`Params.rules`: one schema), and
:func:`of` (and ``ecqg.core.config.load_settings`` from a file) give the typed tree a stage or notebook passes down by block (``settings.dpr.finetune``),
so a function shows in its signature which settings it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ecqg.core.settings.blocks import (Attention, Bm25, Data, Distant, Evaluation, Filtering, Hybrid, Mechanism, Mixing,
                                       Pseudo, Retrieval, Tfidf, Yields)
from ecqg.core.settings.models import (Dpr, DprFinetune, DprPretrain, DprTrain, Encode, Generate, HfTrain, Index, Mrc,
                                       MrcTrain, Qg, QgTrain, Selector, SelectorTrain, TempQG)
from ecqg.core.settings.params import PROFILES, Params
from ecqg.core.settings.retrievers import PolyDpr

__all__ = ["Attention", "Bm25", "Data", "Distant", "Dpr", "DprFinetune", "DprPretrain", "DprTrain", "Encode",
           "Evaluation", "Filtering", "Generate", "HfTrain", "Hybrid", "Index", "Mechanism", "Mixing", "Mrc",
           "MrcTrain", "PROFILES", "Params", "PolyDpr", "Pseudo", "Qg", "QgTrain", "Retrieval", "Selector", "SelectorTrain",
           "TempQG", "Tfidf", "Yields", "of"]


def of(params: Mapping[str, Any] | Params) -> Params:
    """The typed tree of a validated params mapping (a Params is returned as it is)."""
    return params if isinstance(params, Params) else Params.of(params)

