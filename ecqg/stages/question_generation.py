"""Stage 02 in the pipeline: what the generators learn from, which passages and entities they write questions for.

Notebook 02 calls these around :mod:`ecqg.qg`, which holds the generators themselves. Inputs: the gold triples of
stage ``prepare`` (the bundle's annotated triples, or, in the paper profile, DPR retriever-json such as nq-train.json
whose first positive passage and first answer make the triple), the corpus, and stage 01's lowest- and
highest-attended entities per studied passage.
"""

from __future__ import annotations

import hashlib
import logging
import random
from pathlib import Path
from time import perf_counter
from typing import Any, Mapping, Sequence

import torch

from ecqg import qg as qgm
from ecqg.core import paths, schemes, settings, variants
from ecqg.core.io import empty_directory, read_json, read_jsonl, remove_directory, write_json, write_jsonl
from ecqg.data.dpr import read_dpr_retriever_json
from ecqg.qg import generator_for, reference_key, split_heldout
from ecqg.qg.sampling import generate_in_processes
from ecqg.runtime.hf_training import complete_checkpoints
from ecqg.stages.common import fingerprint, fingerprint_int, pool_passages, subset, test_gold_ids

GENERATORS = schemes.of_stage(schemes.QUESTION_GENERATION)   # what stage 02 trains and samples (notebook 02 loops)

log = logging.getLogger(__name__)

FINISHED = "finished"                  # <checkpoint run>/finished/: the trained generator, until the stage ends
FINISHED_FIGURES = "training.json"     # ... and its training figures, written last


def gold_triples() -> tuple[list[dict], dict[str, dict], dict]:
    """Gold (question, passage, answer) triples, their passages ``id -> {title, text}``, and unusable-input counts.

    Each triple: ``id, question, answer, answer_start, passage_id``.
    """
    triples, skipped = [], {"answer_not_in_passage": 0, "no_positive_passage": 0}
    passages: dict[str, dict] = {}
    annotated = [t for _, t in read_jsonl(paths.TRAIN_GOLD)] if paths.TRAIN_GOLD.is_file() else []
    if annotated:  # stage prepare inlines each triple's passage (title, text)
        for t in annotated:
            passages[t["passage_id"]] = {"title": t.pop("title"), "text": t.pop("text")}
            triples.append(t)
    elif paths.TRAIN_GOLD_DPR.is_file():
        for i, record in enumerate(read_dpr_retriever_json(paths.TRAIN_GOLD_DPR)):
            if not record["positive_ctxs"]:
                skipped["no_positive_passage"] += 1
                continue
            ctx = record["positive_ctxs"][0]
            found = [(ctx["text"].lower().find(a.lower()), a) for a in record["answers"]]
            found = [(start, a) for start, a in found if start >= 0]
            if not found:
                skipped["answer_not_in_passage"] += 1
                continue
            start, answer = found[0]
            pid = str(ctx.get("passage_id") or ctx.get("id") or f"dpr-{i}-pos")
            passages[pid] = {"title": ctx.get("title", ""), "text": ctx["text"]}
            triples.append({"id": str(record.get("id", f"dpr-{i}")), "question": record["question"],
                            "answer": ctx["text"][start:start + len(answer)], "answer_start": start,
                            "passage_id": pid, "source": "dpr"})
    if not triples:
        raise ValueError(f"no gold triples: neither {paths.TRAIN_GOLD} nor {paths.TRAIN_GOLD_DPR} holds any")
    return triples, passages, skipped


def split_triples(triples: list[dict], entities: list, training: settings.QgTrain, seed: int
                  ) -> tuple[list, list, list, list]:
    """Held-out triples by whole passages (:func:`ecqg.qg.split_heldout`, ``qg.train.heldout``), then the profile's
    seeded training sub-sample (``qg.train.max_examples``); each list comes with its triples' conditioning entities.
    Returns train, train_entities, heldout, heldout_entities."""
    entity_of = {t["id"]: e for t, e in zip(triples, entities)}
    train, heldout = split_heldout(triples, training.heldout, seed=seed)
    limit = training.max_examples
    if limit is not None and limit < len(train):
        keep = sorted(random.Random(f"{seed}-qg-train").sample(range(len(train)), limit))
        train = [train[i] for i in keep]
    return train, [entity_of[t["id"]] for t in train], heldout, [entity_of[t["id"]] for t in heldout]


def generator_settings(qg: settings.Qg) -> dict:
    """Keyword arguments shared by training and generation (source format and lengths)."""
    return {"source_max_length": qg.source_max_length, "window_words": qg.window_words}


def placeholder(generator: str, qg: settings.Qg) -> str | None:
    """The entity placeholder token of ``generator`` (only the conditioned one has one; None when turned off)."""
    return qg.entity_placeholder if schemes.get(generator).condition == "entity" else None


def train_generator(generator: str, train: list, train_entities: list, passages: Mapping, qg: settings.Qg,
                    seed: int, progress: bool = True) -> tuple[Any, Any, dict]:
    """Build and train one generator, or take the one a cut run of the same settings already finished; save it to
    ``outputs/qg/models/<generator>``. With ``qg.con_init: uncon`` the conditioned generator starts from the saved
    unconditioned one (train ``uncon`` first). Returns model, tokenizer and the training figures.

    Why the finished generator is kept in the checkpoint folder (``<run>/finished/``, with its figures) and not only in
    ``outputs/qg``: DVC deletes a stage's outputs before it reruns one, so a run cut after training (during the other
    generator or the sampling) would otherwise train this generator again from step 0. The checkpoint folder
    persists; :func:`drop_checkpoints` empties it when the stage has written
    everything."""
    run_dir = paths.QG_CHECKPOINTS / generator / fingerprint(qg.as_dict(), seed, [t["id"] for t in train])
    finished = run_dir / FINISHED
    if (finished / FINISHED_FIGURES).is_file():
        log.info("%s generator: taking the one an interrupted run finished, %s", generator, finished)
        model, tokenizer = qgm.load_generator(finished)
        figures = {**read_json(finished / FINISHED_FIGURES, dict, "finished generator figures"),
                   "resumed_from": str(finished)}
    else:
        model, tokenizer, figures = _train_and_keep(generator, train, train_entities, passages, qg, seed, run_dir,
                                                    progress)
    qgm.save_generator(model, tokenizer, paths.generator_dir(generator))
    return model, tokenizer, figures


def _train_and_keep(generator: str, train: list, train_entities: list, passages: Mapping, qg: settings.Qg,
                    seed: int, run_dir: Path, progress: bool) -> tuple[Any, Any, dict]:
    """Train one generator (resuming from ``run_dir``'s last checkpoint), keep it in ``run_dir/finished/`` with its
    figures, and drop the Trainer checkpoints (optimizer states, gigabytes)."""
    if qgm.is_rule_based(qg.architecture):
        return _rule_based(generator, train, qg, run_dir)
    marking = qg.entity_marking if schemes.get(generator).marked else None
    token = placeholder(generator, qg)
    examples, counts = qgm.build_examples(train, passages, generator, marking=marking or qgm.DEFAULT_MARKING,
                                          entities=train_entities, window_words=qg.window_words,
                                          placeholder=token, progress=progress)
    start = qg.model
    if schemes.get(generator).starts_from == "qg.con_init" and qg.con_init == "uncon":
        start = str(paths.generator_dir("uncon"))
        if not (paths.generator_dir("uncon") / "config.json").is_file():
            raise FileNotFoundError(f"qg.con_init is 'uncon' but {paths.generator_dir('uncon')} holds no trained "
                                    "generator: train the unconditioned generator first")
    model, tokenizer = qgm.build_generator(start, placeholder=token, architecture=qg.architecture, seed=seed)
    if qg.dropout is not None:
        qgm.set_dropout(model, qg.dropout)
    result = qgm.train_generator(model, tokenizer, examples, run_dir, qg.train.as_dict(), seed=seed,
                                 source_max_length=qg.source_max_length, target_max_length=qg.target_max_length,
                                 progress=progress)
    figures = {**result, "examples": len(examples), "example_counts": dict(counts),
               "initialised_from": "uncon" if start != qg.model else qg.model}
    finished = run_dir / FINISHED
    qgm.save_generator(model, tokenizer, finished)
    write_json(finished / FINISHED_FIGURES, figures)  # last: its presence marks the finished generator complete
    for checkpoint in complete_checkpoints(run_dir):
        remove_directory(checkpoint)
    return model, tokenizer, figures


def _rule_based(generator: str, train: list, qg: settings.Qg, run_dir: Path) -> tuple[Any, None, dict]:
    """A rule-based generator (``qg.architecture: cloze``): built, not trained; its figures say so (no steps), and
    it is kept in ``run_dir/finished/`` like a trained one."""
    model, tokenizer = qgm.build_generator(qg.model, architecture=qg.architecture)
    figures = {"history": [], "steps": 0, "seconds": 0.0, "examples_per_s": None, "truncated_sources": 0,
               "examples": 0, "example_counts": {"rule_based": True, "gold_triples_unused": len(train)},
               "initialised_from": f"rules ({qg.architecture})", "resumed_from": None}
    finished = run_dir / FINISHED
    qgm.save_generator(model, tokenizer, finished)
    write_json(finished / FINISHED_FIGURES, figures)
    return model, tokenizer, figures


def drop_checkpoints() -> None:
    """Empty the generators' checkpoint folder: called at the end of stage 02, once every output is written."""
    empty_directory(paths.QG_CHECKPOINTS)


def generate(model, tokenizer, generator: str, inputs: list[dict], qg: settings.Qg, seed: int, seed_tag: str,
             progress: bool = True, resumable: bool = False, replicate: int | None = None, *,
             processes: int | str = 1, launcher_args: Sequence[str] | None = None) -> tuple[list[dict], dict]:
    """Sample questions for ``inputs`` with the profile's sampling settings (``qg``, ``qg.generate``; the sampling
    seed drawn from the params' ``seed`` and ``seed_tag``); returns records and drop counts.
    ``replicate``: the set of that replicate (:func:`ecqg.core.variants.generation_seeds`): its own sampling seed,
    and its records' ids end in ``-s<seed>`` and carry ``replicate``.
    With ``processes`` above 1 the batches are split over torchrun workers (:mod:`ecqg.runtime.parallel`;
    ``launcher_args``: the params' own).
    ``resumable``: finished batches are journalled under the generators' checkpoint folder, named by the model's
    weights, the inputs and the settings, so a cut stage takes them instead of sampling them again
    (:mod:`ecqg.qg.sampling`); :func:`drop_checkpoints` removes the journals with the rest."""
    if replicate is not None:
        records, drops = generate(model, tokenizer, generator, inputs, qg, seed, f"{seed_tag}-s{replicate}", progress,
                                  resumable, processes=processes, launcher_args=launcher_args)
        return [{**r, "id": f"{r['id']}-s{replicate}", "replicate": replicate} for r in records], drops
    gen = qg.generate
    architecture = generator_for(model)
    if architecture.rule_based:        # spaCy on one process: seconds for a thousand passages
        records, drops = architecture.sample_records(
            model, inputs, seed=int(fingerprint_int(seed, seed_tag)), samples=gen.samples,
            conditioned=schemes.get(generator).marked, progress=progress)
        for r in records:
            r["generator"] = generator
        return records, dict(drops)
    sampling = dict(marking=qg.entity_marking if schemes.get(generator).marked else None, top_k=gen.top_k,
                    top_p=gen.top_p, samples=gen.samples, batch_size=gen.batch_size,
                    max_new_tokens=gen.max_new_tokens, seed=int(fingerprint_int(seed, seed_tag)),
                    autocast=gen.autocast, placeholder=placeholder(generator, qg), **generator_settings(qg))
    if resumable:
        job = fingerprint(weights_digest(model), inputs, sampling)
        sampling["journal"] = paths.QG_CHECKPOINTS / "sampling" / f"{seed_tag}-{job}"
    records, drops = generate_in_processes(model, tokenizer, inputs, progress=progress, processes=processes,
                                           launcher_args=launcher_args, **sampling)
    for r in records:
        r["generator"] = generator
    return records, dict(drops)


def weights_digest(model) -> str:
    """A hash of a model's weights: names the sampling journal of exactly this generator (a retrained one, even
    from the same settings, starts a journal of its own)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def unconditioned_inputs(passages: int, exclude_test_gold: bool, test_sets: Mapping[str, str], seed: int,
                         replicate: int | None = None) -> tuple[list[dict], dict]:
    """Pool passages (``data.synthetic_pool``) for unconditioned generation: a seeded sample of ``passages``
    (``qg.generate.uncon_passages``; replicate ``replicate``'s own), without the gold passages of ``test_sets``
    (``data.test_sets``) when ``exclude_test_gold`` (``attention.exclude_test_gold``: the same leak guard as stage
    01's sample)."""
    excluded = test_gold_ids(test_sets) if exclude_test_gold else set()
    pool = [p for p in pool_passages() if p["id"] not in excluded]
    size = min(passages, len(pool))
    tag = f"{seed}-qg-uncon" + ("" if replicate is None else f"-s{replicate}")
    chosen = sorted(random.Random(tag).sample(range(len(pool)), size))
    inputs = [{"passage_id": pool[i]["id"], "title": pool[i]["title"], "text": pool[i]["text"], "entity": None,
               "entity_start": None, "entity_label": None} for i in chosen]
    return inputs, {"pool": len(pool), "excluded_test_gold": len(excluded), "sampled": size}


def sample_sets(models: Mapping[str, tuple], s: settings.Params, progress: bool = True
                ) -> tuple[dict[tuple[str, int | None], list[dict]], dict[str, dict]]:
    """Stage 02's question sets: per replicate (:func:`ecqg.core.variants.generation_seeds`) UnCon's questions
    (its own passage sample and sampling seed) and Con's (stage 01's lowest-attended entities, its own sampling
    seed). Returns ``{(scheme, replicate): records}`` and a row of counts per set (named ``uncon`` or
    ``uncon s<seed>``).

    Takes the whole typed tree: it reads ``qg``, ``dpr.seeds``, ``attention.exclude_test_gold``,
    ``data.test_sets``, ``seed``, ``processes`` and ``launcher_args``."""
    con_inputs = conditioned_inputs()
    sets, counts = {}, {}
    for replicate in variants.generation_seeds(s.dpr, s.qg.generate.per_replicate):
        uncon_inputs, sampling = unconditioned_inputs(s.qg.generate.uncon_passages, s.attention.exclude_test_gold,
                                                      s.data.test_sets, s.seed, replicate)
        for scheme, inputs in (("uncon", uncon_inputs), ("con", con_inputs)):
            start = perf_counter()
            model, tokenizer = models[scheme]
            records, drops = generate(model, tokenizer, scheme, inputs, s.qg, s.seed, scheme, progress=progress,
                                      resumable=True, replicate=replicate, processes=s.processes,
                                      launcher_args=s.launcher_args)
            seconds = perf_counter() - start
            sets[scheme, replicate] = records
            counts[scheme if replicate is None else f"{scheme} s{replicate}"] = {
                "inputs": len(inputs), "generated": drops["generated"], "kept": len(records),
                "questions_per_s": round(drops["generated"] / max(seconds, 1e-9), 2),
                "drops": {k: v for k, v in drops.items() if k != "generated"},
                **({"pool": sampling["pool"]} if scheme == "uncon" else {})}
    return sets, counts


def write_sets(sets: Mapping[tuple[str, int | None], list[dict]]) -> None:
    """Each set of :func:`sample_sets` to its file (``paths.generated_file``)."""
    for (scheme, replicate), records in sets.items():
        write_jsonl(paths.generated_file(scheme, replicate), records)


def _entity_input(record: Mapping, entity: Mapping, role: str) -> dict:
    return {"passage_id": record["passage_id"], "title": record["title"], "text": record["text"],
            "entity": entity["entity"], "entity_start": entity["start_char"], "entity_label": entity["label"],
            "attention": entity["attention"], "role": role, "rank": entity.get("rank", 1)}


def conditioned_inputs() -> list[dict]:
    """Stage 01's lowest-attended entities, one input each: the paper's conditioned generation."""
    return [_entity_input(r, e, "lowest") for _, r in read_jsonl(paths.QG_ENTITIES) for e in r["entities"]]


def probe_inputs(max_passages: int | None = None, seed: int = 0) -> list[dict]:
    """Per studied passage its highest- and (rank-1) lowest-attended entity: the paper's Table 1 probe (how a
    retriever scores questions about the entities it attends to most vs least); ``max_passages``: a seeded subset of
    that many passages (``attention.probe_passages``), None = all."""
    out = []
    rows = [r for _, r in read_jsonl(paths.QG_ENTITIES)]
    for r in subset(rows, max_passages, seed, "probe"):
        if "highest" not in r:
            raise ValueError(f"{paths.QG_ENTITIES}: passage {r['passage_id']} has no 'highest' entity; rerun stage 01")
        out.append(_entity_input(r, r["highest"], "highest"))
        out.append(_entity_input(r, r["entities"][0], "lowest"))
    return out


def with_probe_roles(records: list[dict], inputs: list[dict]) -> list[dict]:
    """Probe questions with the ``role`` (highest / lowest) and attention of the entity they were generated for."""
    role = {reference_key(i["passage_id"], i["entity"]): (i["role"], i["attention"]) for i in inputs}
    out = []
    for r in records:
        which, attention = role[reference_key(r["passage_id"], r["entity"])]
        out.append({**r, "id": f"{r['id']}-{which}", "role": which, "attention": attention})
    return out
