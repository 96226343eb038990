"""Stage 05 and dense retrieval in the pipeline: build the retriever a variant starts from (``dpr.model`` names its
kind in the registry), train it on the gold data, retrieve with it.

Notebook 05 (``train_variant``) and the ``retrieve_dense`` stage (``retrieve_all``) call these, so the notebook shows
the steps without holding their logic. Checkpoints live under ``outputs/checkpoints/<variant>/<fingerprint>/``, a
DVC output with ``persist: true``: DVC keeps it when it reruns a killed stage, so training resumes, and the
fingerprint of the training settings makes a changed parameter start afresh instead of resuming a different run.
"""

from __future__ import annotations

import logging
import random
import shutil
import time
from typing import Mapping, Sequence

from ecqg import paths
from ecqg.data.dpr import read_dpr_retriever_json
from ecqg.io import copy_directory, empty_directory, read_jsonl, remove_directory
from ecqg.pipeline.common import fingerprint, pretrain_seed, primary_seed, seeds
from ecqg.pipeline.finetune_validation import CURVE_DIR
from ecqg.retrieval import convergence
from ecqg.retrieval.choices import DENSE_VARIANTS, POLY_VARIANT_DATA
from ecqg.retrieval.retriever import Retriever, build_retriever, is_saved_retriever, load_retriever
from ecqg.retrieval.train import TrainConfig, latest_checkpoint, train_biencoder, without_timings
from ecqg.retrieval.train_data import data_fingerprint, split_records

log = logging.getLogger(__name__)

UNTRAINED = "untrained"  # the base checkpoint, not fine-tuned: Table 3's "not fine-tuned" row


def base_retriever(params: Mapping, kind: str | None = None, **model_kwargs) -> Retriever:
    """The retriever a variant starts from, of ``kind`` (default: the kind ``dpr.model`` names); a Poly-DPR gets
    ``polydpr.codes`` code vectors attending to ``polydpr.attend``. ``model_kwargs``: e.g.
    ``attn_implementation="eager"``, ``code_seed``."""
    dpr = params["dpr"]
    kind = kind or dpr["model"]
    extra = {"codes": params["polydpr"]["codes"], "attend": params["polydpr"]["attend"]} if kind == "polydpr" else {}
    return build_retriever(kind, dpr["base_model"], shared=dpr["shared_encoders"], pooling=dpr["pooling"],
                           query_max_length=dpr["query_max_length"], passage_max_length=dpr["passage_max_length"],
                           **extra, **model_kwargs)


def load_model(variant: str, params: Mapping, seed: int | None = None, **model_kwargs) -> Retriever:
    """The base checkpoint for ``untrained``, else the model stage 05 trained for ``variant`` with ``seed``
    (default: the primary seed). ``model_kwargs``: e.g. ``attn_implementation="eager"``."""
    if variant == UNTRAINED:
        return base_retriever(params, **model_kwargs)
    seed = primary_seed(params) if seed is None else seed
    directory = paths.model_dir(variant, seed)
    if not is_saved_retriever(directory):
        raise FileNotFoundError(f"{directory}: no trained model for variant '{variant}', seed {seed} "
                                "(run stage 05 first)")
    return load_retriever(directory, **model_kwargs)


def gold_records(params: Mapping) -> dict[str, list[dict]]:
    """The gold DPR training records by part, after the profile's seeded sub-sampling (``max_examples``): the gold
    triples (or DPR's nq-train.json), and NQ dev with distant supervision when ``dpr.finetune.nq_dev_distant``."""
    parts = {"gold_triples": list(read_dpr_retriever_json(paths.GOLD_DPR))}
    if params["dpr"]["finetune"]["nq_dev_distant"]:
        parts["nq_dev_distant"] = list(read_dpr_retriever_json(paths.NQ_DEV_DISTANT))
    limit = params["dpr"]["finetune"]["max_examples"]
    total = sum(len(v) for v in parts.values())
    if limit is None or limit >= total:
        return parts
    keep = set(random.Random(f"{params['seed']}-dpr-gold").sample(range(total), limit))
    out, offset = {}, 0
    for name, records in parts.items():
        out[name] = [r for i, r in enumerate(records) if offset + i in keep]
        offset += len(records)
    return out


# dpr.<phase> keys that steer the data and the validation, not the optimisation (not TrainConfig fields)
DATA_KEYS = ("max_examples", "heldout", "nq_dev_distant", "validation", "curve_runs", "curve_probe_passages")


def train_config(params: Mapping, phase: str = "finetune", seed: int | None = None) -> TrainConfig:
    """TrainConfig from ``params.dpr.<phase>`` (keys that only steer data selection are left out)."""
    settings = {k: v for k, v in params["dpr"][phase].items() if k not in DATA_KEYS}
    return TrainConfig.from_dict({**settings, "seed": params["seed"] if seed is None else seed})


VARIANTS = DENSE_VARIANTS
# Pre-trained on the set of the same name (``paths.synthetic_set``): stage 04's generated UnCon / Mixed questions, or
# stage pseudo_queries' generator-free ETM / RSM pseudo-queries over the same passages, as many.
SYNTHETIC_VARIANTS = ("uncon", "mixed", "etm", "rsm", "tempqg")
# Pre-trained on several sets one after the other, each a pre-training phase (``dpr.pretrain``) continuing from the
# last: Luo et al.'s best BioASQ recipe, RSM's pseudo-queries first, then TempQG's questions (Poly-DPR only).
PRETRAIN_SEQUENCES = {"rsm_tempqg": ("rsm", "tempqg")}
PRETRAINED_SUFFIX = "_pre"               # uncon_pre, ...: a pre-trained variant right after pre-training
PRETRAIN_ONLY_VARIANTS = tuple(v + PRETRAINED_SUFFIX for v in SYNTHETIC_VARIANTS)
# Poly-DPR (Luo et al. 2022) trained exactly like a DPR variant, on the same data with the same settings and seeds:
# poly_baseline beside baseline, poly_mixed beside mixed (the 2 x 2 of architecture and synthetic pre-training).
POLY_PREFIX = "poly_"
POLY_VARIANTS = tuple(POLY_PREFIX + v for v in POLY_VARIANT_DATA)
TRAINED_VARIANTS = VARIANTS + POLY_VARIANTS


def in_profile(systems: Sequence[str], params: Mapping) -> list[str]:
    """``systems`` without the rows of the generator-free variants ``pseudo.variants`` does not train (``dpr_etm``,
    ``dpr_etm_pre``, ``hybrid_<method>_etm``): a profile may skip ETM / RSM (the study does, for its time budget)."""
    skipped = [kind for kind in paths.PSEUDO_KINDS if kind not in params["pseudo"]["variants"]]

    def skips(system: str) -> bool:
        return any(system in (f"dpr_{kind}", f"dpr_{kind}{PRETRAINED_SUFFIX}")
                   or (system.startswith("hybrid_") and system.endswith(f"_{kind}")) for kind in skipped)
    return [system for system in systems if not skips(system)]


def data_variant(variant: str) -> str:
    """The DPR variant whose training data ``variant`` uses (``poly_mixed`` -> ``mixed``)."""
    return variant.removeprefix(POLY_PREFIX)


def retriever_kind(variant: str, params: Mapping) -> str:
    """``polydpr`` for a Poly-DPR variant, else the kind ``dpr.model`` names."""
    return "polydpr" if variant.startswith(POLY_PREFIX) else params["dpr"]["model"]


def synthetic_records(variant: str) -> list[dict]:
    """The pre-training set of ``uncon`` / ``mixed`` (stage 04), ``etm`` / ``rsm`` (stage pseudo_queries) or
    ``tempqg`` (stage tempqg), DPR retriever-json."""
    return list(read_dpr_retriever_json(paths.synthetic_set(variant)))


def pretraining_sets(data: str) -> tuple[str, ...]:
    """The synthetic sets a data variant pre-trains on, in order: one set, or a sequence
    (:data:`PRETRAIN_SEQUENCES`)."""
    return PRETRAIN_SEQUENCES.get(data, (data,))


def _train_phase(model: Retriever, records: list[dict], heldout: int, config: TrainConfig, run_dir, seed: int,
                 progress: bool, validator=None) -> dict:
    """One training phase (pre-training or fine-tuning) in ``run_dir``, resumable; returns its figures.
    ``validator(held-out records) -> validate(model, step)`` replaces the pool validation."""
    train, held = split_records(records, heldout, seed)
    resumed_from = latest_checkpoint(run_dir / "checkpoints") if (run_dir / "checkpoints").is_dir() else None
    if resumed_from is not None:
        log.info("resuming an interrupted run from %s", resumed_from)
    start = time.perf_counter()
    history = train_biencoder(model, train, held, config, run_dir, resume=True, progress=progress,
                              validate=validator(held) if validator else None)
    return {"history": history, "train_examples": len(train), "heldout_examples": len(held),
            "train_seconds": time.perf_counter() - start, "run_dir": str(run_dir),
            "resumed_from": None if resumed_from is None else str(resumed_from)}


def _settings_identity(variant: str, params: Mapping) -> dict:
    """The ``dpr`` settings that define a variant's training run (plus ``polydpr`` for a Poly-DPR). The seed lists
    are not among them: a run's own seed is, so adding a seed leaves every other run's checkpoints resumable."""
    dpr = {k: v for k, v in params["dpr"].items()
           if k not in ("encode", "index", "pretrain", "seeds", "related_seeds")}
    return {**dpr, "polydpr": params["polydpr"]} if retriever_kind(variant, params) == "polydpr" else dpr


def _start_model(variant: str, params: Mapping, seed: int) -> Retriever:
    """The base checkpoint as the variant's retriever kind; a Poly-DPR's codes start from ``seed``."""
    kind = retriever_kind(variant, params)
    return base_retriever(params, kind, code_seed=seed) if kind == "polydpr" else base_retriever(params, kind)


def is_pretrained_variant(variant: str) -> bool:
    """Does ``variant`` pre-train on synthetic sets before fine-tuning (uncon, mixed, etm, rsm, tempqg, poly_mixed,
    poly_rsm_tempqg)?"""
    return data_variant(variant) in SYNTHETIC_VARIANTS or data_variant(variant) in PRETRAIN_SEQUENCES


def pretraining_stage(variant: str) -> str:
    """The DVC stage that pre-trains ``variant`` (dvc.yaml): for a message that says what to run."""
    data = data_variant(variant)
    if data == paths.TEMPQG_GENERATOR or data in PRETRAIN_SEQUENCES:
        return f"dpr_pretraining_{variant}"
    stage = ("dpr_pretraining_poly" if variant.startswith(POLY_PREFIX)
             else "dpr_pretraining_pseudo" if data in paths.PSEUDO_KINDS else "dpr_pretraining")
    return f"{stage}@{data}"


def pretrained_dir(variant: str, params: Mapping):
    """Where the one pre-trained model of ``variant`` lives: ``outputs/models/dpr_<variant>_pre_s<seed>``."""
    return paths.model_dir(variant + PRETRAINED_SUFFIX, pretrain_seed(params))


def pretrain_variant(variant: str, params: Mapping, progress: bool = True) -> dict:
    """Pre-train ``variant`` on its synthetic set (``dpr.pretrain``), once, with :func:`pretrain_seed`; save it to
    :func:`pretrained_dir`. Returns the phase's figures (history, counts, time).

    UnCon / Mixed pre-train on stage 04's set of that name, ETM / RSM on stage pseudo_queries' set, TempQG on stage
    tempqg's, Mixed Poly-DPR on Mixed's set; a sequence (``poly_rsm_tempqg``) trains one phase per set, each
    continuing from the last, and its figures join the phases' (history entries name their ``set``). Every
    training seed then fine-tunes from this model (:func:`train_variant`).
    """
    if not is_pretrained_variant(variant):
        raise ValueError(f"variant '{variant}' has no synthetic pre-training; pre-trained variants: "
                         f"{', '.join(v for v in TRAINED_VARIANTS if is_pretrained_variant(v))}")
    seed = pretrain_seed(params)
    model = _start_model(variant, params, seed)
    settings = params["dpr"]["pretrain"]
    checkpoints = paths.checkpoint_dir(variant + PRETRAINED_SUFFIX, seed)
    identity = {k: v for k, v in _settings_identity(variant, params).items() if k != "finetune"}
    phases, trail = [], []
    for name in pretraining_sets(data_variant(variant)):
        synthetic = synthetic_records(name)
        trail.append(data_fingerprint(synthetic))        # a phase's run depends on every set before it
        run_dir = checkpoints / fingerprint(identity, settings, seed, *trail)
        phases.append((name, _train_phase(model, synthetic, settings["heldout"],
                                          train_config(params, "pretrain", seed), run_dir, seed, progress)))
    result = _joined_phases(phases)
    copy_directory(run_dir / "model", pretrained_dir(variant, params),
                   {"history.jsonl": without_timings(result["history"])})
    empty_directory(checkpoints)
    return result


def _joined_phases(phases: list[tuple[str, dict]]) -> dict:
    """One phase's figures as they are; several phases' joined: histories one after the other (steps counted on,
    each entry naming its ``set``), examples and seconds summed."""
    if len(phases) == 1:
        return phases[0][1]
    history, offset = [], 0
    for name, result in phases:
        steps = [h.get("step", 0) for h in result["history"]]
        history += [{**h, "set": name, **({"step": h["step"] + offset} if "step" in h else {})}
                    for h in result["history"]]
        offset += max(steps, default=0)
    last = phases[-1][1]
    return {**last, "history": history, "sets": [name for name, _ in phases],
            "train_examples": sum(r["train_examples"] for _, r in phases),
            "heldout_examples": sum(r["heldout_examples"] for _, r in phases),
            "train_seconds": sum(r["train_seconds"] for _, r in phases),
            "resumed_from": next((r["resumed_from"] for _, r in phases if r["resumed_from"]), None)}


def train_variant(variant: str, params: Mapping, seed: int, progress: bool = True) -> dict:
    """Fine-tune one variant with one seed on the gold data; save it to ``outputs/models/dpr_<variant>_s<seed>``.
    Returns the fine-tuning figures (history, counts, time, and ``pretrained_from`` for a pre-trained variant).

    ``baseline``: the base checkpoint fine-tuned on gold data only (the paper's DPR row). ``uncon`` / ``mixed`` (and
    the generator-free ``etm`` / ``rsm``): start from the variant's one pre-trained model (:func:`pretrain_variant`,
    its own stage), then fine-tune exactly like the baseline (same records, settings and seed), so the rows differ
    only in the pre-training. The seed steers batch order, dropout and the held-out split (and a Poly-DPR's code
    start without pre-training); the gold sub-sample (``max_examples``) is the same for every seed.

    Checkpoints (with optimizer state, about 0.5 GB each for MiniLM) serve only to resume a killed run: once the
    model is saved, the variant's checkpoint directory is emptied, older settings' runs included.
    """
    if variant not in TRAINED_VARIANTS:
        raise ValueError(f"unknown DPR variant '{variant}'; known: {', '.join(TRAINED_VARIANTS)}")
    start_identity: list = []
    pretrained_from = None
    if is_pretrained_variant(variant):
        pretrained_from = pretrained_dir(variant, params)
        if not is_saved_retriever(pretrained_from):
            raise FileNotFoundError(f"{pretrained_from}: no pre-trained model of variant '{variant}' (run stage "
                                    f"{pretraining_stage(variant)} first)")
        model = load_retriever(pretrained_from)
        start_identity = [fingerprint((pretrained_from / "history.jsonl").read_text(encoding="utf-8"))]
    else:
        model = _start_model(variant, params, seed)
    records = [r for part in gold_records(params).values() for r in part]
    heldout = params["dpr"]["finetune"]["heldout"]
    n_train = len(split_records(records, heldout, seed)[0])
    parts = [_settings_identity(variant, params), seed, n_train, len(records) - n_train] + start_identity
    run_dir = paths.checkpoint_dir(variant, seed) / fingerprint(*parts)
    validator, curve = _finetune_validation(variant, params, seed, run_dir, progress)
    result = _train_phase(model, records, heldout, train_config(params, seed=seed), run_dir, seed, progress, validator)
    if curve is not None and curve.is_dir():     # the snapshots' test runs travel with the model
        shutil.copytree(curve, run_dir / "model" / CURVE_DIR, dirs_exist_ok=True)
    copy_directory(run_dir / "model", paths.model_dir(variant, seed),
                   {"history.jsonl": without_timings(result["history"])})
    empty_directory(paths.checkpoint_dir(variant, seed))
    return {**result, "pretrained_from": None if pretrained_from is None else str(pretrained_from)}


def _finetune_validation(variant: str, params: Mapping, seed: int, run_dir, progress: bool):
    """``(validator, curve dir)``: with ``dpr.finetune.validation: corpus``, held-out gold questions retrieved over
    the corpus (:mod:`ecqg.pipeline.finetune_validation`), and for the first seed with ``curve_runs`` the test
    runs of every snapshot; ``(None, None)`` for DPR's pool validation."""
    from ecqg.pipeline.finetune_validation import corpus_validator

    settings = params["dpr"]["finetune"]
    if settings["validation"] != "corpus":
        return None, None
    curve = run_dir / CURVE_DIR if settings["curve_runs"] and seed == primary_seed(params) else None
    return (lambda held: corpus_validator(params, held, curve, progress)), curve


def training_summary(params: Mapping, result: Mapping, variant: str, seed: int, phase: str) -> dict:
    """What ``results/<profile>/dpr_<variant>[_pre]_s<seed>_training.json`` records of one training phase."""
    from ecqg.hf_training import resolve_mixed_precision

    history = result["history"]
    validation = [h for h in history if "val_top1" in h]
    rates = [h["examples_per_s"] for h in history if h.get("examples_per_s")]
    settings = params["dpr"][phase]
    shown, convergence_figures = (validation[-1] if validation else {}), {}
    if settings.get("patience"):      # fine-tuning to convergence: the kept epoch end's validation
        chosen = convergence.selected_step(history, settings["select_metric"])
        shown = next((h for h in validation if h["step"] == chosen), shown)
        convergence_figures = {"epochs_trained": history[-1]["epoch"] + 1 if history else 0, "selected_step": chosen,
                               "select_metric": settings["select_metric"], "patience": settings["patience"]}
    return {
        "variant": variant, "phase": phase, "seed": seed, "profile": params["profile"],
        "base_model": params["dpr"]["base_model"], "pretrained_from": result.get("pretrained_from"),
        "train_examples": result["train_examples"], "heldout_examples": result["heldout_examples"],
        "steps": len(history), "train_minutes": round(result["train_seconds"] / 60, 2),
        "examples_per_s": round(sum(rates) / len(rates), 2) if rates else None,
        "mixed_precision": resolve_mixed_precision(params["dpr"][phase]["mixed_precision"]),  # what ran here
        "final_loss": round(history[-1]["loss"], 4) if history else None,
        **convergence_figures,
        **{k: round(float(v), 4) for k, v in shown.items() if k.startswith("val_")},
    }


def write_training_plots(params: Mapping, history: list[dict], run_name: str) -> list:
    """Loss and validation curves of one training phase as DVC plot data:
    ``results/<profile>/plots/{training,validation}/<run_name>.csv`` (``dvc plots show``); ``run_name`` is
    ``dpr_<variant>_s<seed>``, or ``dpr_<variant>_pre_s<seed>`` for a pre-training."""
    from ecqg.io import write_csv

    return [write_csv(paths.plot_data(params["profile"], f"training/{run_name}.csv"), history, ["step", "loss"]),
            write_csv(paths.plot_data(params["profile"], f"validation/{run_name}.csv"),
                      [h for h in history if "val_top1" in h],
                      ["step", "val_top1", "val_top5", "val_top20", "val_avg_rank"])]


def retrieve_all(variant: str, params: Mapping, seed: int | None = None, progress: bool = True) -> dict:
    """Encode the corpus with the passage encoder of ``variant`` trained with ``seed`` (``untrained``: the base
    checkpoint, no seed), index it with FAISS, search every test set.

    Memory stays bounded by a chunk at any corpus size: the vectors stream to a memmap beside the index
    (``<index dir>.embeddings/``, removed once the index is saved) and FAISS adds them from there chunk by chunk.
    With ``processes`` above 1 the encoding is split over torchrun workers (:mod:`ecqg.parallel`).
    Before encoding, the memory and disk the index needs are estimated from the corpus size and the stage refuses,
    naming the setting, when they would not fit (:mod:`ecqg.retrieval.capacity`)."""
    from ecqg import device, parallel
    from ecqg.run_files import write_run
    from ecqg.retrieval import capacity, dense, faiss_index

    if (variant == UNTRAINED) != (seed is None):
        raise ValueError(f"variant '{variant}' {'takes no' if variant == UNTRAINED else 'needs a'} seed")
    settings = params["dpr"]
    model = load_model(variant, params, seed)
    index_dir = paths.dense_index_dir(variant, seed)
    scratch = index_dir.with_name(index_dir.name + ".embeddings")
    n_passages = dense.count_passages(paths.CORPUS)
    need = capacity.estimate(n_passages, model.dim, model.vectors_per_passage, settings["index"]["kind"],
                             settings["index"]["params"], dtype=settings["encode"]["dtype"])
    capacity.check_fits(need, scratch, f"dense index of {system_name(variant, seed)}")
    autocast = device.autocast_dtype(settings["encode"]["autocast"], device.resolve().type)
    if scratch.is_dir():
        remove_directory(scratch)
    start = time.perf_counter()
    ids, vectors = dense.encode_corpus(model, paths.CORPUS, scratch, n_passages, processes=parallel.processes(params),
                                       params=params, batch_size=settings["encode"]["batch_size"],
                                       dtype=settings["encode"]["dtype"], progress=progress, autocast=autocast)
    encode_s = time.perf_counter() - start
    ids, vectors = faiss_index.index_rows(ids, vectors)   # K rows per passage for a multi-vector model
    index = faiss_index.build_index(vectors, kind=settings["index"]["kind"], seed=params["seed"],
                                    progress=progress, **settings["index"]["params"])
    faiss_index.save_index(index, ids, index_dir)
    del vectors
    remove_directory(scratch)
    figures = {"passages": n_passages, "encode_s": round(encode_s, 1), "autocast": autocast,
               "passages_per_s": round(n_passages / max(encode_s, 1e-9), 1), "device": device.describe(),
               "processes": parallel.processes(params), "estimated_need": need.as_dict()}
    if len(ids) != n_passages:
        figures["index_rows"] = len(ids)
    for name in params["data"]["test_sets"]:
        questions = [q for _, q in read_jsonl(paths.questions_file(name))]
        vectors_q = dense.encode_queries(model, [q["question"] for q in questions],
                                         batch_size=settings["encode"]["batch_size"], progress=progress,
                                         autocast=autocast)
        run = faiss_index.search(index, ids, vectors_q, k=params["retrieval"]["depth"],
                                 qids=[q["id"] for q in questions], progress=progress)
        system = system_name(variant, seed)
        write_run(paths.run_file(system, name), run, tag=system)
    return figures


def system_name(variant: str, seed: int | None = None) -> str:
    """Run directory name of a dense model: ``dpr_<variant>_s<seed>``; the base checkpoint is ``minilm_untrained``."""
    return "minilm_untrained" if variant == UNTRAINED else paths.dense_run_name(variant, seed)


def seed_runs(params: Mapping) -> dict[str, list[str]]:
    """Table 3's dense rows -> the run of each seed (``dpr_baseline`` -> ``[dpr_baseline_s2022, ...]``); a
    pre-trained-only row (``dpr_uncon_pre``) has the one run of its pre-training (:func:`pretrain_seed`)."""
    runs = {f"dpr_{v}": [system_name(v, s) for s in seeds(params, v)] for v in TRAINED_VARIANTS}
    runs.update({f"dpr_{v}": [system_name(v, pretrain_seed(params))] for v in PRETRAIN_ONLY_VARIANTS})
    return runs
