"""The dense retrievers the study trains, declared once: one table, and everything else derives from it.

A variant is a retriever kind, the synthetic sets it pre-trains on (in order; none: fine-tuned on gold data only),
its label in Table 3, the seed list it trains with, and the comparisons it enters (A - B with it as A). From this
table come the DVC stages that train and search with it (``python -m ecqg.tooling.dag`` writes them into dvc.yaml), its
model, checkpoint and run paths, Table 3's rows and labels, the pairs of notebooks 06 and 07 and the claims of the
paper (the comparisons among the ``paper`` variants). Adding a variant is one entry in :data:`TABLE`
(tests/test_variants.py adds a toy one and follows it through the DAG and the tables).

Every training run of a variant is a *replicate*: with seed s it pre-trains on its sets (if any) with seed s, then
fine-tunes from there with seed s, so a replicate of a synthetic variant replicates its pre-training too (issue 47:
the variance of the thing the paper is about). ``paper`` variants train once per seed of ``dpr.seeds``, the related
system's once per seed of ``dpr.related_seeds``.

Foundation module: plain data and names, no torch, so params validation and the DAG writer can read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ecqg.core import paths, schemes

if TYPE_CHECKING:   # the settings blocks name this table in their rules: no import at run time (a cycle)
    from ecqg.core.settings import Dpr, Mixing

TEMPQG = schemes.TEMPQG.name       # the template-conditioned scheme names its set and its DPR variant too

PAPER, RELATED = "paper", "related"          # which seed list: dpr.seeds | dpr.related_seeds
SEED_LISTS = {PAPER: "seeds", RELATED: "related_seeds"}   # the ``dpr`` block's field holding each list
BASELINE = "baseline"                        # the gold-only DPR: the row every remedy is compared with
UNTRAINED = "untrained"                      # the base checkpoint, not fine-tuned, where a variant name goes
                                             # (pre_against, retrieve_dense's argument, its index, attention keys)
# Its Table 3 row and run name (outputs/runs/, the results files). Named when the bundled MiniLM was the only base;
# naming it after the profile's base renames committed result files, so it comes with mini's rerun.
UNTRAINED_SYSTEM = "minilm_untrained"
SPARSE = ("tfidf", "bm25")
PRE_SUFFIX = "_pre"                          # uncon_pre: a pre-trained variant right after its pre-training


@dataclass(frozen=True)
class SyntheticSet:
    """A pre-training set (DPR retriever-json): the file and the stage that writes it. ``per_replicate``: stages
    02-04 write one per replicate when ``qg.generate.per_replicate`` (:func:`generation_seeds`); ``path`` is then
    the first replicate's, the one the related system's stages (pseudo-queries, TempQG) and the analyses read."""

    name: str
    path: Path
    stage: str
    per_replicate: bool = False

    def at(self, seed: int | str | None) -> Path:
        """The file replicate ``seed`` pre-trains on (``seed`` may be DVC's ``${item.seed}``): its own under
        ``outputs/synthetic/s<seed>/`` for a per-replicate set, else the one file."""
        if seed is None or not self.per_replicate:
            return self.path
        return paths.SYNTHETIC / f"s{seed}" / self.path.relative_to(paths.SYNTHETIC)


SETS: dict[str, SyntheticSet] = {s.name: s for s in (
    SyntheticSet("uncon", paths.SYNTHETIC / "uncon.json", "mixing", per_replicate=True),
    SyntheticSet("mixed", paths.SYNTHETIC / "mixed.json", "mixing", per_replicate=True),
    SyntheticSet("etm", paths.PSEUDO / "etm.json", "pseudo_queries"),
    SyntheticSet("rsm", paths.PSEUDO / "rsm.json", "pseudo_queries"),
    SyntheticSet(TEMPQG, paths.TEMPQG / f"{TEMPQG}.json", "tempqg"),
)}
DOSED_SETS = ("uncon", "mixed")              # stage 04 also writes these at each size of ``mixing.doses``


@dataclass(frozen=True)
class Variant:
    """One dense retriever of the study (see the module docstring)."""

    name: str
    label: str
    kind: str | None = None                  # retriever kind (ecqg.core.settings.retrievers); None: dpr.model
    pretrain: tuple[str, ...] = ()           # SETS, pre-trained on in this order, each phase from the last
    seeds: str = RELATED
    against: tuple[str, ...] = ()            # trained rows it is compared with (variant names, "bm25")
    pre_against: tuple[str, ...] = ()        # its pre-training-only row against these (variants' pre rows, "untrained")
    group: str | None = None                 # variants sharing one dvc.yaml block per phase (``finetune_pseudo``)
    note: str = field(default="", compare=False)

    @property
    def system(self) -> str:
        """Its Table 3 row: ``dpr_<name>`` (the mean over its runs)."""
        return f"dpr_{self.name}"

    @property
    def pre_system(self) -> str:
        """Its row right after pre-training: ``dpr_<name>_pre``."""
        return f"dpr_{self.name}{PRE_SUFFIX}"

    @property
    def pretrained(self) -> bool:
        return bool(self.pretrain)

    def retriever_kind(self, default_kind: str) -> str:
        """Its retriever kind: its own, else ``default_kind`` (``dpr.model``)."""
        return self.kind or default_kind


TABLE: tuple[Variant, ...] = (
    Variant("baseline", "DPR", seeds=PAPER, against=("bm25",),
            note="the base checkpoint fine-tuned on the gold data only: the paper's DPR row"),
    Variant("uncon", "UnCon-DPR", pretrain=("uncon",), seeds=PAPER, against=("baseline",),
            pre_against=(UNTRAINED,), note="pre-trained on unconditioned generated questions (stage 04)"),
    Variant("mixed", "Mixed-DPR", pretrain=("mixed",), seeds=PAPER, against=("uncon", "baseline"),
            pre_against=("uncon", UNTRAINED),
            note="pre-trained on entity-conditioned + unconditioned questions, half each (stage 04): the paper's"),
    Variant("etm", "ETM-DPR", pretrain=("etm",), against=("baseline",), pre_against=(UNTRAINED,),
            group="pseudo", note="generator-free pseudo-queries, title + top TF-IDF words (Luo et al. 2022, §5)"),
    Variant("rsm", "RSM-DPR", pretrain=("rsm",), against=("baseline",), pre_against=(UNTRAINED,),
            group="pseudo",
            note="generator-free pseudo-queries, one sentence reduced to its top TF-IDF words (Luo et al. 2022)"),
    Variant(TEMPQG, "TempQG-DPR", pretrain=(TEMPQG,),
            against=("uncon", "baseline"), pre_against=("uncon", UNTRAINED),
            note="template-conditioned questions (Luo et al. 2022, §4; stage tempqg)"),
    Variant("poly_baseline", "Poly-DPR", kind="polydpr", against=("baseline",),
            note="Poly-DPR (Luo et al. 2022, §3.2) trained like DPR"),
    Variant("poly_mixed", "Mixed Poly-DPR", kind="polydpr", pretrain=("mixed",), against=("mixed", "poly_baseline"),
            note="Poly-DPR pre-trained on Mixed's set: the 2 x 2 of architecture and data"),
    Variant("poly_rsm_tempqg", "Poly-DPR, RSM then TempQG", kind="polydpr", pretrain=("rsm", TEMPQG),
            against=("poly_baseline", "baseline", TEMPQG),
            note="Luo et al.'s best BioASQ recipe: Poly-DPR pre-trained on RSM, then on TempQG's questions"),
)
# Comparisons a variant enters as B where A is declared earlier in the table cannot be written there; these are the
# generated sets against the generator-free ones and TempQG's (does the question generator matter?).
GENERATOR_PAIRS: tuple[tuple[str, str], ...] = (
    ("uncon", "etm"), ("uncon", "rsm"), ("mixed", "etm"), ("mixed", "rsm"), ("mixed", TEMPQG),
    (TEMPQG, "etm"), (TEMPQG, "rsm"))


def by_name(table: Sequence[Variant] | None = None) -> dict[str, Variant]:
    table = TABLE if table is None else table
    return {v.name: v for v in table}


def get(name: str, table: Sequence[Variant] | None = None) -> Variant:
    """The variant called ``name``, also a dose variant (``uncon_d10000``); a clear error for an unknown one."""
    table = TABLE if table is None else table
    known = by_name(table)
    if name in known:
        return known[name]
    base, _, size = name.rpartition("_d")
    if base in DOSED_SETS and size.isdigit():
        return dose_variant(base, int(size), table)
    raise ValueError(f"unknown dense variant '{name}'; known: {', '.join(known)} (and <set>_d<size> for the "
                     f"doses of {', '.join(DOSED_SETS)})")


# ----------------------------------------------------------------------------------------------- doses
def dose_set(base: str, size: int | str) -> SyntheticSet:
    """Stage 04's ``base`` set cut to ``size`` questions (``mixing.doses``): nested, a smaller dose is a prefix of a
    larger one."""
    return SyntheticSet(f"{base}_d{size}", paths.SYNTHETIC / "doses" / f"{base}_d{size}.json", "mixing",
                        per_replicate=True)


def dose_variant(base: str, size: int, table: Sequence[Variant] | None = None) -> Variant:
    """``base`` (uncon or mixed) pre-trained on its set at ``size`` questions: pre-training only (the dose curve's
    rows right after pre-training); the fine-tuned rows are the main variants at ``mixing.total``."""
    table = TABLE if table is None else table
    if base not in DOSED_SETS:
        raise ValueError(f"no doses of '{base}': only of {', '.join(DOSED_SETS)}")
    main = by_name(table)[base]
    return Variant(f"{base}_d{size}", f"{main.label.removesuffix('-DPR')}, {size:,} questions", pretrain=(
        f"{base}_d{size}",), seeds=main.seeds, note=f"dose curve: {base} at {size} questions")


def synthetic_set(name: str) -> SyntheticSet:
    if name in SETS:
        return SETS[name]
    base, _, size = name.rpartition("_d")
    if base in DOSED_SETS and size.isdigit():
        return dose_set(base, int(size))
    raise ValueError(f"unknown synthetic set '{name}'; known: {', '.join(SETS)}")


def generation_seeds(dpr: Dpr, per_replicate: bool) -> list[int | None]:
    """The replicates stages 02-04 sample, filter and mix a set for: every seed of ``dpr.seeds`` (a leading part of
    which is ``dpr.related_seeds``) with ``qg.generate.per_replicate``, so the spread over a synthetic arm's runs
    includes its questions'; else ``[None]``: one set that every replicate reads."""
    if per_replicate:
        return [int(s) for s in dpr.seeds]
    return [None]


def set_path(name: str, seed: int | str | None, per_replicate: bool) -> Path:
    """The file of set ``name`` that replicate ``seed`` pre-trains on (``qg.generate.per_replicate``: one set per
    replicate, else one for all)."""
    return synthetic_set(name).at(seed if per_replicate else None)


def doses(mixing: Mixing) -> list[int]:
    """The dose curve's set sizes (``mixing.doses``)."""
    return [int(n) for n in mixing.doses or []]


# ----------------------------------------------------------------------------------------------- a profile's rows


ALL = "all"                                  # ``dpr.variants: all``: every entry of the table


def enabled(variant: Variant, dpr: Dpr) -> bool:
    """Does the profile train ``variant``? (``dpr.variants`` names it, or is ``all``.)"""
    chosen = dpr.variants
    return chosen == ALL or variant.name in chosen


def trained(dpr: Dpr, table: Sequence[Variant] | None = None) -> list[Variant]:
    """The variants the profile trains (``dpr.variants``), in table order."""
    table = TABLE if table is None else table
    return [v for v in table if enabled(v, dpr)]


def builds(stage: str, dpr: Dpr, table: Sequence[Variant] | None = None) -> bool:
    """Does a trained variant pre-train on a set that ``stage`` writes (``pseudo_queries``, ``tempqg``)? A profile
    without such a variant has no such stage."""
    return any(synthetic_set(s).stage == stage for v in trained(dpr, table) for s in v.pretrain)


def seeds(variant: Variant | str, dpr: Dpr) -> list[int]:
    """The training seeds of a variant: one replicate each (pre-training, if any, and fine-tuning)."""
    variant = get(variant) if isinstance(variant, str) else variant
    return [int(s) for s in getattr(dpr, SEED_LISTS[variant.seeds])]


def label(system: str, table: Sequence[Variant] | None = None) -> str:
    """Table 3's label of a row (``dpr_mixed`` -> "Mixed-DPR (ours)", ``dpr_mixed_pre`` -> "Mixed, pre-training only
    (ours)", ``dpr_mixed_d5000_pre`` -> "Mixed, 5,000 questions, pre-training only (ours)"); other systems
    (sparse, hybrids) are labelled where they are made."""
    table = TABLE if table is None else table
    known = by_name(table)
    name = system.removeprefix("dpr_")
    if name.endswith(PRE_SUFFIX):
        try:
            base = get(name.removesuffix(PRE_SUFFIX), table)
        except ValueError:
            return system
        short = base.label if base.label.endswith("Poly-DPR") else base.label.removesuffix("-DPR")   # UnCon, ...
        return f"{short}, pre-training only (ours)"
    if name in known:
        return f"{known[name].label} (ours)"
    return system


def pairs(dpr: Dpr, table: Sequence[Variant] | None = None) -> list[tuple[str, str]]:
    """The comparisons (A - B) among the dense rows the profile has: each variant against what it declares, its
    pre-training-only row against what it declares, and :data:`GENERATOR_PAIRS`; pairs with a row the profile lacks
    are left out."""
    table = TABLE if table is None else table
    names = {v.name for v in trained(dpr, table)}

    def row(name: str, pre: bool = False) -> str | None:
        if name in SPARSE:
            return name
        if name == UNTRAINED:
            return UNTRAINED_SYSTEM
        if name not in names:
            return None
        return f"dpr_{name}{PRE_SUFFIX if pre else ''}"

    out = []
    for v in trained(dpr, table):
        out += [(v.system, row(b)) for b in v.against]
        out += [(v.pre_system, row(b, pre=True)) for b in v.pre_against]
    out += [(row(a), row(b)) for a, b in GENERATOR_PAIRS]
    return [(a, b) for a, b in dict.fromkeys(out) if a and b]


def paper_variants(table: Sequence[Variant] | None = None) -> list[str]:
    """The paper's own systems (DPR, UnCon-DPR, Mixed-DPR): every profile trains them (``dpr.variants``)."""
    table = TABLE if table is None else table
    return [v.name for v in table if v.seeds == PAPER]


def paper_pairs(table: Sequence[Variant] | None = None) -> list[tuple[str, str]]:
    """The paper's own orderings: comparisons among the ``paper`` variants (UnCon - DPR, Mixed - UnCon, Mixed -
    DPR)."""
    table = TABLE if table is None else table
    paper = {v.name for v in table if v.seeds == PAPER}
    return [(f"dpr_{v.name}", f"dpr_{b}") for v in table if v.name in paper for b in v.against if b in paper]


# ----------------------------------------------------------------------------------------------- stage names
# dvc.yaml's blocks (``python -m ecqg.tooling.dag``): a variant's pre-training and fine-tuning have blocks of their own
# (``pretrain_uncon@2022``, ``finetune_baseline@2022``), except the variants of a group (ETM and RSM), which share one
# (``finetune_pseudo@etm-2022``); retrieval needs no per-variant settings, so one block serves each seed list
# (``retrieve_dense@mixed-2022``, ``retrieve_dense_related@tempqg-2022``, ``retrieve_dense_pseudo@etm-2022``, and
# ``retrieve_pretrained[_related|_pseudo]@...`` for the models right after pre-training); the dose curve has
# ``pretrain_dose@uncon-10000-2022`` and ``retrieve_dose@...``.
RETRIEVAL_PHASES = ("retrieve", "retrieve_pre")


def group(variant: Variant) -> str | None:
    """The block a variant shares with others of its group (``pseudo``: ETM and RSM), else None."""
    return variant.group


def is_dose(variant: Variant) -> bool:
    return variant.name.rpartition("_d")[0] in DOSED_SETS and variant not in TABLE


def block(phase: str, variant: Variant) -> str:
    """The dvc.yaml block that runs ``phase`` (pretrain | finetune | retrieve | retrieve_pre) for ``variant``."""
    if is_dose(variant):
        if phase not in ("pretrain", "retrieve_pre"):
            raise ValueError(f"{variant.name} is a dose of the curve: it is pre-trained and searched with right after "
                             f"pre-training only, so it has no {phase!r} stage (the fine-tuned rows are the full sets')")
        return {"pretrain": "pretrain_dose", "retrieve_pre": "retrieve_dose"}[phase]
    if phase in RETRIEVAL_PHASES:
        shared = group(variant) or ("related" if variant.seeds == RELATED else "")
        return "_".join(p for p in ("retrieve_pretrained" if phase == "retrieve_pre" else "retrieve_dense", shared)
                        if p)
    return f"{phase}_{group(variant) or variant.name}"


def shares_block(phase: str, variant: Variant) -> bool:
    """Is ``variant`` one item of a block's ``variant`` axis (rather than the block's only variant)?"""
    return phase in RETRIEVAL_PHASES or group(variant) is not None


def stage_name(phase: str, variant: str, seed: int) -> str:
    """The stage (as DVC names it) that runs ``phase`` for replicate ``seed`` of ``variant``."""
    v = get(variant)
    name = block(phase, v)
    if is_dose(v):
        base, _, size = v.name.rpartition("_d")
        return f"{name}@{base}-{size}-{seed}"
    return f"{name}@{v.name}-{seed}" if shares_block(phase, v) else f"{name}@{seed}"


def pretrain_stage(variant: str, seed: int) -> str:
    return stage_name("pretrain", variant, seed)
