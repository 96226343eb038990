"""Dense retrieval: batched corpus / query encoding with any retriever, sharded embedding files, and the one-call
search (FAISS itself: :mod:`ecqg.retrieval.faiss_index`).

Why this shape:

* **Length-sorted batches.** Passages are tokenised once (no padding), sorted by token count (longest first, so an
  out-of-memory error shows up in the first batch, not after an hour), padded per batch and scattered back into the
  original order. Padding is then minimal, which on CPU is most of the speed-up over a plain Hugging Face loop.
* **Shards.** The paper corpus has 21M passages, so "shard i of n" is a contiguous slice of the stream: each worker
  skips to its slice, encodes it in bounded chunks and writes ``embeddings.npy`` (through ``open_memmap``) +
  ``ids.json`` + ``meta.json`` atomically into ``shard-0000i-of-0000n/``. No worker ever holds the corpus.
  :func:`list_shards` refuses an incomplete set and names the missing shard; :func:`merge_shards` streams them into
  one file with bounded memory.
* **Several vectors per passage.** A retriever with ``K`` vectors per passage encodes to ``N x K x d``; the shards
  keep that shape, and :func:`ecqg.retrieval.faiss_index.index_rows` lays it out as ``K x N`` index rows.
* **Size:** one module over 400 lines because the in-process encoder, the shard files and the split over processes
  (:func:`encode_corpus`, :func:`encode_part`) share one row layout and one chunk loop; apart, each would have to
  restate it.

A run is ``dict[qid, list[(passage id, score)]]``, best first (see :mod:`ecqg.retrieval.evaluation`).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ecqg.core.io import atomic_path, write_json
from ecqg.data.records import read_corpus
from ecqg.retrieval.faiss_index import INDEX_FILE, build_index, index_rows, load_index, search
from ecqg.retrieval.retriever import load_retriever
from ecqg.runtime import parallel
from ecqg.runtime.models import inference
from ecqg.runtime.parallel import MODEL_DIR, block
from ecqg.retrieval.tokenized_corpus import TokenizedCorpus
from ecqg.retrieval.tokens import tokenize_threads

log = logging.getLogger(__name__)

Run = dict[str, list[tuple[str, float]]]  # as ecqg.retrieval.evaluation.Run (not imported: that module loads pyserini)

EMBEDDINGS_FILE, IDS_FILE, META_FILE = "embeddings.npy", "ids.json", "meta.json"
DTYPES = ("float32", "float16")
_SHARD_DIR = re.compile(r"^shard-(\d{5})-of-(\d{5})$")


class ShardError(ValueError):
    """An incomplete or inconsistent set of embedding shards (names the shard and the directory)."""


# ============================================================================================================ encoding
def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _encode_sorted(model, encode, features: list[dict], shape: tuple[int, ...], batch_size: int, device,
                   bar) -> np.ndarray:
    """Encode longest-first batches padded only to their own maximum; rows come back in the input order.

    The vectors stay on the device until the whole list is encoded: no per-batch copy back, so the host pads the
    next batch (pinned memory, non-blocking copy on a GPU) while the device still computes this one."""
    order = np.argsort([-len(f["input_ids"]) for f in features], kind="stable")
    pinned = device.type == "cuda"
    parts = []
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batch = model.pad([features[j] for j in idx])
        batch = {k: (v.pin_memory() if pinned else v).to(device, non_blocking=pinned) for k, v in batch.items()}
        parts.append(encode(batch).float().reshape(len(idx), *shape))   # K = 1: (B, 1, d) -> (B, d)
        bar.update(len(idx))
    out = np.empty((len(features), *shape), dtype=np.float32)
    if parts:
        out[order] = torch.cat(parts).cpu().numpy()
    return out


def _passage_shape(model) -> tuple[int, ...]:
    """``(d,)``, or ``(K, d)`` for a retriever with ``K`` vectors per passage."""
    k = model.vectors_per_passage
    return (model.dim,) if k == 1 else (k, model.dim)


def _check_batch_size(batch_size: int) -> None:
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")


def encode_queries(model, texts: Sequence[str], batch_size: int = 128, progress: bool = True,
                   autocast: str | None = None) -> np.ndarray:
    """Query vectors (float32, ``len(texts) x dim``) in the order of ``texts``; length-sorted batches inside."""
    _check_batch_size(batch_size)
    if not len(texts):
        return np.zeros((0, model.dim), dtype=np.float32)
    start = time.perf_counter()
    with inference(model, autocast) as device, tqdm(total=len(texts), desc="encode queries", unit="q",
                                                     disable=not progress) as bar:
        out = _encode_sorted(model, model.encode_queries, model.query_features(texts), (model.dim,), batch_size,
                             device, bar)
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


def _shard_slice(passages: Iterable[Mapping], shard: tuple[int, int] | None, total: int | None,
                 rows: tuple[int, int] | None = None) -> tuple[Iterator[Mapping], int | None]:
    """The passages of one shard, or of the rows ``[start, end)`` (streamed), and their expected count (``None``:
    unknown)."""
    if shard is None and rows is None:
        return iter(passages), (len(passages) if isinstance(passages, Sequence) else total)
    if total is None:
        if not isinstance(passages, Sequence):
            raise ValueError("sharding a stream needs total= (the corpus size; see count_passages)")
        total = len(passages)
    if rows is None:
        start, end = shard_bounds(total, shard)
        label = f"shard {shard[0]} of {shard[1]}"
    else:
        start, end = rows
        if not 0 <= start <= end <= total:
            raise ValueError(f"rows {rows} outside a corpus of {total} passages")
        label = f"rows {start}-{end}"
    return _checked_slice(iter(passages), start, end, total, label), end - start


def _checked_slice(it: Iterator[Mapping], start: int, end: int, total: int, label: str) -> Iterator[Mapping]:
    """``islice`` that fails loudly when the stream disagrees with ``total`` (a wrong total mis-assigns passages)."""
    seen = 0
    for p in itertools.islice(it, start, end):
        seen += 1
        yield p
    if seen < end - start:
        raise ShardError(f"{label}: the corpus ended after {start + seen} passages, but total={total}")
    if end == total and next(it, None) is not None:
        raise ShardError(f"{label}: the corpus has more than total={total} passages")


def count_passages(path: str | Path) -> int:
    """Number of passages in a corpus file, streamed (O(1) memory): the ``total`` that every shard worker needs."""
    return sum(1 for _ in read_corpus(path))


def _chunks(it: Iterable, size: int) -> Iterator[list]:
    it = iter(it)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def iter_passage_embeddings(model, passages: Iterable[Mapping], batch_size: int = 64,
                            shard: tuple[int, int] | None = None, total: int | None = None,
                            chunk_size: int = 50_000, progress: bool = True,
                            autocast: str | None = None, prefetch: bool | None = None,
                            rows: tuple[int, int] | None = None,
                            tokenize_threads: int | None = None) -> Iterator[tuple[list[str], np.ndarray]]:
    """Yield ``(ids, float32 vectors)`` chunk by chunk for (one shard, or the ``rows`` ``[start, end)``, of) the
    passages (records, or a :class:`~ecqg.retrieval.tokenized_corpus.TokenizedCorpus` whose ids are ready);
    memory is O(chunk_size).

    Sorting by length happens within a chunk, so a larger chunk pads a little less. ``prefetch`` reads and
    tokenises the next chunk in background threads (``tokenize_threads``, default :func:`tokenize_threads`) while
    this one is encoded (default: on an accelerator, where the device would otherwise wait for the host; on a CPU
    the threads only take cores from the encoder).
    """
    _check_batch_size(batch_size)
    if isinstance(passages, TokenizedCorpus):
        lo, hi = rows or (shard_bounds(len(passages), shard) if shard else (0, len(passages)))
        stream, count = None, hi - lo
    else:
        stream, count = _shard_slice(passages, shard, total, rows)
    start, done = time.perf_counter(), 0
    desc = "encode passages" + (f" (shard {shard[0]}/{shard[1]})" if shard else
                                f" (rows {rows[0]}-{rows[1]})" if rows else "")
    with inference(model, autocast) as device, tqdm(total=count, desc=desc, unit="psg",
                                                     disable=not progress) as bar:
        ahead = device.type != "cpu" if prefetch is None else prefetch
        chunks = _ahead(passages.chunks(lo, hi, chunk_size), ahead) if stream is None else \
            _tokenized_chunks(model, stream, chunk_size, ahead, tokenize_threads)
        for ids, features in chunks:
            vectors = _encode_sorted(model, model.encode_passages, features, _passage_shape(model), batch_size,
                                     device, bar)
            done += len(ids)
            yield ids, vectors
    _log_rate("encode_passages", done, "passages", start, device, batch_size)


def _tokenized_chunks(model, stream: Iterator[Mapping], chunk_size: int, prefetch: bool,
                      threads: int | None = None) -> Iterator[tuple[list[str], list[dict]]]:
    """``(passage ids, unpadded features)`` per chunk; with ``prefetch`` the next chunk is read in a background
    thread and tokenised in ``threads`` slices at once (fast tokenizers release the GIL; default
    :func:`tokenize_threads`) while the caller encodes the current one. The features are the same either way."""
    chunks = _chunks(stream, chunk_size)
    done = 0
    threads = (tokenize_threads() if threads is None else threads) if prefetch else 1
    slicer = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ecqg-tokenize") if threads > 1 else None

    def features(chunk: list[Mapping]) -> list[dict]:
        titles, texts = [p.get("title") or "" for p in chunk], [p["text"] for p in chunk]
        if slicer is None or len(chunk) < 2 * threads:
            return model.passage_features(titles, texts)
        step = -(-len(chunk) // threads)
        parts = slicer.map(lambda lo: model.passage_features(titles[lo:lo + step], texts[lo:lo + step]),
                           range(0, len(chunk), step))
        return list(itertools.chain.from_iterable(parts))

    def next_tokenized():
        nonlocal done
        chunk = next(chunks, None)
        if chunk is None:
            return None
        ids = [_passage_id(p, done + k) for k, p in enumerate(chunk)]
        done += len(chunk)
        return ids, features(chunk)

    try:
        if not prefetch:
            while (item := next_tokenized()) is not None:
                yield item
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ecqg-prefetch") as pool:
            future = pool.submit(next_tokenized)
            while (item := future.result()) is not None:
                future = pool.submit(next_tokenized)
                yield item
    finally:
        if slicer is not None:
            slicer.shutdown()


def _ahead(chunks: Iterator, prefetch: bool) -> Iterator:
    """The chunks, each next one read in a background thread while the caller encodes this one (``prefetch``)."""
    if not prefetch:
        yield from chunks
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ecqg-prefetch") as pool:
        future = pool.submit(next, chunks, None)
        while (item := future.result()) is not None:
            future = pool.submit(next, chunks, None)
            yield item


def _passage_id(p: Mapping, position: int) -> str:
    if "id" not in p or "text" not in p:
        raise ValueError(f"passage {position} of the shard has no {'id' if 'id' not in p else 'text'!r} field")
    return str(p["id"])


def encode_passages(model, passages: Iterable[Mapping], batch_size: int = 64, shard: tuple[int, int] | None = None,
                    total: int | None = None, chunk_size: int = 50_000, progress: bool = True,
                    dtype: str = "float32", autocast: str | None = None,
                    prefetch: bool | None = None) -> tuple[list[str], np.ndarray]:
    """All ``(ids, vectors)`` of (one shard of) the passages in memory, in corpus order: for small sets (probes,
    a mini corpus); a corpus goes through :func:`write_shard`, which keeps one chunk in memory."""
    dtype = _check_dtype(dtype)
    ids: list[str] = []
    parts: list[np.ndarray] = []
    for chunk_ids, vectors in iter_passage_embeddings(model, passages, batch_size, shard, total, chunk_size,
                                                      progress, autocast, prefetch):
        ids += chunk_ids
        parts.append(vectors.astype(dtype, copy=False))
    vectors = np.concatenate(parts) if parts else np.zeros((0, *_passage_shape(model)), dtype=dtype)
    return ids, vectors


def _check_dtype(dtype: str) -> str:
    if str(dtype) not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, not {dtype!r}")
    return str(dtype)


def write_shard(model, passages: Iterable[Mapping], out_dir: str | Path, shard: tuple[int, int] = (0, 1),
                total: int | None = None, batch_size: int = 64, dtype: str = "float32", chunk_size: int = 50_000,
                progress: bool = True, autocast: str | None = None, prefetch: bool | None = None) -> Path:
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
        matrix = _new_matrix(tmp / EMBEDDINGS_FILE, model, end_row - start_row, dtype)
        ids = _fill_rows(model, passages, matrix, (start_row, end_row), total, batch_size, chunk_size, progress,
                         autocast, prefetch, offset=start_row)
        del matrix
        seconds = time.perf_counter() - start
        (tmp / IDS_FILE).write_text(json.dumps(ids), encoding="utf-8")
        write_json(tmp / META_FILE, {"shard": shard[0], "num_shards": shard[1], "start": start_row,
                                     "end": end_row, "total": total, "count": len(ids), "dim": model.dim,
                                     "vectors_per_passage": model.vectors_per_passage,
                                     "dtype": dtype, "model": model.config.base_model, "autocast": autocast,
                                     "seconds": round(seconds, 3),
                                     "passages_per_s": round(len(ids) / max(seconds, 1e-9), 2)})
    return target


def _new_matrix(path: Path, model, rows: int, dtype: str) -> np.ndarray:
    """An ``.npy`` file of ``rows`` passage vectors, memory-mapped for writing."""
    return np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(rows, *_passage_shape(model)))


def _fill_rows(model, passages, matrix: np.ndarray, rows: tuple[int, int], total: int, batch_size: int,
               chunk_size: int, progress: bool, autocast, prefetch, offset: int = 0) -> list[str]:
    """Encode the corpus rows ``[start, end)`` into ``matrix[start - offset:end - offset]``, chunk by chunk;
    returns their passage ids."""
    ids: list[str] = []
    at = rows[0] - offset
    for chunk_ids, vectors in iter_passage_embeddings(model, passages, batch_size, None, total, chunk_size,
                                                      progress, autocast, prefetch, rows=rows):
        matrix[at + len(ids):at + len(ids) + len(chunk_ids)] = vectors
        ids += chunk_ids
    matrix.flush()
    return ids


def encode_corpus(model, corpus: str | Path, out_dir: str | Path, total: int, *, processes: int = 1,
                  launcher_args: Sequence[str] | None = None, batch_size: int = 64, dtype: str = "float32",
                  chunk_size: int = 50_000, autocast: str | None = None, progress: bool = True,
                  prefetch: bool | None = None, tokenized: str | Path | None = None) -> tuple[list[str], np.ndarray]:
    """Encode a corpus file into ``out_dir/embeddings.npy``; returns its passage ids and the vectors, memory-mapped
    read-only. Memory is one chunk per process at any corpus size.

    ``tokenized``: the corpus already tokenised (stage ``tokenize_corpus``, :mod:`ecqg.retrieval.tokenized_corpus`),
    read instead of the text, after checking it was made with this model's tokenizer and passage length.
    ``processes`` above 1 splits the rows over torchrun workers (:mod:`ecqg.runtime.parallel`; ``launcher_args``:
    params.yaml's): each writes whole chunks of its block into the one file, so the vectors are the single process's.
    A worker starts at its block's first row of the tokenised corpus (from the text: reads up to it, seconds per
    million passages)."""
    dtype = _check_dtype(dtype)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / EMBEDDINGS_FILE
    source = _corpus_source(model, corpus, tokenized, total)
    matrix = _new_matrix(path, model, total, dtype)
    if processes <= 1:
        ids = _fill_rows(model, source, matrix, (0, total), total, batch_size, chunk_size, progress, autocast,
                         prefetch)
        del matrix
    else:
        del matrix
        with parallel.job_directory("encode") as job_dir:
            model.save(job_dir / parallel.MODEL_DIR)
            job = {"corpus": str(corpus), "tokenized": str(tokenized) if tokenized else None, "total": total,
                   "matrix": str(path.resolve()), "batch_size": batch_size,
                   "chunk_size": chunk_size, "autocast": autocast, "prefetch": prefetch}
            parts = parallel.run("encode", job, job_dir, processes, launcher_args, progress)
        ids = [pid for part in parts for pid in part]
    if len(ids) != total:
        raise ShardError(f"{out_dir}: {len(ids)} passages encoded, expected {total}")
    return ids, np.load(path, mmap_mode="r", allow_pickle=False)


def _corpus_source(model, corpus: str | Path, tokenized: str | Path | None, total: int):
    """The tokenised corpus (checked against the model and ``total``) or the corpus text, streamed."""
    if tokenized is None:
        return read_corpus(corpus)
    source = TokenizedCorpus(tokenized, model)
    if len(source) != total:
        raise ShardError(f"{tokenized}: {len(source)} tokenised passages, the corpus {corpus} has {total}; "
                         "rerun tokenize_corpus")
    return source


def encode_part(job: Mapping, rank: int, world: int, job_dir: Path) -> list[str]:
    """One torchrun worker of :func:`encode_corpus`: whole chunks of its block into its rows of the shared file."""
    model = load_retriever(Path(job_dir) / MODEL_DIR)
    rows = block(job["total"], job["chunk_size"], rank, world)
    matrix = np.load(job["matrix"], mmap_mode="r+", allow_pickle=False)
    if rows[0] == rows[1]:
        return []
    source = _corpus_source(model, job["corpus"], job.get("tokenized"), job["total"])
    return _fill_rows(model, source, matrix, rows, job["total"], job["batch_size"],
                      job["chunk_size"], job["progress"] and rank == 0, job["autocast"], job["prefetch"])


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


def read_shard(path: str | Path, mmap: bool = True) -> tuple[list[str], np.ndarray]:
    """``(ids, vectors)`` of one shard directory; the vectors memory-mapped (read-only) unless ``mmap`` is False."""
    return _read_shard(Path(path), mmap)


def _read_shard(path: Path, mmap: bool = True) -> tuple[list[str], np.ndarray]:
    try:
        ids = json.loads((path / IDS_FILE).read_text(encoding="utf-8"))
        vectors = np.load(path / EMBEDDINGS_FILE, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ShardError(f"{path}: unreadable shard ({exc})") from None
    if vectors.ndim not in (2, 3) or len(ids) != len(vectors):   # N x d, or N x K x d (K vectors per passage)
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
        if dim is not None and vectors.shape[1:] != dim:
            raise ShardError(f"{path}: vector shape {vectors.shape[1:]}, earlier shards have {dim}")
        dim = vectors.shape[1:]
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
    shape, dtype = shards[0][2].shape[1:], shards[0][2].dtype
    with atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        merged = np.lib.format.open_memmap(tmp / EMBEDDINGS_FILE, mode="w+", dtype=dtype, shape=(rows, *shape))
        ids: list[str] = []
        for _, shard_ids, vectors in shards:
            merged[len(ids):len(ids) + len(shard_ids)] = vectors
            ids += shard_ids
        merged.flush()
        del merged
        (tmp / IDS_FILE).write_text(json.dumps(ids), encoding="utf-8")
    return _read_shard(Path(out_dir))


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


def _index_for(model, source, batch_size: int, kind: str, progress: bool, index_params: dict):
    if isinstance(source, (str, Path)) and (Path(source) / INDEX_FILE).is_file():
        index, ids = load_index(source)
        return ids, index
    if isinstance(source, (str, Path)) and Path(source).is_dir():
        ids, vectors = load_shards(source)
    else:
        if isinstance(source, (str, Path)):
            source = read_corpus(source)
        ids, vectors = encode_passages(model, source, batch_size=batch_size, progress=progress)
    ids, vectors = index_rows(ids, vectors)
    return ids, build_index(vectors, kind=kind, progress=progress, **index_params)
