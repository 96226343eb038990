"""The paper profile on one GPU: throughput of every heavy step on random-weight models of the paper's sizes, and
the GPU-hours each paper stage would take. Nothing is downloaded; a person with a GPU runs it in a few minutes:

    .venv/bin/python bench/gpu_check.py                   # paper sizes: bert-base, BART-large, RoBERTa-base
    .venv/bin/python bench/gpu_check.py --size tiny       # a check of the script itself on a CPU (seconds)
    python bench/gpu_check.py --tokenizer DIR             # a machine without the bundled encoder package: any
                                                          # folder with bert-base-uncased's vocab.txt (weights unused)

It measures, on the device the project's policy picks (``ecqg.device``; ``ECQG_DEVICE`` overrides it):

* encoding: the pipeline's own ``dense.iter_passage_embeddings`` (tokenising the next chunk in background threads,
  length-sorted batches, one copy back per chunk) against a plain forward over pre-tokenised, length-sorted batches,
  same batch and autocast. ``steady_over_plain`` leaves out the first chunk, whose tokenising overlaps nothing (one
  chunk in 420 of a 21M corpus at the default 50,000): it is the share of the device the pipeline keeps busy at
  scale (target >= 0.90), and the projection below uses it;
* DPR fine-tuning at the paper's batch (128 questions + 1 hard negative each) without GradCache and with chunks,
  and pre-training at batch 1,024, without GradCache and then with halving chunks until one fits, through
  ``ecqg.retrieval.train`` with params/paper.yaml's settings of each phase (hard negatives, length buckets):
  examples/s, peak memory and MFU (6 N per unpadded token; the peak from the device's name or ``--peak-tflops``);
* question sampling with a BART-large-sized generator (``qg.generate_questions``, top-k / top-p) and the round-trip
  reader (``filtering.reader.predict``) with a RoBERTa-base-sized extractive reader;

then prints the projected GPU-hours of each paper stage from ``params/paper.yaml``'s sizes. Text comes from the
committed bundle (``data/corpus.jsonl.gz``), re-cut into 100-word passages as DPR's psgs_w100 (``--passages
bundle``: the bundle's own, shorter ones); the vocabulary is the bundled BERT WordPiece (bert-base-uncased's), with
the generator's and reader's vocabulary sizes set to BART's / RoBERTa's so the output layers cost what they cost.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import logging
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import load_passages, make_records  # noqa: E402

from ecqg import config, device  # noqa: E402
from ecqg.models import inference, resolve_model  # noqa: E402
from ecqg.retrieval import dense  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAPER_PASSAGES = 21_015_324
SIZES = {   # encoder / generator / reader shapes and the work measured per section
    "paper": dict(layers=12, hidden=768, heads=12, ffn=3072, bart_layers=12, bart_hidden=1024, bart_heads=16,
                  bart_ffn=4096, passages=40_000, encode_batch=512, encode_chunk=4_000, train_batch=128, pretrain_batch=1024,
                  chunks=(None, 64), pretrain_chunks=(256, 64), train_steps=6, qg_passages=512, qg_batch=64,
                  reader_questions=4096, reader_batch=128, passage_len=256, query_len=64),
    "tiny": dict(layers=2, hidden=32, heads=2, ffn=64, bart_layers=1, bart_hidden=32, bart_heads=2, bart_ffn=64,
                 passages=300, encode_batch=32, encode_chunk=60, train_batch=8, pretrain_batch=16, chunks=(None, 4), pretrain_chunks=(8, 4),
                 train_steps=2, qg_passages=16, qg_batch=8, reader_questions=32, reader_batch=16, passage_len=64,
                 query_len=16),
}


TOKENIZER = "bundled:minilm"      # every model here has random weights: only the WordPiece vocabulary is read


def psgs_w100_like(passages: list[dict], count: int) -> list[dict]:
    """The bundle's text re-cut into 100-word passages, as DPR cut Wikipedia (psgs_w100: ~142 WordPiece tokens per
    title + passage, against ~103 for the bundle's own passages); the word stream is reused, shifted, if short."""
    words = [(p["title"], w) for p in passages for w in p["text"].split()]
    out, shift = [], 0
    while len(out) < count and words:
        for lo in range(shift, len(words) - 100 + 1, 100):
            out.append({"id": str(len(out)), "title": words[lo][0], "text": " ".join(w for _, w in words[lo:lo + 100])})
            if len(out) == count:
                break
        shift += 37
    return out


def _tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(TOKENIZER))


def _bert_config(s: dict, **extra):
    from transformers import BertConfig

    return BertConfig(num_hidden_layers=s["layers"], hidden_size=s["hidden"], num_attention_heads=s["heads"],
                      intermediate_size=s["ffn"], **extra)


def _biencoder(s: dict, tokenizer):
    from transformers import BertModel

    from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig

    torch.manual_seed(0)
    return BiEncoder(BertModel(_bert_config(s)), BertModel(_bert_config(s)), tokenizer,
                     BiEncoderConfig("random bert-base", passage_max_length=s["passage_len"],
                                     query_max_length=s["query_len"]))


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_gb() -> float | None:
    return round(torch.cuda.max_memory_allocated() / 1e9, 2) if torch.cuda.is_available() else None


def _reset_peak():
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def feeding(s: dict, tokenizer, passages: list[dict], autocast: str | None, threads: int) -> dict:
    """Steady passages/s of the pipeline with ``threads`` tokenising threads, and of the tokenising alone."""
    model = _biencoder(s, tokenizer)
    kwargs = dict(batch_size=s["encode_batch"], chunk_size=s["encode_chunk"], progress=False, autocast=autocast,
                  prefetch=True, tokenize_threads=threads)
    for _ in dense.iter_passage_embeddings(model, passages, **kwargs):   # warm-up, as in encoding()
        pass
    rates = {}
    for name, chunks in (("tokenize_only", lambda: dense._tokenized_chunks(model, iter(passages),
                                                                            s["encode_chunk"], True, threads)),
                         ("pipeline", lambda: dense.iter_passage_embeddings(model, passages, **kwargs))):
        first = None
        for ids, _ in chunks():
            if first is None:
                first, start = len(ids), time.perf_counter()
        _sync()
        rates[f"{name}_steady_passages_per_s"] = round((len(passages) - first) / (time.perf_counter() - start), 1)
    return {"tokenize_threads": threads, **rates}


def encoding(s: dict, tokenizer, passages: list[dict], autocast: str | None, peak: float | None = None) -> dict:
    """Pipeline loop vs a plain forward over pre-tokenised, length-sorted batches (same batch, same autocast)."""
    model = _biencoder(s, tokenizer)
    dense.encode_passages(model, passages, batch_size=s["encode_batch"], chunk_size=s["encode_chunk"],
                          progress=False, autocast=autocast)   # warm-up: every batch shape once (allocator, kernels)
    _reset_peak()
    _sync()
    start = time.perf_counter()
    first = None                       # the first chunk's tokenising overlaps nothing: steady state starts after it
    for ids, _ in dense.iter_passage_embeddings(model, passages, batch_size=s["encode_batch"],
                                                chunk_size=s["encode_chunk"], progress=False, autocast=autocast):
        if first is None:
            first, steady_start = len(ids), time.perf_counter()
    _sync()
    end = time.perf_counter()
    pipeline = len(passages) / (end - start)
    steady = (len(passages) - first) / (end - steady_start)
    features = model.passage_features([p["title"] for p in passages], [p["text"] for p in passages])
    order = np.argsort([-len(f["input_ids"]) for f in features], kind="stable")
    batches = [model.pad([features[j] for j in order[lo:lo + s["encode_batch"]]])
               for lo in range(0, len(order), s["encode_batch"])]
    with inference(model, autocast) as where:
        batches = [{k: v.to(where) for k, v in b.items()} for b in batches]
        for _ in range(2):                                    # the first pass warms up, the second is timed
            _sync()
            start = time.perf_counter()
            for batch in batches:
                model.encode_passages(batch)
            _sync()
    plain = len(passages) / (time.perf_counter() - start)
    tokens = float(np.mean([len(f["input_ids"]) for f in features]))
    flops = 2 * _encoder_params(s) * tokens
    return {"steady_mfu": _mfu(steady * flops, peak), "plain_mfu": _mfu(plain * flops, peak),
            "pipeline_passages_per_s": round(pipeline, 1), "steady_passages_per_s": round(steady, 1),
            "plain_forward_passages_per_s": round(plain, 1), "pipeline_over_plain": round(pipeline / plain, 3),
            "steady_over_plain": round(steady / plain, 3), "mean_tokens": round(tokens, 1),
            "chunk": s["encode_chunk"], "tokenize_threads": dense.tokenize_threads() if where.type != "cpu" else 1,
            "batch": s["encode_batch"], "autocast": autocast, "peak_gb": _peak_gb()}


def _encoder_params(s: dict) -> int:
    """Parameters of one bert-base-shaped encoder (embeddings included): the N of 6 N per token."""
    from transformers import BertModel

    with torch.device("meta"):
        return sum(p.numel() for p in BertModel(_bert_config(s)).parameters())


PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}   # dense bf16/fp16


def peak_tflops(override: float | None = None) -> float | None:
    """The device's dense bf16 / fp16 peak (TFLOP/s) by its name, for MFU; ``None`` when unknown (a CPU)."""
    if override:
        return override
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


def _mfu(flops_per_s: float, peak: float | None) -> float | None:
    return round(flops_per_s / (peak * 1e12), 4) if peak else None


def _tokens(model, records: list[dict], hard_negatives: int) -> tuple[float, float]:
    """Mean unpadded tokens per question and per passage of the records (what 6 N per token counts)."""
    q = model.query_features([r["question"] for r in records])
    ctxs = [c for r in records for c in r["positive_ctxs"][:1] + r["hard_negative_ctxs"][:hard_negatives]]
    p = model.passage_features([c["title"] for c in ctxs], [c["text"] for c in ctxs])
    return float(np.mean([len(f["input_ids"]) for f in q])), float(np.mean([len(f["input_ids"]) for f in p]))


def training(s: dict, tokenizer, passages: list[dict], batch: int, chunk: int | None, settings: dict,
             peak: float | None = None) -> dict:
    """Examples/s and MFU of ``train_biencoder`` with the profile's settings for the phase (``settings``: its
    ``hard_negatives`` and ``length_bucket_size``), bf16 where native, else fp16 on a GPU / float32 on a CPU.
    MFU counts 6 N per unpadded token of both sides (queries and 1 + hard_negatives passages per example):
    GradCache's second forward and the padding are overhead, not useful work."""
    from ecqg.hf_training import resolve_mixed_precision
    from ecqg.retrieval.train import TrainConfig, train_biencoder

    precision = resolve_mixed_precision("auto")
    precision = "fp16" if precision == "no" and torch.cuda.is_available() else precision
    hard_negatives, bucket = int(settings["hard_negatives"]), settings.get("length_bucket_size")
    records = make_records(passages[:batch * (s["train_steps"] + 1)])
    cfg = TrainConfig(lr=1e-5, epochs=1, batch_size=batch, hard_negatives=hard_negatives, warmup_steps=0,
                      grad_cache_chunk_size=chunk, length_bucket_size=bucket, checkpoint_every=None,
                      max_steps=s["train_steps"] + 1, seed=0, mixed_precision=precision, log_every=10_000)
    model = _biencoder(s, tokenizer)
    q_tokens, p_tokens = _tokens(model, records, hard_negatives)
    _reset_peak()
    try:
        with tempfile.TemporaryDirectory() as out:
            history = train_biencoder(model, records, None, cfg, out, resume=False, progress=False)
    except torch.OutOfMemoryError as exc:
        return {"batch": batch, "grad_cache_chunk_size": chunk, "error": f"out of memory: {str(exc)[:120]}"}
    rate = statistics.median(h["examples_per_s"] for h in history[1:])
    tokens = q_tokens + (1 + hard_negatives) * p_tokens
    return {"batch": batch, "hard_negatives": hard_negatives, "grad_cache_chunk_size": chunk,
            "length_bucket_size": bucket, "mixed_precision": precision, "examples_per_s": round(rate, 1),
            "tokens_per_example": round(tokens, 1), "mfu": _mfu(rate * tokens * 6 * _encoder_params(s), peak),
            "peak_gb": _peak_gb()}


def largest_fitting_chunk(s: dict, tokenizer, passages: list[dict], batch: int, settings: dict,
                          peak: float | None) -> list[dict]:
    """Pre-training at ``batch`` without GradCache, then with halving chunks until one fits: the fastest setting
    the device holds (the profile's chunk is measured too, for comparison)."""
    out = []
    for chunk in (None, *s["pretrain_chunks"]):
        out.append(training(s, tokenizer, passages, batch, chunk, settings, peak))
        if "error" not in out[-1] and chunk is None:
            break                                       # the whole batch fits: no chunk is faster
    return out


def sampling(s: dict, tokenizer, passages: list[dict]) -> dict:
    """Questions/s of top-k / top-p sampling with a BART-large-sized generator (vocabulary 50,265)."""
    from transformers import BartConfig, BartForConditionalGeneration

    from ecqg import qg

    torch.manual_seed(0)
    model = BartForConditionalGeneration(BartConfig(
        vocab_size=50265, d_model=s["bart_hidden"], encoder_layers=s["bart_layers"], decoder_layers=s["bart_layers"],
        encoder_attention_heads=s["bart_heads"], decoder_attention_heads=s["bart_heads"],
        encoder_ffn_dim=s["bart_ffn"], decoder_ffn_dim=s["bart_ffn"], pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
        decoder_start_token_id=tokenizer.sep_token_id, forced_eos_token_id=None))
    inputs = [{"passage_id": str(i), "title": p["title"], "text": p["text"], "entity": None}
              for i, p in enumerate(passages[:s["qg_passages"]])]
    kwargs = dict(samples=2, batch_size=s["qg_batch"], max_new_tokens=48, source_max_length=s["passage_len"],
                  autocast="auto", progress=False)
    qg.generate_questions(model, tokenizer, inputs[:s["qg_batch"]], **kwargs)          # warm-up
    _reset_peak()
    _sync()
    start = time.perf_counter()
    _, drops = qg.generate_questions(model, tokenizer, inputs, **kwargs)
    _sync()
    seconds = time.perf_counter() - start
    return {"passages_per_s": round(len(inputs) / seconds, 1), "samples_per_passage": 2,
            "questions_per_s": round(drops["generated"] / seconds, 1), "max_new_tokens": 48,
            "batch": s["qg_batch"], "peak_gb": _peak_gb()}


def reading(s: dict, passages: list[dict]) -> dict:
    """Questions/s of the round-trip reader with a RoBERTa-base-sized extractive reader (vocabulary 50,265)."""
    from transformers import RobertaConfig, RobertaForQuestionAnswering

    from ecqg.filtering import reader

    tokenizer = _tokenizer()
    torch.manual_seed(0)
    model = RobertaForQuestionAnswering(RobertaConfig(
        vocab_size=50265, num_hidden_layers=s["layers"], hidden_size=s["hidden"], num_attention_heads=s["heads"],
        intermediate_size=s["ffn"], max_position_embeddings=514, pad_token_id=tokenizer.pad_token_id))
    questions = [{"id": str(i), "question": " ".join(p["text"].split()[:10]) + "?", "context": p["text"]}
                 for i, p in enumerate(itertools.islice(itertools.cycle(passages), s["reader_questions"]))]
    kwargs = dict(max_length=384, stride=128, batch_size=s["reader_batch"], autocast="auto", progress=False)
    reader.predict(model, tokenizer, questions[:s["reader_batch"]], **kwargs)             # warm-up
    _reset_peak()
    _sync()
    start = time.perf_counter()
    reader.predict(model, tokenizer, questions, **kwargs)
    _sync()
    return {"questions_per_s": round(len(questions) / (time.perf_counter() - start), 1), "batch": s["reader_batch"],
            "peak_gb": _peak_gb()}


def stage_counts(paper: dict) -> dict[str, int]:
    """How many corpus encodings, fine-tunings and pre-trainings the paper profile's DAG runs (the DAG written for
    its ``dpr.variants``)."""
    import yaml

    from ecqg import dag as dag_writer
    from ecqg.dvc_stages import expanded_stages

    dag = yaml.safe_load(dag_writer.render(paper))
    names = [name for name, _ in expanded_stages(dag, paper)]
    return {"encodings": sum(n.startswith(("retrieve_dense", "retrieve_pretrained", "retrieve_untrained",
                                           "retrieve_dose")) for n in names),  # untrained, dense, pre-trained only
            "finetunings": sum(n.startswith("finetune_") for n in names),
            "pretrainings": sum(n.startswith("pretrain_") for n in names)}


def projection(paper: dict, figures: dict) -> list[dict]:
    """GPU-hours of each paper stage at the measured rates, from params/paper.yaml's sizes and the DAG's counts."""
    dpr, gen = paper["dpr"], paper["qg"]["generate"]
    counts = stage_counts(paper)
    trained = [r for r in figures["finetune"] if "examples_per_s" in r]
    best_train = max(trained, key=lambda r: r["examples_per_s"]) if trained else {"examples_per_s": float("nan")}
    pretrain_rate = figures["pretrain"].get("examples_per_s", float("nan"))
    questions = gen["uncon_passages"] * gen["samples"] * 2     # sampled for UnCon, about as many conditioned
    enc_rate = figures["encoding"]["steady_passages_per_s"]
    rows = [
        (f"corpus encoding, 21M passages x {counts['encodings']} (every retrieve_* stage)",
         counts["encodings"] * PAPER_PASSAGES / enc_rate, enc_rate, "passages/s"),
        (f"DPR fine-tuning, {dpr['finetune']['epochs']} epochs x 58,880 x {counts['finetunings']} runs",
         counts["finetunings"] * 58_880 * dpr["finetune"]["epochs"] / best_train["examples_per_s"],
         best_train["examples_per_s"], "examples/s"),
        (f"synthetic pre-training, {dpr['pretrain']['epochs']} epochs x {paper['mixing']['total']:,} x "
         f"{counts['pretrainings']} runs", counts["pretrainings"] * paper["mixing"]["total"] *
         dpr["pretrain"]["epochs"] / pretrain_rate, pretrain_rate, "examples/s"),
        (f"question sampling, {questions:,} samples (UnCon + conditioned)",
         questions / figures["sampling"]["questions_per_s"], figures["sampling"]["questions_per_s"], "questions/s"),
        (f"round-trip reader over {questions:,} questions", questions / figures["reader"]["questions_per_s"],
         figures["reader"]["questions_per_s"], "questions/s"),
    ]
    out = [{"stage": name, "gpu_hours": round(seconds / 3600, 2), "rate": rate, "unit": unit}
           for name, seconds, rate, unit in rows]
    out.append({"stage": "total", "gpu_hours": round(sum(r["gpu_hours"] for r in out), 1), "rate": None,
                "unit": ""})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="paper")
    parser.add_argument("--out", help="also write the figures as JSON here")
    parser.add_argument("--sections", default="", help="run only these sections, e.g. encoding,feeding "
                        "(the projection needs all five of encoding, finetune, pretrain, sampling, reader)")
    parser.add_argument("--feeding", default="", help="also sweep the encoding's tokenising threads, e.g. 1,4,15")
    parser.add_argument("--passages", choices=("psgs_w100", "bundle"), default="psgs_w100",
                        help="100-word passages as DPR's Wikipedia (default) or the bundle's own, shorter ones")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak, for MFU (known: "
                        + ", ".join(f"{k} {v:g}" for k, v in PEAK_TFLOPS.items()) + ")")
    parser.add_argument("--tokenizer", default=TOKENIZER,
                        help="bert-base-uncased's tokenizer: bundled:minilm (default), a folder or a hub id")
    args = parser.parse_args()
    globals()["TOKENIZER"] = args.tokenizer
    logging.basicConfig(level=logging.WARNING)
    s = SIZES[args.size]
    where = device.resolve()
    autocast = device.autocast_dtype("float16" if where.type == "cuda" else "auto", where.type)
    head = {"date": datetime.date.today().isoformat(), "device": device.describe(), "size": args.size,
            "host": f"{platform.machine()} {platform.processor()}", "torch": torch.__version__}
    print(f"# {json.dumps(head)}", flush=True)
    tokenizer = _tokenizer()
    bundle = load_passages(s["passages"])
    passages = psgs_w100_like(bundle, s["passages"]) if args.passages == "psgs_w100" else \
        [{"id": str(i), **p} for i, p in enumerate(bundle)]
    dpr = config.preset("paper", config.PRESETS_DIR)["dpr"]     # the paper profile's phase settings
    peak = peak_tflops(args.peak_tflops)
    figures: dict = {**head, "passages": args.passages, "peak_tflops": peak}

    def pretrain():
        tried = largest_fitting_chunk(s, tokenizer, passages, s["pretrain_batch"], dpr["pretrain"], peak)
        figures["pretrain_chunks"] = tried
        fitting = [t for t in tried if "error" not in t]
        return max(fitting, key=lambda t: t["examples_per_s"]) if fitting else tried[-1]

    steps = [("encoding", lambda: encoding(s, tokenizer, passages, autocast, peak)),
             ("finetune", lambda: [training(s, tokenizer, passages, s["train_batch"], c, dpr["finetune"], peak)
                                   for c in s["chunks"]]),
             ("pretrain", pretrain),
             ("sampling", lambda: sampling(s, tokenizer, passages)),
             ("reader", lambda: reading(s, passages))]
    if args.feeding:
        steps.insert(1, ("feeding", lambda: [feeding(s, tokenizer, passages, autocast, int(t))
                                             for t in args.feeding.split(",")]))
    if args.sections:
        steps = [(name, step) for name, step in steps if name in args.sections.split(",")]
    for name, step in steps:
        start = time.perf_counter()
        figures[name] = step()
        print(f"{name:9s} {time.perf_counter() - start:6.1f} s  {json.dumps(figures[name])}", flush=True)
    if {"encoding", "finetune", "pretrain", "sampling", "reader"} <= set(figures):
        figures["projection"] = projection(config.preset("paper", config.PRESETS_DIR), figures)
        print(f"\n{'paper stage (params/paper.yaml sizes)':88s} {'GPU-hours':>9s}  measured rate")
        for row in figures["projection"]:
            print(f"{row['stage']:88s} {row['gpu_hours']:9.2f}  {row['rate']} {row['unit']}")
    mfu = {"encoding (steady)": figures.get("encoding", {}).get("steady_mfu"),
           "encoding (plain forward)": figures.get("encoding", {}).get("plain_mfu"),
           **{f"fine-tuning, chunk {f['grad_cache_chunk_size']}": f.get("mfu") for f in figures.get("finetune", [])},
           **{f"pre-training, chunk {p['grad_cache_chunk_size']}": p.get("mfu")
              for p in figures.get("pretrain_chunks", [])}}
    print("\nMFU (" + (f"peak {peak:g} TFLOP/s" if peak else "no known peak for this device") + "): "
          + ", ".join(f"{k} {'n/a' if v is None else f'{v:.1%}'}" for k, v in mfu.items()))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
