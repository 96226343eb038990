"""Benchmark: DPR training throughput (examples/s): plain full-batch graph, length buckets, gradient caching.

Prints figures; not a test. Real-looking text: passages from ``data/corpus.jsonl.gz`` (the committed mini bundle);
each question is a passage's opening words, its positive that passage, its hard negative another passage.
Run: ``.venv/bin/python bench/bench_train.py [--steps 4 --warmup 1 --chunk 4 --bucket 16 --mixed-precision bf16]``;
``--hard-negatives 0`` times in-batch negatives only (synthetic pre-training without BM25 negatives);
``--bucket 16,8,4 --buckets-only`` compares bucket sizes alone (the study's fine-tuning setting:
``--batch-size 32 --query-len 64 --bucket 16,8,4 --buckets-only --mixed-precision bf16``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch

from ecqg.core.io import read_jsonl
from ecqg.retrieval.biencoder import BiEncoder
from ecqg.retrieval.train import TrainConfig, train_biencoder

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus.jsonl.gz"


def load_passages(limit: int) -> list[dict]:
    """Corpus passages if the bundle is there, else a synthetic stand-in (said so in the output)."""
    if CORPUS.is_file():
        return [{"title": r["title"], "text": r["text"]} for _, r in itertools.islice(read_jsonl(CORPUS), limit)]
    words = "the river flows past a castle built in medieval times by the king of a northern land".split()
    return [{"title": f"Passage {i}", "text": " ".join(words[(i + j) % len(words)] for j in range(100))}
            for i in range(limit)]


def make_records(passages: list[dict]) -> list[dict]:
    """Question = opening words of the passage (not real questions, but real vocabulary and lengths)."""
    n = len(passages)
    return [{"question": " ".join(p["text"].split()[:12]).lower() + "?", "answers": ["x"],
             "positive_ctxs": [p], "hard_negative_ctxs": [passages[(i * 7 + 3) % n]]}
            for i, p in enumerate(passages)]


def run(model_ref: str, records: list[dict], chunk: int | None, bucket: int | None, args) -> dict:
    off = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0} if args.no_dropout else {}
    model = BiEncoder.from_base(model_ref, query_max_length=args.query_len, passage_max_length=args.passage_len,
                                **off)
    config = TrainConfig(lr=1e-5, epochs=1, batch_size=args.batch_size, hard_negatives=args.hard_negatives,
                         warmup_steps=0, grad_cache_chunk_size=chunk, length_bucket_size=bucket, checkpoint_every=None,
                         max_steps=args.warmup + args.steps, seed=0, mixed_precision=args.mixed_precision)
    with tempfile.TemporaryDirectory() as out:
        history = train_biencoder(model, records, None, config, out, resume=False, progress=False)
    timed = history[args.warmup:]
    return {"grad_cache_chunk_size": chunk, "length_bucket_size": bucket,
            "examples_per_s_median": statistics.median(h["examples_per_s"] for h in timed),
            "step_seconds_median": statistics.median(h["step_seconds"] for h in timed),
            "losses": [round(h["loss"], 4) for h in history]}


def feeding_costs(model_ref: str, records: list[dict], buckets: list[int], args) -> None:
    """What caching tokenisation or smaller buckets could save: tokenising one step's texts, and the share of padding
    tokens each bucket size leaves (passages sorted by length within the step, as the trainer does)."""
    bi = BiEncoder.from_base(model_ref, query_max_length=args.query_len, passage_max_length=args.passage_len)
    step = records[:args.batch_size]
    contexts = [c for r in step for c in [r["positive_ctxs"][0], *r["hard_negative_ctxs"][:args.hard_negatives]]]
    titles, texts = [c["title"] for c in contexts], [c["text"] for c in contexts]
    start = time.perf_counter()
    for _ in range(10):
        bi.tokenize_queries([r["question"] for r in step])
        lengths = bi.tokenize_passages(titles, texts)["attention_mask"].sum(dim=1).tolist()
    print(f"tokenising one step's {len(step)} questions and {len(texts)} passages: "
          f"{(time.perf_counter() - start) * 100:.1f} ms")
    lengths.sort()
    for b in buckets:
        padded = sum(max(lengths[i:i + b]) * len(lengths[i:i + b]) for i in range(0, len(lengths), b))
        print(f"bucket {b:3d}: {1 - sum(lengths) / padded:.1%} of the passage tokens are padding")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bundled:minilm")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--query-len", type=int, default=32)
    parser.add_argument("--passage-len", type=int, default=256, help="the mini profile's passage_max_length")
    parser.add_argument("--chunk", type=int, default=4, help="GradCache chunk size")
    parser.add_argument("--bucket", default="16", help="length bucket size(s) of the plain path, comma-separated")
    parser.add_argument("--buckets-only", action="store_true",
                        help="time the length-bucket modes only (no plain full-batch or grad-cache mode)")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per mode")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per mode")
    parser.add_argument("--hard-negatives", type=int, default=1,
                        help="BM25-style hard negatives per question (0: in-batch negatives only, e.g. synthetic "
                             "pre-training as GPL recommends)")
    parser.add_argument("--mixed-precision", default="no", choices=("no", "bf16", "fp16"),
                        help="Accelerate's mixed precision (bf16: autocast on CPUs with bf16 instructions)")
    parser.add_argument("--no-dropout", action="store_true",
                        help="dropout off: every mode then gives the same losses (a check, not a speed setting)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    passages = load_passages(args.batch_size * (args.steps + args.warmup) * 2)
    records = make_records(passages)
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, text from {'corpus' if CORPUS.is_file() else 'synthetic stand-in'}")
    print(f"# model {args.model}, batch {args.batch_size} (+{args.batch_size * args.hard_negatives} hard negatives), "
          f"query len {args.query_len}, passage len {args.passage_len}, {args.steps} timed steps after "
          f"{args.warmup} warm-up, mixed precision {args.mixed_precision}")
    buckets = [int(b) for b in args.bucket.split(",")]
    feeding_costs(args.model, records, buckets, args)
    results = []
    modes = [(f"length buckets ({b})", None, b) for b in buckets]
    if not args.buckets_only:
        modes = [("plain", None, None), modes[0], (f"grad-cache (chunk {args.chunk})", args.chunk, None)]
    for mode, chunk, bucket in modes:
        start = time.perf_counter()
        result = run(args.model, records, chunk, bucket, args)
        result["wall_s"] = round(time.perf_counter() - start, 1)
        results.append(result)
        print(f"{mode:24s} {result['examples_per_s_median']:7.2f} examples/s   "
              f"{result['step_seconds_median']:6.2f} s/step   losses {result['losses']}")
    if args.buckets_only:
        first = results[0]["examples_per_s_median"]
        for b, r in zip(buckets[1:], results[1:]):
            print(f"length buckets ({b}) / ({buckets[0]}) throughput: {r['examples_per_s_median'] / first:.2f}x")
    else:
        plain = results[0]["examples_per_s_median"]
        print(f"length buckets / plain throughput: {results[1]['examples_per_s_median'] / plain:.2f}x "
              "(expected > 1 on CPU: less padding)")
        print(f"grad-cache / plain throughput: {results[2]['examples_per_s_median'] / plain:.2f}x "
              "(expected < 1: one extra forward pass per step)")
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
