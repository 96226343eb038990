"""Dense retrieval: batched corpus / query encoding with a :class:`BiEncoder`, sharded embedding files, FAISS search.

Why this shape:

* **Length-sorted batches.** Passages are tokenised once (no padding), sorted by token count (longest first, so an
  out-of-memory error shows up in the first batch, not after an hour), padded per batch and scattered back into the
  original order. Padding is then minimal, which on CPU is most of the speed-up over a plain Hugging Face loop.
* **Shards.** The paper corpus has 21M passages, so "shard i of n" is a contiguous slice of the stream: each worker
  skips to its slice, encodes it in bounded chunks and writes ``embeddings.npy`` (through ``open_memmap``) +
  ``ids.json`` + ``meta.json`` atomically into ``shard-0000i-of-0000n/``. No worker ever holds the corpus.
  :func:`list_shards` refuses an incomplete set and names the missing shard; :func:`merge_shards` streams them into
  one file with bounded memory.
* **FAISS.** ``flat`` (exact inner product, DPR's choice), ``hnsw`` (graph, fast on CPU) or ``ivfpq`` (compressed,
  for corpora that do not fit in memory). GPU FAISS is used when the module and a GPU are there, else CPU; the log
  says which. An index is saved next to its passage ids so a result can never be paired with the wrong corpus.

A run is ``dict[qid, list[(passage id, score)]]``, best first (see :mod:`ecqg.evaluation`).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import torch
from tqdm.auto import tqdm

from ecqg.io import atomic_path, write_json
from ecqg.retrieval.index_kinds import INDEX_KINDS
from ecqg.models import inference

log = logging.getLogger(__name__)

Run = dict[str, list[tuple[str, float]]]  # as ecqg.evaluation.Run (not imported: that module loads pyserini)

EMBEDDINGS_FILE, IDS_FILE, META_FILE = "embeddings.npy", "ids.json", "meta.json"
INDEX_FILE, INDEX_META_FILE = "index.faiss", "index.json"
DTYPES = ("float32", "float16")
_SHARD_DIR = re.compile(r"^shard-(\d{5})-of-(\d{5})$")
_GPU_RESOURCES: list[Any] = []  # keep StandardGpuResources alive as long as the indexes that use them


class ShardError(ValueError):
    """An incomplete or inconsistent set of embedding shards (names the shard and the directory)."""


# ============================================================================================================ encoding
def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _features(encoding) -> list[dict[str, list[int]]]:
    """A tokenizer's unpadded batch output as one dict per example (what ``tokenizer.pad`` takes)."""
    keys = list(encoding.keys())
    return [{k: encoding[k][i] for k in keys} for i in range(len(encoding["input_ids"]))]


def _passage_features(model, passages: Sequence[Mapping]) -> list[dict]:
    """Tokenise like ``BiEncoder.tokenize_passages`` (``[CLS] title [SEP] text [SEP]``, cut the text) but unpadded."""
    titles = [p.get("title") or "" for p in passages]
    texts = [p["text"] for p in passages]
    return _features(model.tokenizer(titles, texts, truncation="only_second",
                                     max_length=model.config.passage_max_length))


def _query_features(model, texts: Sequence[str]) -> list[dict]:
    """Tokenise like ``BiEncoder.tokenize_queries`` but unpadded."""
    return _features(model.tokenizer(list(texts), truncation=True, max_length=model.config.query_max_length))


def _encode_sorted(model, encode, features: list[dict], batch_size: int, device, bar) -> np.ndarray:
    """Encode longest-first batches padded only to their own maximum; rows come back in the input order."""
    order = np.argsort([-len(f["input_ids"]) for f in features], kind="stable")
    out = np.empty((len(features), _dim(model)), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batch = model.tokenizer.pad([features[j] for j in idx], return_tensors="pt")
        batch = {k: v.to(device) for k, v in batch.items()}
        out[idx] = encode(batch).float().cpu().numpy()
        bar.update(len(idx))
    return out


def _dim(model) -> int:
    return int(model.passage_encoder.config.hidden_size)


def _check_batch_size(batch_size: int) -> None:
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")


def encode_queries(model, texts: Sequence[str], batch_size: int = 128, progress: bool = True,
                   autocast: str | None = None) -> np.ndarray:
    """Query vectors (float32, ``len(texts) x dim``) in the order of ``texts``; length-sorted batches inside."""
    _check_batch_size(batch_size)
    if not len(texts):
        return np.zeros((0, _dim(model)), dtype=np.float32)
    start = time.perf_counter()
    with inference(model, autocast) as device, tqdm(total=len(texts), desc="encode queries", unit="q",
                                                     disable=not progress) as bar:
        out = _encode_sorted(model, model.encode_queries, _query_features(model, texts), batch_size, device, bar)
    _log_rate("encode_queries", len(texts), "queries", start, device, batch_size)
    return out


def _log_rate(what: str, count: int, unit: str, start: float, device, batch_size: int) -> None:
    seconds = time.perf_counter() - start
    log.info("%s: %d %s in %.1f s (%.1f %s/s) on %s, batch %d", what, count, unit, seconds,
             count / max(seconds, 1e-9), unit, device, batch_size)


# ---------------------------------------------------------------------------------------------------------- shards
def shard_bounds(total: int, shard: tuple[int, int]) -> tuple[int, int]:
    """``[start, end)`` of shard ``i`` of ``n`` over ``total`` items: contiguous, sizes differ by at most one."""
    i, n = shard
    if not (isinstance(n, int) and isinstance(i, int) and n >= 1 and 0 <= i < n):
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard!r}")
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    return i * total // n, (i + 1) * total // n


def shard_name(shard: tuple[int, int]) -> str:
    return f"shard-{shard[0]:05d}-of-{shard[1]:05d}"


def _shard_slice(passages: Iterable[Mapping], shard: tuple[int, int] | None,
                 total: int | None) -> tuple[Iterator[Mapping], int | None]:
    """The passages of one shard (streamed) and their expected count (``None``: unknown)."""
    if shard is None:
        return iter(passages), (len(passages) if isinstance(passages, Sequence) else total)
    if total is None:
        if not isinstance(passages, Sequence):
            raise ValueError("sharding a stream needs total= (the corpus size; see count_passages)")
        total = len(passages)
    start, end = shard_bounds(total, shard)
    return _checked_slice(iter(passages), start, end, total, shard), end - start


def _checked_slice(it: Iterator[Mapping], start: int, end: int, total: int, shard) -> Iterator[Mapping]:
    """``islice`` that fails loudly when the stream disagrees with ``total`` (a wrong total mis-assigns passages)."""
    seen = 0
    for p in itertools.islice(it, start, end):
        seen += 1
        yield p
    if seen < end - start:
        raise ShardError(f"shard {shard[0]} of {shard[1]}: the corpus ended after {start + seen} passages, "
                         f"but total={total}")
    if shard[0] == shard[1] - 1 and next(it, None) is not None:
        raise ShardError(f"shard {shard[0]} of {shard[1]}: the corpus has more than total={total} passages")


def count_passages(path: str | Path) -> int:
    """Number of passages in a corpus file, streamed (O(1) memory): the ``total`` that every shard worker needs."""
    from ecqg.data.records import read_corpus

    return sum(1 for _ in read_corpus(path))


def _chunks(it: Iterable, size: int) -> Iterator[list]:
    it = iter(it)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def iter_passage_embeddings(model, passages: Iterable[Mapping], batch_size: int = 64,
                            shard: tuple[int, int] | None = None, total: int | None = None,
                            chunk_size: int = 50_000, progress: bool = True,
                            autocast: str | None = None) -> Iterator[tuple[list[str], np.ndarray]]:
    """Yield ``(ids, float32 vectors)`` chunk by chunk for (one shard of) the passages; memory is O(chunk_size).

    Sorting by length happens within a chunk, so a larger chunk pads a little less.
    """
    _check_batch_size(batch_size)
    stream, count = _shard_slice(passages, shard, total)
    start, done = time.perf_counter(), 0
    desc = "encode passages" + (f" (shard {shard[0]}/{shard[1]})" if shard else "")
    with inference(model, autocast) as device, tqdm(total=count, desc=desc, unit="psg",
                                                     disable=not progress) as bar:
        for chunk in _chunks(stream, chunk_size):
            ids = [_passage_id(p, done + k) for k, p in enumerate(chunk)]
            vectors = _encode_sorted(model, model.encode_passages, _passage_features(model, chunk), batch_size,
                                     device, bar)
            done += len(chunk)
            yield ids, vectors
    _log_rate("encode_passages", done, "passages", start, device, batch_size)


def _passage_id(p: Mapping, position: int) -> str:
    if "id" not in p or "text" not in p:
        raise ValueError(f"passage {position} of the shard has no {'id' if 'id' not in p else 'text'!r} field")
    return str(p["id"])


def encode_passages(model, passages: Iterable[Mapping], batch_size: int = 64, shard: tuple[int, int] | None = None,
                    total: int | None = None, chunk_size: int = 50_000, progress: bool = True,
                    dtype: str = "float32", autocast: str | None = None) -> tuple[list[str], np.ndarray]:
    """All ``(ids, vectors)`` of (one shard of) the passages in memory, in corpus order; see :func:`write_shard`."""
    dtype = _check_dtype(dtype)
    ids: list[str] = []
    parts: list[np.ndarray] = []
    for chunk_ids, vectors in iter_passage_embeddings(model, passages, batch_size, shard, total, chunk_size,
                                                      progress, autocast):
        ids += chunk_ids
        parts.append(vectors.astype(dtype, copy=False))
    vectors = np.concatenate(parts) if parts else np.zeros((0, _dim(model)), dtype=dtype)
    return ids, vectors


def _check_dtype(dtype: str) -> str:
    if str(dtype) not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, not {dtype!r}")
    return str(dtype)


def write_shard(model, passages: Iterable[Mapping], out_dir: str | Path, shard: tuple[int, int] = (0, 1),
                total: int | None = None, batch_size: int = 64, dtype: str = "float32", chunk_size: int = 50_000,
                progress: bool = True, autocast: str | None = None) -> Path:
    """Encode shard ``i`` of ``n`` into ``out_dir/shard-0000i-of-0000n/`` atomically; returns that directory.

    The embeddings go straight into an ``open_memmap`` file, so a shard of any size needs only one chunk in memory.
    """
    dtype = _check_dtype(dtype)
    if total is None:
        if not isinstance(passages, Sequence):
            raise ValueError("write_shard on a stream needs total= (the corpus size; see count_passages)")
        total = len(passages)
    start_row, end_row = shard_bounds(total, shard)
    target = Path(out_dir) / shard_name(shard)
    start = time.perf_counter()
    with atomic_path(target) as tmp:
        tmp.mkdir(parents=True)
        ids = _fill_memmap(model, passages, tmp, shard, total, batch_size, dtype, chunk_size, progress, autocast)
        seconds = time.perf_counter() - start
        (tmp / IDS_FILE).write_text(json.dumps(ids), encoding="utf-8")
        write_json(tmp / META_FILE, {"shard": shard[0], "num_shards": shard[1], "start": start_row,
                                     "end": end_row, "total": total, "count": len(ids), "dim": _dim(model),
                                     "dtype": dtype, "model": model.config.base_model, "seconds": round(seconds, 3),
                                     "passages_per_s": round(len(ids) / max(seconds, 1e-9), 2)})
    return target


def _fill_memmap(model, passages, directory: Path, shard, total, batch_size, dtype, chunk_size, progress,
                 autocast) -> list[str]:
    start_row, end_row = shard_bounds(total, shard)
    matrix = np.lib.format.open_memmap(directory / EMBEDDINGS_FILE, mode="w+", dtype=dtype,
                                       shape=(end_row - start_row, _dim(model)))
    ids: list[str] = []
    for chunk_ids, vectors in iter_passage_embeddings(model, passages, batch_size, shard, total, chunk_size,
                                                      progress, autocast):
        matrix[len(ids):len(ids) + len(chunk_ids)] = vectors
        ids += chunk_ids
    matrix.flush()
    del matrix
    return ids


def list_shards(directory: str | Path) -> list[Path]:
    """The shard directories ``0..n-1`` in order; raises :class:`ShardError` naming a missing or mixed shard."""
    directory = Path(directory)
    found = {}
    for child in sorted(directory.iterdir()) if directory.is_dir() else []:
        m = _SHARD_DIR.match(child.name)
        if m and child.is_dir():
            found[(int(m.group(1)), int(m.group(2)))] = child
    if not found:
        raise ShardError(f"{directory}: no embedding shards (expected directories like {shard_name((0, 1))})")
    counts = sorted({n for _, n in found})
    if len(counts) > 1:
        raise ShardError(f"{directory}: shards from different splits ({', '.join(f'of {n}' for n in counts)}); "
                         "remove the stale ones")
    n = counts[0]
    for i in range(n):
        if (i, n) not in found:
            raise ShardError(f"{directory}: shard {i} of {n} is missing (no {shard_name((i, n))}/); "
                             f"encode it with shard=({i}, {n})")
    return [found[(i, n)] for i in range(n)]


def _read_shard(path: Path, mmap: bool = True) -> tuple[list[str], np.ndarray]:
    try:
        ids = json.loads((path / IDS_FILE).read_text(encoding="utf-8"))
        vectors = np.load(path / EMBEDDINGS_FILE, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ShardError(f"{path}: unreadable shard ({exc})") from None
    if vectors.ndim != 2 or len(ids) != len(vectors):
        raise ShardError(f"{path}: {len(ids)} ids but embeddings of shape {vectors.shape}")
    return [str(i) for i in ids], vectors


def _checked_shards(directory: str | Path) -> Iterator[tuple[Path, list[str], np.ndarray]]:
    """Each shard in order, checking that ids are unique across shards and dimensions agree."""
    seen: set[str] = set()
    dim = None
    for path in list_shards(directory):
        ids, vectors = _read_shard(path)
        for pid in ids:
            if pid in seen:
                raise ShardError(f"{path}: passage id {pid!r} occurs more than once across the shards")
            seen.add(pid)
        if dim is not None and vectors.shape[1] != dim:
            raise ShardError(f"{path}: dimension {vectors.shape[1]}, earlier shards have {dim}")
        dim = vectors.shape[1]
        yield path, ids, vectors


def load_shards(directory: str | Path) -> tuple[list[str], np.ndarray]:
    """All shards concatenated in memory (fine for the mini corpus; for 21M passages use :func:`merge_shards`)."""
    ids: list[str] = []
    parts = []
    for _, shard_ids, vectors in _checked_shards(directory):
        ids += shard_ids
        parts.append(np.asarray(vectors))
    return ids, np.concatenate(parts)


def merge_shards(directory: str | Path, out_dir: str | Path) -> tuple[list[str], np.ndarray]:
    """Stream all shards into one ``out_dir/{embeddings.npy, ids.json}`` (atomic); returns ids + a read-only memmap."""
    shards = list(_checked_shards(directory))
    rows = sum(len(ids) for _, ids, _ in shards)
    dim, dtype = shards[0][2].shape[1], shards[0][2].dtype
    with atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        merged = np.lib.format.open_memmap(tmp / EMBEDDINGS_FILE, mode="w+", dtype=dtype, shape=(rows, dim))
        ids: list[str] = []
        for _, shard_ids, vectors in shards:
            merged[len(ids):len(ids) + len(shard_ids)] = vectors
            ids += shard_ids
        merged.flush()
        del merged
        (tmp / IDS_FILE).write_text(json.dumps(ids), encoding="utf-8")
    return _read_shard(Path(out_dir))


# =============================================================================================================== FAISS
def _gpu_available() -> bool:
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def _to_gpu(index, kind: str, use_gpu: bool | None):
    """Move an index to GPU 0 when asked (``None``: when available); HNSW has no GPU version and stays on CPU."""
    want = _gpu_available() if use_gpu is None else use_gpu
    if want and not _gpu_available():
        raise RuntimeError("use_gpu=True but this FAISS build has no GPU support or no GPU is visible")
    if not want or kind == "hnsw":
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


def _kind_params(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if kind not in INDEX_KINDS:
        raise ValueError(f"index kind must be one of {sorted(INDEX_KINDS)}, not {kind!r}")
    unknown = sorted(set(params) - set(INDEX_KINDS[kind]))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for a {kind} index; allowed: {sorted(INDEX_KINDS[kind])}")
    return {**INDEX_KINDS[kind], **params}


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
    index = _empty_index(kind, vectors.shape[1], p)
    if kind == "ivfpq":
        _train_ivfpq(index, vectors, p, seed)
    index = _to_gpu(index, kind, use_gpu)
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


def search(index, ids: Sequence[str], query_vectors: np.ndarray, k: int = 100, batch_size: int = 1024,
           qids: Sequence[str] | None = None, progress: bool = True) -> Run:
    """Top-``k`` passages per query as a run ``{qid: [(passage id, float score), ...]}``, best first.

    ``qids`` name the query rows (default ``"0"``, ``"1"``, ...). Fewer than ``k`` results (small corpus, HNSW or
    IVF misses) simply give a shorter list.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    qids = [str(i) for i in range(len(query_vectors))] if qids is None else [str(q) for q in qids]
    if len(qids) != len(query_vectors):
        raise ValueError(f"{len(qids)} qids for {len(query_vectors)} query vectors")
    run: Run = {}
    start = time.perf_counter()
    for lo in tqdm(range(0, len(qids), batch_size), desc="FAISS search", unit="batch", disable=not progress):
        scores, rows = index.search(_as_float32(query_vectors[lo:lo + batch_size]), k)
        for qid, srow, rrow in zip(qids[lo:lo + batch_size], scores, rows):
            run[qid] = [(ids[r], float(s)) for r, s in zip(rrow.tolist(), srow.tolist()) if r >= 0]
    seconds = time.perf_counter() - start
    log.info("FAISS search: %d queries, k=%d in %.2f s (%.1f queries/s)", len(qids), k, seconds,
             len(qids) / max(seconds, 1e-9))
    return run


# ========================================================================================================= one call
def dense_retrieve(model, source: Iterable[Mapping] | str | Path, questions: Mapping[str, str], k: int = 100,
                   batch_size: int = 64, kind: str = "flat", progress: bool = True, **index_params) -> Run:
    """Encode (or load) the corpus, encode the questions and search: the whole dense retrieval in one call.

    ``source``: a saved index directory, a directory of embedding shards, a corpus file, or passage dicts.
    """
    ids, index = _index_for(model, source, batch_size, kind, progress, index_params)
    qids = list(questions)
    vectors = encode_queries(model, [questions[q] for q in qids], batch_size=max(batch_size, 128), progress=progress)
    return search(index, ids, vectors, k=k, qids=qids, progress=progress)


def _index_for(model, source, batch_size: int, kind: str, progress: bool, params: dict):
    if isinstance(source, (str, Path)) and (Path(source) / INDEX_FILE).is_file():
        index, ids = load_index(source)
        return ids, index
    if isinstance(source, (str, Path)) and Path(source).is_dir():
        ids, vectors = load_shards(source)
    else:
        if isinstance(source, (str, Path)):
            from ecqg.data.records import read_corpus

            source = read_corpus(source)
        ids, vectors = encode_passages(model, source, batch_size=batch_size, progress=progress)
    return ids, build_index(vectors, kind=kind, progress=progress, **params)
