"""Checkpointed, resumable training of an ordinary transformers model through the HF ``Trainer``.

Why: the question generators (02) and the MRC filter (03) are plain seq2seq / QA models, for which ``Trainer`` is the
well-kept loop (mixed precision, multi-GPU through Accelerate, checkpoints with optimizer, scheduler and RNG state).
This module adds what a pipeline stage needs on top: one settings dict from ``params.yaml``, resume from the latest
*complete* checkpoint (a SIGKILL can leave a half-written ``checkpoint-N``: Trainer writes ``trainer_state.json`` last,
so a directory without it is incomplete and is removed), and a few throughput figures for the stage metrics.
(The bi-encoder has its own loop in ``ecqg.retrieval.train``: in-batch negatives and GradCache do not fit Trainer.)
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any, Mapping

from ecqg.core import device as core_device
from ecqg.core import io as core_io
from ecqg.core.device import MIXED_PRECISION
from ecqg.core.io import CHECKPOINT_DIR, checkpoint_step

log = logging.getLogger(__name__)

SETTINGS = ("lr", "epochs", "batch_size", "warmup_ratio", "weight_decay", "max_steps", "checkpoint_every",
            "mixed_precision")


def complete_checkpoints(output_dir: str | Path) -> list[Path]:
    """``checkpoint-N`` directories holding ``trainer_state.json`` (written last by Trainer), oldest first."""
    return core_io.complete_checkpoints(output_dir, "trainer_state.json")


def remove_incomplete_checkpoints(output_dir: str | Path) -> list[Path]:
    """Delete ``checkpoint-N`` directories a killed run left half-written; return what was removed."""
    directory = Path(output_dir)
    if not directory.is_dir():
        return []
    removed = [p for p in directory.iterdir()
               if p.is_dir() and CHECKPOINT_DIR.match(p.name) and not (p / "trainer_state.json").is_file()]
    for path in removed:
        log.warning("removing incomplete checkpoint %s (its run was interrupted while saving)", path)
        shutil.rmtree(path)
    return removed


def native_bf16() -> bool:
    """Whether bfloat16 runs in hardware where training runs (the GPU Accelerate picks, else the CPU): see
    :func:`ecqg.core.device.native_bf16`."""
    # torch loads only to look for a GPU: importing this module stays torch-free (stages' --help, CPU-only tools)
    import torch

    return core_device.native_bf16("cuda" if torch.cuda.is_available() else "cpu")


def resolve_mixed_precision(value: str) -> str:
    """``auto`` -> ``bf16`` where bf16 is native (``native_bf16``), else ``no`` (float32); other values unchanged.
    The resolved value is what runs; stages write it into their metrics, so a number says which precision made it."""
    if value not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision is {value!r}; expected one of {MIXED_PRECISION}")
    if value != "auto":
        return value
    resolved = "bf16" if native_bf16() else "no"
    log.info("mixed_precision auto -> %s (%s)", resolved, "native bf16" if resolved == "bf16" else
             "no native bf16 on this machine: float32")
    return resolved


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The training settings this module reads, all present (config validation checks their values), with
    ``mixed_precision`` resolved (``auto`` -> what this machine runs)."""
    missing = [k for k in SETTINGS if k not in settings]
    if missing:
        raise ValueError(f"training settings lack {missing}; expected keys {list(SETTINGS)}")
    return {**{k: settings[k] for k in SETTINGS}, "mixed_precision": resolve_mixed_precision(settings["mixed_precision"])}


def fresh_accelerator_state(mixed_precision: str) -> None:
    """Forget Accelerate's process-wide ``AcceleratorState`` when it holds another mixed precision than the one a
    new training asks for. Why: Accelerate refuses a second ``Accelerator`` of another precision in one process (a
    notebook or a test session that trains a bf16 model, then a float32 one); the distributed process state
    (``PartialState``) is kept, so this is safe under ``accelerate launch`` / torchrun."""
    # accelerate is absent from the torch+transformers-only GPU image (bench/gpu_check.py skips training there)
    from accelerate.state import AcceleratorState

    state = AcceleratorState._shared_state
    if state and state.get("_mixed_precision", mixed_precision) != mixed_precision:
        AcceleratorState._reset_state()


def training_arguments(output_dir: str | Path, settings: Mapping[str, Any], seed: int, progress: bool = True,
                       evaluate: bool = False, **extra):
    """``TrainingArguments`` from a params block: linear warm-up/decay AdamW, step checkpoints, no reporting.
    ``mixed_precision`` bf16 / fp16 trains under autocast (bf16 on a CPU with bf16 instructions is faster than float32
    for the mini generators, bench/bench_qg.py; ``auto`` picks it only there). ``evaluate``:
    score the evaluation set at every checkpoint; ``extra``: further ``TrainingArguments`` (e.g. group_by_length)."""
    # torch and transformers load when training starts
    import torch
    from transformers import TrainingArguments

    s = check_settings(settings)
    return TrainingArguments(
        output_dir=str(output_dir),
        learning_rate=float(s["lr"]),
        num_train_epochs=float(s["epochs"]),
        max_steps=-1 if s["max_steps"] is None else int(s["max_steps"]),
        per_device_train_batch_size=int(s["batch_size"]),
        warmup_steps=float(s["warmup_ratio"]),  # transformers 5: a value below 1 is a fraction of the steps
        weight_decay=float(s["weight_decay"]),
        lr_scheduler_type="linear",
        save_strategy="steps",
        save_steps=int(s["checkpoint_every"]),
        save_total_limit=2,
        logging_strategy="steps",
        logging_steps=max(1, min(int(s["checkpoint_every"]), 10)),
        seed=seed,
        data_seed=seed,
        report_to="none",
        disable_tqdm=not progress,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        bf16=s["mixed_precision"] == "bf16",
        fp16=s["mixed_precision"] == "fp16",
        # Trainer takes mixed precision without a GPU only when told it runs on the CPU
        use_cpu=s["mixed_precision"] != "no" and not torch.cuda.is_available(),
        eval_strategy="steps" if evaluate else "no",
        eval_steps=int(s["checkpoint_every"]) if evaluate else None,
        **extra,
    )


def one_device(args):
    """``args`` never running ``nn.DataParallel``: a single process that sees several GPUs (a stage started without
    a launcher on a node) trains on the first one, at the batch the settings state; HF's Trainer would otherwise
    wrap the model in DataParallel and multiply the batch by the GPU count. Under torchrun / ``accelerate launch``
    (one process per device) nothing changes."""
    if args.n_gpu > 1 and args.parallel_mode.name == "NOT_DISTRIBUTED":
        log.warning("this process sees %d GPUs and was not launched one process per device: training on one of them "
                    "at batch %d (never DataParallel, which would make it %d); run the stage under torchrun for "
                    "all of them", args.n_gpu, args.per_device_train_batch_size,
                    args.per_device_train_batch_size * args.n_gpu)
        args._n_gpu = 1
    return args


def _step_logger():
    """A Trainer callback that logs every logging step through ``logging``: inside a papermill-run notebook the
    Trainer's own progress bar is a widget, so without it a DVC log would show nothing during training."""
    # transformers loads when training starts
    from transformers import TrainerCallback

    class StepLogger(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            figures = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in (logs or {}).items())
            log.info("step %d/%d: %s", state.global_step, state.max_steps, figures)

    return StepLogger()


def train_with_checkpoints(model, train_dataset, output_dir: str | Path, settings: Mapping[str, Any], *, seed: int,
                           data_collator=None, progress: bool = True, eval_dataset=None,
                           **extra_arguments) -> dict[str, Any]:
    """Train ``model`` in place on ``train_dataset``, resuming from the latest complete checkpoint in ``output_dir``.

    Returns ``history`` (Trainer's log history), ``resumed_from``, ``seconds`` (this call), ``steps`` (global, incl.
    resumed ones), ``examples_per_s`` (steps of this call x batch size / seconds; the last batch of an epoch may be smaller).
    ``eval_dataset``: scored at every checkpoint (its loss enters the history); ``extra_arguments``: further
    ``TrainingArguments``.
    """
    # transformers loads when training starts
    from transformers import Trainer

    if len(train_dataset) == 0:
        raise ValueError(f"{output_dir}: no training examples")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    remove_incomplete_checkpoints(output_dir)
    done = complete_checkpoints(output_dir)
    resume = done[-1] if done else None
    if resume is not None:
        log.info("resuming training from %s", resume)
    args = one_device(training_arguments(output_dir, settings, seed, progress, evaluate=eval_dataset is not None,
                                         **extra_arguments))
    precision = check_settings(settings)["mixed_precision"]
    fresh_accelerator_state(precision)
    trainer = Trainer(model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset,
                      data_collator=data_collator, callbacks=[_step_logger()])
    start_step = 0 if resume is None else checkpoint_step(resume)
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    seconds = time.perf_counter() - start
    steps = trainer.state.global_step
    examples = (steps - start_step) * args.per_device_train_batch_size * max(1, args.world_size)
    log.info("trained %d steps (%d new) in %.1f s: %.2f examples/s", steps, steps - start_step, seconds,
             examples / max(seconds, 1e-9))
    return {"history": list(trainer.state.log_history), "resumed_from": None if resume is None else str(resume),
            "seconds": round(seconds, 1), "steps": steps, "mixed_precision": precision,
            "examples_per_s": round(examples / max(seconds, 1e-9), 2)}
