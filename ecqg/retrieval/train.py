"""DPR bi-encoder training: NLL over in-batch + BM25 hard negatives, gradient caching, multi-process, resumable.

What it does (Karpukhin et al. 2020, as used by the paper's baseline, UnCon-DPR and Mixed-DPR):

* **Loss.** A step takes ``batch_size`` DPR records (the *global* batch, over all processes). Its passages are the
  B positives (``positive_ctxs[0]``) followed by up to ``hard_negatives`` passages per record, sampled without
  replacement from ``hard_negative_ctxs`` with an RNG seeded by ``(seed, epoch, record index)``; a record with fewer
  hard negatives contributes fewer (counted per step in the history and logged once up front). Scores are ``Q @ P^T``
  over *all* passages of the global batch and the target of question i is its own positive.
* **Inputs** are tokenised once before the first step (:class:`ecqg.retrieval.tokens.TrainingTokens`: every
  question and every passage a batch can hold, each distinct text once, over the host's threads), and with
  ``tokens_cache`` kept as memory-mapped Arrow files that every process of the run and every later run on the set
  reads (the main process writes them). DataLoader workers (:mod:`ecqg.retrieval.loader`) build each step's padded
  tensors ahead of the loop, to the very tensors the tokenizer would have given, in pinned memory on a GPU; the step
  copies them without blocking. The losses and gradient norms stay on the device until a log step (``log_every``),
  a checkpoint, a validation or a callback reads them: no other host sync in a step. AdamW is the fused kernel on a
  GPU (torch's default elsewhere: the CPU runs stay bit-identical to earlier ones).
* **Data order** is a permutation seeded by ``(seed, epoch)``, cut into global batches; process r takes slice r of
  each global batch. So the order, the negatives and hence the optimisation do not depend on the number of processes.
* **Gradient caching** (GradCache, Gao et al. 2021), ``grad_cache_chunk_size``: (1) encode queries and passages in
  chunks without a graph, capturing the RNG state before each chunk; (2) compute the full-batch loss on those
  representations as leaves and backprop to d loss / d representation; (3) re-encode each chunk with a graph after
  restoring its RNG state (same dropout masks) and backprop the cached gradients. The parameter gradients equal those
  of one full-batch graph, with memory for one chunk. (Gradient accumulation is *not* a substitute: it does not add
  in-batch negatives.)
* **Multi-process** (HF Accelerate). Representations are all-gathered and the local slice is put back with its graph;
  every process computes the *global* mean loss, so its gradient with respect to its own parameters' contribution is
  exact, and the per-process parameter gradients are **summed**. The result equals a single process running the
  global batch. DDP's own per-backward hooks cannot model GradCache's many forward / backward passes per step (and
  average instead of summing), so all passes run under ``no_sync`` and the sum is done by
  :class:`~ecqg.retrieval.contrastive.GradientReducer`: DDP-style buckets launched as asynchronous all-reduces while
  the step's last backward pass still runs, in the same order on every process.
* **GradCache when needed**: ``grad_cache_chunk_size: auto`` decides at the start of a run, from the device's memory
  and the per-device batch at the set's longest texts (:mod:`ecqg.retrieval.train_memory`), whether the whole batch
  fits one graph; a CPU never chunks.
  Launch the script (or ``-m module``) that calls :func:`train_biencoder` once per process; nothing else changes
  (same config: the batch size is global, so the data order and the step are those of one process)::

      accelerate launch --multi_gpu --num_processes 8 train_script.py ...          # 8 GPUs, one machine
      torchrun --standalone --nproc_per_node 8 train_script.py ...                 # the same without accelerate
      ACCELERATE_USE_CPU=1 torchrun --standalone --nproc_per_node 2 train_script.py  # 2 CPU processes (gloo)

  The last form is what ``tests/test_train.py::test_two_processes_match_one`` runs: two processes reproduce the
  single-process loss and gradients. (Plain ``torchrun`` without ``ACCELERATE_USE_CPU=1`` on a machine without GPUs
  gives N independent single-process runs.)

  Checkpoints need a file system shared by all processes (multi-node). DeepSpeed / FSDP sharded optimisers are not
  supported (the optimizer state is saved by the main process only).
* **Checkpoints** every ``checkpoint_every`` steps under ``output_dir/checkpoints/checkpoint-<step>``: model
  (Retriever.save, safetensors), optimizer and scheduler (``torch.save``, read back with ``weights_only=True``), each
  process's RNG states, step / epoch / position in the epoch and the history. Written into ``.checkpoint-<step>.tmp``
  and renamed, ``state.json`` last; only a ``checkpoint-<digits>`` directory holding ``state.json`` counts. The last
  ``keep_checkpoints`` are kept. ``resume=True`` continues from the latest one exactly (same data order, consumed
  batches skipped, RNG restored), after checking the trajectory-relevant config and a fingerprint of the data.
* **Size:** one module over 400 lines because about 60 of them are this description of the method; the pieces live
  in :mod:`ecqg.retrieval.train_data`, :mod:`ecqg.retrieval.contrastive` and :mod:`ecqg.retrieval.validation`.
* **Validation** every ``eval_every`` steps and at the end, on held-out records (never the test set): DPR's "average
  rank" validation. The pool is every held-out record's first positive plus all its hard negatives (deduplicated);
  metrics: mean 1-based rank of the positive, top-1/5/20 accuracy within the pool, mean NLL over the pool.
* **Convergence** (``patience``, ``snapshot_steps``; :mod:`ecqg.retrieval.convergence`): validated snapshots at
  every epoch end and chosen steps, a patience rule over epochs, the best epoch end kept as the trained model.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ecqg.core.io import atomic_path, complete_checkpoints, remove_directory, write_json, write_jsonl
from ecqg.retrieval import convergence
from ecqg.retrieval import loader, train_memory
from ecqg.retrieval.contrastive import ContrastiveStep, EncoderModule, GradientReducer
from ecqg.retrieval.retriever import Retriever
from ecqg.core.train_config import AUTO, TrainConfig
from ecqg.retrieval.tokens import TrainingTokens, tokenize_threads
from ecqg.retrieval.train_data import check_records, data_fingerprint, epoch_batches
from ecqg.retrieval.validation import evaluate_biencoder
from ecqg.runtime.hf_training import fresh_accelerator_state, resolve_mixed_precision

log = logging.getLogger(__name__)

TIMING_KEYS = ("examples_per_s", "step_seconds")  # history fields that vary from run to run


def without_timings(history: Sequence[dict]) -> list[dict]:
    """The history as saved with a model (a DVC-tracked output): the same steps, losses and validation figures, but
    no wall-clock fields, so retraining to identical weights leaves the output identical and reruns nothing
    downstream. The timings stay in the run directory's history and the stage metrics."""
    return [{k: v for k, v in entry.items() if k not in TIMING_KEYS} for entry in history]

STATE_FILE = "state.json"
# Config fields that do not change the training trajectory, so they may differ when resuming.
_RESUME_FREE = {"checkpoint_every", "keep_checkpoints", "eval_every", "eval_batch_size", "log_every", "snapshot_steps",
                "loader_workers", "dist_timeout_minutes"}


# --------------------------------------------------------------------------------------------------------------------
# configuration


# TrainConfig (the settings and their rules) lives in ecqg.core.train_config, which params validation reads too.


# --------------------------------------------------------------------------------------------------------------------
# checkpoints


def rng_states() -> dict[str, Any]:
    """Every RNG a training step may touch, in types ``torch.load(weights_only=True)`` accepts."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "python": [version, list(internal), gauss],
            "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)]}


def set_rng_states(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))


def latest_checkpoint(directory: str | Path) -> Path | None:
    """The highest-step *complete* checkpoint: named ``checkpoint-<digits>`` and holding ``state.json``.

    Temporary ``.checkpoint-*.tmp`` directories (a save killed midway) never match.
    """
    found = complete_checkpoints(directory, STATE_FILE)
    return found[-1] if found else None


def prune_checkpoints(directory: Path, keep: int) -> None:
    """Keep the ``keep`` highest-step complete checkpoints."""
    for path in complete_checkpoints(directory, STATE_FILE)[:-keep]:
        remove_directory(path)


# --------------------------------------------------------------------------------------------------------------------
# the trainer


@dataclass
class _Progress:
    step: int = 0
    epoch: int = 0
    position: int = 0          # batches of the current epoch already consumed
    history: list[dict] = field(default_factory=list)
    stopped_by: str = "epochs"  # why the loop ended: "patience", "epochs" (the cap) or "max_steps"


def _param_groups(module: torch.nn.Module, weight_decay: float) -> list[dict]:
    """BERT practice: no weight decay on biases and LayerNorm weights."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if param.requires_grad:
            (no_decay if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_accelerator(config: TrainConfig):
    """The Accelerator training expects (also picks up `accelerate launch` / torchrun settings from the env)."""
    # accelerate is not on the torch+transformers-only GPU image (gpu_check skips training there)
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, DistributedDataParallelKwargs, InitProcessGroupKwargs

    precision = resolve_mixed_precision(config.mixed_precision)
    fresh_accelerator_state(precision)
    # split_batches: one scheduler step per optimiser step (our batch size is already global).
    # broadcast_buffers off: BERT's buffers are constant, and an in-place broadcast between the query and passage
    # forward passes would invalidate the saved position ids of the first graph.
    # The process group's timeout: how long a rank waits at a collective (torch's default, 10 minutes, is shorter
    # than a rank may need for a checkpoint or a validation at the paper's sizes).
    return Accelerator(mixed_precision=precision,
                       dataloader_config=DataLoaderConfiguration(split_batches=True),
                       kwargs_handlers=[DistributedDataParallelKwargs(broadcast_buffers=False),
                                        InitProcessGroupKwargs(timeout=timedelta(minutes=config.dist_timeout_minutes))])


class _Trainer:
    def __init__(self, bi: Retriever, train_records, val_records, config: TrainConfig, output_dir: Path,
                 accelerator, progress: bool, callback, validator=None, tokens_cache: Path | None = None):
        self.bi, self.train, self.val, self.cfg = bi, list(train_records), list(val_records or []), config
        self.out, self.acc, self.show_progress, self.callback = output_dir, accelerator, progress, callback
        self.validator, self.tokens_cache = validator, tokens_cache
        self.ckpt_dir = output_dir / "checkpoints"
        self.steps_per_epoch = len(epoch_batches(len(self.train), config.batch_size, config.seed, 0, config.drop_last))
        if self.steps_per_epoch == 0:
            raise ValueError(f"{len(self.train)} training records make no batch of {config.batch_size} "
                             "(lower batch_size or set drop_last=False)")
        if config.batch_size < accelerator.num_processes:
            raise ValueError(f"batch_size {config.batch_size} < {accelerator.num_processes} processes")
        full = config.epochs * self.steps_per_epoch
        self.total_steps = min(full, config.max_steps) if config.max_steps else full
        self.fingerprint = data_fingerprint(self.train)
        self.tokens: TrainingTokens | None = None    # built in _setup, once, before the first step

    # --- setup --------------------------------------------------------------------------------------------------
    def _setup(self, resume: bool) -> _Progress:
        # accelerate and transformers load when training is set up
        from accelerate.utils import set_seed
        from transformers import get_linear_schedule_with_warmup

        # Every rank its own dropout stream (seed + rank; rank 0 draws what one process draws): the data order and the
        # hard negatives come from RNGs of their own, seeded by the config, so they stay those of one process.
        set_seed(self.cfg.seed, device_specific=True)
        start = time.perf_counter()
        if self.tokens_cache is None:
            self.tokens = TrainingTokens(self.bi, self.train, tokenize_threads())
        else:       # every rank tokenises its share and writes it; then all read the whole cache (no rank idles)
            self.tokens = TrainingTokens.cached(self.bi, self.train, self.tokens_cache, tokenize_threads(1),
                                                rank=self.acc.process_index, world=self.acc.num_processes,
                                                barrier=self.acc.wait_for_everyone)
        log.info("training set tokenised once: %s in %.1f s", self.tokens.describe(), time.perf_counter() - start)
        self.chunk_size = self._grad_cache_chunk()
        checkpoint = latest_checkpoint(self.ckpt_dir) if resume else None
        state = self._read_state(checkpoint) if checkpoint else None
        if checkpoint:
            self._load_weights(checkpoint)
        self.bi.train()
        module = EncoderModule(self.bi)
        optimizer = torch.optim.AdamW(_param_groups(module, self.cfg.weight_decay), lr=self.cfg.lr,
                                      eps=self.cfg.adam_eps, fused=self.acc.device.type == "cuda")
        warmup = self.cfg.warmup_steps if self.cfg.warmup_steps is not None else \
            int(self.cfg.warmup_ratio * self.total_steps)
        scheduler = get_linear_schedule_with_warmup(optimizer, warmup, self.total_steps)
        self.module, self.optimizer, self.scheduler = self.acc.prepare(module, optimizer, scheduler)
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        self.reducer = GradientReducer(self.params, self.acc)
        self.stepper = ContrastiveStep(self.bi, self.acc, self.module, self.chunk_size, self.cfg.length_bucket_size,
                                       self.reducer)
        if checkpoint:
            self._load_optimisation_state(checkpoint)
            log.info("resumed from %s (step %d)", checkpoint, state["step"])
            return _Progress(state["step"], state["epoch"], state["position"], state["history"])
        return _Progress()

    def _grad_cache_chunk(self) -> int | None:
        """``grad_cache_chunk_size``, with ``auto`` decided from the device's memory
        (:mod:`ecqg.retrieval.train_memory`) for this process's share of a batch, at the set's longest texts."""
        if self.cfg.grad_cache_chunk_size != AUTO:
            return self.cfg.grad_cache_chunk_size
        queries = -(-self.cfg.batch_size // self.acc.num_processes)
        shape = train_memory.Shape(queries, queries * (1 + self.cfg.hard_negatives),
                                   int(self.tokens.questions.lengths(self.tokens.question_rows).max()),
                                   int(self.tokens.passages.lengths(np.arange(len(self.tokens.passages))).max()))
        chunk, why = train_memory.resolve_chunk(self.bi, shape, train_memory.device_memory(self.acc.device))
        log.info("grad_cache_chunk_size auto: %s", why)
        return chunk

    def _read_state(self, checkpoint: Path) -> dict:
        state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
        mine, theirs = dataclasses.asdict(self.cfg), state["config"]
        changed = sorted(k for k in set(mine) | set(theirs) if k not in _RESUME_FREE and mine.get(k) != theirs.get(k))
        if changed:
            raise ValueError(f"cannot resume from {checkpoint}: config differs in {changed}; "
                             "use a new output_dir or resume=False")
        if state["data_fingerprint"] != self.fingerprint:
            raise ValueError(f"cannot resume from {checkpoint}: the training records differ from that run's")
        return state

    def _load_weights(self, checkpoint: Path) -> None:
        self._load_weights_from(checkpoint / "model")

    def _load_weights_from(self, model_dir: Path) -> None:
        saved = type(self.bi).load(model_dir)
        self.bi.load_state_dict(saved.state_dict())

    def _load_optimisation_state(self, checkpoint: Path) -> None:
        device = self.acc.device
        self.optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device, weights_only=True))
        self.scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=True))
        rng_file = checkpoint / f"rng-{self.acc.process_index}.pt"
        if rng_file.is_file():
            set_rng_states(torch.load(rng_file, weights_only=True))
        else:
            log.warning("%s missing (different number of processes?): dropout RNG not restored", rng_file.name)

    # --- checkpoints --------------------------------------------------------------------------------------------
    def _save_checkpoint(self, prog: _Progress) -> None:
        """All processes write their RNG file into one temp dir; the main process adds the rest and renames it."""
        name = f"checkpoint-{prog.step:08d}"
        tmp = self.ckpt_dir / f".{name}.tmp"
        if self.acc.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        self.acc.wait_for_everyone()
        torch.save(rng_states(), tmp / f"rng-{self.acc.process_index}.pt")
        self.acc.wait_for_everyone()
        if self.acc.is_main_process:
            self.bi.save(tmp / "model")
            torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
            torch.save(self.scheduler.state_dict(), tmp / "scheduler.pt")
            state = {"step": prog.step, "epoch": prog.epoch, "position": prog.position, "history": prog.history,
                     "config": dataclasses.asdict(self.cfg), "data_fingerprint": self.fingerprint,
                     "num_processes": self.acc.num_processes}
            write_json(tmp / STATE_FILE, state)       # last: its presence marks the checkpoint complete
            final = self.ckpt_dir / name
            if final.exists():
                remove_directory(final)
            os.replace(tmp, final)
            prune_checkpoints(self.ckpt_dir, self.cfg.keep_checkpoints)
            write_jsonl(self.out / "history.jsonl", prog.history)
        self.acc.wait_for_everyone()

    # --- loop ---------------------------------------------------------------------------------------------------
    def _steps(self, prog: _Progress) -> Iterator[tuple[int, int, loader.StepInputs]]:
        """(epoch, position, this process's inputs) of every step from where ``prog`` stands; consumed batches are
        skipped, not replayed. Built by DataLoader workers (:mod:`ecqg.retrieval.loader`) from the seeded order."""
        plan = loader.StepPlan(self.tokens, batch_size=self.cfg.batch_size, seed=self.cfg.seed,
                               drop_last=self.cfg.drop_last, hard_negatives=self.cfg.hard_negatives,
                               rank=self.acc.process_index, world=self.acc.num_processes,
                               chunk_size=self.chunk_size, bucket_size=self.cfg.length_bucket_size,
                               pad_id=self.bi.tokenizer.pad_token_id or 0, side=self.bi.tokenizer.padding_side)
        workers = self.cfg.loader_workers
        workers = loader.default_workers(self.acc.device) if workers is None else workers
        return loader.iterate_steps(plan, prog.epoch, prog.position, self.total_steps - prog.step,
                                    self.steps_per_epoch, self.acc.device, workers)

    def _optimise(self, inputs: loader.StepInputs) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One optimiser step; the loss and gradient norm stay on the device (read at the log steps)."""
        loss = self.stepper.backward_inputs(inputs)
        self.reducer.finish()
        norm = None
        if self.cfg.max_grad_norm:
            norm = self.acc.clip_grad_norm_(self.params, self.cfg.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss, norm

    def _settle(self) -> None:
        """Read the pending steps' losses and gradient norms back from the device: one host sync for all of them."""
        if not self._pending:
            return
        losses = torch.stack([e["loss"] for e in self._pending]).tolist()
        norms = [e["grad_norm"] for e in self._pending if isinstance(e["grad_norm"], torch.Tensor)]
        norms = iter(torch.stack(norms).tolist() if norms else [])
        for entry, loss in zip(self._pending, losses):
            entry["loss"] = loss
            if isinstance(entry["grad_norm"], torch.Tensor):
                entry["grad_norm"] = next(norms)
        self._pending = []

    def _validate(self, step: int) -> dict[str, float]:
        """The caller's ``validate(model, step)`` when given (on the main process; {} elsewhere), else DPR's pool
        validation on the held-out records, its encoding split over every process and run in the training precision
        (``accelerator.autocast``): no rank waits while one validates. Called by every process."""
        if self.validator is not None:
            return self.validator(self.bi, step) if self.acc.is_main_process else {}
        if not self.val:
            return {}
        with self.acc.autocast():
            return evaluate_biencoder(self.bi, self.val, self.cfg.eval_batch_size, self.acc.device,
                                      accelerator=self.acc if self.acc.num_processes > 1 else None)

    # --- convergence (ecqg.retrieval.convergence) -------------------------------------------------------------------
    def _is_snapshot(self, step: int, epoch_end: bool) -> bool:
        return step in self.cfg.snapshot_steps or (epoch_end and self.cfg.patience is not None)

    def _snapshot(self, prog: _Progress, epoch_end: bool) -> dict:
        """Validate a snapshot; an epoch end that beats every earlier one is saved as ``<output>/best/``."""
        out: dict = {}
        metrics = self._validate(prog.step)       # every process takes part; the main one decides
        if self.acc.is_main_process:
            metric = self.cfg.select_metric
            if self.cfg.patience is not None and metric not in metrics:
                raise ValueError(f"the snapshot validation gave {sorted(metrics)}, not select_metric {metric!r}")
            out = {convergence.SNAPSHOT: True, **({convergence.EPOCH_END: True} if epoch_end else {}), **metrics}
            if epoch_end and self.cfg.patience is not None and \
                    convergence.improves(prog.history, metrics[metric], metric):
                with atomic_path(self.out / "best") as tmp:
                    self.bi.save(tmp / "model")
                out[convergence.BEST] = True
        self.acc.wait_for_everyone()
        return out

    def _converged(self, prog: _Progress) -> bool:
        """Patience is over (decided by the main process, which holds the validation figures). Asked only at an epoch
        boundary: patience counts epoch ends, so nothing else can change the answer (no collective between)."""
        if self.cfg.patience is None or prog.position != 0:
            return False
        stop = self.acc.is_main_process and convergence.should_stop(prog.history, self.cfg.select_metric,
                                                                    self.cfg.patience)
        if self.acc.num_processes > 1:
            stop = bool(self.acc.reduce(torch.tensor(int(stop), device=self.acc.device), "sum").item())
        return stop

    def run(self, resume: bool) -> list[dict]:
        prog = self._setup(resume)
        self._log_hard_negative_shortfall()
        bar = tqdm(total=self.total_steps, initial=prog.step, desc="train DPR", dynamic_ncols=True,
                   disable=not (self.show_progress and self.acc.is_main_process))
        steps = self._steps(prog)
        self._pending: list[dict] = []        # history entries whose loss is still a device tensor
        window = (prog.step, time.perf_counter())
        try:
            while prog.step < self.total_steps and not self._converged(prog):
                epoch, pos, inputs = next(steps)
                entry = self._train_step(epoch, inputs, prog)
                self._pending.append(entry)
                epoch_end = pos + 1 == self.steps_per_epoch
                prog.epoch, prog.position = (epoch + 1, 0) if epoch_end else (epoch, pos + 1)
                snapshot = self._is_snapshot(prog.step, epoch_end)
                checkpoint = (self.cfg.checkpoint_every and prog.step % self.cfg.checkpoint_every == 0) or \
                    (snapshot and epoch_end)    # a resumed run then decides patience on the same history
                logged = prog.step % self.cfg.log_every == 0
                if snapshot or checkpoint or logged or self.callback is not None or prog.step == self.total_steps:
                    self._settle()              # the host sync: only where something reads the figures
                if snapshot:
                    entry.update(self._snapshot(prog, epoch_end))
                elif self.cfg.eval_every and prog.step % self.cfg.eval_every == 0:
                    entry.update(self._validate(prog.step))
                prog.history.append(entry)
                if checkpoint:
                    self._save_checkpoint(prog)
                bar.update(1)
                if logged:
                    seconds = time.perf_counter() - window[1]
                    rate = (prog.step - window[0]) * self.cfg.batch_size / max(seconds, 1e-9)
                    window = (prog.step, time.perf_counter())
                    bar.set_postfix(loss=f"{entry['loss']:.4f}", ex_s=f"{rate:.1f}")
                    log.info("step %d/%d loss %.4f lr %.3g %.1f examples/s (since the last log line)", prog.step,
                             self.total_steps, entry["loss"], entry["lr"], rate)
                if self.callback is not None:
                    self.callback(entry)
        finally:
            steps.close()
            self.reducer.close()
        self._settle()
        bar.close()
        epochs_end = self.cfg.epochs * self.steps_per_epoch
        prog.stopped_by = ("patience" if prog.step < self.total_steps else
                           "max_steps" if self.cfg.max_steps is not None and self.cfg.max_steps < epochs_end
                           else "epochs")
        return self._finish(prog)

    def _train_step(self, epoch: int, inputs: loader.StepInputs, prog: _Progress) -> dict:
        """One step; its entry's ``loss`` / ``grad_norm`` are device tensors until :meth:`_settle`. On a GPU the
        step's seconds are the host's (nothing waits for the device between log steps); the log line's rate is over
        the steps since the last one, which ends in a sync."""
        start = time.perf_counter()
        lr = self.scheduler.get_last_lr()[0]
        loss, norm = self._optimise(inputs)
        seconds = time.perf_counter() - start
        prog.step += 1
        return {"step": prog.step, "epoch": epoch, "loss": loss, "lr": lr, "grad_norm": norm,
                "examples_per_s": inputs.examples / seconds, "step_seconds": seconds,
                "missing_hard_negatives": inputs.missing_hard_negatives}

    def _finish(self, prog: _Progress) -> list[dict]:
        if prog.history and not any(k.startswith("val_") for k in prog.history[-1]):
            prog.history[-1].update(self._validate(prog.step))
        if prog.history:           # why the run ended: "patience", "epochs" (the cap) or "max_steps"
            prog.history[-1]["stopped_by"] = prog.stopped_by
        if self.cfg.patience is not None and (self.out / "best" / "model").is_dir():
            chosen = convergence.selected_step(prog.history, self.cfg.select_metric)
            log.info("keeping the best epoch end, step %s of %d (patience %d on %s)", chosen, prog.step,
                     self.cfg.patience, self.cfg.select_metric)
            self._load_weights_from(self.out / "best" / "model")
        if self.acc.is_main_process:
            self.bi.save(self.out / "model")
            write_jsonl(self.out / "history.jsonl", prog.history)
            final = prog.history[-1] if prog.history else {}
            log.info("trained %d steps; final %s", prog.step,
                     {k: v for k, v in final.items() if k.startswith("val_")})
        self.acc.wait_for_everyone()
        return prog.history

    def _log_hard_negative_shortfall(self) -> None:
        """Counted once up front: which records cannot supply the configured number of hard negatives."""
        short = sum(len(r.get("hard_negative_ctxs") or []) < self.cfg.hard_negatives for r in self.train)
        if short:
            log.warning("%d of %d training records have fewer than %d hard negatives; their batches carry fewer",
                        short, len(self.train), self.cfg.hard_negatives)


def train_biencoder(model: Retriever, train_records: Sequence[dict], val_records: Sequence[dict] | None,
                    config: TrainConfig, output_dir: str | Path, resume: bool = True, progress: bool = True,
                    accelerator=None, callback: Callable[[dict], None] | None = None,
                    validate: Callable[[Retriever, int], dict] | None = None,
                    tokens_cache: str | Path | None = None) -> list[dict]:
    """Train ``model`` in place; save it to ``output_dir/model``, the history to ``output_dir/history.jsonl``.

    ``resume``: continue from the latest complete checkpoint in ``output_dir/checkpoints`` (if any).
    ``callback(entry)`` runs after every step (after its checkpoint), e.g. to stop early by raising.
    ``validate(model, step) -> {val_...: ...}`` replaces the held-out pool validation (``val_records`` then unused),
    on the main process: at ``eval_every``, the snapshots (``snapshot_steps`` and, with ``patience``, every epoch end;
    :mod:`ecqg.retrieval.convergence`) and the end.
    ``tokens_cache``: a directory where the training set's tokens are kept (Arrow, memory-mapped;
    :meth:`~ecqg.retrieval.tokens.TrainingTokens.cached`), shared by the processes of this run and by later runs on
    the same set; None tokenises in memory.
    Returns the history: one dict per step (step, epoch, loss, lr, grad_norm, examples_per_s, ...), with
    ``val_*`` metrics on validation steps.
    """
    check_records(train_records, "train records")
    if val_records:
        check_records(val_records, "validation records")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    accelerator = accelerator or make_accelerator(config)
    trainer = _Trainer(model, train_records, val_records, config, output_dir, accelerator, progress, callback,
                       validate, None if tokens_cache is None else Path(tokens_cache))
    return trainer.run(resume)
