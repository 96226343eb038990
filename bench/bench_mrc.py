"""Benchmark: MRC filter training (examples/s) and inference (questions/s) on real mini examples.

Prints one JSON object; not a test. Examples: the first ``--n`` gold triples and as many SQuAD 2.0 unanswerables
(half each) from the bundle, contexts from the corpus. Training runs ``ceil(n / batch)`` steps of the real
:func:`ecqg.filtering.train_mrc` (HF Trainer, per-batch padding) from ``--model`` in a temporary directory.
Run: ``.venv/bin/python bench/bench_mrc.py [--n 64 --batch 16 --max-length 256 --stride 64 --answer-windows-only]``.
Times are wall clock: on a shared machine, run it when the cores are idle.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import platform
import tempfile
import time
from pathlib import Path

import torch

from ecqg.data.records import read_corpus, read_squad2_unanswerable, read_train_gold
from ecqg.filtering import build_mrc_model, mrc_examples, predict, train_features, train_mrc

ROOT = Path(__file__).resolve().parents[1]


def load_examples(n: int) -> list[dict]:
    gold = list(itertools.islice(read_train_gold(ROOT / "data" / "train_gold.jsonl.gz"), n - n // 2))
    unans = list(itertools.islice(read_squad2_unanswerable(ROOT / "data" / "squad2_unanswerable.jsonl.gz"), n // 2))
    wanted = {r["passage_id"] for r in gold + unans}
    passages = {p["id"]: p for p in read_corpus(ROOT / "data" / "corpus.jsonl.gz") if p["id"] in wanted}
    return mrc_examples(gold, unans, passages)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--stride", type=int, default=64)
    ap.add_argument("--model", default="bundled:minilm")
    ap.add_argument("--answer-windows-only", action="store_true", help="one training window per example")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    examples = load_examples(args.n)
    model, tokenizer = build_mrc_model(args.model, seed=0)
    features = train_features(tokenizer, examples, args.max_length, args.stride, args.answer_windows_only)
    steps = math.ceil(len(features) / args.batch)
    settings = {"lr": 3e-5, "epochs": 1, "batch_size": args.batch, "warmup_ratio": 0.1, "weight_decay": 0.0,
                "max_steps": steps, "checkpoint_every": 10_000, "mixed_precision": "no"}
    with tempfile.TemporaryDirectory() as tmp:
        trained = train_mrc(model, tokenizer, examples, tmp, settings, seed=0, max_length=args.max_length,
                            stride=args.stride, answer_windows_only=args.answer_windows_only,
                            progress=False)
    start = time.perf_counter()
    predict(model, tokenizer, examples, max_length=args.max_length, stride=args.stride, batch_size=64,
            progress=False)
    infer_s = time.perf_counter() - start
    result = {
        "examples": len(examples), "features": len(features), "steps": trained["steps"], "batch": args.batch,
        "max_length": args.max_length, "stride": args.stride, "model": args.model,
        "answer_windows_only": args.answer_windows_only,
        "train_s": trained["seconds"], "train_features_per_s": round(len(features) / trained["seconds"], 2),
        "train_examples_per_s": trained["examples_per_s"],
        "infer_s": round(infer_s, 2), "infer_questions_per_s": round(len(examples) / infer_s, 2),
        "torch_threads": torch.get_num_threads(), "machine": platform.machine(),
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
