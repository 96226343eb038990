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
import time
from typing import Mapping

from ecqg import paths
from ecqg.data.dpr import read_dpr_retriever_json
from ecqg.io import copy_directory, empty_directory, read_jsonl
from ecqg.pipeline.common import fingerprint, primary_seed, pretrain_only_seeds, seeds
from ecqg.retrieval.choices import DENSE_VARIANTS, POLY_VARIANT_DATA
from ecqg.retrieval.retriever import Retriever, build_retriever, is_saved_retriever, load_retriever
from ecqg.retrieval.train import TrainConfig, latest_checkpoint, train_biencoder, without_timings
from ecqg.retrieval.train_data import data_fingerprint, split_records

log = logging.getLogger(__name__)

UNTRAINED = "untrained"  # the base checkpoint, not fine-tuned: Table 3's "not fine-tuned" row


def base_retriever(params: Mapping, kind: str | None = None, **model_kwargs) -> Retriever:
    """The retriever a variant starts from, of ``kind`` (default: the kind ``dpr.model`` names); a Poly-DPR gets
    ``polydpr.codes`` code vectors. ``model_kwargs``: e.g. ``attn_implementation="eager"``, ``code_seed``."""
    dpr = params["dpr"]
    kind = kind or dpr["model"]
    extra = {"codes": params["polydpr"]["codes"]} if kind == "polydpr" else {}
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
    """The gold DPR training records by part, after the profile's seeded sub-sampling (``max_examples``)."""
    parts = {"gold_triples": list(read_dpr_retriever_json(paths.GOLD_DPR)),
             "nq_dev_distant": list(read_dpr_retriever_json(paths.NQ_DEV_DISTANT))}
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


def train_config(params: Mapping, phase: str = "finetune", seed: int | None = None) -> TrainConfig:
    """TrainConfig from ``params.dpr.<phase>`` (keys that only steer data selection are left out)."""
    settings = {k: v for k, v in params["dpr"][phase].items() if k not in ("max_examples", "heldout")}
    return TrainConfig.from_dict({**settings, "seed": params["seed"] if seed is None else seed})


VARIANTS = DENSE_VARIANTS
# Pre-trained on the set of the same name (``paths.synthetic_set``): stage 04's generated UnCon / Mixed questions, or
# stage pseudo_queries' generator-free ETM / RSM pseudo-queries over the same passages, as many.
SYNTHETIC_VARIANTS = ("uncon", "mixed", "etm", "rsm")
PRETRAINED_SUFFIX = "_pre"               # uncon_pre, ...: a pre-trained variant right after pre-training
PRETRAIN_ONLY_VARIANTS = tuple(v + PRETRAINED_SUFFIX for v in SYNTHETIC_VARIANTS)
# Poly-DPR (Luo et al. 2022) trained exactly like a DPR variant, on the same data with the same settings and seeds:
# poly_baseline beside baseline, poly_mixed beside mixed (the 2 x 2 of architecture and synthetic pre-training).
POLY_PREFIX = "poly_"
POLY_VARIANTS = tuple(POLY_PREFIX + v for v in POLY_VARIANT_DATA)
TRAINED_VARIANTS = VARIANTS + POLY_VARIANTS


def data_variant(variant: str) -> str:
    """The DPR variant whose training data ``variant`` uses (``poly_mixed`` -> ``mixed``)."""
    return variant.removeprefix(POLY_PREFIX)


def retriever_kind(variant: str, params: Mapping) -> str:
    """``polydpr`` for a Poly-DPR variant, else the kind ``dpr.model`` names."""
    return "polydpr" if variant.startswith(POLY_PREFIX) else params["dpr"]["model"]


def synthetic_records(variant: str) -> list[dict]:
    """The pre-training set of ``uncon`` / ``mixed`` (stage 04) or ``etm`` / ``rsm`` (stage pseudo_queries), DPR
    retriever-json."""
    return list(read_dpr_retriever_json(paths.synthetic_set(variant)))


def _train_phase(model: Retriever, records: list[dict], heldout: int, config: TrainConfig, run_dir, seed: int,
                 progress: bool) -> dict:
    """One training phase (pre-training or fine-tuning) in ``run_dir``, resumable; returns its figures."""
    train, held = split_records(records, heldout, seed)
    resumed_from = latest_checkpoint(run_dir / "checkpoints") if (run_dir / "checkpoints").is_dir() else None
    if resumed_from is not None:
        log.info("resuming an interrupted run from %s", resumed_from)
    start = time.perf_counter()
    history = train_biencoder(model, train, held, config, run_dir, resume=True, progress=progress)
    return {"history": history, "train_examples": len(train), "heldout_examples": len(held),
            "train_seconds": time.perf_counter() - start, "run_dir": str(run_dir),
            "resumed_from": None if resumed_from is None else str(resumed_from)}


def train_variant(variant: str, params: Mapping, seed: int, progress: bool = True) -> dict:
    """Train one variant with one seed; save it to ``outputs/models/dpr_<variant>_s<seed>``. Returns the fine-tuning
    figures (history, counts, time) and, for synthetic variants, ``pretrain`` with the same figures of the
    pre-training phase.

    ``baseline``: the base checkpoint fine-tuned on gold data only (the paper's DPR row). ``uncon`` / ``mixed`` (and
    the generator-free ``etm`` / ``rsm``): pre-trained on the set of that name (``dpr.pretrain``), then fine-tuned
    exactly like the baseline (same records, settings and seed), so the rows differ only in the pre-training. The
    seed steers batch order, dropout and the held-out split; the gold sub-sample (``max_examples``) is the same for
    every seed.

    A synthetic variant's model right after pre-training (before fine-tuning) is saved too, as
    ``outputs/models/dpr_<variant>_pre_s<seed>``, so the synthetic data's own effect can be measured.

    Checkpoints (with optimizer state, about 0.5 GB each for MiniLM) serve only to resume a killed run: once the
    model is saved, the variant's checkpoint directory is emptied, older settings' runs included.
    """
    if variant not in TRAINED_VARIANTS:
        raise ValueError(f"unknown DPR variant '{variant}'; known: {', '.join(TRAINED_VARIANTS)}")
    dpr = {k: v for k, v in params["dpr"].items() if k not in ("encode", "index", "pretrain", "seeds")}
    kind = retriever_kind(variant, params)
    if kind == "polydpr":   # the codes' random start follows the training seed; K is part of the run's identity
        dpr = {**dpr, "polydpr": params["polydpr"]}
        model = base_retriever(params, kind, code_seed=seed)
    else:
        model = base_retriever(params, kind)
    pretrain = None
    if data_variant(variant) in SYNTHETIC_VARIANTS:
        synthetic = synthetic_records(data_variant(variant))
        settings = params["dpr"]["pretrain"]
        pre_dir = paths.checkpoint_dir(variant, seed) / ("pretrain-" + fingerprint(
            dpr, settings, seed, data_fingerprint(synthetic)))
        pretrain = _train_phase(model, synthetic, settings["heldout"], train_config(params, "pretrain", seed),
                                pre_dir, seed, progress)
        copy_directory(pre_dir / "model", paths.model_dir(variant + PRETRAINED_SUFFIX, seed),
                       {"history.jsonl": without_timings(pretrain["history"])})
        model = load_retriever(pre_dir / "model")
    records = [r for part in gold_records(params).values() for r in part]
    heldout = params["dpr"]["finetune"]["heldout"]
    n_train = len(split_records(records, heldout, seed)[0])
    parts = [dpr, seed, n_train, len(records) - n_train] + ([] if pretrain is None else [pretrain["run_dir"]])
    run_dir = paths.checkpoint_dir(variant, seed) / fingerprint(*parts)
    result = _train_phase(model, records, heldout, train_config(params, seed=seed), run_dir, seed, progress)
    copy_directory(run_dir / "model", paths.model_dir(variant, seed),
                   {"history.jsonl": without_timings(result["history"])})
    empty_directory(paths.checkpoint_dir(variant, seed))
    return {**result, "pretrain": pretrain}


def write_training_plots(params: Mapping, result: Mapping, variant: str, seed: int) -> list:
    """Loss and validation curves of a training run (and of its pre-training) as DVC plot data:
    ``results/<profile>/plots/{training,validation}/dpr_<variant>[_pre]_s<seed>.csv`` (``dvc plots show``)."""
    from ecqg.io import write_csv

    runs = {paths.dense_run_name(variant, seed): result["history"]}
    if result.get("pretrain") is not None:
        runs[paths.dense_run_name(variant + PRETRAINED_SUFFIX, seed)] = result["pretrain"]["history"]
    written = []
    for name, history in runs.items():
        written.append(write_csv(paths.plot_data(params["profile"], f"training/{name}.csv"), history,
                                 ["step", "loss"]))
        written.append(write_csv(paths.plot_data(params["profile"], f"validation/{name}.csv"),
                                 [h for h in history if "val_top1" in h],
                                 ["step", "val_top1", "val_top5", "val_top20", "val_avg_rank"]))
    return written


def retrieve_all(variant: str, params: Mapping, seed: int | None = None, progress: bool = True) -> dict:
    """Encode the corpus with the passage encoder of ``variant`` trained with ``seed`` (``untrained``: the base
    checkpoint, no seed), index it with FAISS, search every test set."""
    from ecqg.data.records import read_corpus
    from ecqg.run_files import write_run
    from ecqg.retrieval import dense, faiss_index

    if (variant == UNTRAINED) != (seed is None):
        raise ValueError(f"variant '{variant}' {'takes no' if variant == UNTRAINED else 'needs a'} seed")
    settings = params["dpr"]
    model = load_model(variant, params, seed)
    start = time.perf_counter()
    from ecqg.hf_training import resolve_autocast

    autocast = resolve_autocast(settings["encode"]["autocast"])
    ids, vectors = dense.encode_passages(model, read_corpus(paths.CORPUS), batch_size=settings["encode"]["batch_size"],
                                         progress=progress, autocast=autocast)
    encode_s = time.perf_counter() - start
    n_passages = len(ids)
    ids, vectors = faiss_index.index_rows(ids, vectors)   # K rows per passage for a multi-vector retriever
    index = faiss_index.build_index(vectors, kind=settings["index"]["kind"], seed=params["seed"],
                              **settings["index"]["params"])
    faiss_index.save_index(index, ids, paths.dense_index_dir(variant, seed))
    figures = {"passages": n_passages, "encode_s": round(encode_s, 1), "autocast": autocast,
               "passages_per_s": round(n_passages / max(encode_s, 1e-9), 1)}
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
    """Table 3's dense rows -> the run of each seed (``dpr_baseline`` -> ``[dpr_baseline_s2022, ...]``); the
    pre-trained-only rows (``dpr_uncon_pre``) have runs for ``evaluation.pretrain_only_seeds`` only."""
    runs = {f"dpr_{v}": [system_name(v, s) for s in seeds(params)] for v in TRAINED_VARIANTS}
    runs.update({f"dpr_{v}": [system_name(v, s) for s in pretrain_only_seeds(params)] for v in PRETRAIN_ONLY_VARIANTS})
    return runs
