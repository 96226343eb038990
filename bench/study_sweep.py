"""The study's fine-tuning sweep (issues 29, 47) on one GPU, outside DVC: DPR, UnCon-DPR and Mixed-DPR as replicates
at every seed of ``dpr.seeds`` (each synthetic replicate pre-trained with its own seed, then fine-tuned to
convergence), the dose curve's pre-trainings (``mixing.doses``), with the stage-05 code itself, and Table 3's test
sets scored; ``summarize`` gives every difference over the seeds (the hierarchical bootstrap and Welch's t).

Why outside DVC: a device machine of this workplace takes at most 64 MiB of files each way, so the trained models
(about 90 MB each) cannot come back to feed stages 06 / 07; what comes back is every figure they produce (training
histories, held-out validation, each test question's first-hit rank, and for the first seed the curve's ranks and
moved-sentence gaps). The DVC study on the CPU remains the pipeline's own result; this is the same recipe on
another device: on one H200 a fine-tuning took 6-8 min with twelve sharing the GPU, against about 1.7 h on 2 CPU
cores, and the whole plan (14 jobs) needs more than one 10-minute call: finish a cut run with ``--only`` (and
``--no-curve`` where the DVC study gives the first seed's curve) and summarize the calls' files together. Each call
records the SHA-256 of the data it trained on (``digests`` prints a checkout's); calls that trained on different data
are not summarized together.

Three commands::

    # here, once stage 04 of the study has run (it needs spaCy for the probe, the study's outputs, faiss):
    cd STUDY_CLONE && python /path/to/repo/bench/study_sweep.py pack --out /path/to/repo/.sweep
    # on the GPU machine (its Python has torch and transformers; faiss and the pure-Python
    # answer matching of pyserini travel in the pack):
    python3 bench/study_sweep.py run --pack .sweep --workdir /tmp/sweep --out $OUT
    # here: Table 3 per variant (seed means), paired differences with CIs and p-values, the curve
    python bench/study_sweep.py summarize results/reruns/study-sweep-h200/sweep.json.gz [a later call's sweep.json]

A checkout that never ran stages 01-04 (about three hours of 2 CPU cores) packs from the committed synthetic sets
instead: ``make profile P=study && dvc repro training_data`` (minutes), then ``pack --out .sweep --sets
results/study/synthetic_sets.json.gz``; that file is written in the study clone after stage 04 by ``export-sets
--out results/study/synthetic_sets.json.gz``.

What differs from the DVC study, by necessity, and is recorded in the output: the base MiniLM travels as float16
(the 90.9 MB float32 file does not fit beside the data; it is widened back to float32 before training, so training
starts from weights rounded to 11 significant bits); resumable checkpoints are written only at epoch ends
(``checkpoint_every``: they never change the trajectory); the encoding batch for validation and retrieval is
``--encode-batch``. The training recipe (data, held-out split, batch, schedule, patience, seeds) is the study's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("baseline", "uncon", "mixed")          # the claim's three systems, as stage 05 names them
PRETRAINED = ("uncon", "mixed")
POLY_VARIANTS = ("poly_baseline", "poly_mixed")     # Poly-DPR beside DPR, on the first seed only
DATA_FILES = ("outputs/data/corpus.jsonl", "outputs/data/questions", "outputs/train/gold_dpr.json",
              "outputs/train/nq_dev_distant.json", "outputs/synthetic/uncon.json", "outputs/synthetic/mixed.json")
CTX_FIELDS = ("positive_ctxs", "negative_ctxs", "hard_negative_ctxs")
PYSERINI_FILES = ("pyserini/__init__.py", "pyserini/eval/__init__.py", "pyserini/eval/evaluate_dpr_retrieval.py")
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
K_MAX = 20                                          # Table 3's largest k: first-hit ranks are counted up to it
RESULT = "sweep.json"


# ----------------------------------------------------------------------------------------------- synthetic sets
def set_file(variant: str) -> str:
    """Stage 04's output path of a synthetic set (as in the pack)."""
    return f"outputs/synthetic/{variant}.json"


def input_digests(root: Path) -> dict[str, str]:
    """SHA-256 of each of the sweep's data files under ``root`` (a folder: of its files' names and digests, sorted),
    so that calls whose sweeps are summarized together can be checked to have trained on the same data."""
    import hashlib

    from ecqg.stages.input_test_set import digest

    digests = {}
    for name in DATA_FILES:
        path = root / name
        if not path.is_dir():
            digests[name] = digest(path)["sha256"]
            continue
        listing = "".join(f"{f.relative_to(root).as_posix()}\0{digest(f)['sha256']}\n"
                          for f in sorted(path.rglob("*")) if f.is_file())
        digests[name] = hashlib.sha256(listing.encode()).hexdigest()
    return digests


def export_sets(out: Path) -> None:
    """The study's two synthetic sets (stage 04's output) without passage texts, into one gzipped JSON file.

    Stages 01-04 take about three hours of 2 CPU cores; everything else the sweep reads comes from the data bundle
    in minutes (``dvc repro training_data``). With this file committed, a checkout that never ran 01-04 can still
    pack the sweep (``pack --sets``). Every context's text is checked against the pool before it is dropped, so the
    rebuild is exact (byte for byte); titles, ids, scores and answers stay."""
    from ecqg.core import config
    from ecqg.core.io import read_json, write_text
    from ecqg.stages.common import passages_by_id

    params = config.load("params.yaml")
    passages = passages_by_id()
    sets = {}
    for variant in PRETRAINED:
        records = read_json(set_file(variant), list, "a list of DPR retriever examples")
        for i, ex in enumerate(records):
            for field in CTX_FIELDS:
                for ctx in ex.get(field, []):
                    pid = ctx.get("passage_id")
                    if pid not in passages or passages[pid]["text"] != ctx.get("text"):
                        raise SystemExit(f"{set_file(variant)}: record {i}, {field}: passage {pid!r} is not the "
                                         "pool's passage of that id; cannot drop its text")
                    ctx["text"] = None          # kept as a key, so the rebuild keeps the field order
        sets[variant] = records
    write_text(out, json.dumps({"profile": params["profile"], "seed": params["seed"], "sets": sets},
                               ensure_ascii=False, separators=(",", ":")))
    print(json.dumps({"file": str(out), "bytes": out.stat().st_size,
                      "examples": {v: len(r) for v, r in sets.items()}}))


def rebuilt_sets(exported: Path) -> dict[str, bytes]:
    """``{path in the pack: DPR retriever json}`` of an :func:`export_sets` file, texts put back from the pool and
    written by stage 04's writer, so that the files are stage 04's byte for byte."""
    import tempfile

    from ecqg.data.dpr import write_dpr_retriever_json
    from ecqg.core.errors import DataFormatError
    from ecqg.core.io import read_json
    from ecqg.stages.common import passages_by_id

    sets = read_json(exported, dict, "an object with the exported synthetic sets")
    if set(sets.get("sets", {})) != set(PRETRAINED):
        raise DataFormatError(exported, None, "sets", f"expected the sets {', '.join(PRETRAINED)}")
    passages = passages_by_id()
    out = {}
    for variant, records in sets["sets"].items():
        for i, ex in enumerate(records):
            for field in CTX_FIELDS:
                for ctx in ex.get(field, []):
                    if ctx.get("passage_id") not in passages:
                        raise DataFormatError(exported, f"set {variant}, record {i}", field,
                                              f"passage {ctx.get('passage_id')!r} is not in this checkout's pool "
                                              "(run `dvc repro training_data` on the study profile first)")
                    ctx["text"] = passages[ctx["passage_id"]]["text"]
        with tempfile.TemporaryDirectory() as tmp:
            write_dpr_retriever_json(Path(tmp) / "set.json", records)
            out[set_file(variant)] = (Path(tmp) / "set.json").read_bytes()
    return out


# ------------------------------------------------------------------------------------------------------------ pack
def pack(out: Path, sets: Path | None = None) -> None:
    """Everything the sweep reads, from the study clone in the working directory, compressed into ``out``; with
    ``sets`` (an :func:`export_sets` file), the synthetic sets come from it instead of stage 04's outputs."""
    import io

    import faiss
    import safetensors.torch
    import torch

    from ecqg.core import config, settings
    from ecqg.runtime.models import resolve_model
    from ecqg.stages.located import moved_pairs

    params = config.load("params.yaml")
    s = settings.of(params)
    rebuilt = rebuilt_sets(sets) if sets else {}
    missing = [f for f in DATA_FILES if f not in rebuilt and not Path(f).exists()]
    if missing:
        raise SystemExit(f"{Path.cwd()}: {', '.join(missing)} missing; run the study's stages up to 04_mixing first"
                         + ("" if sets else " (or `dvc repro training_data` and pack --sets with an exported file)"))
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile("params.yaml", out / "params.yaml")
    probe, dropped = moved_pairs(s.dpr, s.data, s.retrieval, s.seed, s.dpr.finetune.curve_probe_passages)
    (out / "probe.json").write_text(json.dumps({"max_pairs": s.dpr.finetune.curve_probe_passages,
                                                "pairs": probe, "left_out": dropped}), encoding="utf-8")
    with tarfile.open(out / "data.tar.xz", "w:xz") as tar:
        for name in DATA_FILES:
            if name in rebuilt:
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(rebuilt[name]), int(time.time())
                tar.addfile(info, io.BytesIO(rebuilt[name]))
            else:
                tar.add(name)

    base = Path(resolve_model(params["dpr"]["base_model"]))
    weights = safetensors.torch.load_file(str(base / "model.safetensors"))
    half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in weights.items()}
    staging = out / "model"
    staging.mkdir(exist_ok=True)
    safetensors.torch.save_file(half, str(staging / "model.safetensors"), metadata={"format": "pt"})
    for name in MODEL_FILES:
        shutil.copyfile(base / name, staging / name)
    with tarfile.open(out / "model.tar.xz", "w:xz", preset=9) as tar:
        tar.add(staging, arcname="model")
    shutil.rmtree(staging)

    site = Path(faiss.__file__).resolve().parents[1]
    with tarfile.open(out / "site.tar.xz", "w:xz", preset=9) as tar:
        for path in sorted(site.glob("faiss*")):
            tar.add(path, arcname=path.name)
        for name in PYSERINI_FILES:      # DrQA's answer matching (ecqg.data.text) is pure Python; the rest needs Java
            tar.add(site / name, arcname=name)
    sizes = {p.name: p.stat().st_size for p in sorted(out.iterdir())}
    print(json.dumps({"pack": str(out), "bytes": sizes, "total_mib": round(sum(sizes.values()) / 2**20, 1),
                      "probe_pairs": len(probe), "torch": torch.__version__}, indent=1))


# ------------------------------------------------------------------------------------------------------------- run
def unpack(pack_dir: Path, workdir: Path) -> None:
    """Data into ``workdir/outputs``, faiss and pyserini's answer matching into ``workdir/site``, the base model
    widened back to float32."""
    import safetensors.torch

    workdir.mkdir(parents=True, exist_ok=True)
    for archive, target in (("data.tar.xz", workdir), ("site.tar.xz", workdir / "site"),
                            ("model.tar.xz", workdir)):
        with tarfile.open(pack_dir / archive, "r:xz") as tar:
            tar.extractall(target, filter="data")
    weights = safetensors.torch.load_file(str(workdir / "model" / "model.safetensors"))
    safetensors.torch.save_file({k: (v.float() if v.is_floating_point() else v) for k, v in weights.items()},
                                str(workdir / "model" / "model.safetensors"), metadata={"format": "pt"})
    shutil.copyfile(pack_dir / "params.yaml", workdir / "params.yaml")
    shutil.copyfile(pack_dir / "probe.json", workdir / "probe.json")


def plan(seeds: list[int], poly: bool, doses: list[int] = ()) -> list[dict]:
    """The jobs in priority order: each seed's pre-trainings (a replicate pre-trains on its own, as stage 05 does),
    then each seed's three fine-tunings (first seed first, whose snapshots make the curve); with ``poly``, Poly-DPR
    and Mixed Poly-DPR at the first seed last (issue 29 asks for them on the curve at one seed where the budget
    holds)."""
    def pretrain(v: str, seed: int) -> dict:
        return {"name": f"{v}-pre-{seed}", "phase": "pretrain", "variant": v, "seed": seed, "needs": []}

    def finetune(v: str, seed: int) -> dict:
        return {"name": f"{v}-{seed}", "phase": "finetune", "variant": v, "seed": seed,
                "needs": [f"{v}-pre-{seed}"] if v.removeprefix("poly_") in PRETRAINED else []}

    jobs = [pretrain(v, seed) for seed in seeds for v in PRETRAINED]
    jobs += [finetune(v, seed) for seed in seeds for v in ("uncon", "mixed", "baseline")]
    if poly:
        jobs += [pretrain("poly_mixed", seeds[0]), *(finetune(v, seeds[0]) for v in POLY_VARIANTS)]
    # the dose curve (mixing.doses): UnCon and Mixed pre-trained on their sets cut to each size, every seed, not
    # fine-tuned (the fine-tuned rows are the full sets'); the cut sets are stage 04's (mixing.dose_sets), rebuilt
    # here from the full sets the pack carries
    jobs += [pretrain(f"{base}_d{size}", seed) for size in doses for seed in seeds for base in PRETRAINED]
    return jobs


def write_dose_sets(workdir: Path, mixing, seed: int) -> list[str]:
    """Stage 04's dose sets (``mixing.doses``; ``seed``: the profile's) rebuilt from the packed full sets with stage 04's own cut
    (``ecqg.filtering.mixing.dose_sets``: UnCon's first n, Mixed's first n/2 of each generator, reshuffled, seeded): the same
    files, so a sweep needs no second copy of the questions."""
    from ecqg.data.dpr import read_dpr_retriever_json, write_dpr_retriever_json
    from ecqg.filtering.mixing import dose_sets
    from ecqg.core.variants import SETS, doses, dose_set

    sizes = doses(mixing)
    if not sizes:
        return []
    full = {name: list(read_dpr_retriever_json(workdir / SETS[name].path)) for name in PRETRAINED}
    written = []
    for size, cut in dose_sets(full["uncon"], full["mixed"], sizes, seed).items():
        for name, records in zip(PRETRAINED, cut):
            path = workdir / dose_set(name, size).path
            path.parent.mkdir(parents=True, exist_ok=True)
            write_dpr_retriever_json(path, records)
            written.append(str(path.relative_to(workdir)))
    return written


def select_jobs(jobs: list[dict], only: list[str]) -> list[dict]:
    """The named jobs and the pre-trainings they need, in plan order (to finish a cut run's rest)."""
    unknown = set(only) - {j["name"] for j in jobs}
    if unknown:
        raise ValueError(f"no such job: {', '.join(sorted(unknown))}; "
                         f"the plan has {', '.join(j['name'] for j in jobs)}")
    wanted = set(only) | {n for j in jobs if j["name"] in only for n in j["needs"]}
    return [j for j in jobs if j["name"] in wanted]


def run(pack_dir: Path, workdir: Path, out: Path, workers: int, budget_s: float, encode_batch: int,
        sets: list[str], poly: bool, only: list[str] | None = None, curve: bool = True) -> None:
    """Unpack, then run the jobs ``workers`` at a time (MiniLM at batch 32 leaves most of a GPU idle, so several
    trainings share it); start no job that the budget cannot hold (its estimate: the longest finished job of its
    phase), and write ``out/sweep.json`` after every job so a cut run still returns what finished. Without
    ``curve`` the first seed's fine-tunings skip the curve's test-set searches and probe at each snapshot (about 10%
    of a job; the snapshots are still validated, so training and model selection are the same)."""
    import torch

    start = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    unpack(pack_dir, workdir)
    from ecqg.core import config, settings
    params = config.load(workdir / "params.yaml")
    seeds = [int(s) for s in params["dpr"]["seeds"]]
    (workdir / "results").mkdir(exist_ok=True)
    (workdir / "logs").mkdir(exist_ok=True)
    sweep = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
             "torch": torch.__version__, "host_cpus": os.cpu_count(), "workers": workers,
             "encode_batch": encode_batch, "sets": sets, "curve_runs": curve, "profile": params["profile"],
             "seeds": seeds, "date": time.strftime("%Y-%m-%d"), "k_max": K_MAX,
             "unpack_s": round(time.monotonic() - start, 1),
             "inputs": input_digests(workdir), "jobs": {}, "skipped": [], "failed": {}}
    sweep["dose_sets"] = write_dose_sets(workdir, settings.of(params).mixing, params["seed"])
    pending, running, longest, logged = plan(seeds, poly, [int(n) for n in params["mixing"]["doses"]]), {}, {}, \
        time.monotonic()
    if only:
        pending = select_jobs(pending, only)
    for job_ in pending:
        job_["curve_runs"] = curve
    threads = max(1, (os.cpu_count() or 2) // workers)
    path = [str(ROOT), str(workdir / "site"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path),
           "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    while pending or running:
        for name, (proc, job, began, log) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[name]
            seconds = time.monotonic() - began
            result = workdir / "results" / f"{name}.json"
            if proc.returncode == 0 and result.is_file():
                figures = json.loads(result.read_text(encoding="utf-8"))
                ids = figures.pop("question_ids")          # the same test questions for every job: kept once
                if sweep.setdefault("question_ids", ids) != ids:
                    raise RuntimeError(f"{name} scored other test questions than the jobs before it")
                sweep["jobs"][name] = {**figures, "wall_s": round(seconds, 1)}
                longest[job["phase"]] = max(longest.get(job["phase"], 0.0), seconds)
            else:
                tail = (workdir / "logs" / f"{name}.log").read_text(encoding="utf-8", errors="replace")[-4000:]
                sweep["failed"][name] = {"returncode": proc.returncode, "log_tail": tail}
                print(f"--- {name} failed (rc {proc.returncode}):\n{tail}", flush=True)
            print(f"{time.monotonic() - start:6.0f} s  {name} done in {seconds:.0f} s "
                  f"(rc {proc.returncode})", flush=True)
            write_sweep(out, sweep, start)
            write_logs(workdir, out)
        ready = [j for j in pending if all(n in sweep["jobs"] for n in j["needs"])]
        blocked = [j for j in pending if any(n in sweep["failed"] or n in sweep["skipped"] for n in j["needs"])]
        for job in blocked:
            pending.remove(job)
            sweep["skipped"].append(job["name"])
        for job in ready:
            if len(running) >= workers:
                break
            estimate = longest.get(job["phase"], 0.0)
            if time.monotonic() - start + estimate > budget_s:
                pending.remove(job)
                sweep["skipped"].append(job["name"])
                print(f"skip {job['name']}: {estimate:.0f} s would pass the {budget_s:.0f} s budget", flush=True)
                continue
            pending.remove(job)
            log = open(workdir / "logs" / f"{job['name']}.log", "w", encoding="utf-8")
            proc = subprocess.Popen([sys.executable, __file__, "job", "--workdir", str(workdir), "--job",
                                     json.dumps(job), "--encode-batch", str(encode_batch), "--sets", *sets],
                                    cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
            running[job["name"]] = (proc, job, time.monotonic(), log)
            print(f"{time.monotonic() - start:6.0f} s  start {job['name']}", flush=True)
        if pending and not running and not ready:
            break
        if time.monotonic() - logged > 30:          # a run cut by the machine's limit still returns its logs
            write_logs(workdir, out)
            logged = time.monotonic()
        time.sleep(2)
    write_sweep(out, sweep, start)
    write_logs(workdir, out)


def write_logs(workdir: Path, out: Path) -> None:
    """Every job's log (its last 20,000 characters) in one file, rewritten as jobs finish."""
    with open(out / "job_logs.txt", "w", encoding="utf-8") as joined:
        for path in sorted((workdir / "logs").glob("*.log")):
            joined.write(f"===== {path.name}\n{path.read_text(encoding='utf-8', errors='replace')[-20000:]}\n")


def write_sweep(out: Path, sweep: dict, start: float) -> None:
    from ecqg.core.io import write_text

    sweep["elapsed_s"] = round(time.monotonic() - start, 1)
    write_text(out / RESULT, json.dumps(sweep))      # atomic: a run cut mid-write keeps the last whole file


# ------------------------------------------------------------------------------------------------------------- job
def first_hit_ranks(run_path: Path, questions: list[dict], text_of: dict, cache) -> list[int]:
    """Per question, the rank (1..K_MAX) of the first answer-bearing passage, 0 for none within K_MAX."""
    import numpy as np

    from ecqg.retrieval import evaluation
    from ecqg.retrieval.run_files import read_run

    hits = evaluation.hit_matrix(read_run(run_path), questions, text_of, k_max=K_MAX, cache=cache)
    return [int(r) for r in np.where(hits.any(axis=1), hits.argmax(axis=1) + 1, 0)]


def job_params(params: dict, spec: dict, workdir: Path, encode_batch: int) -> dict:
    """The study's parameters as a job on the GPU machine runs them: the unpacked base model, the sweep's encoding
    batch, checkpoints only at epoch ends, and (``spec["curve_runs"]`` false) no curve runs. None of these changes
    what is trained or which step is kept: the curve only adds test-set searches to validations that run anyway."""
    params["dpr"]["base_model"] = str(workdir / "model")
    params["dpr"]["encode"]["batch_size"] = encode_batch
    for phase in ("finetune", "pretrain"):
        params["dpr"][phase]["checkpoint_every"] = None
    if not spec.get("curve_runs", True):
        params["dpr"]["finetune"]["curve_runs"] = False
    return params


def job(workdir: Path, spec: dict, encode_batch: int, sets: list[str]) -> None:
    """One pre-training or fine-tuning through ``ecqg.stages.dpr_training`` (stage 05's own calls), then its test runs
    (``retrieve_all``) reduced to first-hit ranks; written to ``results/<name>.json``."""
    os.chdir(workdir)
    sys.path.insert(1, str(workdir / "site"))
    from ecqg.core import config, device, paths, settings
    from ecqg.retrieval import evaluation
    from ecqg.core.io import read_jsonl
    from ecqg.stages import dpr_training as dense, finetune_validation, located
    from ecqg.stages.retrieve_dense import retrieve_all
    from ecqg.stages.results import load_passage_texts
    from ecqg.core.logs import setup_logging

    setup_logging()
    s = settings.of(job_params(config.load("params.yaml"), spec, workdir, encode_batch))
    probe = json.loads((workdir / "probe.json").read_text(encoding="utf-8"))

    def packed_pairs(_dpr, _data, _retrieval, _seed, max_pairs, located_=None):
        """The probe's pairs as ``moved_pairs`` made them where spaCy is (pack); this machine has no spaCy."""
        if max_pairs != probe["max_pairs"]:
            raise ValueError(f"the pack's probe was drawn for {probe['max_pairs']} pairs, "
                             f"the curve asks for {max_pairs}")
        return probe["pairs"], probe["left_out"]

    located.moved_pairs = packed_pairs
    variant, phase = spec["variant"], spec["phase"]
    began = time.perf_counter()
    seed = spec["seed"]
    if phase == "pretrain":
        result = dense.pretrain_variant(variant, s, seed, progress=False)
        system_variant = variant + dense.PRETRAINED_SUFFIX
    else:
        result = dense.train_variant(variant, s, seed, progress=False)
        system_variant = variant
    train_s = time.perf_counter() - began
    # from the corpus text: the GPU machine has no `datasets` to read stage tokenize_corpus's Arrow files with
    figures = retrieve_all(system_variant, s, seed, progress=False, tokenized=None)
    text_of = load_passage_texts()
    caches = {name: evaluation.HitCache(text_of) for name in sets}
    questions = {name: [q for _, q in read_jsonl(paths.questions_file(name))] for name in sets}
    system = dense.system_name(system_variant, seed)
    ranks = {name: first_hit_ranks(paths.run_file(system, name), questions[name], text_of, caches[name])
             for name in sets}
    curve = {}
    curve_root = paths.model_dir(variant, seed) / finetune_validation.CURVE_DIR
    if phase == "finetune" and curve_root.is_dir():
        for step_dir in sorted(curve_root.iterdir()):
            step = int(step_dir.name.split("-")[1])
            curve[step] = {name: first_hit_ranks(step_dir / f"{name}.trec", questions[name], text_of,
                                                   caches[name])
                           for name in sets}
            moved = step_dir / finetune_validation.MOVED_FILE
            if moved.is_file():
                curve[step]["moved_gaps"] = json.loads(moved.read_text(encoding="utf-8"))["gaps"]
    summary = dense.training_summary(s.dpr, s.profile, result, variant, seed, phase)
    history = [{k: v for k, v in h.items() if k in ("step", "epoch") or k.startswith("val_") or k in
                ("snapshot", "epoch_end", "best", "loss")} for h in result["history"]]
    rates = [h["examples_per_s"] for h in result["history"] if h.get("examples_per_s")]
    out = {"name": spec["name"], "phase": phase, "variant": variant, "seed": seed, "system": system,
           "train_s": round(train_s, 1), "total_s": round(time.perf_counter() - began, 1),
           "examples_per_s_median": sorted(rates)[len(rates) // 2] if rates else None,
           "device": device.describe(), "summary": summary, "history": history, "retrieval": figures,
           "question_ids": {name: [str(q["id"]) for q in qs] for name, qs in questions.items()},
           "ranks": ranks, "curve": curve}
    path = Path("results") / f"{spec['name']}.json"
    path.write_text(json.dumps(out, default=str), encoding="utf-8")


# ------------------------------------------------------------------------------------------------------- summarize
def read_sweep(path: Path) -> dict:
    from ecqg.core.io import read_json

    return read_json(path, dict, "a sweep (bench/study_sweep.py run)")


def merged(sweeps: list[dict]) -> dict:
    """Several calls' sweeps as one (a cut run finished by a later ``--only`` call): every job once, the first
    call's copy where two ran it; the calls must have scored the same questions with the same seeds."""
    first = sweeps[0]
    jobs = dict(first["jobs"])
    for other in sweeps[1:]:
        for key in ("question_ids", "seeds", "sets", "profile"):
            if other.get(key) != first.get(key):
                raise ValueError(f"the sweeps differ in {key}: they are not one study's")
        if first.get("inputs") and other.get("inputs"):
            differ = [f for f in DATA_FILES if first["inputs"].get(f) != other["inputs"].get(f)]
            if differ:
                raise ValueError(f"the sweeps trained on different data ({', '.join(differ)}): not one study's")
        jobs.update({name: job for name, job in other["jobs"].items() if name not in jobs})
    unchecked = [i for i, sweep in enumerate(sweeps) if not sweep.get("inputs")]
    if len(sweeps) > 1 and unchecked:
        print(f"note: sweep file(s) {', '.join(str(i + 1) for i in unchecked)} of {len(sweeps)} record no input "
              "digests (written before they were kept): that every call trained on the same data is not checked")
    return {**first, "jobs": jobs}


COMPARED = (("uncon", "baseline"), ("mixed", "baseline"), ("mixed", "uncon"), ("uncon-pre", "baseline"),
            ("mixed-pre", "uncon-pre"), ("poly_baseline", "baseline"), ("poly_mixed", "poly_baseline"),
            ("poly_mixed", "mixed"))                 # Table 3's paired differences, A - B


def seeded_runs(sweep: dict) -> dict[str, dict[int, dict]]:
    """system -> {seed: job}, in Table 3's order: each fine-tuned variant at the seeds it ran, then each
    ``<variant>-pre`` at the seeds it pre-trained with (``<variant>-pre-<seed>``; a sweep from before pre-training
    was replicated has one ``<variant>-pre`` job, filed under the first seed); systems without a job left out."""
    jobs, seeds = sweep["jobs"], sweep["seeds"]
    runs = {v: {s: jobs[f"{v}-{s}"] for s in seeds if f"{v}-{s}" in jobs} for v in (*VARIANTS, *POLY_VARIANTS)}
    doses = sorted({int(m[1]) for name in jobs if (m := re.fullmatch(r"(?:uncon|mixed)_d(\d+)-pre-\d+", name))})
    for v in (*PRETRAINED, "poly_mixed", *(f"{b}_d{n}" for n in doses for b in PRETRAINED)):
        pre = {s: jobs[f"{v}-pre-{s}"] for s in seeds if f"{v}-pre-{s}" in jobs}
        if not pre and f"{v}-pre" in jobs:
            pre = {seeds[0]: jobs[f"{v}-pre"]}
        runs[f"{v}-pre"] = pre
    return {system: by_seed for system, by_seed in runs.items() if by_seed}


def compared_pairs(runs: dict[str, dict[int, dict]]) -> list[tuple[str, str, set]]:
    """``COMPARED``'s pairs that both ran, then Mixed - UnCon right after pre-training at each dose of the dose
    curve, each with the seeds both have (a pair is compared at those only)."""
    doses = [(f"mixed_d{n}-pre", f"uncon_d{n}-pre") for n in sorted(
        {int(s.split("_d")[1].split("-")[0]) for s in runs if s.startswith("mixed_d")})]
    pairs = [(a, b, set(runs[a]) & set(runs[b])) for a, b in (*COMPARED, *doses) if a in runs and b in runs]
    return [(a, b, common) for a, b, common in pairs if common]


def seed_stack(by_seed: dict[int, dict], name: str, only: set | None = None):
    """questions x seeds x K_MAX hit matrix of one system on test set ``name`` (``only`` those seeds; first hits
    only, enough for Top-k at every k <= K_MAX)."""
    import numpy as np

    return np.stack([as_hits(j["ranks"][name]) for s, j in by_seed.items() if only is None or s in only], axis=1)


def runs_interval(stack_a, stack_b, k: int, paired: bool = True):
    """A - B at Top-k with the runs (seeds) as the unit, by the claims tables' rule (``ecqg.analysis.over_runs``):
    paired by seed (the stacks hold the seeds both systems share, in one order; a seed fixes the gold sub-sample and
    the batch order in every arm), or, for comparison, as two independent arms. None with one seed."""
    from ecqg.retrieval import evaluation
    from ecqg.analysis.over_runs import over_runs

    a, b = (evaluation.seed_hits_at_k(x, [k])[:, :, 0].astype(float) for x in (stack_a, stack_b))
    if a.shape[1] < 2 or b.shape[1] < 2:
        return None
    return over_runs(a, b, paired_runs=paired, n_boot=2000, seed=0)


def summarize(paths_: list[Path]) -> None:
    """Table 3 from the sweep's ranks: each variant's seed-mean Top-1/5/20 per test set with the seed spread, and the
    paired differences (seed-mean per question, paired bootstrap) of UnCon / Mixed against DPR and Mixed against
    UnCon; then the curve of the first seed. Several files: one sweep finished over several calls."""
    import numpy as np
    import pandas as pd

    from ecqg.retrieval import evaluation
    from ecqg.analysis import power, tables

    sweeps = [read_sweep(p) for p in paths_]
    for p, sweep in zip(paths_, sweeps):
        print(f"{p}: device {sweep['device']}  torch {sweep['torch']}  {sweep['date']}  jobs done: "
              f"{len(sweep['jobs'])}  skipped: {sweep['skipped']}  failed: {list(sweep['failed'])}  "
              f"elapsed {sweep['elapsed_s']} s")
    sweep = merged(sweeps)
    jobs = sweep["jobs"]
    for name, j in jobs.items():
        s = j["summary"]
        print(f"  {name:14s} train {j['train_s']:6.1f} s  median {j['examples_per_s_median'] or 0:7.1f} ex/s  "
              f"steps {s.get('steps')}  kept {s.get('selected_step', '-')}")
    sets, seeds = sweep["sets"], sweep["seeds"]
    runs = seeded_runs(sweep)
    rows, pairs = [], []
    for name in sets:
        for system, by_seed in runs.items():
            hits = seed_stack(by_seed, name)
            acc = evaluation.seed_hits_at_k(hits, (1, 5, 20)).mean(axis=0) * 100   # seeds x k
            rows.append({"set": name, "system": system, "seeds": hits.shape[1],
                         **{f"top{k}": round(float(acc[:, i].mean()), 1) for i, k in enumerate((1, 5, 20))},
                         **{f"top{k}_seeds": [round(float(a), 1) for a in acc[:, i]]
                            for i, k in enumerate((1, 5, 20))}})
        for a, b, common in compared_pairs(runs):
            for k in (1, 5, 20):
                stacks = [seed_stack(runs[x], name, common) for x in (a, b)]
                res = tables.paired_bootstrap(*stacks, k)
                over_runs, unpaired = runs_interval(*stacks, k), runs_interval(*stacks, k, paired=False)
                pairs.append({"set": name, "pair": f"{a} - {b}", "k": k, "seeds": len(common),
                              "difference": round(100 * res["difference"], 1),
                              "ci": [round(100 * res["ci_low"], 1), round(100 * res["ci_high"], 1)],
                              "p_value": res["p_value"],
                              "ci_paired_runs": None if over_runs is None else
                              [round(100 * over_runs.low, 2), round(100 * over_runs.high, 2)],
                              "p_paired_runs": None if over_runs is None else round(over_runs.p, 4),
                              "ci_unpaired_runs": None if unpaired is None else
                              [round(100 * unpaired.low, 2), round(100 * unpaired.high, 2)],
                              "detectable": None if over_runs is None else
                              round(100 * power.detectable_effect(over_runs.se, over_runs.df), 1)})
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(pd.DataFrame(rows).to_string(index=False))
        print(pd.DataFrame(pairs).to_string(index=False))
        first = seeds[0]
        curve_rows = []
        for v in (*VARIANTS, *POLY_VARIANTS):
            j = jobs.get(f"{v}-{first}")
            if not j:
                continue
            for step, entry in sorted(j["curve"].items(), key=lambda kv: int(kv[0])):
                row = {"system": v, "step": int(step)}
                for name in sets:
                    hits = as_hits(entry[name])
                    row.update({f"{name}@{k}": round(100 * float(evaluation.hits_at_k(hits, [k]).mean()), 1)
                                for k in (1, 20)})
                if "moved_gaps" in entry:
                    row["moved_gap"] = round(float(np.mean(entry["moved_gaps"])), 4)
                curve_rows.append(row)
        if curve_rows:
            print(pd.DataFrame(curve_rows).to_string(index=False))


def slice_figures(sweep: dict, masks: dict[str, dict]) -> dict:
    """The slices' tables from a (merged) sweep and ``{slice kind: {bucket: question mask}}`` over its NQ questions:
    ``accuracy`` (Top-k per bucket and system, seed-means), ``paired`` (differences per bucket at the seeds two
    systems share, paired bootstrap), ``psi`` (the position slices' PSI per system and PSI differences) and
    ``curve`` (Top-k per position bucket and PSI at each snapshot of the first seed). The tables are notebook 07's
    (``evaluation.accuracy_table`` / ``paired_table``, ``stages.mechanism.psi_table``, their default resamples)."""
    import pandas as pd

    from ecqg.retrieval import evaluation
    from ecqg.analysis import mechanism, tables
    from ecqg.stages import mechanism as mp

    runs, seeds, ks = seeded_runs(sweep), sweep["seeds"], (1, 5, 20)
    questions = [{"id": i} for i in sweep["question_ids"]["nq"]]
    rows, paired, psi_rows = [], [], []
    for kind, kind_masks in masks.items():
        for system, by_seed in runs.items():
            table = tables.accuracy_table(seed_stack(by_seed, "nq"), questions, ks, masks=kind_masks)
            for bucket, at in table.groupby("subset", sort=False):
                rows.append({"slice": kind, "bucket": bucket, "system": system, "seeds": len(by_seed),
                             **{f"top{k}": round(100 * a, 1) for k, a in zip(at.k, at.accuracy)}})
        for a, b, common in compared_pairs(runs):
            stacks = {a: seed_stack(runs[a], "nq", common), b: seed_stack(runs[b], "nq", common)}
            table = tables.paired_table(stacks[a], stacks[b], questions, ks, masks=kind_masks)
            paired += [{"slice": kind, "bucket": r.subset, "pair": f"{a} - {b}", "k": r.k, "seeds": len(common),
                        "difference": round(100 * r.difference, 1),
                        "ci": [round(100 * r.ci_low, 1), round(100 * r.ci_high, 1)], "p_value": round(r.p_value, 4)}
                       for r in table.itertuples()]
            if kind == "position":
                frame = mp.psi_table(stacks, kind_masks, ks, [(a, b)], n_boot=2000, seed=0, confidence=0.95)
                psi_rows += [{"k": r.pop("k"), "seeds": len(common), **r} for r in frame.to_dict("records")]
    curve_rows = []
    for v in (*VARIANTS, *POLY_VARIANTS):
        j = sweep["jobs"].get(f"{v}-{seeds[0]}")
        for step, entry in sorted((j or {}).get("curve", {}).items(), key=lambda kv: int(kv[0])):
            row = {"system": v, "step": int(step)}
            for k in ks:
                vals = evaluation.hits_at_k(as_hits(entry["nq"]), [k])[:, 0].astype(float)
                by_bucket = {b: float(vals[m].mean()) for b, m in masks["position"].items()}
                row.update({f"nq@{k} {b}": round(100 * a, 1) for b, a in by_bucket.items()})
                row[f"psi@{k}"] = round(float(mechanism.psi(list(by_bucket.values()))), 3)
            curve_rows.append(row)
    return {"accuracy": pd.DataFrame(rows), "paired": pd.DataFrame(paired), "psi": pd.DataFrame(psi_rows),
            "curve": pd.DataFrame(curve_rows)}


def slices(paths_: list[Path], entity_model: bool) -> dict:
    """Notebook 07's answer-position slices for the sweep's models (run in a checkout with the study profile's
    ``outputs/data``: the NQ questions, their gold passages and spaCy's sentences), printed and returned
    (:func:`slice_figures`). With ``entity_model``, also the least- / most-attended answer-entity thirds, ranked by
    the attention of *this checkout's* ``dpr_baseline_s<first seed>`` (the DVC study's CPU-trained model: the
    sweep's own models stay on the GPU machine)."""
    import pandas as pd

    from ecqg.core import config, settings
    from ecqg.analysis import mechanism
    from ecqg.stages import mechanism as mp

    params = config.load("params.yaml")
    s = settings.of(params)
    sweep = merged([read_sweep(p) for p in paths_])
    if params["profile"] != sweep["profile"]:
        raise SystemExit(f"params.yaml is the {params['profile']!r} profile; the sweep ran {sweep['profile']!r}")
    questions = mp.nq_questions(s.data, s.retrieval)
    if [str(q["id"]) for q in questions] != [str(i) for i in sweep["question_ids"]["nq"]]:
        raise SystemExit("this checkout's NQ questions are not the ones the sweep scored (another profile or data)")
    passages = mp.gold_passage_records(questions)
    locations, analyses = mp.locate(questions, passages)
    masks = {"position": mechanism.bucket_masks(locations)}
    if entity_model:
        ranks = mp.entity_attention(s.dpr, s.attention.batch_size, s.evaluation.mechanism.min_entities, locations,
                                    analyses, passages, questions, progress=False)
        masks["entity"] = mechanism.bucket_masks(ranks, "third", mechanism.THIRDS)
    print("questions per slice:", {kind: {k: int(m.sum()) for k, m in ms.items()} for kind, ms in masks.items()},
          "left out:", {k: v for k, v in locations.status.value_counts().items() if k != "ok"})
    figures = slice_figures(sweep, masks)
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_rows", 500):
        for name, frame in figures.items():
            if len(frame):
                print(f"--- {name}\n{frame.round(4).to_string(index=False)}")
    return figures


def as_hits(ranks: list[int]):
    """First-hit ranks back to a questions x K_MAX hit matrix (True at the first hit only)."""
    import numpy as np

    ranks = np.asarray(ranks)
    hits = np.zeros((len(ranks), K_MAX), dtype=bool)
    found = ranks > 0
    hits[np.nonzero(found)[0], ranks[found] - 1] = True
    return hits


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="collect the study's inputs (run in the study clone)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sets", type=Path, help="the synthetic sets from an export-sets file, not from stage 04")
    e = sub.add_parser("export-sets", help="the study's synthetic sets without passage texts (run in the study "
                                           "clone after stage 04)")
    e.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("run", help="run the sweep (on the GPU machine)")
    r.add_argument("--pack", type=Path, required=True)
    r.add_argument("--workdir", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--workers", type=int, default=4)
    r.add_argument("--budget-s", type=float, default=520.0, help="start no job that would end past this")
    r.add_argument("--encode-batch", type=int, default=256)
    r.add_argument("--sets", nargs="+", default=["nq", "wq", "tqa"])
    r.add_argument("--poly", action="store_true", help="also Poly-DPR and Mixed Poly-DPR at the first seed")
    r.add_argument("--only", nargs="+", help="run only these jobs (and the pre-trainings they need)")
    r.add_argument("--no-curve", dest="curve", action="store_false",
                   help="the first seed without the curve's test-set runs (when its DVC study gives the curve)")
    j = sub.add_parser("job", help="one training (started by run)")
    j.add_argument("--workdir", type=Path, required=True)
    j.add_argument("--job", required=True)
    j.add_argument("--encode-batch", type=int, required=True)
    j.add_argument("--sets", nargs="+", required=True)
    sub.add_parser("digests", help="SHA-256 of the sweep's data files in this checkout, as a sweep records them (run "
                                   "in the study clone, to compare the DVC study's inputs with a sweep's)")
    s = sub.add_parser("summarize", help="tables from sweep.json files (several: one sweep over several calls)")
    s.add_argument("sweep", type=Path, nargs="+")
    sl = sub.add_parser("slices", help="answer-position (and entity-attention) slices of the sweep's NQ ranks "
                                       "(run in a checkout with the study profile's outputs/data)")
    sl.add_argument("sweep", type=Path, nargs="+")
    sl.add_argument("--entity-model", action="store_true",
                    help="also the answer-entity attention thirds, by this checkout's DPR of the first seed")
    args = parser.parse_args(argv)
    if args.command == "pack":
        pack(args.out.resolve(), args.sets.resolve() if args.sets else None)
    elif args.command == "export-sets":
        export_sets(args.out.resolve())
    elif args.command == "run":
        run(args.pack.resolve(), args.workdir.resolve(), args.out.resolve(), args.workers, args.budget_s,
            args.encode_batch, args.sets, args.poly, args.only, args.curve)
    elif args.command == "job":
        job(args.workdir, json.loads(args.job), args.encode_batch, args.sets)
    elif args.command == "digests":
        print(json.dumps(input_digests(Path.cwd()), indent=1))
    elif args.command == "slices":
        slices(args.sweep, args.entity_model)
    else:
        summarize(args.sweep)


if __name__ == "__main__":
    main()
