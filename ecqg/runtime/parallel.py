"""Split a heavy step over processes that torchrun starts: corpus encoding, question sampling, the reader, and DPR
training (every process trains on its share of each global batch, in-batch negatives gathered across them).

Why: on a machine with 8 GPUs each of these steps (21M passages encoded a dozen times, a million questions sampled
and read) runs 8 times faster only if its work is split; training already runs under ``torchrun`` through
Accelerate, so these steps use the same launcher rather than a job runner of their own.

How: with ``processes: N`` above 1 in params.yaml (``auto``: one per visible GPU, 1 on a CPU; the paper profiles'
setting), the step saves the model it holds and a job description into a
fresh directory, runs ``torchrun --standalone --nproc_per_node N -m ecqg.runtime.parallel <job dir>`` and waits, relaying
the processes' output. Each process learns its rank from Accelerate (``PartialState``), takes the GPU of its local
rank (:mod:`ecqg.core.device`), and does one contiguous block of whole *units* — a sampling batch, a reader chunk, an
encoding chunk — so every batch it forms is one that a single process would form; it writes its part, and the step
merges the parts in rank order. The merged output is therefore the single process's, bit for bit on one device kind
(``tests/test_parallel.py`` runs two CPU processes against one; on a CPU also at one thread count, since a matmul
splits its sums by threads: torchrun gives each process one unless ``OMP_NUM_THREADS`` says otherwise). A process that fails fails the step, naming the
task and showing its output; parts of an incomplete set are never merged.

Several machines: ``launcher_args`` replaces ``--standalone`` (e.g. ``--nnodes 2 --rdzv-backend c10d
--rdzv-endpoint host:29500``); the job directory then has to be on a filesystem every machine sees, and the same
command has to be started on the other machines (not tested here: one machine is what this repository could try).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ecqg.core import cli, device, paths
from ecqg.core.io import atomic_path, write_json
from ecqg.core.logs import setup_logging

log = logging.getLogger(__name__)

JOB_FILE = "job.json"
MODEL_DIR = "model"
# task -> "module:function" of the worker, imported in the worker process only. A worker takes
# ``(job, rank, world, job_dir)`` and returns its part (JSON); ``job`` is what the step wrote.
WORKERS = {
    "encode": "ecqg.retrieval.dense:encode_part",
    "generate": "ecqg.qg.sampling:generate_part",
    "read": "ecqg.filtering.reader:predict_part",
    "train": "ecqg.stages.dpr_training:train_part",        # a training stage: every process trains, gradients summed
}


AUTO = "auto"       # processes: one per GPU the device policy may use


def processes(setting: int | str = 1) -> int:
    """The ``processes`` setting of params.yaml as a count (1: the step runs in the calling process); ``auto``:
    :func:`gpus`."""
    return gpus() if setting == AUTO else int(setting)


def gpus() -> int:
    """``processes: auto`` at run time: the CUDA devices visible (``CUDA_VISIBLE_DEVICES``) under ``device: auto`` or
    ``cuda``; 1 on a CPU, under ``device: cpu`` (or ``ECQG_DEVICE=cpu``), or with one named GPU (``cuda:N``)."""
    setting = device.setting_in_force()
    if setting == "cpu" or setting.startswith("cuda:"):
        return 1
    import torch  # torch: kept out of the launcher's import (a CPU step never needs it to ask)

    return max(1, torch.cuda.device_count()) if torch.cuda.is_available() else 1


def block(total: int, unit: int, rank: int, world: int) -> tuple[int, int]:
    """``[start, end)`` of rank ``rank`` of ``world``: contiguous, made of whole units of ``unit`` items (the last
    unit may be short), unit counts differing by at most one. A rank may get nothing when there are fewer units
    than processes."""
    if unit < 1 or world < 1 or not 0 <= rank < world or total < 0:
        raise ValueError(f"block({total}, unit={unit}, rank={rank}, world={world}): need unit, world >= 1 and "
                         "0 <= rank < world")
    units = -(-total // unit)
    return (min(total, rank * units // world * unit), min(total, (rank + 1) * units // world * unit))


def part_file(job_dir: Path, rank: int) -> Path:
    return Path(job_dir) / f"part-{rank:05d}.json"


@contextmanager
def job_directory(task: str) -> Iterator[Path]:
    """A fresh directory for one job under ``outputs/parallel/`` (removed afterwards, whatever happened)."""
    root = paths.OUTPUTS / "parallel"
    root.mkdir(parents=True, exist_ok=True)
    job_dir = Path(tempfile.mkdtemp(prefix=f"{task}-", dir=root)).resolve()
    try:
        yield job_dir
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)


def launch_command(job_dir: Path, n: int, launcher_args: list[str] | None = None) -> list[str]:
    """The torchrun command that starts ``n`` workers on ``job_dir`` (``launcher_args`` replace ``--standalone``)."""
    where = list(launcher_args) if launcher_args else ["--standalone"]
    return [sys.executable, "-m", "torch.distributed.run", *where, "--nproc_per_node", str(n),
            "-m", "ecqg.runtime.parallel", str(job_dir)]


def run(task: str, job: Mapping[str, Any], job_dir: Path, processes_setting: int | str,
        launcher_args: Sequence[str] | None = None, progress: bool = True) -> list[Any]:
    """Run ``task`` on ``job`` in ``processes`` workers (``processes_setting``: params.yaml's, :func:`processes`;
    ``launcher_args``: params.yaml's, :func:`launch_command`); returns their parts in rank order.

    ``job_dir`` comes from :func:`job_directory` and may already hold what the job names (the saved model)."""
    if task not in WORKERS:
        raise ValueError(f"unknown parallel task {task!r}; known: {sorted(WORKERS)}")
    n = processes(processes_setting)
    setting = device.setting_in_force()
    if setting.startswith("cuda:"):
        raise ValueError(f"processes is {n} but device is {setting!r}: every process would use that one GPU; set "
                         "device: auto (each process then takes the GPU of its local rank)")
    write_json(job_dir / JOB_FILE, {"task": task, "device": setting, "progress": progress, **job})
    command = launch_command(job_dir, n, launcher_args)
    log.info("%s: %d processes: %s", task, n, " ".join(command))
    _run_relaying(command, task, n, cpu=device.resolve().type == "cpu")
    missing = [rank for rank in range(n) if not part_file(job_dir, rank).is_file()]
    if missing:
        raise RuntimeError(f"{task}: the launcher exited cleanly but rank(s) {missing} wrote no part in {job_dir}")
    return [json.loads(part_file(job_dir, rank).read_text(encoding="utf-8")) for rank in range(n)]


def _run_relaying(command: list[str], task: str, n: int, cpu: bool = False) -> None:
    """Run the launcher, printing its output as it comes (a notebook shows it; a DVC log too); fail with the tail.
    ``cpu``: the processes talk over gloo on the CPU (Accelerate's ``ACCELERATE_USE_CPU``), not NCCL."""
    # a progress bar refreshes 10 times a second; relayed into a notebook over hours that is a flood: every 30 s
    env = {"TQDM_MININTERVAL": "30", **os.environ, "PYTHONUNBUFFERED": "1", **({"ACCELERATE_USE_CPU": "1"} if cpu
                                                                              else {})}
    tail: deque[str] = deque(maxlen=60)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        for line in proc.stdout:
            tail.append(line.rstrip())
            print(line, end="", flush=True)
    if proc.returncode != 0:
        last = "\n".join(tail)
        raise RuntimeError(f"{task}: torchrun with {n} processes exited with code {proc.returncode}; its last "
                           f"output:\n{last}")


def worker(job_dir: str | Path) -> int:
    """One process of a job: its rank from Accelerate, the device of its local rank, its block, its part file."""
    from accelerate import PartialState  # accelerate, torch: only in a worker process

    job_dir = Path(job_dir)
    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
    device.configure(job["device"])
    state = PartialState(cpu=device.resolve().type == "cpu")    # cpu: gloo between CPU processes
    rank, world = state.process_index, state.num_processes
    part = _worker_function(job["task"])(job, rank, world, job_dir)
    with atomic_path(part_file(job_dir, rank)) as tmp:
        tmp.write_text(json.dumps(part), encoding="utf-8")
    state.destroy_process_group()
    return 0


def _worker_function(task: str) -> Callable:
    module, name = WORKERS[task].split(":")
    return getattr(importlib.import_module(module), name)


def main(argv: Sequence[str] | None = None) -> int:
    """The worker's entry; torchrun's ``record`` puts a failing rank's traceback into its closing summary, the part
    of the output that :func:`run` shows."""
    parser = cli.parser("ecqg.runtime.parallel", __doc__, usage="torchrun ... -m ecqg.runtime.parallel JOB_DIR")
    parser.add_argument("job_dir", help="the job directory a step wrote (its job description and model)")
    job_dir = parser.parse_args(argv).job_dir
    # torch: kept out of --help
    from torch.distributed.elastic.multiprocessing.errors import record

    setup_logging()
    return record(worker)(job_dir)


if __name__ == "__main__":
    sys.exit(main())
