"""Stage ``tempqg`` (notebook 08) in the pipeline: TempQG's pre-training set (Luo et al., AAAI 2022, §4) over the
UnCon set's passages, so TempQG-DPR pre-trains on the same passages and as many examples as UnCon-DPR, and only the
question generator differs.

Steps, one function each, called by notebook 08 around :mod:`ecqg.tempqg`, which holds the method:

1. **Templates** of stage 02's training questions (its held-out passages stay unseen), clustered; the clusters of at
   least ``tempqg.min_cluster_size`` questions are the candidates a selector chooses among.
2. **Selector**: Poly-DPR trained on (passage -> template) pairs of the candidate clusters; its accuracy on pairs of
   held-out passages, beside always choosing the largest cluster.
3. **Generator**: UnCon's generator (stage 02) trained further on ``template <sep> passage -> answer <sep>
   question`` (every training question with its cluster's template): a shared warm start, so it costs
   ``tempqg.train.max_steps`` steps, not a generator from scratch.
4. **Quality** on stage 02's held-out triples, with the selector's template, beside UnCon's samples of the same
   inputs (the same seed, so stage 02's own samples): BLEU-4 / ROUGE-L, answer in passage, and template adherence.
5. **The set**: for each distinct passage of the UnCon set, the selector's template and ``tempqg.samples`` samples;
   stage 03's two filters (the profile's stage 1 rule, the baseline's hardness cut); test questions and duplicates
   out; then one kept question per UnCon entry (best sample score first) with one BM25 hard negative, as the ETM /
   RSM sets. UnCon entries whose passage kept no question are left out and counted.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from typing import Any, Mapping, Sequence

from ecqg import qg as qgm
from ecqg.core import device, paths, settings, variants
from ecqg.core.io import remove_directory, write_json
from ecqg.data.dpr import write_dpr_retriever_json
from ecqg.filtering import build_mrc_model
from ecqg.filtering.mixing import dedupe
from ecqg.qg import split_heldout
from ecqg.retrieval.bm25 import BM25Searcher
from ecqg.retrieval.pseudo_queries import dpr_examples
from ecqg.retrieval.retriever import build_retriever
from ecqg.retrieval.train import TrainConfig, train_biencoder
from ecqg.retrieval.train_data import split_records
from ecqg.stages import filtering as sp
from ecqg.stages import mixing
from ecqg.stages.common import fingerprint, passages_by_id, pool_passages
from ecqg.stages.pseudo_queries import N_HARD, NEGATIVE_DEPTH, passage_pool
from ecqg.stages.question_generation import generate, gold_triples, split_triples
from ecqg.tempqg import generation, selector
from ecqg.tempqg.templates import (Templates, adherence, candidates, cluster_templates, extract_templates,
                                   template_statistics)

log = logging.getLogger(__name__)

SELECTOR_DIR = paths.TEMPQG / "selector"
GENERATOR_DIR = paths.TEMPQG / "generator"
TEMPLATES_FILE = paths.TEMPQG / "templates.json"
GENERATED_FILE = paths.TEMPQG / "generated.jsonl"


# ------------------------------------------------------------------------------------------------ 1. templates


def training_split(training: settings.QgTrain, seed: int) -> tuple[list[dict], list[dict], dict[str, dict]]:
    """Stage 02's training and held-out gold triples (the same split and sub-sample: ``qg.train``, the params'
    ``seed``) and their passages."""
    triples, passages, _ = gold_triples()
    train, _, heldout, _ = split_triples(triples, [None] * len(triples), training, seed)
    return train, heldout, passages


def corpus_texts() -> list[str]:
    """The texts the entities' document frequency is counted over: the synthetic pool (corpus and extra passages)."""
    return [p["text"] for p in pool_passages()]


def build_templates(tempqg: settings.TempQG, train: Sequence[Mapping], texts: Sequence[str]
                    ) -> tuple[Templates, list[int]]:
    """The training questions' clustered templates and the candidate clusters (largest first)."""
    raw, _ = extract_templates([t["question"] for t in train], texts, tempqg.min_df)
    templates = cluster_templates(raw, tempqg.threshold, tempqg.representative)
    chosen = candidates(templates, tempqg.min_cluster_size)
    if not chosen:
        raise ValueError(f"no template cluster holds {tempqg.min_cluster_size} or more of the "
                         f"{len(train)} training questions: lower tempqg.min_cluster_size or tempqg.threshold")
    return templates, chosen


def template_figures(templates: Templates, chosen: Sequence[int]) -> dict:
    """The statistics, and how many training questions the candidate clusters hold."""
    sizes = Counter(templates.of_question)
    return {**template_statistics(templates), "candidates": len(chosen),
            "candidate_questions": sum(sizes[c] for c in chosen),
            "candidate_share": round(sum(sizes[c] for c in chosen) / max(len(templates.raw), 1), 4)}


def write_templates(templates: Templates, chosen: Sequence[int]) -> None:
    """``outputs/tempqg/templates.json``: the candidate clusters, largest first, with their members."""
    sizes = Counter(templates.of_question)
    write_json(TEMPLATES_FILE, {"candidates": [{"cluster": c, "template": templates.representatives[c],
                                                "questions": sizes[c], "members": list(templates.members[c])}
                                               for c in chosen],
                                "clusters": len(templates.representatives)})


# ------------------------------------------------------------------------------------------------ 2. selector


def selector_pairs(selector_settings: settings.Selector, seed: int, train: Sequence[Mapping], passages: Mapping,
                   templates: Templates, chosen: Sequence[int]) -> tuple[list[dict], list[dict], list[str]]:
    """(training pairs, held-out pairs, candidate templates): the training questions of candidate clusters as
    (passage -> template) pairs, ``tempqg.selector.heldout`` of them held out by whole passages."""
    index = {c: i for i, c in enumerate(chosen)}
    kept = [(t, index[c]) for t, c in zip(train, templates.of_question) if c in index]
    texts = [templates.representatives[c] for c in chosen]
    sub = Templates(representatives=tuple(texts), members=tuple(templates.members[c] for c in chosen),
                    of_question=tuple(i for _, i in kept), raw=tuple(texts[i] for _, i in kept))
    pairs = selector.training_pairs([t for t, _ in kept], passages, sub)
    fit, held = split_heldout([{**p, "passage_id": t["passage_id"]} for p, (t, _) in zip(pairs, kept)],
                              selector_settings.heldout, seed=seed)
    return fit, held, texts


def train_selector(selector_settings: settings.Selector, dpr: settings.Dpr, polydpr: settings.PolyDpr, seed: int,
                   timeout_minutes: int, pairs: Sequence[dict], progress: bool = True) -> tuple[Any, dict]:
    """Poly-DPR (``polydpr.*``, from ``dpr.base_model``) trained on the pairs, in-batch negatives only; the passage
    is the query (``tempqg.selector.query_max_length`` pieces of it), a template the document. Resumes from its
    checkpoints; saved to ``outputs/tempqg/selector``. ``timeout_minutes``: ``collective_timeout_minutes``."""
    model = build_retriever("polydpr", dpr.base_model, shared=dpr.shared_encoders, pooling=dpr.pooling,
                            query_max_length=selector_settings.query_max_length,
                            passage_max_length=dpr.query_max_length, codes=polydpr.codes, attend=polydpr.attend)
    config = TrainConfig.from_dict({**selector_settings.train.as_dict(), "hard_negatives": 0, "seed": seed,
                                    "dist_timeout_minutes": timeout_minutes})
    run_dir = paths.TEMPQG_CHECKPOINTS / "selector" / fingerprint(selector_settings.as_dict(), polydpr.as_dict(),
                                                                  dpr.base_model, [p["id"] for p in pairs])
    history = train_biencoder(model, list(pairs), None, config, run_dir, resume=True, progress=progress)
    model.save(SELECTOR_DIR)
    remove_directory(run_dir)
    steps = [h for h in history if "loss" in h]
    return model, {"pairs": len(pairs), "steps": len(steps), "final_loss": steps[-1]["loss"] if steps else None,
                   "seconds": round(sum(h.get("step_seconds", 0) for h in steps), 1)}


def _selector_autocast(encode: settings.Encode) -> str | None:
    """The selector's inference precision (``dpr.encode.autocast`` on the device in use): one for its accuracy and
    its choices, so the accuracy reported is that of the templates chosen."""
    return device.autocast_dtype(encode.autocast, device.resolve().type)


def selector_accuracy(model, heldout: Sequence[dict], templates: Sequence[str], encode: settings.Encode) -> dict:
    """Top-1 / top-5 of the selector on held-out pairs, beside always choosing the largest cluster (template 0);
    batches and precision of ``dpr.encode``."""
    out = selector.accuracy(model, heldout, templates, batch_size=encode.batch_size,
                            autocast=_selector_autocast(encode))
    out["largest_cluster_top1"] = round(sum(r["template"] == 0 for r in heldout) / len(heldout), 4)
    return out


def choose_templates(model, passages: Sequence[Mapping], templates: Sequence[str], encode: settings.Encode
                     ) -> list[str]:
    """The selector's best template for each passage (batches and precision of ``dpr.encode``)."""
    best = selector.select(model, passages, templates, k=1, batch_size=encode.batch_size,
                           autocast=_selector_autocast(encode))
    return [templates[i] for i in best[:, 0]]


# ------------------------------------------------------------------------------------------------ 3. generator


def train_generator(qg: settings.Qg, training: settings.HfTrain, seed: int, train: Sequence[Mapping],
                    passages: Mapping, templates: Sequence[str], progress: bool = True) -> tuple[Any, Any, dict]:
    """UnCon's generator trained further on the template-conditioned examples; saved to ``outputs/tempqg/generator``,
    its checkpoints dropped once saved. Where UnCon is rule-based (``qg.architecture: cloze``), TempQG's generator
    is a prefix LM built from ``qg.model`` and trained on the template examples alone, for the steps UnCon's
    generator would have had plus its own (``qg.train.max_steps`` + ``tempqg.train.max_steps``; ``initialised_from``
    says which). ``training``: ``tempqg.train``."""
    examples, counts = generation.training_examples(train, passages, templates, qg.window_words)
    run_dir = paths.TEMPQG_CHECKPOINTS / "generator" / fingerprint(training.as_dict(), qg.as_dict(), seed,
                                                                   [e["id"] for e in examples], list(templates))
    model, tokenizer, start = *qgm.load_generator(paths.generator_dir("uncon")), "uncon"
    if tokenizer is None:        # a rule-based UnCon (qg.architecture: cloze) has no weights to train further
        model, tokenizer = qgm.build_generator(qg.model, architecture="prefix_lm", seed=seed)
        start = qg.model
        if qg.dropout is not None:
            qgm.set_dropout(model, qg.dropout)
        if training.max_steps is not None and qg.train.max_steps is not None:
            training = training.replace(max_steps=training.max_steps + qg.train.max_steps)
    result = qgm.train_generator(model, tokenizer, examples, run_dir, training.as_dict(), seed=seed,
                                 source_max_length=qg.source_max_length, target_max_length=qg.target_max_length,
                                 progress=progress)
    qgm.save_generator(model, tokenizer, GENERATOR_DIR)
    remove_directory(run_dir)
    figures = {k: result[k] for k in ("steps", "seconds", "examples_per_s", "truncated_sources") if k in result}
    return model, tokenizer, {**figures, "examples": counts["examples"], "initialised_from": start}


def sample(model, tokenizer, inputs: list[dict], qg: settings.Qg, seed: int, seed_tag: str, samples: int,
           progress: bool = True, *, processes: int | str = 1, launcher_args: Sequence[str] | None = None
           ) -> tuple[list[dict], dict]:
    """TempQG records for template inputs (:func:`ecqg.tempqg.generation.sampling_inputs`), ``samples`` each, with
    ``qg``'s other sampling settings (:func:`ecqg.stages.question_generation.generate`)."""
    qg = qg.replace(generate=qg.generate.replace(samples=samples))
    records, drops = generate(model, tokenizer, "uncon", inputs, qg, seed, seed_tag, progress=progress,
                              processes=processes, launcher_args=launcher_args)
    return generation.as_tempqg(records), drops


# ------------------------------------------------------------------------------------------------ 4. quality


def question_templates(questions: Sequence[str], texts: Sequence[str], min_df: int) -> list[str]:
    """Each question's own template, blanked as the training questions were (``tempqg.min_df``)."""
    return extract_templates(list(questions), texts, min_df)[0]


def heldout_quality(s: settings.Params, heldout: Sequence[Mapping], passages: Mapping, texts: Sequence[str],
                    selector_model, templates: Sequence[str], generator, uncon) -> dict:
    """TempQG's and UnCon's quality on stage 02's held-out inputs (one per passage), each sample's adherence to
    the selector's template for its passage (for UnCon: how often a question follows it unasked).

    Takes the whole typed tree: it reads ``dpr.encode``, ``qg``, ``tempqg``, ``seed``, ``processes`` and
    ``launcher_args``."""
    workers = {"processes": s.processes, "launcher_args": s.launcher_args}
    inputs, references = qgm.heldout_inputs(heldout, passages)
    chosen = choose_templates(selector_model, [passages[i["passage_id"]] for i in inputs], templates, s.dpr.encode)
    template_of = {i["passage_id"]: t for i, t in zip(inputs, chosen)}
    records, drops = sample(*generator, generation.sampling_inputs(
        [(i["passage_id"], passages[i["passage_id"]]) for i in inputs], chosen), s.qg, s.seed, "tempqg-heldout",
        s.qg.generate.samples, progress=False, **workers)
    uncon_records, uncon_drops = generate(*uncon, "uncon", inputs, s.qg, s.seed, "heldout", progress=False, **workers)
    out = {}
    for name, recs, dropped in (("tempqg", records, drops), ("uncon", uncon_records, uncon_drops)):
        plain = [{**r, "entity": None} for r in recs]
        own = question_templates([r["question"] for r in recs], texts, s.tempqg.min_df)
        out[name] = {**qgm.evaluate_generator(plain, references, passages, generated=dropped["generated"]),
                     **{f"template_{k}": v for k, v in adherence(
                         own, [template_of[r["passage_id"]] for r in recs], s.tempqg.threshold).items()
                        if k != "n"}}
    return out


# ------------------------------------------------------------------------------------------------ 5. the set


def set_passages() -> tuple[list[str], dict[str, dict]]:
    """The UnCon set's passage ids (with repeats, in its order) and those passages."""
    pool, _ = passage_pool()
    return pool, passages_by_id(set(pool))


def stage1_rule(tempqg: settings.TempQG, filtering: settings.Filtering) -> str:
    """The first filter TempQG's questions pass: ``tempqg.stage1``, else stage 03's ``filtering.stage1``."""
    return tempqg.stage1 or filtering.stage1


def filter_questions(s: settings.Params, records: list[dict], passages: Mapping, progress: bool = True
                     ) -> tuple[list[dict], dict]:
    """Stage 03's filters (the reader stage 03 trained, the baseline's hardness cut) with the first one
    ``tempqg.stage1`` where a profile sets it (mini: TempQG's prefix LM writes too few questions its reader answers
    for one per UnCon entry), then test questions and duplicates out (:func:`ecqg.filtering.mixing.dedupe`).

    Takes the whole typed tree: it reads ``tempqg``, ``filtering``, ``mrc``, ``dpr``, ``data.test_sets``,
    ``processes`` and ``launcher_args`` (stage 03's steps, as stage 03 runs them)."""
    rule = stage1_rule(s.tempqg, s.filtering)
    filtering = s.filtering.replace(stage1=rule)
    predictions: dict = {}
    if rule == "roundtrip":
        model, tokenizer = build_mrc_model(str(paths.MRC_MODEL))
        predictions, _ = sp.read(model, tokenizer, records, passages, s.mrc, progress=progress,
                                 processes=s.processes, launcher_args=s.launcher_args)
    kept1, _, stage1 = sp.stage1(records, predictions, passages, filtering)
    kept2, _, stage2, _ = sp.stage2(kept1, passages, filtering, s.dpr, progress=progress)
    kept, deduped = dedupe(kept2, mixing.test_question_keys(s.data.test_sets), where="TempQG questions")
    funnel = {"generated": len(records), "after_stage1": len(kept1), "after_stage2": len(kept2),
              "after_dedupe": len(kept), "stage1_rule": rule,
              "dedupe_dropped": deduped["dropped"]}
    return kept, funnel


def one_per_entry(pool: Sequence[str], kept: Sequence[Mapping]) -> tuple[list[dict], int]:
    """One kept question per UnCon entry, in the set's order: a passage's questions by sample score (best first),
    a passage used twice getting two different ones; returns the records and how many entries got none."""
    by_passage: dict[str, list[Mapping]] = defaultdict(list)
    for rec in sorted(kept, key=lambda r: (-(r.get("sample_score") or 0.0), r["id"])):
        by_passage[rec["passage_id"]].append(rec)
    out, missing = [], 0
    for pid in pool:
        if by_passage.get(pid):
            out.append(dict(by_passage[pid].pop(0)))
        else:
            missing += 1
    return out, missing


def write_set(pretrain: settings.DprPretrain, bm25: settings.Bm25, seed: int, records: Sequence[Mapping],
              passages: dict, progress: bool = True) -> dict:
    """The TempQG set as DPR retriever json (``outputs/tempqg/tempqg.json``), one BM25 hard negative each with the
    same-title guard, as the ETM / RSM sets; its figures. The split is pre-training's (``dpr.pretrain``, ``seed``);
    the negatives ``bm25``'s."""
    train, held = split_records(records, pretrain.heldout, seed)   # pre-training's split
    if len(train) < pretrain.batch_size:
        raise ValueError(f"the TempQG set has {len(records)} questions: too few to pre-train on (dpr.pretrain holds "
                         f"out {len(held)} and trains in batches of {pretrain.batch_size}); the filters kept "
                         "too few samples: raise tempqg.samples")
    searcher = BM25Searcher(paths.BM25_INDEX, k1=bm25.k1, b=bm25.b)
    run = searcher.search({r["id"]: r["question"] for r in records}, k=NEGATIVE_DEPTH,
                          threads=bm25.threads, progress=progress)
    searcher.close()
    passages.update(passages_by_id({pid for hits in run.values() for pid, _ in hits} - passages.keys()))
    examples, negatives = dpr_examples(records, run, passages, n_hard=N_HARD)
    size = write_dpr_retriever_json(variants.SETS[variants.TEMPQG].path, examples)
    return {"size": size, **{f"negatives_{k}": v for k, v in negatives.items() if k != "questions"}}
