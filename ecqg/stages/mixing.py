"""Stage ``mixing`` (notebook 04): stage 03's survivors deduplicated and mixed into the UnCon and Mixed pre-training
sets (and their doses), with BM25 hard negatives; the quality of every synthetic set along the filter chain.

Notebook 04 calls these around :mod:`ecqg.filtering.mixing`, which holds the method; this module only knows where the
pipeline keeps things and which params steer them.
"""

from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

from ecqg.core import paths, settings, variants
from ecqg.core.io import read_jsonl
from ecqg.core.schemes import of_stage
from ecqg.filtering import mixing as mix
from ecqg.filtering import read_generated
from ecqg.qg.quality import BAR, bar_misses, set_measures
from ecqg.runtime.models import load_spacy
from ecqg.stages.common import passages_by_id  # noqa: F401  (notebooks 03 / 04 / 06 read passages through here)


def kept_questions(seed: int | None = None) -> dict[str, list[dict]]:
    """Stage 03's survivors per generator (replicate ``seed``'s where each has its own set)."""
    return {g: list(read_generated(paths.kept_file(g, seed))) for g in of_stage()}


def mix_replicate(seed: int | None, mixing: settings.Mixing, run_seed: int, test_keys: set[str]
                  ) -> dict[str, Any]:
    """Stage 04 for one replicate's survivors (``seed``; None: the one shared set): deduplicated against each other
    and the test questions (conditioned first, the scarcer), then UnCon and Mixed at ``mixing.total`` and their
    doses, sampled with the replicate's seed (the one shared set: ``run_seed``, the params' ``seed``). Returns the
    pools, sets, doses and their statistics."""
    kept = kept_questions(seed)
    pool, dedupe_stats = mix.dedupe(kept["con"] + kept["uncon"], test_keys)
    pools = {g: [r for r in pool if r["generator"] == g] for g in kept}
    sampling = run_seed if seed is None else seed
    mixed, uncon, set_stats = mix.build_sets(pools["uncon"], pools["con"], mixing.total, sampling,
                                             require_total=mixing.require_total)
    return {"kept": {g: len(rs) for g, rs in kept.items()}, "pools": pools, "dedupe": dedupe_stats,
            "mixed": mixed, "uncon": uncon, "sets": set_stats,
            "doses": mix.dose_sets(uncon, mixed, variants.doses(mixing), sampling)}


def write_replicate(seed: int | None, mixed: Mapping[str, Any], examples: Mapping[str, Mapping],
                    replicates: Sequence[int | None]) -> dict[str, int]:
    """One replicate's sets (:func:`mix_replicate`) to the files its pre-trainings read
    (``ecqg.core.variants.SyntheticSet.at``); the first replicate's (of ``replicates``:
    :func:`ecqg.core.variants.generation_seeds`) also to the sets' own paths, which the related system's stages
    (pseudo-queries, TempQG) and the analyses read. Returns the sizes, by set name (``uncon``, ``uncon_d400``, and
    ``... s<seed>`` for a replicate's own)."""
    first = replicates[0]
    suffix = "" if seed is None else f" s{seed}"
    sizes = {}
    for name in ("mixed", "uncon"):
        sizes[name + suffix] = mix.write_set(variants.SETS[name].at(seed), mixed[name], examples)
        if seed is not None and seed == first:
            sizes[name] = mix.write_set(variants.SETS[name].path, mixed[name], examples)
    for size, (dose_uncon, dose_mixed) in mixed["doses"].items():
        for name, records in (("uncon", dose_uncon), ("mixed", dose_mixed)):   # the dose curve (mixing.doses)
            sizes[f"{name}_d{size}{suffix}"] = mix.write_set(variants.dose_set(name, size).at(seed), records,
                                                             examples)
    return sizes


def replicate_name(seed: int | None) -> str:
    return "the set" if seed is None else f"s{seed}"


def test_question_keys(test_sets: Mapping[str, str]) -> set[str]:
    """Question keys of every prepared test set (``data.test_sets``): no synthetic question may equal one."""
    return mix.question_keys_of([paths.questions_file(name) for name in test_sets])


# ============================================================================================ the questions' quality
QUALITY_SAMPLES = 30        # random questions of each set printed on the page


def reference_questions(limit: int, seed: int) -> list[dict]:
    """Real questions over bundle passages, the quality table's reference row: the annotated gold triples (SQuAD 2.0,
    XQuAD, ...; a profile given DPR's retriever json has none, and the row is left out)."""
    if not paths.TRAIN_GOLD.is_file():
        return []
    triples = [t for _, t in read_jsonl(paths.TRAIN_GOLD)]
    return random.Random(seed).sample(triples, min(limit, len(triples)))


def question_quality(decisions: list[dict], sets: Mapping[str, list[dict]], reference: list[dict], seed: int,
                     samples: int = QUALITY_SAMPLES) -> dict:
    """The bar's measures (:func:`ecqg.qg.quality.set_measures`) for every synthetic set along the filter chain:
    each scheme's generated questions, those the round trip kept, those both filters kept; then the training sets
    (``sets``: name -> records); and the real questions of ``reference`` as the row to compare with. Each row says
    which part of :data:`ecqg.qg.quality.BAR` it misses; ``samples`` random questions of each training set and of
    the reference are kept for the page."""
    ids = {str(r["passage_id"]) for r in decisions} | {str(r["passage_id"]) for rs in sets.values() for r in rs}
    ids |= {str(r["passage_id"]) for r in reference}
    text_of = {pid: p["text"] for pid, p in passages_by_id(ids).items()}
    reference = [r for r in reference if str(r["passage_id"]) in text_of]   # a sub-sampled corpus lacks some
    nlp = load_spacy(disable=("lemmatizer",))
    rows = []

    def row(name: str, stage: str, records: list[dict]) -> None:
        if records:
            measures = set_measures(records, text_of, nlp, seed)
            rows.append({"set": name, "stage": stage, **measures, "misses": bar_misses(measures)})

    for scheme in dict.fromkeys(r["generator"] for r in decisions):
        mine = [r for r in decisions if r["generator"] == scheme]
        row(scheme, "generated", mine)
        row(scheme, "after the round trip (stage 1)", [r for r in mine if r.get("stage") != 1])
        row(scheme, "after hardness (stage 2)", [r for r in mine if r["decision"] == "kept"])
    for name, records in sets.items():
        row(name, "training set", records)
    row("real questions", "reference (gold triples)", reference)
    rng = random.Random(seed)
    picked = {name: rng.sample(records, min(samples, len(records)))
              for name, records in [*sets.items(), ("real questions", reference)] if records}
    keep = ("question", "answer", "entity", "generator", "passage_id")
    return {"bar": {k: list(v) for k, v in BAR.items()}, "rows": rows,
            "samples": {name: [{k: r.get(k) for k in keep if r.get(k) is not None} for r in records]
                        for name, records in picked.items()}}
