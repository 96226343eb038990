"""The dense retrievers the study trains, declared once: one table, and everything else derives from it.

A variant is a retriever kind, the synthetic sets it pre-trains on (in order; none: fine-tuned on gold data only),
its label in Table 3, the seed list it trains with, and the comparisons it enters (A - B with it as A). From this
table come the DVC stages that train and search with it (``python -m ecqg.dag`` writes them into dvc.yaml), its
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ecqg import paths

PAPER, RELATED = "paper", "related"          # which seed list: dpr.seeds | dpr.related_seeds
SEED_LISTS = {PAPER: "dpr.seeds", RELATED: "dpr.related_seeds"}
UNTRAINED = "minilm_untrained"               # Table 3's row of the base checkpoint, not fine-tuned
SPARSE = ("tfidf", "bm25")
PRE_SUFFIX = "_pre"                          # uncon_pre: a pre-trained variant right after its pre-training


@dataclass(frozen=True)
class SyntheticSet:
    """A pre-training set (DPR retriever-json): the file, the stage that writes it, and the params list that must
    name it for the profile to build it (None: always built)."""

    name: str
    path: Path
    stage: str
    enabled_by: str | None = None


SETS: dict[str, SyntheticSet] = {s.name: s for s in (
    SyntheticSet("uncon", paths.SYNTHETIC / "uncon.json", "mixing"),
    SyntheticSet("mixed", paths.SYNTHETIC / "mixed.json", "mixing"),
    SyntheticSet("etm", paths.PSEUDO / "etm.json", "pseudo_queries", enabled_by="pseudo.variants"),
    SyntheticSet("rsm", paths.PSEUDO / "rsm.json", "pseudo_queries", enabled_by="pseudo.variants"),
    SyntheticSet(paths.TEMPQG_GENERATOR, paths.TEMPQG / f"{paths.TEMPQG_GENERATOR}.json", "tempqg"),
)}
DOSED_SETS = ("uncon", "mixed")              # stage 04 also writes these at each size of ``mixing.doses``


@dataclass(frozen=True)
class Variant:
    """One dense retriever of the study (see the module docstring)."""

    name: str
    label: str
    kind: str | None = None                  # retriever kind (ecqg.retrieval.choices.RETRIEVERS); None: dpr.model
    pretrain: tuple[str, ...] = ()           # SETS, pre-trained on in this order, each phase from the last
    seeds: str = RELATED
    against: tuple[str, ...] = ()            # trained rows it is compared with (variant names, "bm25")
    pre_against: tuple[str, ...] = ()        # its pre-training-only row against these (variants' pre rows, "untrained")
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

    @property
    def enabled_by(self) -> str | None:
        """The params list that must name this variant (its sets') for a profile to train it."""
        return next((SETS[s].enabled_by for s in self.pretrain if SETS[s].enabled_by), None)

    def retriever_kind(self, params: Mapping) -> str:
        return self.kind or params["dpr"]["model"]


TABLE: tuple[Variant, ...] = (
    Variant("baseline", "DPR", seeds=PAPER, against=("bm25",),
            note="the base checkpoint fine-tuned on the gold data only: the paper's DPR row"),
    Variant("uncon", "UnCon-DPR", pretrain=("uncon",), seeds=PAPER, against=("baseline",),
            pre_against=("untrained",), note="pre-trained on unconditioned generated questions (stage 04)"),
    Variant("mixed", "Mixed-DPR", pretrain=("mixed",), seeds=PAPER, against=("uncon", "baseline"),
            pre_against=("uncon", "untrained"),
            note="pre-trained on entity-conditioned + unconditioned questions, half each (stage 04): the paper's"),
    Variant("etm", "ETM-DPR", pretrain=("etm",), against=("baseline",), pre_against=("untrained",),
            note="generator-free pseudo-queries, title + top TF-IDF words (Luo et al. 2022, §5)"),
    Variant("rsm", "RSM-DPR", pretrain=("rsm",), against=("baseline",), pre_against=("untrained",),
            note="generator-free pseudo-queries, one sentence reduced to its top TF-IDF words (Luo et al. 2022)"),
    Variant(paths.TEMPQG_GENERATOR, "TempQG-DPR", pretrain=(paths.TEMPQG_GENERATOR,),
            against=("uncon", "baseline"), pre_against=("uncon", "untrained"),
            note="template-conditioned questions (Luo et al. 2022, §4; stage tempqg)"),
    Variant("poly_baseline", "Poly-DPR", kind="polydpr", against=("baseline",),
            note="Poly-DPR (Luo et al. 2022, §3.2) trained like DPR"),
    Variant("poly_mixed", "Mixed Poly-DPR", kind="polydpr", pretrain=("mixed",), against=("mixed", "poly_baseline"),
            note="Poly-DPR pre-trained on Mixed's set: the 2 x 2 of architecture and data"),
    Variant("poly_rsm_tempqg", "Poly-DPR, RSM then TempQG", kind="polydpr", pretrain=("rsm", paths.TEMPQG_GENERATOR),
            against=("poly_baseline", "baseline", paths.TEMPQG_GENERATOR),
            note="Luo et al.'s best BioASQ recipe: Poly-DPR pre-trained on RSM, then on TempQG's questions"),
)
# Comparisons a variant enters as B where A is declared earlier in the table cannot be written there; these are the
# generated sets against the generator-free ones and TempQG's (does the question generator matter?).
GENERATOR_PAIRS: tuple[tuple[str, str], ...] = (
    ("uncon", "etm"), ("uncon", "rsm"), ("mixed", "etm"), ("mixed", "rsm"), ("mixed", paths.TEMPQG_GENERATOR),
    (paths.TEMPQG_GENERATOR, "etm"), (paths.TEMPQG_GENERATOR, "rsm"))


def by_name(table: Sequence[Variant] = TABLE) -> dict[str, Variant]:
    return {v.name: v for v in table}


def get(name: str, table: Sequence[Variant] = TABLE) -> Variant:
    """The variant called ``name``, also a dose variant (``uncon_d10000``); a clear error for an unknown one."""
    known = by_name(table)
    if name in known:
        return known[name]
    base, _, size = name.rpartition("_d")
    if base in DOSED_SETS and size.isdigit():
        return dose_variant(base, int(size), table)
    raise ValueError(f"unknown dense variant '{name}'; known: {', '.join(known)} (and <set>_d<size> for the "
                     f"doses of {', '.join(DOSED_SETS)})")


# ----------------------------------------------------------------------------------------------- doses
def dose_set(base: str, size: int) -> SyntheticSet:
    """Stage 04's ``base`` set cut to ``size`` questions (``mixing.doses``): nested, a smaller dose is a prefix of a
    larger one."""
    return SyntheticSet(f"{base}_d{size}", paths.SYNTHETIC / "doses" / f"{base}_d{size}.json", "mixing")


def dose_variant(base: str, size: int, table: Sequence[Variant] = TABLE) -> Variant:
    """``base`` (uncon or mixed) pre-trained on its set at ``size`` questions: pre-training only (the dose curve's
    rows right after pre-training); the fine-tuned rows are the main variants at ``mixing.total``."""
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


def doses(params: Mapping) -> list[int]:
    return [int(n) for n in params["mixing"].get("doses") or []]


# ----------------------------------------------------------------------------------------------- a profile's rows
def _dotted(params: Mapping, key: str):
    node = params
    for part in key.split("."):
        node = node[part]
    return node


def enabled(variant: Variant, params: Mapping) -> bool:
    """Does the profile train ``variant``? (ETM / RSM only where ``pseudo.variants`` names them.)"""
    if variant.enabled_by is None:
        return True
    return all(s in _dotted(params, variant.enabled_by) for s in variant.pretrain if SETS[s].enabled_by)


def trained(params: Mapping, table: Sequence[Variant] = TABLE) -> list[Variant]:
    """The variants the profile trains, in table order."""
    return [v for v in table if enabled(v, params)]


def seeds(variant: Variant | str, params: Mapping) -> list[int]:
    """The training seeds of a variant: one replicate each (pre-training, if any, and fine-tuning)."""
    variant = get(variant) if isinstance(variant, str) else variant
    return [int(s) for s in _dotted(params, SEED_LISTS[variant.seeds])]


def label(system: str, table: Sequence[Variant] = TABLE) -> str:
    """Table 3's label of a row (``dpr_mixed`` -> "Mixed-DPR (ours)", ``dpr_mixed_pre`` -> "Mixed, pre-training only
    (ours)"); other systems (sparse, hybrids) are labelled where they are made."""
    known = by_name(table)
    name = system.removeprefix("dpr_")
    if name.endswith(PRE_SUFFIX) and name.removesuffix(PRE_SUFFIX) in known:
        base = known[name.removesuffix(PRE_SUFFIX)]
        return f"{base.label.removesuffix('-DPR').removesuffix(' Poly-DPR')}, pre-training only (ours)"
    if name in known:
        return f"{known[name].label} (ours)"
    return system


def pairs(params: Mapping, table: Sequence[Variant] = TABLE) -> list[tuple[str, str]]:
    """The comparisons (A - B) among the dense rows the profile has: each variant against what it declares, its
    pre-training-only row against what it declares, and :data:`GENERATOR_PAIRS`; pairs with a row the profile lacks
    are left out."""
    names = {v.name for v in trained(params, table)}

    def row(name: str, pre: bool = False) -> str | None:
        if name in SPARSE:
            return name
        if name == "untrained":
            return UNTRAINED
        if name not in names:
            return None
        return f"dpr_{name}{PRE_SUFFIX if pre else ''}"

    out = []
    for v in trained(params, table):
        out += [(v.system, row(b)) for b in v.against]
        out += [(v.pre_system, row(b, pre=True)) for b in v.pre_against]
    out += [(row(a), row(b)) for a, b in GENERATOR_PAIRS]
    return [(a, b) for a, b in dict.fromkeys(out) if a and b]


def paper_pairs(table: Sequence[Variant] = TABLE) -> list[tuple[str, str]]:
    """The paper's own orderings: comparisons among the ``paper`` variants (UnCon - DPR, Mixed - UnCon, Mixed -
    DPR)."""
    paper = {v.name for v in table if v.seeds == PAPER}
    return [(f"dpr_{v.name}", f"dpr_{b}") for v in table if v.name in paper for b in v.against if b in paper]
