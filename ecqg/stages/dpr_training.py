"""Stage 05 and dense retrieval in the pipeline: build the retriever a variant starts from (``dpr.model`` names its
kind in the registry), train it on the gold data, retrieve with it.

Notebook 05 (``train_variant``) calls these, so the notebook shows the steps without holding their logic; the
``retrieve_dense`` stage's search is :mod:`ecqg.stages.retrieve_dense`. Checkpoints live under
``outputs/checkpoints/<variant>/<fingerprint>/``, a DVC output with ``persist: true``: DVC keeps it when it reruns a
killed stage, so training resumes, and the fingerprint of the training settings makes a changed parameter start
afresh instead of resuming a different run.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import time
from typing import Mapping

from ecqg.core import paths, settings, variants
from ecqg.core.settings import retrievers
from ecqg.core.io import copy_directory, empty_directory, write_csv
from ecqg.core.variants import UNTRAINED
from ecqg.data.dpr import read_dpr_retriever_json
from ecqg.retrieval import convergence
from ecqg.retrieval.retriever import Retriever, build_retriever, is_saved_retriever, load_retriever
from ecqg.retrieval.train import TrainConfig, latest_checkpoint, train_biencoder, without_timings
from ecqg.retrieval.train_data import data_fingerprint, split_records
from ecqg.runtime import parallel
from ecqg.runtime.hf_training import resolve_mixed_precision
from ecqg.stages.common import fingerprint, primary_seed
from ecqg.stages.finetune_validation import CURVE_DIR, corpus_validator

log = logging.getLogger(__name__)

# Every training set's tokens, once per set and base model (Arrow, memory-mapped; ecqg.retrieval.tokens.
# TrainingTokens.cached): read by every process of a run and every later run on the set (seeds, variants, doses'
# parent sets). Not a DVC output: a cache, keyed by the texts and the tokenizer; deleting it costs one tokenisation.
TRAINING_TOKENS = paths.OUTPUTS / "tokenized" / "training"


def kind_block(s: settings.Params, kind: str) -> settings.PolyDpr | None:
    """The params block of retriever ``kind``'s own settings where its traits name one
    (``ecqg.core.settings.retrievers.KINDS``: a Poly-DPR's ``polydpr``), else None: what :func:`base_retriever`
    takes."""
    block = retrievers.settings_block(kind)
    return getattr(s, block) if block else None


def _own_settings(kind: str, own: settings.PolyDpr | None) -> dict:
    """The constructor keys of ``kind``'s own block (``own``), checked to be there when the kind has one."""
    block = retrievers.settings_block(kind)
    if not block:
        return {}
    if own is None:
        raise ValueError(f"retriever kind '{kind}' takes its '{block}' settings: pass that block (kind_settings)")
    return own.as_dict()


def base_retriever(dpr: settings.Dpr, kind: str | None = None, kind_settings: settings.PolyDpr | None = None,
                   **model_kwargs) -> Retriever:
    """The retriever a variant starts from, of ``kind`` (default: the kind ``dpr.model`` names), with the settings of
    its own params block where its traits name one (``kind_settings``, :func:`kind_block`: a Poly-DPR's
    ``polydpr`` codes and what they attend to; ignored for a kind without one). ``model_kwargs``: e.g.
    ``attn_implementation="eager"``, ``code_seed``."""
    kind = kind or dpr.model
    extra = _own_settings(kind, kind_settings)
    return build_retriever(kind, dpr.base_model, shared=dpr.shared_encoders, pooling=dpr.pooling,
                           query_max_length=dpr.query_max_length, passage_max_length=dpr.passage_max_length,
                           **extra, **model_kwargs)


def load_model(variant: str, dpr: settings.Dpr, seed: int | None = None,
               kind_settings: settings.PolyDpr | None = None, **model_kwargs) -> Retriever:
    """The base checkpoint for ``untrained`` (``kind_settings``: :func:`base_retriever`'s), else the model stage 05
    trained for ``variant`` with ``seed`` (default: the primary seed). ``model_kwargs``: e.g.
    ``attn_implementation="eager"``."""
    if variant == UNTRAINED:
        return base_retriever(dpr, kind_settings=kind_settings, **model_kwargs)
    seed = primary_seed(dpr) if seed is None else seed
    directory = paths.model_dir(variant, seed)
    if not is_saved_retriever(directory):
        raise FileNotFoundError(f"{directory}: no trained model for variant '{variant}', seed {seed} "
                                "(run stage 05 first)")
    return load_retriever(directory, **model_kwargs)


def gold_records(finetune: settings.DprFinetune, seed: int) -> dict[str, list[dict]]:
    """The gold DPR training records by part, after the profile's seeded sub-sampling (``max_examples``; ``seed``:
    the profile's): the gold triples (or DPR's nq-train.json), and NQ dev with distant supervision when
    ``dpr.finetune.nq_dev_distant``."""
    parts = {"gold_triples": list(read_dpr_retriever_json(paths.GOLD_DPR))}
    if finetune.nq_dev_distant:
        parts["nq_dev_distant"] = list(read_dpr_retriever_json(paths.NQ_DEV_DISTANT))
    limit = finetune.max_examples
    total = sum(len(v) for v in parts.values())
    if limit is None or limit >= total:
        return parts
    keep = set(random.Random(f"{seed}-dpr-gold").sample(range(total), limit))
    out, offset = {}, 0
    for name, records in parts.items():
        out[name] = [r for i, r in enumerate(records) if offset + i in keep]
        offset += len(records)
    return out


PRETRAINED_SUFFIX = variants.PRE_SUFFIX     # uncon_pre, ...: a pre-trained variant right after pre-training


def retriever_kind(variant: str, dpr: settings.Dpr) -> str:
    """The retriever kind of ``variant`` (the table's, or ``dpr.model``)."""
    return variants.get(variant).retriever_kind(dpr.model)


def synthetic_records(name: str, seed: int, per_replicate: bool) -> list[dict]:
    """The pre-training set replicate ``seed`` reads (``ecqg.core.variants.SETS``: stage 04's, its own where sets
    are per replicate, ``qg.generate.per_replicate``; pseudo_queries', tempqg's, or a dose), DPR retriever-json."""
    return list(read_dpr_retriever_json(variants.set_path(name, seed, per_replicate)))


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
                              validate=validator(held) if validator else None, tokens_cache=TRAINING_TOKENS)
    return {"history": history, "train_examples": len(train), "heldout_examples": len(held),
            "train_seconds": time.perf_counter() - start, "run_dir": str(run_dir),
            "resumed_from": None if resumed_from is None else str(resumed_from)}


def _settings_identity(variant: str, dpr: settings.Dpr, kind_settings: settings.PolyDpr | None = None) -> dict:
    """The ``dpr`` settings that define a variant's training run (plus its kind's own block, ``kind_settings``:
    ``polydpr``). The seed lists are not among them: a run's own seed is, so adding a seed leaves every other run's
    checkpoints resumable."""
    identity = {k: v for k, v in dpr.as_dict().items()
                if k not in ("encode", "index", "pretrain", "seeds", "related_seeds")}
    kind = retriever_kind(variant, dpr)
    block = retrievers.settings_block(kind)
    return {**identity, block: _own_settings(kind, kind_settings)} if block else identity


def _start_model(variant: str, dpr: settings.Dpr, kind_settings: settings.PolyDpr | None, seed: int) -> Retriever:
    """The base checkpoint as the variant's retriever kind; a Poly-DPR's codes start from ``seed``."""
    kind = retriever_kind(variant, dpr)
    return base_retriever(dpr, kind, kind_settings, code_seed=seed) if retrievers.traits(kind).seeded_init else \
        base_retriever(dpr, kind, kind_settings)


def is_pretrained_variant(variant: str) -> bool:
    """Does ``variant`` pre-train on synthetic sets before fine-tuning?"""
    return variants.get(variant).pretrained


def pretrained_dir(variant: str, seed: int):
    """Where replicate ``seed`` of ``variant`` keeps its pre-trained model:
    ``outputs/models/dpr_<variant>_pre_s<seed>``."""
    return paths.model_dir(variant + PRETRAINED_SUFFIX, seed)


def pretrain_variant(variant: str, s: settings.Params, seed: int, progress: bool = True) -> dict:
    """Pre-train replicate ``seed`` of ``variant`` on its synthetic sets (``dpr.pretrain``) and save it to
    :func:`pretrained_dir`. Returns the phase's figures (history, counts, time). Takes the whole tree, as
    :func:`train_variant` does (:func:`train_replicate` runs either): ``dpr``, the kind's own block, which set a
    replicate reads (``qg.generate.per_replicate``) and the collective timeout.

    Every replicate pre-trains on its own (seed ``seed``), so the spread over a synthetic variant's runs includes
    its pre-training's. A variant with several sets (``poly_rsm_tempqg``) trains one phase per set, each continuing
    from the last, and its figures join the phases' (history entries name their ``set``). Fine-tuning replicate
    ``seed`` then starts from this model (:func:`train_variant`).
    """
    spec = variants.get(variant)
    if not spec.pretrained:
        raise ValueError(f"variant '{variant}' has no synthetic pre-training; pre-trained variants: "
                         f"{', '.join(v.name for v in variants.TABLE if v.pretrained)}")
    own = kind_block(s, retriever_kind(variant, s.dpr))
    model = _start_model(variant, s.dpr, own, seed)
    pretrain = s.dpr.pretrain
    checkpoints = paths.checkpoint_dir(variant + PRETRAINED_SUFFIX, seed)
    identity = {k: v for k, v in _settings_identity(variant, s.dpr, own).items() if k != "finetune"}
    phases, trail = [], []
    for name in spec.pretrain:
        synthetic = synthetic_records(name, seed, s.qg.generate.per_replicate)
        trail.append(data_fingerprint(synthetic))        # a phase's run depends on every set before it
        run_dir = checkpoints / fingerprint(identity, pretrain.as_dict(), seed, *trail)
        phases.append((name, _train_phase(model, synthetic, pretrain.heldout,
                                          pretrain.train_config(seed, s.collective_timeout_minutes), run_dir, seed,
                                          progress)))
    result = _joined_phases(phases)
    if is_main_process():
        copy_directory(run_dir / "model", pretrained_dir(variant, seed),
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


def train_variant(variant: str, s: settings.Params, seed: int, progress: bool = True) -> dict:
    """Fine-tune one variant with one seed on the gold data; save it to ``outputs/models/dpr_<variant>_s<seed>``.
    Returns the fine-tuning figures (history, counts, time, and ``pretrained_from`` for a pre-trained variant).
    Takes the whole tree: ``dpr``, the kind's own block, the profile's ``seed`` (the gold sub-sample), the collective
    timeout, and for the corpus validation ``data``, ``retrieval`` (:func:`_finetune_validation`).

    ``baseline``: the base checkpoint fine-tuned on gold data only (the paper's DPR row). A pre-trained variant
    (``ecqg.core.variants.TABLE``) starts from replicate ``seed``'s pre-trained model (:func:`pretrain_variant`, its own
    stage), then fine-tunes exactly like the baseline (same records, settings and seed), so the rows differ only in
    the pre-training. The seed steers batch order, dropout and the held-out split (and a Poly-DPR's code start
    without pre-training); the gold sub-sample (``max_examples``) is the same for every seed.

    Checkpoints (with optimizer state, several times the model's size each) serve only to resume a killed run: once the
    model is saved, the variant's checkpoint directory is emptied, older settings' runs included.
    """
    own = kind_block(s, retriever_kind(variant, s.dpr))
    start_identity: list = []
    pretrained_from = None
    if is_pretrained_variant(variant):
        pretrained_from = pretrained_dir(variant, seed)
        if not is_saved_retriever(pretrained_from):
            raise FileNotFoundError(f"{pretrained_from}: no pre-trained model of variant '{variant}', seed {seed} "
                                    f"(run stage {variants.pretrain_stage(variant, seed)} first)")
        model = load_retriever(pretrained_from)
        start_identity = [fingerprint((pretrained_from / "history.jsonl").read_text(encoding="utf-8"))]
    else:
        model = _start_model(variant, s.dpr, own, seed)
    finetune = s.dpr.finetune
    records = [r for part in gold_records(finetune, s.seed).values() for r in part]
    heldout = finetune.heldout
    n_train = len(split_records(records, heldout, seed)[0])
    parts = [_settings_identity(variant, s.dpr, own), seed, n_train, len(records) - n_train] + start_identity
    run_dir = paths.checkpoint_dir(variant, seed) / fingerprint(*parts)
    validator, curve = _finetune_validation(s.dpr, s.data, s.retrieval, s.seed, seed, run_dir, progress)
    result = _train_phase(model, records, heldout, finetune.train_config(seed, s.collective_timeout_minutes), run_dir,
                          seed, progress, validator)
    if is_main_process():
        if curve is not None and curve.is_dir():     # the snapshots' test runs travel with the model
            shutil.copytree(curve, run_dir / "model" / CURVE_DIR, dirs_exist_ok=True)
        copy_directory(run_dir / "model", paths.model_dir(variant, seed),
                       {"history.jsonl": without_timings(result["history"])})
        empty_directory(paths.checkpoint_dir(variant, seed))
    return {**result, "pretrained_from": None if pretrained_from is None else str(pretrained_from)}


def is_main_process() -> bool:
    """Rank 0 of a torchrun job, or the only process: the one that writes the trained model (the trainer itself
    saves from the main process only)."""
    return int(os.environ.get("RANK", "0")) == 0


def train_replicate(variant: str, s: settings.Params, seed: int, phase: str = "finetune", progress: bool = True
                    ) -> dict:
    """Pre-train (``phase="pretrain"``) or fine-tune replicate ``seed`` of ``variant``: in this process, or with
    ``processes: N`` above 1 in N torchrun processes (one per GPU under ``device: auto``), in-batch negatives
    gathered across them. ``batch_size`` is the global batch, so the data order, the negatives and the trained model
    are those of one process (``tests/test_parallel.py`` trains both ways and compares). Returns the phase's
    figures. Takes the whole tree: the phase's (:func:`pretrain_variant`, :func:`train_variant`), and ``processes``,
    ``launcher_args``; the workers rebuild it from the job."""
    if phase not in ("pretrain", "finetune"):
        raise ValueError(f"phase must be 'pretrain' or 'finetune', not {phase!r}")
    n = parallel.processes(s.processes)
    if n == 1:
        return _run_phase(variant, s, seed, phase, progress)
    batch = getattr(s.dpr, phase).batch_size
    if batch % n:
        counted = " (processes: auto, the GPUs visible here)" if s.processes == "auto" else ""
        raise ValueError(f"dpr.{phase}.batch_size {batch} does not split over processes: {n}{counted}; the global "
                         "batch is cut into one share per process (each the batch per device): set 'processes' to "
                         f"a divisor of {batch} or 'dpr.{phase}.batch_size' to a multiple of {n}")
    log.info("%s of %s, seed %d: %d processes, %d examples per device of a global batch of %d", phase, variant,
             seed, n, batch // n, batch)
    with parallel.job_directory("train") as job_dir:
        parts = parallel.run("train", {"variant": variant, "params": s.as_dict(), "seed": seed, "phase": phase},
                             job_dir, s.processes, s.launcher_args, progress)
    return parts[0]


def train_part(job: Mapping, rank: int, world: int, job_dir) -> dict:
    """One torchrun process of :func:`train_replicate`: the whole phase, its share of each global batch (the
    trainer takes it from Accelerate); rank 0 returns the figures."""
    result = _run_phase(job["variant"], settings.of(job["params"]), job["seed"], job["phase"],
                        job["progress"] and rank == 0)
    return result if rank == 0 else {}


def _run_phase(variant: str, s: settings.Params, seed: int, phase: str, progress: bool) -> dict:
    return (pretrain_variant(variant, s, seed, progress) if phase == "pretrain"
            else train_variant(variant, s, seed, progress))


def _finetune_validation(dpr: settings.Dpr, data: settings.Data, retrieval: settings.Retrieval, probe_seed: int,
                         seed: int, run_dir, progress: bool):
    """``(validator, curve dir)``: with ``dpr.finetune.validation: corpus``, held-out gold questions retrieved over
    the corpus (:mod:`ecqg.stages.finetune_validation`), and for the first seed with ``curve_runs`` the test
    runs of every snapshot; ``(None, None)`` for DPR's pool validation. ``probe_seed``: the profile's ``seed`` (the
    moved-sentence probe's sample); ``seed``: the replicate's."""
    finetune = dpr.finetune
    if finetune.validation != "corpus":
        return None, None
    curve = run_dir / CURVE_DIR if finetune.curve_runs and seed == primary_seed(dpr) else None
    return (lambda held: corpus_validator(dpr, data, retrieval, probe_seed, held, curve, progress)), curve


def training_summary(dpr: settings.Dpr, profile: str, result: Mapping, variant: str, seed: int, phase: str) -> dict:
    """What ``results/<profile>/dpr_<variant>[_pre]_s<seed>_training.json`` records of one training phase (its
    settings: ``dpr.<phase>``)."""
    history = result["history"]
    validation = [h for h in history if "val_top1" in h]
    rates = [h["examples_per_s"] for h in history if h.get("examples_per_s")]
    block = getattr(dpr, phase)
    shown, convergence_figures = (validation[-1] if validation else {}), {}
    if getattr(block, "patience", None):      # fine-tuning to convergence: the kept epoch end's validation
        chosen = convergence.selected_step(history, block.select_metric)
        shown = next((h for h in validation if h["step"] == chosen), shown)
        convergence_figures = {"epochs_trained": history[-1]["epoch"] + 1 if history else 0, "selected_step": chosen,
                               "select_metric": block.select_metric, "patience": block.patience}
    if history and history[-1].get("stopped_by"):
        convergence_figures["stopped_by"] = history[-1]["stopped_by"]     # recorded by the trainer
    return {
        "variant": variant, "phase": phase, "seed": seed, "profile": profile,
        "base_model": dpr.base_model, "pretrained_from": result.get("pretrained_from"),
        "train_examples": result["train_examples"], "heldout_examples": result["heldout_examples"],
        "steps": len(history), "train_minutes": round(result["train_seconds"] / 60, 2),
        "examples_per_s": round(sum(rates) / len(rates), 2) if rates else None,
        "mixed_precision": resolve_mixed_precision(block.mixed_precision),  # what ran here
        "final_loss": round(history[-1]["loss"], 4) if history else None,
        **convergence_figures,
        **{k: round(float(v), 4) for k, v in shown.items() if k.startswith("val_")},
    }


def write_training_plots(profile: str, history: list[dict], run_name: str) -> list:
    """Loss and validation curves of one training phase as DVC plot data:
    ``results/<profile>/plots/{training,validation}/<run_name>.csv`` (``dvc plots show``); ``run_name`` is
    ``dpr_<variant>_s<seed>``, or ``dpr_<variant>_pre_s<seed>`` for a pre-training."""
    return [write_csv(paths.plot_data(profile, f"training/{run_name}.csv"), history, ["step", "loss"]),
            write_csv(paths.plot_data(profile, f"validation/{run_name}.csv"),
                      [h for h in history if "val_top1" in h],
                      ["step", "val_top1", "val_top5", "val_top20", "val_avg_rank"])]


def system_name(variant: str, seed: int | None = None) -> str:
    """Run directory name of a dense model: ``dpr_<variant>_s<seed>``; the base checkpoint's is
    ``variants.UNTRAINED_SYSTEM``."""
    return variants.UNTRAINED_SYSTEM if variant == UNTRAINED else paths.dense_run_name(variant, seed)


def seed_runs(dpr: settings.Dpr, mixing: settings.Mixing) -> dict[str, list[str]]:
    """Table 3's dense rows -> the run of each replicate (``dpr_baseline`` -> ``[dpr_baseline_s2022, ...]``), for
    every variant the profile trains; a pre-trained variant's row right after pre-training (``dpr_uncon_pre``) has
    the pre-trained model of each replicate, and each dose of ``mixing.doses`` its own rows."""
    runs = {}
    for v in variants.trained(dpr):
        replicate_seeds = variants.seeds(v, dpr)
        runs[v.system] = [system_name(v.name, s) for s in replicate_seeds]
        if v.pretrained:
            runs[v.pre_system] = [system_name(v.name + PRETRAINED_SUFFIX, s) for s in replicate_seeds]
    for v in dose_variants(mixing):
        runs[v.pre_system] = [system_name(v.name + PRETRAINED_SUFFIX, s) for s in variants.seeds(v, dpr)]
    return runs


def dose_variants(mixing: settings.Mixing) -> list:
    """The dose curve's variants (``mixing.doses``): UnCon and Mixed pre-trained on their sets cut to each size."""
    return [variants.dose_variant(base, n) for n in variants.doses(mixing) for base in variants.DOSED_SETS]
