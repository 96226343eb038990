"""The install files say one thing: FAISS is the CPU or the GPU build, chosen by make or by one line of
environment.yml, and a conda user runs make in the conda environment."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def _requirements(path: Path, seen: set[Path] | None = None) -> set[str]:
    """Package names a requirements file asks for, following its -r includes."""
    names, seen = set(), seen or set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            names |= _requirements(path.parent / line[3:].strip(), seen)
        elif line and not line.startswith("-"):
            names.add(re.split(r"[=<>\[ ]", line)[0].lower())
    return names


def _conda_pip(env: dict, swap: bool) -> set[str]:
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    names = set()
    for entry in pip:
        if entry.startswith("-r "):
            name = entry[3:].strip()
            names |= _requirements(REPO / (name.replace("faiss-cpu", "faiss-gpu") if swap else name))
    return names


def test_the_environments_for_cpu_and_for_gpu_each_install_one_faiss():
    cpu_env, gpu_env = (yaml.safe_load((REPO / name).read_text(encoding="utf-8"))
                        for name in ("environment.yml", "environment-gpu.yml"))
    cpu, gpu = _conda_pip(cpu_env, swap=False), _conda_pip(gpu_env, swap=False)
    assert "faiss-cpu" in cpu and "faiss-gpu" not in cpu
    assert "faiss-gpu" in gpu and "faiss-cpu" not in gpu and cpu - {"faiss-cpu"} == gpu - {"faiss-gpu"}
    gpu_pip = next(d["pip"] for d in gpu_env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert any(e.startswith("--extra-index-url https://download.pytorch.org/whl/cu") for e in gpu_pip)
    assert not any(n.startswith("faiss") for n in _requirements(REPO / "requirements/base.txt"))


def _make(*args: str, **env: str) -> str:
    done = subprocess.run(["make", "-n", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **env})
    return done.stdout + done.stderr


def test_make_installs_the_faiss_build_asked_for_and_uses_an_active_conda_env():
    gpu, cpu = _make("install", "FAISS=gpu", "-B"), _make("install", "FAISS=cpu", "-B")
    assert "requirements/faiss-gpu.txt" in gpu and "uninstall --quiet --yes faiss-cpu" in gpu     # never both
    assert "requirements/faiss-cpu.txt" in cpu and "uninstall --quiet --yes faiss-gpu" in cpu
    conda = _make("install", "CONDA=1", "-B", CONDA_PREFIX="/opt/conda/envs/ecqg")
    assert "/opt/conda/envs/ecqg/bin/python -m pip install" in conda and "-m venv" not in conda.split("||")[0]
    assert "needs an active conda environment" in _make("install", "CONDA=1", CONDA_PREFIX="")


def test_the_doctor_reports_the_gpu_path_and_both_faiss_builds(monkeypatch, capsys):
    from ecqg.tooling import doctor

    report, problems = doctor.machine()
    text = "\n".join(report)
    assert "torch 2.13.0" in text and "GPU(s) visible" in text and "FAISS imported:" in text and "NCCL" in text
    assert "disk free" in text and not problems
    monkeypatch.setattr(doctor, "installed", lambda name: "1.15.1")          # faiss-cpu and faiss-gpu both there
    _, problems = doctor.machine()
    assert any("both installed" in p for p in problems)
    assert doctor.main(["--machine"]) == 1 and "both installed" in capsys.readouterr().err


def test_the_slurm_example_runs_make_repro_bare_on_one_task():
    """Stages start their own torchrun processes, so the job is one task running `make repro` unwrapped; a requeued
    job resumes (DVC and the checkpoints), and the docs point at the file."""
    script = REPO / "slurm" / "paper_one_node.sbatch"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text(encoding="utf-8")
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(\S+))?", text, flags=re.M))
    assert directives["nodes"] == "1" and directives["ntasks"] == "1" and "requeue" in directives
    commands = [line.split("#")[0].strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert commands[-1] == "make repro", "make repro must run bare, last"
    assert not any(w in c for c in commands for w in ("srun", "torchrun", "accelerate launch"))
    assert "python -m ecqg.tooling.doctor --machine" in commands and "python -m ecqg.core.config inputs" in commands
    assert "slurm/paper_one_node.sbatch" in (REPO / "docs" / "paper_profile.md").read_text(encoding="utf-8")


def test_the_collective_timeout_is_a_setting_every_trainer_gets():
    from ecqg.core import config, settings

    def train_config(params, phase="finetune"):     # what stage 05 gives the trainer (stages.dpr_training)
        s = settings.of(params)
        return getattr(s.dpr, phase).train_config(s.seed, s.collective_timeout_minutes)

    params = config.load(REPO / "params.yaml")
    assert params["collective_timeout_minutes"] == 60 and train_config(params).dist_timeout_minutes == 60
    params["collective_timeout_minutes"] = 90
    assert train_config(params, "pretrain").dist_timeout_minutes == 90
    params["collective_timeout_minutes"] = 0
    with pytest.raises(config.ConfigError, match="collective_timeout_minutes"):
        config.validate(params)
