"""The reader's held-out quality at each of its training checkpoints: is its F1 reached in fewer steps?

Stage 03 trains the round-trip reader for ``mrc.train.max_steps`` steps (mini: 800, about 20 minutes on 2 cores, the
longest step of mini's run) and keeps a checkpoint every ``mrc.train.checkpoint_every``; the stage deletes them once
the reader is saved, so copy them while it trains (or point this at any HF Trainer checkpoints of the reader). Each
is scored exactly as stage 03 scores the final reader: the same held-out examples (``mrc_data``), the same striding,
null threshold and precision (``sp.read``, ``evaluate_mrc``). Prints one line per checkpoint and a JSON summary;
not a test.

Run: ``.venv/bin/python bench/reader_curve.py CHECKPOINT_DIR [...] [--params params.yaml] [--out curve.json]``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from ecqg.core import config
from ecqg.core.device import cpu_name
from ecqg.filtering import build_mrc_model, evaluate_mrc
from ecqg.pipeline import synthetic as sp

KEEP = ("has_ans_f1", "has_ans_exact", "no_answer_accuracy", "f1", "exact")


def step_of(path: Path) -> int:
    found = re.search(r"checkpoint-(\d+)", path.name)
    if not found:
        raise SystemExit(f"{path}: not an HF Trainer checkpoint folder (checkpoint-<step>)")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoints", nargs="+", type=Path)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    params = config.load(args.params)
    _, heldout, counts = sp.mrc_data(params)
    rows = []
    for path in sorted(args.checkpoints, key=step_of):
        model, tokenizer = build_mrc_model(str(path))
        start = time.perf_counter()
        predictions, _ = sp.read(model, tokenizer, heldout, None, params, progress=False)
        quality = evaluate_mrc(predictions, heldout)
        rows.append({"step": step_of(path), **{k: round(float(quality[k]), 2) for k in KEEP},
                     "seconds": round(time.perf_counter() - start, 1)})
        print("  ".join(f"{k} {v}" for k, v in rows[-1].items()), flush=True)
    summary = {"cpu": cpu_name(), "params": args.params, "heldout": counts["heldout"],
               "max_steps": params["mrc"]["train"]["max_steps"], "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
