"""The reader's held-out quality at each of its training checkpoints: is its F1 reached in fewer steps?

Stage 03 trains the round-trip reader for ``mrc.train.max_steps`` steps (mini: 800, about 20 minutes on 2 cores, the
longest step of mini's run) and keeps a checkpoint every ``mrc.train.checkpoint_every``; the stage deletes them once
the reader is saved, so copy them while it trains (or point this at any HF Trainer checkpoints of the reader). Each
is scored exactly as stage 03 scores the final reader: the same held-out examples (``mrc_data``), the same striding,
null threshold and precision (``sp.read``, ``evaluate_mrc``). Prints one line per checkpoint and a JSON summary;
not a test.

Run: ``.venv/bin/python bench/reader_curve.py CHECKPOINT_DIR [...] [--params params.yaml] [--out curve.json]``,
or ``--train DIR`` to first train the reader as stage 03 does (same examples, settings and seed) into ``DIR``
keeping every checkpoint (resumable: run it again after a stop), then score them all; ``--max-steps`` /
``--mixed-precision`` / ``--checkpoint-every`` override the params' schedule, precision and checkpoint spacing
for that training.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import time
from pathlib import Path

from ecqg.core import config, settings
from ecqg.core.device import cpu_name
from ecqg.filtering import build_mrc_model, evaluate_mrc
from ecqg.stages import filtering as sp

KEEP = ("has_ans_f1", "has_ans_exact", "no_answer_accuracy", "f1", "exact")


def step_of(path: Path) -> int:
    found = re.search(r"checkpoint-(\d+)", path.name)
    if not found:
        raise SystemExit(f"{path}: not an HF Trainer checkpoint folder (checkpoint-<step>)")
    return int(found.group(1))


def train_keeping_checkpoints(params, train: list[dict], out: Path, max_steps: int | None,
                               mixed_precision: str | None, checkpoint_every: int | None = None
                               ) -> tuple[list[Path], float]:
    """Stage 03's reader training (``sp.reader``'s model, features and Trainer arguments) with no limit on the
    checkpoints kept: the stage keeps two and deletes them once the reader is saved."""
    from transformers import DataCollatorWithPadding, Trainer

    from ecqg.filtering.reader import train_features
    from ecqg.runtime.hf_training import check_settings, complete_checkpoints, fresh_accelerator_state, one_device, \
        remove_incomplete_checkpoints, training_arguments

    mrc = params["mrc"]
    settings = {**mrc["train"], **({"max_steps": max_steps} if max_steps else {}),
                **({"mixed_precision": mixed_precision} if mixed_precision else {}),
                **({"checkpoint_every": checkpoint_every} if checkpoint_every else {})}
    model, tokenizer = build_mrc_model(mrc["model"], seed=params["seed"])
    features = train_features(tokenizer, train, mrc["max_length"], mrc["stride"], mrc["answer_windows_only"])
    out.mkdir(parents=True, exist_ok=True)
    remove_incomplete_checkpoints(out)
    done = complete_checkpoints(out)
    args = one_device(training_arguments(out, settings, params["seed"], progress=False))
    args.save_total_limit = None
    fresh_accelerator_state(check_settings(settings)["mixed_precision"])
    trainer = Trainer(model=model, args=args, train_dataset=features,
                      data_collator=DataCollatorWithPadding(tokenizer))
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(done[-1]) if done else None)
    seconds = time.perf_counter() - start
    print(f"trained to step {trainer.state.global_step} in {seconds:.0f} s "
          f"({settings['mixed_precision']}, {settings['max_steps']} steps)", flush=True)
    return complete_checkpoints(out), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoints", nargs="*", type=Path)
    ap.add_argument("--train", type=Path, help="train the reader into this folder first, keeping every checkpoint")
    ap.add_argument("--max-steps", type=int)
    ap.add_argument("--mixed-precision", choices=("no", "bf16", "fp16", "auto"))
    ap.add_argument("--checkpoint-every", type=int, help="steps between the checkpoints scored (--train)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    params = config.load(args.params)
    s = settings.of(params)
    train, heldout, counts = sp.mrc_data(s.mrc, s.data.mrc_unanswerable, s.seed)
    checkpoints, train_seconds = list(args.checkpoints), None
    if args.train:
        trained, train_seconds = train_keeping_checkpoints(params, train, args.train, args.max_steps,
                                                           args.mixed_precision, args.checkpoint_every)
        checkpoints += trained
    if not checkpoints:
        raise SystemExit("no checkpoints: name checkpoint folders or --train a folder")
    rows = []
    for path in sorted(checkpoints, key=step_of):
        model, tokenizer = build_mrc_model(str(path))
        start = time.perf_counter()
        predictions, _ = sp.read(model, tokenizer, heldout, None, s.mrc, progress=False, processes=s.processes,
                                 launcher_args=s.launcher_args)
        quality = evaluate_mrc(predictions, heldout)
        rows.append({"step": step_of(path), **{k: round(float(quality[k]), 2) for k in KEEP},
                     "seconds": round(time.perf_counter() - start, 1)})
        print("  ".join(f"{k} {v}" for k, v in rows[-1].items()), flush=True)
    summary = {"cpu": cpu_name(), "date": datetime.date.today().isoformat(), "params": args.params,
               "heldout": counts["heldout"],
               "train_seconds": None if train_seconds is None else round(train_seconds),
               "max_steps": args.max_steps or params["mrc"]["train"]["max_steps"],
               "mixed_precision": args.mixed_precision or params["mrc"]["train"]["mixed_precision"], "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
