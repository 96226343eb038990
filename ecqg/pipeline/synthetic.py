"""Stages 03 and 04 in the pipeline: filter the generated questions, then mix the survivors into the UnCon and
Mixed pre-training sets.

Notebooks 03 and 04 call these around :mod:`ecqg.filtering` and :mod:`ecqg.filtering.mixing`, which hold the methods; this
module only knows where the pipeline keeps things and which params steer them.
"""

from __future__ import annotations

import random
import time
from typing import Any, Mapping, Sequence

from ecqg.core import paths, settings
from ecqg.data.records import read_squad2_unanswerable
from ecqg.core.io import empty_directory
from ecqg.core.schemes import of_stage
from ecqg.pipeline.common import passages_by_id  # noqa: F401  (notebooks 03 / 04 / 06 read passages through here)


def generated_questions(replicates: Sequence[int | None]) -> dict[str, list[dict]]:
    """Stage 02's sampled questions per generator (every replicate's set, ``replicates``:
    :func:`ecqg.core.variants.generation_seeds`; each record naming its ``replicate`` where they are per replicate),
    validated (errors name the file, line and field)."""
    from ecqg.filtering import read_generated

    return {g: [r for seed in replicates for r in read_generated(paths.generated_file(g, seed))]
            for g in of_stage()}


def probe_questions() -> list[dict]:
    """Stage 02's Table 1 probe questions (conditioned, about highest- and lowest-attended entities)."""
    from ecqg.filtering import read_generated

    return list(read_generated(paths.QG_PROBES))


# ------------------------------------------------------------------------------------------------ the MRC reader


def mrc_data(mrc: settings.Mrc, unanswerable_file: str, seed: int) -> tuple[list[dict], list[dict], dict]:
    """SQuAD2-style training and held-out examples from the gold triples and the SQuAD 2.0 unanswerables
    (``unanswerable_file``: ``data.mrc_unanswerable``), split by passage; the training part sub-sampled to
    ``mrc.train.max_examples`` and the held-out part to ``mrc.eval_examples`` (both seeded by ``seed``)."""
    from ecqg.filtering import mrc_examples, split_by_passage

    from ecqg.pipeline.question_generation import gold_triples

    triples, passages, _ = gold_triples()  # the bundle's triples, or the paper profile's DPR positives
    unanswerable = list(read_squad2_unanswerable(unanswerable_file))
    passages.update(passages_by_id({u["passage_id"] for u in unanswerable}))
    unanswerable = [u for u in unanswerable if u["passage_id"] in passages]  # profile may have cut the corpus
    examples = mrc_examples(triples, unanswerable, passages)
    train, heldout = split_by_passage(examples, mrc.heldout_fraction, seed, max_train=mrc.train.max_examples)
    if len(heldout) > mrc.eval_examples:
        heldout = random.Random(f"{seed}-mrc-eval").sample(heldout, mrc.eval_examples)
    counts = {"examples": len(examples), "answerable": sum(bool(e["answers"]) for e in examples),
              "train": len(train), "train_answerable": sum(bool(e["answers"]) for e in train),
              "heldout": len(heldout), "heldout_answerable": sum(bool(e["answers"]) for e in heldout)}
    return train, heldout, counts


def reader(mrc: settings.Mrc, seed: int, train: list[dict], progress: bool = True) -> tuple[Any, Any, dict | None]:
    """The MRC reader: ``mrc.model`` as is (``train_model: false``), or trained here on ``train`` (resumable);
    saved to ``outputs/filtering/mrc_model``, its checkpoints dropped once it is saved. Returns model, tokenizer,
    training figures (None when not trained)."""
    from ecqg.filtering import build_mrc_model, save_mrc, train_mrc
    from ecqg.pipeline.common import fingerprint

    model, tokenizer = build_mrc_model(mrc.model, seed=seed)
    figures = None
    if mrc.train_model:
        named = {k: v for k, v in mrc.as_dict().items() if k not in ("eval_examples",)}
        run_dir = paths.MRC_CHECKPOINTS / fingerprint(named, seed, [e["id"] for e in train])
        figures = train_mrc(model, tokenizer, train, run_dir, mrc.train.as_dict(), seed=seed,
                            max_length=mrc.max_length, stride=mrc.stride,
                            answer_windows_only=mrc.answer_windows_only, progress=progress)
    save_mrc(model, tokenizer, paths.MRC_MODEL)
    empty_directory(paths.MRC_CHECKPOINTS)
    return model, tokenizer, figures


def read(model, tokenizer, questions: list[dict], passages: Mapping | None, mrc: settings.Mrc,
         progress: bool = True, *, processes: int | str = 1,
         launcher_args: Sequence[str] | None = None) -> tuple[dict, float]:
    """The reader's answers to ``questions`` (with striding) and the questions per second; with ``processes``
    above 1 split over torchrun workers (``launcher_args``: the params' own); ``mrc.predict_batch_size`` windows a
    forward pass, under ``mrc.autocast``."""
    from ecqg.filtering.reader import predict_in_processes

    start = time.perf_counter()
    predictions = predict_in_processes(model, tokenizer, questions, passages, progress=progress,
                                       processes=processes, launcher_args=launcher_args,
                                       max_length=mrc.max_length, stride=mrc.stride,
                                       max_answer_length=mrc.max_answer_length,
                                       null_threshold=mrc.null_threshold, batch_size=mrc.predict_batch_size,
                                       autocast=mrc.autocast)
    return predictions, len(questions) / max(time.perf_counter() - start, 1e-9)


# ------------------------------------------------------------------------------------------------ the two filters


def stage1(records: list[dict], predictions: Mapping, passages: Mapping, filtering: settings.Filtering
           ) -> tuple[list[dict], list[dict], dict]:
    """Stage 1 by ``filtering.stage1``: the MRC round trip, the answer-in-passage substitute, or ``none`` (stage 1
    skipped: every parsed question goes on to stage 2). The rule used is written into the metrics."""
    from ecqg.filtering import answer_in_passage_filter, check_generated, roundtrip_filter

    if filtering.stage1 == "roundtrip":
        return roundtrip_filter(records, predictions, filtering.min_confidence, filtering.require_overlap)
    if filtering.stage1 == "answer_in_passage":
        return answer_in_passage_filter(records, passages)
    kept = check_generated(records)
    return kept, [], {"in": len(kept), "kept": len(kept), "method": "none (stage 1 skipped)"}


def hardness_model(dpr: settings.Dpr) -> str:
    """The model stage 2 scores hardness with (the page states it): the first replicate's fine-tuned DPR."""
    from ecqg.pipeline.common import primary_seed

    return f"dpr_baseline_s{primary_seed(dpr)} (DPR fine-tuned on the gold data, the first replicate)"


def stage2(records: list[dict], passages: Mapping, filtering: settings.Filtering, dpr: settings.Dpr,
           progress: bool = True) -> tuple[list[dict], list[dict], dict, dict]:
    """Stage 2: the baseline DPR's score and own-passage rank for each survivor, then the hardness cut (the model of
    the primary seed, ``dpr.seeds[0]``)."""
    from ecqg.filtering import dpr_hardness, hardness_filter
    from ecqg.retrieval.faiss_index import load_index
    from ecqg.pipeline.common import primary_seed
    from ecqg.retrieval.retriever import load_retriever

    seed = primary_seed(dpr)
    model = load_retriever(paths.model_dir("baseline", seed))
    index, ids = load_index(paths.dense_index_dir("baseline", seed))
    scores = dpr_hardness(model, records, passages, index, ids, depth=filtering.depth,
                          batch_size=dpr.encode.batch_size, progress=progress, autocast=filtering.autocast)
    kept, rejected, stats = hardness_filter(records, scores, filtering.hardness, filtering.keep_fraction,
                                            filtering.max_rank)
    return kept, rejected, stats, scores


# ------------------------------------------------------------------------------------------------ mixing


def write_kept(kept: list[dict], replicates: Sequence[int | None]) -> dict[str, int]:
    """Stage 03's survivors, a file per generator and replicate (``replicates``:
    :func:`ecqg.core.variants.generation_seeds`; ``paths.kept_file``); returns the counts."""
    from ecqg.core.io import write_jsonl

    counts = {}
    for seed in replicates:
        for g in of_stage():
            path = paths.kept_file(g, seed)
            counts[str(path)] = write_jsonl(path, [r for r in kept if r["generator"] == g
                                                   and r.get("replicate") == seed])
    return counts


def kept_questions(seed: int | None = None) -> dict[str, list[dict]]:
    """Stage 03's survivors per generator (replicate ``seed``'s where each has its own set)."""
    from ecqg.filtering import read_generated

    return {g: list(read_generated(paths.kept_file(g, seed))) for g in of_stage()}


def mix_replicate(seed: int | None, mixing: settings.Mixing, run_seed: int, test_keys: set[str]
                  ) -> dict[str, Any]:
    """Stage 04 for one replicate's survivors (``seed``; None: the one shared set): deduplicated against each other
    and the test questions (conditioned first, the scarcer), then UnCon and Mixed at ``mixing.total`` and their
    doses, sampled with the replicate's seed (the one shared set: ``run_seed``, the params' ``seed``). Returns the
    pools, sets, doses and their statistics."""
    from ecqg.core import variants
    from ecqg.filtering import mixing as mix

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
    from ecqg.core import variants
    from ecqg.filtering import mixing

    first = replicates[0]
    suffix = "" if seed is None else f" s{seed}"
    sizes = {}
    for name in ("mixed", "uncon"):
        sizes[name + suffix] = mixing.write_set(variants.SETS[name].at(seed), mixed[name], examples)
        if seed is not None and seed == first:
            sizes[name] = mixing.write_set(variants.SETS[name].path, mixed[name], examples)
    for size, (dose_uncon, dose_mixed) in mixed["doses"].items():
        for name, records in (("uncon", dose_uncon), ("mixed", dose_mixed)):   # the dose curve (mixing.doses)
            sizes[f"{name}_d{size}{suffix}"] = mixing.write_set(variants.dose_set(name, size).at(seed), records,
                                                                examples)
    return sizes


def replicate_name(seed: int | None) -> str:
    return "the set" if seed is None else f"s{seed}"


def test_question_keys(test_sets: Mapping[str, str]) -> set[str]:
    """Question keys of every prepared test set (``data.test_sets``): no synthetic question may equal one."""
    from ecqg.filtering.mixing import question_keys_of

    return question_keys_of([paths.questions_file(name) for name in test_sets])


# ============================================================================================ the questions' quality
QUALITY_SAMPLES = 30        # random questions of each set printed on the page


def reference_questions(limit: int, seed: int) -> list[dict]:
    """Real questions over bundle passages, the quality table's reference row: the annotated gold triples (SQuAD 2.0,
    XQuAD, ...; a profile given DPR's retriever json has none, and the row is left out)."""
    from ecqg.core.io import read_jsonl

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
    from ecqg.qg.quality import BAR, bar_misses, set_measures
    from ecqg.runtime.models import load_spacy

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
