"""Measurement: synthetic pre-training with BM25 hard negatives or with in-batch negatives only.

Why: GPL (Wang et al. 2022) found BM25 hard negatives hurt on synthetic queries (a BM25 "negative" of a generated
question is often a passage that answers it too). This decides ``dpr.pretrain.hard_negatives`` by measurement on this
profile's own data: the same synthetic set, settings and seed, pre-trained once per choice, each model then scored by
DPR's average-rank validation on the held-out *gold* records of the first training seed (never the test set). The
untrained base encoder is the reference row. Prints one JSON line per model; writes nothing into ``outputs/``.

Needs the profile's stage 04 (``outputs/synthetic/<variant>.json``) and training data (``outputs/data``): run
``dvc repro mixing`` first. Run from the repository root:
``.venv/bin/python bench/compare_pretrain_negatives.py [--variant mixed] [--max-examples N] [--choices 0 1]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

from ecqg.core import config
from ecqg.stages import dpr_training as dense
from ecqg.retrieval.train import train_biencoder
from ecqg.retrieval.train_data import split_records
from ecqg.retrieval.validation import evaluate_biencoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--variant", default="mixed", choices=("uncon", "mixed"))
    parser.add_argument("--max-examples", type=int, default=None, help="pre-train on the first N records only")
    parser.add_argument("--choices", type=int, nargs="+", default=[0, 1], help="hard negatives per question")
    args = parser.parse_args()

    s = config.load_settings(args.params)
    dpr = s.dpr
    seed = dense.primary_seed(dpr)                 # the first replicate's pre-training seed
    gold = [r for part in dense.gold_records(dpr.finetune, s.seed).values() for r in part]
    gold_heldout = split_records(gold, dpr.finetune.heldout, dense.primary_seed(dpr))[1]
    synthetic = dense.synthetic_records(args.variant, seed, s.qg.generate.per_replicate)[:args.max_examples]
    train, synthetic_heldout = split_records(synthetic, dpr.pretrain.heldout, seed)
    print(json.dumps({"profile": s.profile, "variant": args.variant, "train_examples": len(train),
                      "gold_heldout": len(gold_heldout), "synthetic_heldout": len(synthetic_heldout)}), flush=True)

    def report(name: str, model, extra: dict) -> None:
        gold_metrics = evaluate_biencoder(model, gold_heldout)
        synthetic_metrics = evaluate_biencoder(model, synthetic_heldout)
        print(json.dumps({"model": name, **extra,
                          "gold": {k: round(v, 4) for k, v in gold_metrics.items()},
                          "synthetic": {k: round(v, 4) for k, v in synthetic_metrics.items()}}), flush=True)

    own = dense.kind_block(s, dpr.model)
    report("untrained", dense.base_retriever(dpr, kind_settings=own), {})
    for hard_negatives in args.choices:
        model = dense.base_retriever(dpr, kind_settings=own)
        config_ = dataclasses.replace(dpr.pretrain.train_config(seed, s.collective_timeout_minutes),
                                      hard_negatives=hard_negatives)
        with tempfile.TemporaryDirectory() as run_dir:
            start = time.perf_counter()
            history = train_biencoder(model, train, None, config_, Path(run_dir), resume=False, progress=False)
            seconds = time.perf_counter() - start
        report(f"pretrained, hard_negatives={hard_negatives}", model,
               {"train_seconds": round(seconds, 1), "examples_per_s": round(len(train) / seconds, 2),
                "steps": sum(1 for h in history if "loss" in h)})


if __name__ == "__main__":
    main()
