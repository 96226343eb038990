"""FAISS over passage vectors: build (``flat`` exact inner product, DPR's choice; ``hnsw`` graph, fast on CPU;
``ivfpq`` compressed, for corpora that do not fit in memory), save next to the passage id of every row (so a result
can never be paired with the wrong corpus), load, and search with the mapping from rows back to passages: a
retriever with K vectors per passage puts K rows per passage in the index and each passage keeps its best row.
GPU FAISS is used when the module and a GPU are there (IVF-PQ's training included), else CPU; the log says which.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from tqdm.auto import tqdm

from ecqg.core.io import atomic_path, write_json
from ecqg.core.choices import INDEX_KINDS

log = logging.getLogger(__name__)

Run = dict[str, list[tuple[str, float]]]  # as ecqg.retrieval.evaluation.Run (not imported: that module loads pyserini)
IDS_FILE, INDEX_FILE, INDEX_META_FILE = "ids.json", "index.faiss", "index.json"
_GPU_RESOURCES: list[Any] = []  # keep StandardGpuResources alive as long as the indexes that use them


def _gpu_available() -> bool:
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def _torch_sees_a_gpu() -> bool:
    # torch only to ask whether a GPU is there: the index code itself is torch-free
    import torch

    return torch.cuda.is_available()


def _to_gpu(index, kind: str, use_gpu: bool | None):
    """Move an index to GPU 0 when asked (``None``: when available); HNSW has no GPU version and stays on CPU."""
    want = _gpu_available() if use_gpu is None else use_gpu
    if want and not _gpu_available():
        raise RuntimeError("use_gpu=True but this FAISS build has no GPU support or no GPU is visible")
    if not want or kind == "hnsw":
        if not _gpu_available() and _torch_sees_a_gpu():
            log.warning("FAISS %s index on CPU although a GPU is visible: the installed FAISS has no GPU support "
                        "(install faiss-gpu instead of faiss-cpu: make install FAISS=gpu; python -m "
                        "ecqg.tooling.doctor says which build is imported)", kind)
        else:
            log.info("FAISS %s index on CPU (%s)", kind, "no GPU FAISS" if not _gpu_available() else
                     "HNSW has no GPU implementation" if kind == "hnsw" else "use_gpu=False")
        return index
    if not _GPU_RESOURCES:
        _GPU_RESOURCES.append(faiss.StandardGpuResources())
    options = faiss.GpuClonerOptions()
    options.useFloat16 = True  # IVF-PQ lookup tables in fp16: needed for large m on GPU
    log.info("FAISS %s index on GPU (%d visible)", kind, faiss.get_num_gpus())
    return faiss.index_cpu_to_gpu(_GPU_RESOURCES[0], 0, index, options)


def _to_cpu(index):
    return faiss.index_gpu_to_cpu(index) if hasattr(faiss, "index_gpu_to_cpu") and "Gpu" in type(index).__name__ \
        else index


def _kind_params(kind: str, index_params: Mapping[str, Any]) -> dict[str, Any]:
    if kind not in INDEX_KINDS:
        raise ValueError(f"index kind must be one of {sorted(INDEX_KINDS)}, not {kind!r}")
    unknown = sorted(set(index_params) - set(INDEX_KINDS[kind]))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for a {kind} index; allowed: {sorted(INDEX_KINDS[kind])}")
    return {**INDEX_KINDS[kind], **index_params}


def _as_float32(vectors: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(vectors, dtype=np.float32)


def _empty_index(kind: str, dim: int, p: dict[str, Any]):
    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, int(p["M"]), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction, index.hnsw.efSearch = int(p["efConstruction"]), int(p["efSearch"])
        return index
    if dim % int(p["m"]):
        raise ValueError(f"ivfpq: m={p['m']} sub-quantizers must divide the dimension {dim}")
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFPQ(quantizer, dim, int(p["nlist"]), int(p["m"]), int(p["nbits"]),
                             faiss.METRIC_INNER_PRODUCT)
    index.nprobe = int(p["nprobe"])  # (faiss' Python wrapper keeps the quantizer alive with the index)
    return index


def _train_ivfpq(index, vectors: np.ndarray, p: dict[str, Any], seed: int) -> None:
    """Train on a seeded sample; refuse when k-means cannot have one training vector per centroid."""
    needed = max(int(p["nlist"]), 2 ** int(p["nbits"]))
    if len(vectors) < needed:
        raise ValueError(f"ivfpq needs at least {needed} training vectors (max(nlist={p['nlist']}, "
                         f"2**nbits={2 ** int(p['nbits'])})) but got {len(vectors)}; use a flat or hnsw index, "
                         "or lower nlist / nbits")
    size = min(len(vectors), int(p["train_size"] or 256 * needed))
    if size < 39 * needed:
        log.warning("ivfpq: %d training vectors for %d centroids; FAISS recommends >= %d", size, needed, 39 * needed)
    rows = np.sort(np.random.default_rng(seed).choice(len(vectors), size=size, replace=False))
    start = time.perf_counter()
    index.train(_as_float32(vectors[rows]))
    log.info("ivfpq: trained nlist=%s m=%s nbits=%s on %d vectors in %.1f s", p["nlist"], p["m"], p["nbits"], size,
             time.perf_counter() - start)


def build_index(vectors: np.ndarray, kind: str = "flat", use_gpu: bool | None = None, seed: int = 0,
                add_batch_size: int = 100_000, progress: bool = True, **params):
    """A FAISS inner-product index over ``vectors`` (row r = passage r; float16 / memmap fine, added in chunks).

    ``kind``: ``flat`` (exact); ``hnsw`` (``M``, ``efSearch``, ``efConstruction``); ``ivfpq`` (``nlist``, ``m``,
    ``nbits``, ``nprobe``, ``train_size``; trained on a sample drawn with ``seed``).
    """
    p = _kind_params(kind, params)
    if vectors.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array, got shape {vectors.shape}")
    start = time.perf_counter()
    index = _to_gpu(_empty_index(kind, vectors.shape[1], p), kind, use_gpu)
    if kind == "ivfpq":       # k-means and the PQ codebooks on the GPU too, when the index is there
        _train_ivfpq(index, vectors, p, seed)
    for lo in tqdm(range(0, len(vectors), add_batch_size), desc=f"FAISS {kind} add", unit="batch",
                   disable=not progress):
        index.add(_as_float32(vectors[lo:lo + add_batch_size]))
    seconds = time.perf_counter() - start
    log.info("FAISS %s index: %d x %d in %.1f s (%.0f vectors/s) %s", kind, index.ntotal, vectors.shape[1], seconds,
             index.ntotal / max(seconds, 1e-9), {k: v for k, v in p.items() if v is not None})
    return index


def index_kind(index) -> str:
    """``flat`` / ``hnsw`` / ``ivfpq`` (or the FAISS class name) of a CPU or GPU index."""
    name = type(index).__name__
    for kind, marker in (("hnsw", "HNSW"), ("ivfpq", "IVFPQ"), ("flat", "Flat")):
        if marker in name:
            return kind
    return name


def describe_index(index) -> dict[str, Any]:
    """What ``index.json`` records: kind, size, dimension and the search-time parameters."""
    out: dict[str, Any] = {"kind": index_kind(index), "class": type(index).__name__, "ntotal": int(index.ntotal),
                           "dim": int(index.d)}
    if out["kind"] == "hnsw":
        out.update(efSearch=int(index.hnsw.efSearch), efConstruction=int(index.hnsw.efConstruction))
    if out["kind"] == "ivfpq":
        out.update(nlist=int(index.nlist), nprobe=int(index.nprobe))
    return out


def save_index(index, ids: Sequence[str], directory: str | Path) -> Path:
    """Write ``index.faiss`` (CPU form) + ``ids.json`` + ``index.json`` atomically into ``directory``."""
    if index.ntotal != len(ids):
        raise ValueError(f"the index holds {index.ntotal} vectors but {len(ids)} ids were given")
    with atomic_path(directory) as tmp:
        tmp.mkdir(parents=True)
        cpu_index = _to_cpu(index)
        faiss.write_index(cpu_index, str(tmp / INDEX_FILE))
        (tmp / IDS_FILE).write_text(json.dumps([str(i) for i in ids]), encoding="utf-8")
        write_json(tmp / INDEX_META_FILE, describe_index(cpu_index))
    return Path(directory)


def load_index(directory: str | Path, use_gpu: bool | None = None):
    """``(index, ids)`` saved by :func:`save_index`; moved to GPU when available (or asked)."""
    directory = Path(directory)
    if not (directory / INDEX_FILE).is_file() or not (directory / IDS_FILE).is_file():
        raise FileNotFoundError(f"{directory}: not a saved index (needs {INDEX_FILE} and {IDS_FILE})")
    index = faiss.read_index(str(directory / INDEX_FILE))
    ids = json.loads((directory / IDS_FILE).read_text(encoding="utf-8"))
    if index.ntotal != len(ids):
        raise ValueError(f"{directory}: the index holds {index.ntotal} vectors but {IDS_FILE} has {len(ids)} ids")
    return _to_gpu(index, index_kind(index), use_gpu), ids


def index_rows(ids: Sequence[str], vectors: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The rows an index holds and the passage of each: one row per passage, or ``K`` rows per passage for a
    retriever with several vectors per passage (``vectors``: ``N x K x d``), all named by their passage."""
    vectors = np.asarray(vectors)
    if vectors.ndim == 2:
        return list(ids), vectors
    if vectors.ndim != 3 or vectors.shape[0] != len(ids):
        raise ValueError(f"vectors must be N x d or N x K x d for {len(ids)} passages, got shape {vectors.shape}")
    k = vectors.shape[1]
    return [pid for pid in ids for _ in range(k)], vectors.reshape(-1, vectors.shape[2])


def search(index, ids: Sequence[str], query_vectors: np.ndarray, k: int = 100, batch_size: int = 1024,
           qids: Sequence[str] | None = None, progress: bool = True) -> Run:
    """Top-``k`` passages per query as a run ``{qid: [(passage id, float score), ...]}``, best first.

    ``ids`` name the passage of each index row (:func:`index_rows`). When a passage owns several rows (several
    vectors per passage) its score is its best row's, what a multi-vector retriever's ``scores`` gives: the search
    then fetches ``k x K`` rows (enough, since every row ranked above the k-th passage's best belongs to one of the
    k - 1 better passages) and keeps each passage's first. ``qids`` name the query rows (default ``"0"``, ...).
    Fewer than ``k`` results (small corpus, HNSW or IVF misses) simply give a shorter list.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    qids = [str(i) for i in range(len(query_vectors))] if qids is None else [str(q) for q in qids]
    if len(qids) != len(query_vectors):
        raise ValueError(f"{len(qids)} qids for {len(query_vectors)} query vectors")
    per_passage = max(Counter(ids).values()) if len(ids) else 1
    run: Run = {}
    start = time.perf_counter()
    for lo in tqdm(range(0, len(qids), batch_size), desc="FAISS search", unit="batch", disable=not progress):
        scores, rows = index.search(_as_float32(query_vectors[lo:lo + batch_size]), k * per_passage)
        for qid, srow, rrow in zip(qids[lo:lo + batch_size], scores, rows):
            hits = [(ids[r], float(s)) for r, s in zip(rrow.tolist(), srow.tolist()) if r >= 0]
            run[qid] = hits if per_passage == 1 else _best_per_passage(hits, k)
    seconds = time.perf_counter() - start
    log.info("FAISS search: %d queries, k=%d in %.2f s (%.1f queries/s)", len(qids), k, seconds,
             len(qids) / max(seconds, 1e-9))
    return run


def _best_per_passage(hits: list[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    """Rows best first -> each passage once, at its best row, the first ``k`` passages."""
    seen, out = set(), []
    for pid, score in hits:
        if pid not in seen:
            seen.add(pid)
            out.append((pid, score))
            if len(out) == k:
                break
    return out
