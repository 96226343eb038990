"""How a typed settings block is declared: a frozen dataclass whose every field carries its validation rule
(allowed types, a check, what a valid value looks like) as field metadata, the shape of
:class:`ecqg.core.train_config.TrainConfig`. ``ecqg.core.config`` validates ``params.yaml`` with the rules the blocks
declare (one schema), then :meth:`Block.of` builds the typed tree once at the edge.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ecqg.core.train_config import RULE, Rule, rule as train_rule

NESTED = "block"    # field metadata: the Block class of a nested params block


def setting(types: tuple[type, ...], check: Callable[[Any], bool] | None, expected: str):
    """A field of a params block: its rule is the field's metadata (no default: every key is in the params file)."""
    return dataclasses.field(metadata={RULE: (types, check, expected)})


def trained(name: str):
    """A field that is a :class:`TrainConfig` setting: TrainConfig's own rule (one rule per setting)."""
    return dataclasses.field(metadata={RULE: train_rule(name)})


def nested(block: type[Block]):
    """A field holding a nested params block (``dpr.finetune``)."""
    return dataclasses.field(metadata={NESTED: block})


@dataclasses.dataclass(frozen=True)
class Block:
    """A params block: built from the validated mapping; ``rules`` lists the block's rules by dotted key."""

    @classmethod
    def rules(cls, prefix: str = "") -> dict[str, Rule]:
        """``{dotted key: rule}`` for every setting of the block and its nested blocks, in declaration order."""
        out: dict[str, Rule] = {}
        for f in dataclasses.fields(cls):
            dotted = f"{prefix}{f.name}"
            if NESTED in f.metadata:
                out.update(f.metadata[NESTED].rules(dotted + "."))
            else:
                out[dotted] = f.metadata[RULE]
        return out

    @classmethod
    def leaf_mappings(cls, prefix: str = "") -> set[str]:
        """The dotted keys whose value is a mapping checked as a whole (``data.test_sets``, ``dpr.index.params``)."""
        out = set()
        for f in dataclasses.fields(cls):
            dotted = f"{prefix}{f.name}"
            if NESTED in f.metadata:
                out |= f.metadata[NESTED].leaf_mappings(dotted + ".")
            elif dict in f.metadata[RULE][0]:
                out.add(dotted)
        return out

    @classmethod
    def of(cls, values: Mapping[str, Any]):
        """The typed block of an already validated mapping (``ecqg.core.config.validate``); a missing key is a
        KeyError naming it, not a default."""
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in values:
                raise KeyError(f"{cls.__name__}: the params block has no '{f.name}' (validate the params first)")
            value = values[f.name]
            kwargs[f.name] = f.metadata[NESTED].of(value) if NESTED in f.metadata else value
        return cls(**kwargs)

    def as_dict(self) -> dict[str, Any]:
        """The block as the params mapping it came from (for fingerprints, records and overlays)."""
        return {f.name: (getattr(self, f.name).as_dict() if NESTED in f.metadata else getattr(self, f.name))
                for f in dataclasses.fields(self)}

    def replace(self, **changes):
        """A copy with ``changes`` (a variant's or a stage's override of a setting)."""
        return dataclasses.replace(self, **changes)
