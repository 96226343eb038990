"""Benchmark: question-generator training examples/s and generated questions/s (bundled MiniLM as a generator).

Prints figures; not a test. Real examples: the first ``--examples`` gold triples of ``outputs/data/train_gold.jsonl``
(or of ``--gold``), unconditioned format for training; generation is conditioned on their (passage, entity) pairs. Training runs through ``ecqg.runtime.hf_training`` (a few steps, no checkpoint);
generation samples ``--samples`` sequences per passage with top-k 10 / top-p 0.9 from the (barely trained) model, so
the questions/s figure includes the long outputs of an untrained decoder (up to ``--max-new-tokens``).
``--architecture`` (prefix_lm, bert2bert) and ``--mixed-precision`` (no, bf16) compare what ``qg.architecture`` and
``qg.train.mixed_precision`` choose between; ``--autocast`` runs generation as ``qg.generate.autocast`` does.
Run: ``.venv/bin/python bench/bench_qg.py [--examples 64 --batch-size 8 --architecture prefix_lm --mixed-precision bf16]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import tempfile
import time
from pathlib import Path

import torch

from ecqg import qg
from ecqg.data.records import read_train_gold
from ecqg.core.io import read_jsonl

GOLD = Path(__file__).resolve().parents[1] / "outputs" / "data" / "train_gold.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gold", default=str(GOLD), help="gold triples jsonl with inline title/text")
    ap.add_argument("--model", default="bundled:minilm")
    ap.add_argument("--architecture", default="prefix_lm", choices=qg.ARCHITECTURES)
    ap.add_argument("--mixed-precision", default="no", choices=("no", "bf16"))
    ap.add_argument("--examples", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--source-len", type=int, default=128)
    ap.add_argument("--window", type=int, default=80, help="passage window in words (0: none)")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--gen-inputs", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--autocast", default=None, choices=(None, "bfloat16", "auto"),
                    help="generation under autocast (qg.generate.autocast); default float32")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    window = args.window or None

    triples, passages = [], {}
    for (_, raw), triple in zip(read_jsonl(args.gold), read_train_gold(args.gold)):
        if len(triples) >= args.examples:
            break
        if "text" not in raw:
            raise SystemExit(f"{args.gold}: records carry no passage text; pass a gold file with title/text")
        passages[triple["passage_id"]] = {"title": raw.get("title", ""), "text": raw["text"]}
        triples.append(triple)
    examples, _ = qg.build_examples(triples, passages, "uncon", window_words=window, progress=False)
    model, tokenizer = qg.build_generator(args.model, architecture=args.architecture, seed=0)
    settings = {"lr": 1e-4, "epochs": 1, "batch_size": args.batch_size, "warmup_ratio": 0.0, "weight_decay": 0.0,
                "max_steps": None, "checkpoint_every": 10**6, "mixed_precision": args.mixed_precision}
    with tempfile.TemporaryDirectory() as out:
        train = qg.train_generator(model, tokenizer, examples, out, settings, seed=0,
                                   source_max_length=args.source_len, target_max_length=args.max_new_tokens,
                                   progress=False)
    entities, _ = qg.select_entities(triples, passages, progress=False)
    inputs = qg.heldout_inputs(triples, passages, entities)[0][: args.gen_inputs]   # distinct (passage, entity)
    start = time.perf_counter()
    _, drops = qg.generate_questions(model, tokenizer, inputs, marking=qg.DEFAULT_MARKING, samples=args.samples,
                                     batch_size=args.gen_batch,
                                     max_new_tokens=args.max_new_tokens, source_max_length=args.source_len,
                                     window_words=window, seed=0, autocast=args.autocast, progress=False)
    gen_s = time.perf_counter() - start
    print(json.dumps({
        "machine": platform.processor() or platform.machine(), "torch_threads": torch.get_num_threads(),
        "model": args.model, "architecture": args.architecture, "mixed_precision": args.mixed_precision,
        "generation_autocast": args.autocast, "gen_batch": args.gen_batch,
        "train_examples": len(examples), "batch_size": args.batch_size,
        "source_len": args.source_len, "window_words": window, "train_seconds": train["seconds"],
        "train_examples_per_s": train["examples_per_s"], "inputs": len(inputs), "generated": drops["generated"],
        "generate_seconds": round(gen_s, 1), "questions_per_s": round(drops["generated"] / gen_s, 2),
    }, indent=2))


if __name__ == "__main__":
    main()
