"""The metrics files the notebook stages write under ``results/<profile>/``, each declared once as a frozen
dataclass: the notebook fills its fields and writes it; the report (``ecqg.report.markdown.load_metrics``) and a
stage that reads another's record (08 reads 02's quality) read it through its type. A file whose top-level
fields are not its type's (one missing, or one the type does not know) is refused naming the file and the field,
so a renamed key fails where it is read.

Only the top level is typed: the nested tables (per encoder, per generator, per set) keep the shape the stage's
own functions give them. In the core because the stages write these files and the report, a layer below the
stages, reads them. A field with a default is one the committed records of an older profile lack (they were
written before it existed); every other field is required. Fields are keyword-only and in the file's order."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_json, write_json


@dataclass(frozen=True, kw_only=True)
class MetricsFile:
    """One metrics file: ``FILE`` is its name in the profile's results folder."""

    FILE: ClassVar[str]

    def as_dict(self) -> dict[str, Any]:
        """The file's fields in order; a field an older record lacks (left at its default, None) stays out."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.default is dataclasses.MISSING or getattr(self, f.name) is not None}

    def write(self, metrics_dir: Path) -> Path:
        """Write the record to ``metrics_dir/FILE`` (atomically, as every JSON of the repository) and return the path.
        Today's stages write every field: a None where only an older record may lack the field is refused, since
        :meth:`as_dict` would leave it out."""
        unset = [f.name for f in dataclasses.fields(self)
                 if f.default is not dataclasses.MISSING and getattr(self, f.name) is None]
        if unset:
            raise ValueError(f"{type(self).__name__}: field {unset[0]!r} is None; only records written before it "
                             "existed lack it")
        return write_json(Path(metrics_dir) / self.FILE, self.as_dict())

    @classmethod
    def from_dict(cls, data: Mapping, source: str = "") -> MetricsFile:
        where = source or cls.FILE
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in data if k not in names]
        if unknown:
            raise DataFormatError(where, None, unknown[0], f"not a field of {cls.__name__} "
                                  f"(ecqg.core.metrics_files; its fields: {', '.join(names)})")
        required = [f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        missing = [k for k in required if k not in data]
        if missing:
            raise DataFormatError(where, None, missing[0], f"missing ({cls.__name__} requires it; rerun the stage "
                                  "that writes the file)")
        return cls(**data)

    @classmethod
    def require(cls, metrics_dir: Path) -> MetricsFile:
        """The record in ``metrics_dir``; a stage that needs another's record says which file is missing."""
        got = cls.read(metrics_dir)
        if got is None:
            raise FileNotFoundError(f"{Path(metrics_dir) / cls.FILE}: no {cls.__name__} record (run the stage "
                                    "that writes it first)")
        return got

    @classmethod
    def read(cls, metrics_dir: Path) -> MetricsFile | None:
        """The record in ``metrics_dir``, or None where the stage has not run there."""
        path = Path(metrics_dir) / cls.FILE
        if not path.is_file():
            return None
        return cls.from_dict(read_json(path, dict, "a JSON object"), str(path))


@dataclass(frozen=True, kw_only=True)
class AttentionBias(MetricsFile):
    """Stage 01: the studied passages' sampling, the entity conditioning, each encoder's summary."""

    FILE: ClassVar[str] = "attention_bias.json"
    profile: str
    sampling: Mapping
    conditioning: Mapping
    example_passage: str | None
    paper: Mapping                      # the paper's position-bias shares (ecqg.core.paper.POSITION_BIAS)
    encoders: Mapping


@dataclass(frozen=True, kw_only=True)
class QuestionGeneration(MetricsFile):
    """Stage 02: the generators' training, the sampled questions' quality and the generation funnel."""

    FILE: ClassVar[str] = "question_generation.json"
    profile: str
    model: str
    architecture: str | None = None     # qg.architecture
    per_replicate: bool | None = None   # qg.generate.per_replicate
    entities: Mapping
    training: Mapping
    quality: Mapping
    generation: Mapping


@dataclass(frozen=True, kw_only=True)
class Filtering(MetricsFile):
    """Stage 03: the reader, the two filters' rules and the funnel of every generator's questions."""

    FILE: ClassVar[str] = "filtering.json"
    profile: str
    stage1_rule: str
    hardness: Mapping | None = None     # stage 2's rule and model
    mrc: Mapping
    funnel: Mapping
    probes: Mapping


@dataclass(frozen=True, kw_only=True)
class Mixing(MetricsFile):
    """Stage 04: the training sets' sizes, pools, dedupe and hard negatives, and the sets' statistics (entity and
    answer types, positions: the ``statistics`` keys of ``ecqg.filtering.mixing``)."""

    FILE: ClassVar[str] = "mixing.json"
    profile: str
    sizes: Mapping
    pools: Mapping
    dedupe: Mapping
    sets: Mapping
    hard_negatives: Mapping
    replicates: Mapping | None = None   # each replicate's pools and sets
    entity_types: Mapping
    answer_types_uncon: Mapping
    answer_types_con: Mapping
    con_entity_position: Mapping
    uncon_answer_position: Mapping


@dataclass(frozen=True, kw_only=True)
class QuestionQuality(MetricsFile):
    """Stage 04: the method's bar for every synthetic set along the filter chain
    (``stages.mixing.question_quality``)."""

    FILE: ClassVar[str] = "question_quality.json"
    profile: str
    bar: Mapping
    rows: list
    samples: Mapping


@dataclass(frozen=True, kw_only=True)
class PolyCodes(MetricsFile):
    """Stage 06: what each Poly-DPR's codes attend to."""

    FILE: ClassVar[str] = "poly_codes.json"
    profile: str
    dpr_training_seed: int
    codes_k: int
    passages: int
    probe_questions: int
    systems: Mapping


@dataclass(frozen=True, kw_only=True)
class FinetuneCurve(MetricsFile):
    """Stage 06: Top-k along fine-tuning (the held-out snapshots of one training seed)."""

    FILE: ClassVar[str] = "finetune_curve.json"
    profile: str
    dpr_training_seed: int | None
    variants: list
    accuracy: list
    paired: list


@dataclass(frozen=True, kw_only=True)
class MechanismCurve(MetricsFile):
    """Stage 07: the mechanism's measures along fine-tuning."""

    FILE: ClassVar[str] = "mechanism_curve.json"
    profile: str
    dpr_training_seed: int | None
    variants: list
    psi: list
    entity_paired: list
    moved_sentence: list


@dataclass(frozen=True, kw_only=True)
class TempQG(MetricsFile):
    """Stage 08: the templates, the selector, the generator, the questions' quality and the set's funnel."""

    FILE: ClassVar[str] = "tempqg.json"
    profile: str
    templates: Mapping
    selector: Mapping
    generator: Mapping
    quality: Mapping
    set: Mapping


RECORDS: dict[str, type[MetricsFile]] = {cls.FILE: cls for cls in (
    AttentionBias, QuestionGeneration, Filtering, Mixing, QuestionQuality, PolyCodes, FinetuneCurve,
    MechanismCurve, TempQG)}
