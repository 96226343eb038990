"""Check that the machine can run the pipeline, and say what is missing in plain words.

Run by ``make install`` (so a broken set-up fails at install time, not twenty minutes into ``dvc repro``) and by hand
with ``python -m ecqg.tooling.doctor``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from importlib import metadata

from ecqg.core import cli
from ecqg.core.java import java_problem
from ecqg.runtime.models import bundled_encoder_path, load_spacy


def check() -> list[str]:
    """Return a list of problems (empty when everything needed is there)."""
    problems = []
    problem = java_problem()
    if problem is not None:
        problems.append(problem)
    try:
        bundled_encoder_path()
    except Exception as exc:  # report, don't crash: doctor lists every problem at once
        problems.append(str(exc))
    try:
        load_spacy()
    except Exception as exc:
        problems.append(str(exc))
    return problems


FAISS_BUILDS = ("faiss-cpu", "faiss-gpu")


def installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def machine() -> tuple[list[str], list[str]]:
    """What the node has for the GPU path, and its problems: torch's build, its GPUs and NCCL, the FAISS build that
    ``import faiss`` actually gives (and whether both builds are installed, which one import then shadows), disk and
    memory. Printed by ``--machine``; the problems fail it."""
    import torch  # torch: kept out of --help and the plain check (make install)

    report, problems = [], []
    cuda = torch.version.cuda
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    report.append(f"torch {torch.__version__} ({'CUDA ' + cuda if cuda else 'CPU build'}), {gpus} GPU(s) visible"
                  + (": " + ", ".join(torch.cuda.get_device_name(i) for i in range(gpus)) if gpus else ""))
    nccl = torch.distributed.is_available() and torch.distributed.is_nccl_available()
    report.append(f"NCCL {'available' if nccl else 'not available'} (gloo on the CPU)")
    builds = {name: installed(name) for name in FAISS_BUILDS}
    present = [f"{n} {v}" for n, v in builds.items() if v]
    try:
        import faiss  # optional: a FAISS that does not import is reported, not raised

        gpu_faiss = hasattr(faiss, "StandardGpuResources")
        report.append(f"FAISS imported: {faiss.__version__}, {'with' if gpu_faiss else 'without'} GPU support "
                      f"({faiss.get_num_gpus() if gpu_faiss else 0} GPU(s)); installed: {', '.join(present) or '?'}")
    except ImportError as exc:
        gpu_faiss = False
        problems.append(f"FAISS does not import ({exc}): make install")
    if all(builds.values()):
        problems.append("faiss-cpu and faiss-gpu are both installed and provide the same module: uninstall one "
                        "(make install FAISS=gpu removes faiss-cpu)")
    if gpus and not gpu_faiss:
        problems.append(f"{gpus} GPU(s) visible but FAISS has no GPU support: make install FAISS=gpu")
    if not gpus and shutil.which("nvidia-smi") and not cuda:
        problems.append("nvidia-smi is here but torch is a CPU build: install the CUDA build of torch 2.13.0")
    disk = shutil.disk_usage(".")
    report.append(f"disk free here: {disk.free / 2**30:.0f} GiB of {disk.total / 2**30:.0f} GiB")
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        report.append(f"memory: {memory:.0f} GiB, {os.cpu_count()} cores")
    except (ValueError, OSError, AttributeError):
        pass
    return report, problems


def main(argv: Sequence[str] = ()) -> int:
    parser = cli.parser("ecqg.tooling.doctor", __doc__, paragraphs=2)
    parser.add_argument("--machine", action="store_true",
                        help="also report torch's CUDA build, the GPUs, NCCL, the FAISS build imported, disk and "
                             "memory (python -m ecqg.tooling.cost gives a profile's needs)")
    args = parser.parse_args(argv)
    problems = check()
    if args.machine:
        report, more = machine()
        for line in report:
            print(f"ecqg doctor: {line}")
        problems += more
    for problem in problems:
        print(f"ecqg doctor: {problem}", file=sys.stderr)
    if not problems:
        print("ecqg doctor: java, bundled encoder and spaCy model found" + (", the GPU path set up as reported"
                                                                          if args.machine else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
