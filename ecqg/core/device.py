"""The one device policy: where every step that runs a model puts it, and which autocast it runs under.

Why one place: the paper profile runs on GPUs, and a step that forgets ``.to(device)`` does not fail, it runs on the
host at a fraction of the speed (measured on an H100 machine: bert-base encoding 14.9 passages/s on the host's 16
cores against 2,011 on the GPU). So no step picks a device itself: :func:`ecqg.runtime.models.inference`, the context every
inference loop runs in, calls :func:`place`, and ``tests/test_device_policy.py`` fails when a model runs outside it.

The setting is ``device`` in ``params.yaml``: ``auto`` (CUDA when a GPU is visible, else the CPU; under ``accelerate
launch`` / ``torchrun`` each process takes the GPU of its ``LOCAL_RANK``), ``cpu``, ``cuda`` or ``cuda:N``. A stage
applies it with :func:`configure` (``ecqg.core.stage_record.timed_stage`` and ``ecqg.tooling.notebook.load_params``
do); the environment variable ``ECQG_DEVICE`` overrides it for one run without touching params (and without rerunning
DVC stages).

Autocast (inference) per device: ``auto`` -> bfloat16 on a GPU that has it, else float16; on a CPU bfloat16 only
where it is native (AVX512-BF16 / AMX), else none: emulated bf16 is several times slower than float32.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import sys
from typing import Any, Mapping

log = logging.getLogger(__name__)

ENV_VAR = "ECQG_DEVICE"
AUTOCAST_VALUES = (None, "auto", "bfloat16", "float16")
_SETTING = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_configured = "auto"


# Training precision settings (``mixed_precision`` in params; ``ecqg.runtime.hf_training`` resolves ``auto`` with
# :func:`native_bf16`): here, beside the device policy, so params validation reads them without importing training.
MIXED_PRECISION = ("no", "bf16", "fp16", "auto")


def is_valid_setting(value: Any) -> bool:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (what params' ``device`` and ``ECQG_DEVICE`` accept)."""
    return isinstance(value, str) and bool(_SETTING.match(value))


def configure(params_or_setting: Mapping | str) -> str:
    """Make ``params['device']`` (or a setting string) the policy of this process; returns the setting in force
    (``ECQG_DEVICE`` wins over params)."""
    global _configured
    setting = params_or_setting if isinstance(params_or_setting, str) else params_or_setting.get("device", "auto")
    if not is_valid_setting(setting):
        raise ValueError(f"device is {setting!r}; expected auto, cpu, cuda or cuda:N")
    _configured = setting
    return setting_in_force()


def setting_in_force() -> str:
    """The setting that :func:`resolve` uses: ``ECQG_DEVICE`` when set, else the configured one (default ``auto``)."""
    env = os.environ.get(ENV_VAR)
    if env:
        if not is_valid_setting(env):
            raise ValueError(f"{ENV_VAR}={env!r}; expected auto, cpu, cuda or cuda:N")
        return env
    return _configured


def resolve(setting: str | None = None):
    """The ``torch.device`` a model runs on under ``setting`` (default: the setting in force)."""
    import torch  # torch: kept out of the core's import (params validation asks the policy without it)

    setting = setting or setting_in_force()
    if setting == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    if setting.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device is {setting!r} but no CUDA GPU is visible here; set device: auto (or cpu) in "
                           f"params.yaml, or {ENV_VAR}=cpu for one run")
    return torch.device(setting)


def place(model, setting: str | None = None):
    """Move ``model`` to the policy's device (a no-op when it is there already); returns that device."""
    device = resolve(setting)
    current = next(model.parameters()).device
    if current != device:
        log.info("device policy: %s from %s to %s", type(model).__name__, current, device)
        model.to(device)
    return device


def native_bf16(device_type: str = "cpu") -> bool:
    """Whether bfloat16 runs in hardware on this device: a CUDA GPU with bf16, or a CPU with AVX512-BF16 or AMX.
    Elsewhere torch emulates bf16, and autocast is several times SLOWER than float32 (measured on a 2-core
    AVX2-only EPYC: encoding 5.7 vs 41 passages/s, bench/bench_encode.py)."""
    import torch  # torch: kept out of the core's import (params validation asks the policy without it)

    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host() -> dict:
    """What a stage ran on, for its metrics: a run resumed over several sessions may land on machines of different
    CPU kinds, and with ``auto`` precision a stage's numbers depend on whether bf16 was native there.

    A stage process that never imported torch (BM25, TF-IDF, the hybrids, the notebook runner: its kernel is another
    process) on a machine without an NVIDIA driver reads the CPU's flags instead of importing torch to ask: that
    import cost 1.5-2 s at the end of every such stage (measured on 2 cores), the same answer."""
    if "torch" not in sys.modules and not _nvidia_driver():
        return {"cpu": cpu_name(), "cores": os.cpu_count(), "cpu_native_bf16": _cpu_flags_bf16(), "gpus": []}
    import torch  # torch: only where a stage already holds it or a GPU is there (above)

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "cpu_native_bf16": native_bf16("cpu"), "gpus": gpus}


def _nvidia_driver() -> bool:
    """Whether an NVIDIA driver shows a device here (then only torch can say which GPUs this process sees)."""
    gpus = "/proc/driver/nvidia/gpus"
    return os.path.exists("/dev/nvidia0") or (os.path.isdir(gpus) and bool(os.listdir(gpus)))


def _cpu_flags_bf16() -> bool:
    """:func:`native_bf16` for the CPU from ``/proc/cpuinfo`` (the flags torch's two checks read: AVX512-BF16, AMX
    tiles); torch's own answer where the file is unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            flags = next((line.split(":", 1)[1].split() for line in handle if line.startswith("flags")), None)
    except OSError:
        flags = None
    if flags is None:
        return native_bf16("cpu")
    return "avx512_bf16" in flags or "amx_tile" in flags


def autocast_dtype(value: str | None, device_type: str = "cpu") -> str | None:
    """Inference autocast on ``device_type``: ``auto`` -> ``bfloat16`` where native, else ``float16`` on a GPU and
    none (float32) on a CPU; explicit values unchanged."""
    if value not in AUTOCAST_VALUES:
        raise ValueError(f"autocast is {value!r}; expected one of {AUTOCAST_VALUES}")
    if value != "auto":
        return value
    if native_bf16(device_type):
        return "bfloat16"
    return "float16" if device_type == "cuda" else None


def describe() -> dict[str, Any]:
    """What a stage's metrics record of the policy: the setting, the device it resolved to, and the GPU's name."""
    import torch  # torch: kept out of the core's import (params validation asks the policy without it)

    device = resolve()
    out: dict[str, Any] = {"setting": setting_in_force(), "device": str(device)}
    if device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(device)
    return out
