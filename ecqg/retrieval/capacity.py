"""How much memory and disk a corpus encoding + FAISS index needs, checked before the first passage is encoded.

Why: at the paper's size (21,015,324 passages, 768-dim) a wrong index kind does not fail at once; it fails as an
out-of-memory kill hours into the encoding. So the ``retrieve_dense`` stages estimate their need from the corpus size
and the ``dpr.index`` / ``dpr.encode`` settings and refuse up front, naming the setting to change.

The estimate (bytes), from how the stage works (:func:`ecqg.stages.retrieve_dense.retrieve_all`):

* disk: the vectors streamed to a memmap (``rows x dim x 4``, or x 2 with ``dpr.encode.dtype: float16``), beside
  the saved index;
* memory: the index itself (flat ``rows x dim x 4``; HNSW that plus ``M x 2`` 4-byte links per row; IVF-PQ ``m x
  nbits / 8`` bytes of code and an 8-byte id per row, plus the coarse centroids and the k-means training sample),
  the passage id of every row in Python (about 80 bytes each), and one chunk of vectors being encoded.

``rows`` = passages x vectors per passage (Poly-DPR: K). The margin is 10 % of what the machine has.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ecqg.core.choices import INDEX_KINDS

ID_BYTES = 80            # one passage id in the ids list: a short str object (~57 bytes) + its list slot, rounded up
MARGIN = 0.9             # use at most 90 % of the free memory / disk


class CapacityError(RuntimeError):
    """The encoding or the index would not fit this machine; the message names the setting to change."""


@dataclass(frozen=True)
class Need:
    memory: int
    disk: int
    rows: int
    index_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "memory_gb": round(self.memory / 1e9, 2), "disk_gb": round(self.disk / 1e9, 2),
                "index_gb": round(self.index_bytes / 1e9, 2)}


def index_bytes(rows: int, dim: int, kind: str, index_params: Mapping[str, Any] | None = None) -> int:
    """Resident size of a FAISS index of ``kind`` over ``rows`` vectors (the ``dpr.index`` settings: ``kind`` and
    ``index_params``)."""
    if kind not in INDEX_KINDS:
        raise ValueError(f"index kind must be one of {sorted(INDEX_KINDS)}, not {kind!r}")
    p = {**INDEX_KINDS[kind], **(index_params or {})}
    if kind == "flat":
        return rows * dim * 4
    if kind == "hnsw":
        return rows * dim * 4 + rows * int(p["M"]) * 2 * 4
    code = int(p["m"]) * int(p["nbits"]) // 8
    centroids = max(int(p["nlist"]), 2 ** int(p["nbits"]))
    train = min(rows, int(p["train_size"] or 256 * centroids)) * dim * 4
    return rows * (code + 8) + int(p["nlist"]) * dim * 4 + train


def estimate(passages: int, dim: int, vectors_per_passage: int, kind: str,
             index_params: Mapping[str, Any] | None = None,
             chunk_size: int = 50_000, dtype: str = "float32") -> Need:
    """What encoding ``passages`` and indexing them needs (see the module docstring); ``dtype``: of the streamed
    vectors on disk (``dpr.encode.dtype``)."""
    rows = passages * vectors_per_passage
    index = index_bytes(rows, dim, kind, index_params)
    chunk = min(chunk_size, passages) * vectors_per_passage * dim * 4 * 2   # the chunk and its sorted copy
    streamed = rows * dim * (2 if dtype == "float16" else 4)
    return Need(memory=index + rows * ID_BYTES + chunk, disk=streamed + index, rows=rows, index_bytes=index)


def available_memory() -> int:
    """Memory this process may still take: ``MemAvailable`` (what the kernel can give without swapping)."""
    import psutil  # psutil: not a declared dependency of its own (it comes with accelerate): asked only here

    return int(psutil.virtual_memory().available)


def check_fits(need: Need, scratch: str | Path, what: str, memory: int | None = None,
               disk: int | None = None) -> None:
    """Raise :class:`CapacityError` when ``need`` exceeds 90 % of the free memory or of the free disk under
    ``scratch``; ``what`` names the job in the message (``memory`` / ``disk``: for tests, else measured)."""
    memory = available_memory() if memory is None else memory
    if disk is None:
        probe = Path(scratch)
        while not probe.exists():
            probe = probe.parent
        disk = shutil.disk_usage(probe).free
    gb = 1e9
    if need.memory > MARGIN * memory:
        raise CapacityError(
            f"{what}: needs about {need.memory / gb:.1f} GB of memory ({need.rows:,} index rows; the index alone "
            f"{need.index_bytes / gb:.1f} GB) but {memory / gb:.1f} GB are free. Set dpr.index.kind to ivfpq (a "
            "compressed index: dpr.index.params m / nbits set the bytes per row) or lower dpr.index.params, or "
            "run on a machine with more memory")
    if need.disk > MARGIN * disk:
        raise CapacityError(
            f"{what}: needs about {need.disk / gb:.1f} GB of disk under {scratch} (the streamed vectors and the "
            f"index) but {disk / gb:.1f} GB are free. Free space there, or point outputs/ at a larger disk")
