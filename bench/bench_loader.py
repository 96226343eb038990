"""Benchmark: how fast the host builds DPR training steps at the paper profile's shapes, against how fast one GPU
consumes them (issue 58 item 2: the host must build them at least 8x faster).

A step here is one device's share of a paper-profile batch: 128 questions, their 128 positives and 128 BM25 hard
negatives (pre-training at a global 1,024 on 8 GPUs; fine-tuning at 128 on one GPU has the same shape), questions up
to 64 word pieces, passages up to 256, laid out as the paper profile trains them (passages in length-sorted passes
of ``--bucket`` 128, each padded to its own longest). The tokens are random ids with random lengths (questions
uniform in 8-64 pieces, passages in 96-256: longer than psgs_w100's mean of 142.5, so the padding work is on the safe
side), held in the trainer's own arrays (:class:`ecqg.retrieval.tokens.TrainingTokens`), each record with
``--pool`` hard negatives to draw from (DPR's nq-train has several; the synthetic sets one).

Two figures: the build in the calling process (``StepPlan.inputs``: the seeded hard-negative draws, the gathers and
the padding, one core), and the steps a training loop receives through :func:`ecqg.retrieval.loader.iterate_steps`
with ``--workers`` DataLoader workers (what the trainer runs; on a CPU there is no pinning or device copy to time).
The GPU's rate is the committed H100 measurement of fine-tuning at batch 128 + 1 hard negative without GradCache
(``bench/results/gpu_check_h100_2026-11-27_*.json``: 229.0-281.9 examples/s, so at most 281.9 / 128 = 2.2 steps/s);
the ratio is against its faster end.

Run: ``.venv/bin/python bench/bench_loader.py [--steps 200 --workers 2 --json] [--write-doc]`` (``--write-doc``: the
figures into docs/paper_profile.md, between its ``loader-bench`` markers).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from ecqg.core.device import cpu_name
from ecqg.retrieval.loader import StepPlan, iterate_steps
from ecqg.retrieval.tokens import TokenStore, TrainingTokens

RESULTS = Path(__file__).resolve().parent / "results"
GPU_FILES = ("gpu_check_h100_2026-11-27_all_sections.json", "gpu_check_h100_2026-11-27_one_tokenizer_thread.json")
TARGET = 8.0
DOC = Path(__file__).resolve().parents[1] / "docs" / "paper_profile.md"
START = "<!-- loader-bench:start (bench/bench_loader.py --write-doc writes this block) -->"
END = "<!-- loader-bench:end -->"


def gpu_rate() -> tuple[float, float, str]:
    """(examples/s, steps/s) of the faster committed H100 fine-tuning run at batch 128 without GradCache, and where."""
    best, where = 0.0, ""
    for name in GPU_FILES:
        run = json.loads((RESULTS / name).read_text(encoding="utf-8"))
        for entry in run["finetune"]:
            if entry.get("grad_cache_chunk_size") is None and entry.get("examples_per_s", 0) > best:
                best, where, batch = entry["examples_per_s"], f"{name}: finetune[grad_cache_chunk_size null]", \
                    entry["batch"]
    return best, best / batch, f"{where} ({run['device'].get('gpu', 'GPU')})"


def random_store(rng: np.random.Generator, n: int, low: int, high: int, vocab: int = 30522) -> TokenStore:
    """``n`` texts of ``low``-``high`` pieces: random ids, segment ids 0, as a retriever's features are stored."""
    lengths = rng.integers(low, high + 1, size=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = {"input_ids": rng.integers(1000, vocab, size=int(offsets[-1]), dtype=np.int32),
            "token_type_ids": np.zeros(int(offsets[-1]), dtype=np.int8)}
    return TokenStore(["input_ids", "token_type_ids", "attention_mask"], flat, offsets)


def paper_tokens(records: int, pool: int, seed: int = 0) -> TrainingTokens:
    rng = np.random.default_rng(seed)
    questions = random_store(rng, records, 8, 64)
    passages = random_store(rng, records * (1 + pool), 96, 256)
    negatives = np.arange(records, records * (1 + pool), dtype=np.int64)      # record i: its own pool of passages
    return TrainingTokens.from_arrays(questions, passages, np.arange(records),
                                      np.arange(0, records * pool + 1, pool), negatives)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-device", type=int, default=128, help="questions per device and step (paper: 128)")
    parser.add_argument("--devices", type=int, default=8, help="processes the global batch splits over")
    parser.add_argument("--hard-negatives", type=int, default=1)
    parser.add_argument("--pool", type=int, default=4, help="hard negatives each record offers to draw from")
    parser.add_argument("--bucket", type=int, default=128, help="length_bucket_size (the paper profile's: 128)")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--steps", type=int, default=200, help="steps timed per figure")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                        help="DataLoader workers (default: the cores less one)")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    parser.add_argument("--write-doc", action="store_true", help="write the figures into docs/paper_profile.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tokens = paper_tokens(args.records, args.pool)
    plan = StepPlan(tokens, batch_size=args.per_device * args.devices, seed=0, drop_last=True,
                    hard_negatives=args.hard_negatives, rank=0, world=args.devices, chunk_size=None,
                    bucket_size=args.bucket, pad_id=0, side="right")
    steps_per_epoch = len(plan.batches(0))
    plan.inputs(0, plan.batches(0)[0])                                       # warm-up
    start = time.perf_counter()
    for j in range(args.steps):
        inputs = plan.inputs(j // steps_per_epoch, plan.batches(j // steps_per_epoch)[j % steps_per_epoch])
    in_process = args.steps / (time.perf_counter() - start)
    shapes = {"queries": list(inputs.queries[0]["input_ids"].shape),
              "passage_passes": [list(t["input_ids"].shape) for t in inputs.passages]}
    received = iterate_steps(plan, 0, 0, args.steps + 8, steps_per_epoch, torch.device("cpu"), args.workers)
    for _ in range(8):                                                       # the workers start and fill the queue
        next(received)
    start = time.perf_counter()
    for _ in range(args.steps):
        next(received)
    through_loader = args.steps / (time.perf_counter() - start)
    received.close()
    examples_per_s, steps_per_s, where = gpu_rate()
    figures = {"cpu": cpu_name(), "cores": os.cpu_count(), "torch": torch.__version__, "per_device": args.per_device,
               "hard_negatives": args.hard_negatives, "length_bucket_size": args.bucket, "shapes": shapes,
               "in_process_steps_per_s": round(in_process, 1), "workers": args.workers,
               "loader_steps_per_s": round(through_loader, 1), "gpu_examples_per_s": examples_per_s,
               "gpu_steps_per_s": round(steps_per_s, 2), "gpu_rate_from": where,
               "in_process_over_gpu": round(in_process / steps_per_s, 1),
               "loader_over_gpu": round(through_loader / steps_per_s, 1), "target": TARGET}
    lines = [f"# {figures['cpu']} ({figures['cores']} cores), torch {torch.__version__}; a step: {args.per_device} "
             f"questions + {args.per_device} positives + {args.per_device * args.hard_negatives} hard negatives, "
             f"questions 8-64 pieces, passages 96-256, length-sorted passes of {args.bucket}: queries "
             f"{shapes['queries']}, passages {shapes['passage_passes']}",
             f"GPU consumes (committed H100, {where}): {examples_per_s} examples/s = {steps_per_s:.2f} steps/s",
             f"built in the training process (one core): {in_process:8.1f} steps/s = "
             f"{figures['in_process_over_gpu']:6.1f}x the GPU",
             f"through the loader ({args.workers} workers):      {through_loader:8.1f} steps/s = "
             f"{figures['loader_over_gpu']:6.1f}x the GPU (target >= {TARGET:g}x)"]
    print("\n".join(lines))
    if args.json:
        print(json.dumps(figures))
    if args.write_doc:
        write_doc(lines, time.strftime("%Y-%m-%d"))


def write_doc(lines: list[str], date: str) -> None:
    """The figures between the markers of docs/paper_profile.md, with the command and the date."""
    text = DOC.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{DOC}: no {START} ... {END} markers")
    block = (f"Measured {date} by `python bench/bench_loader.py --write-doc` (host side only: the step's tensors at "
             "the paper's per-device shapes, no GPU):\n\n```\n" + "\n".join(lines) + "\n```\n")
    head, rest = text.split(START, 1)
    DOC.write_text(head + START + "\n" + block + END + rest.split(END, 1)[1], encoding="utf-8")


if __name__ == "__main__":
    main()
