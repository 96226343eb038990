"""Texts tokenised once, kept as flat integer arrays: the training set's questions and passages, a corpus's chunks.

Why: the trainer used to tokenise every batch on the main thread (the passages twice when length-bucketed), so over
40 epochs each text went through the tokenizer 40-80 times while the accelerator waited. Here each distinct text is
tokenised once before the first step, in the retriever's own way (``query_features`` / ``passage_features``, so the
ids are the very ones the per-batch path gave), in slices over the host's threads (fast tokenizers release the
GIL), and a batch is a gather of ready ids padded in numpy: the same tensors as before, so the same training run.

Memory: 5 bytes per token (``int32`` ids, ``int8`` segment ids) plus one offset per text: a million synthetic
questions with a positive and a hard negative each, ~150-token passages, about 1.6 GB per process, well under the
records themselves as Python objects; each slice of 4,096 texts is packed as soon as it is tokenised, so the
tokenizer's Python lists never exist for more than a few slices at once.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ecqg.core.io import atomic_path

log = logging.getLogger(__name__)

ATTENTION_MASK = "attention_mask"     # all ones on an unpadded text: rebuilt, not stored
_DTYPES = {"token_type_ids": np.int8}  # segment ids are 0 / 1; every other key is stored as int32


def tokenize_threads(processes: int | None = None) -> int:
    """Threads that tokenise on the host: this process's share of the machine's cores (torchrun's
    ``LOCAL_WORLD_SIZE`` processes share them, or ``processes`` when given: 1 when the others wait for this one),
    one left for the loop feeding the device.

    Why: one tokenizer thread cannot keep up with a GPU's encoding (``bench/gpu_check.py`` measures both);
    ``TOKENIZERS_PARALLELISM`` stays false (``ecqg/core/env.py``) because the
    tokenizer's own threads do not survive the forks of torchrun and DataLoader workers, so the split is ours."""
    # config builds the params schema at import; only the core count is wanted here
    from ecqg.core.config import host_cores

    sharing = processes if processes is not None else int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, min(8, host_cores() // max(1, sharing) - 1))


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of what decides the ids: the tokenizer's class and vocabulary, normaliser, pre-tokeniser and post-
    processor (a fast tokenizer's own description, minus the truncation / padding state a call leaves behind)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TypeError(f"{type(tokenizer).__name__} ({tokenizer.name_or_path}) is not a fast tokenizer; a tokenised "
                        "corpus needs one (its fingerprint is the fast tokenizer's own description)")
    described = json.loads(backend.to_str())
    described.pop("truncation", None)
    described.pop("padding", None)
    described["class"] = type(tokenizer).__name__
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def passage_features(tokenizer, titles, texts, max_length: int) -> list[dict[str, list[int]]]:
    """``[CLS] title [SEP] text [SEP]``, only the text cut: the one definition the retriever and this module share."""
    encoding = tokenizer(list(titles), list(texts), truncation="only_second", max_length=max_length)
    keys = list(encoding.keys())
    return [{k: encoding[k][i] for k in keys} for i in range(len(encoding["input_ids"]))]


class TokenStore:
    """Unpadded features of many texts as one flat ``int32`` array per key and row offsets.

    ``features(rows)`` gives the dicts :meth:`ecqg.retrieval.retriever.Retriever.pad` takes (numpy rows; the
    attention mask rebuilt as ones)."""

    def __init__(self, keys: Sequence[str], flat: Mapping[str, np.ndarray], offsets: np.ndarray):
        self.keys, self.flat, self.offsets = list(keys), dict(flat), offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self, rows: Sequence[int]) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        return self.offsets[rows + 1] - self.offsets[rows]

    def features(self, rows: Sequence[int]) -> list[dict[str, np.ndarray]]:
        out = []
        for row in rows:
            lo, hi = int(self.offsets[row]), int(self.offsets[row + 1])
            out.append({k: (np.ones(hi - lo, dtype=np.int32) if k == ATTENTION_MASK else self.flat[k][lo:hi])
                        for k in self.keys})
        return out

    def padded(self, rows: Sequence[int], pad_id: int, side: str = "right") -> dict:
        """``{key: LongTensor (len(rows), longest)}``: the tensors :func:`ecqg.retrieval.retriever.pad_features`
        makes of ``features(rows)`` (same keys in the same order, pad id for ``input_ids``, 0 elsewhere, the mask
        ones over each text), built by whole-array gathers instead of a Python loop over rows."""
        # torch only for batches: tokenising and the token caches run without it
        import torch

        rows = np.asarray(rows, dtype=np.int64)
        starts = self.offsets[rows]
        lengths = self.offsets[rows + 1] - starts
        width = int(lengths.max()) if len(rows) else 0
        position = np.arange(width, dtype=np.int64)[None, :]
        lead = (width - lengths)[:, None] if side == "left" else np.zeros((len(rows), 1), dtype=np.int64)
        mask = (position >= lead) & (position < lead + lengths[:, None])
        index = (starts[:, None] + position - lead)[mask]
        out = {}
        for key in self.keys:
            if key == ATTENTION_MASK:
                array = mask.astype(np.int64)
            else:
                array = np.full((len(rows), width), pad_id if key == "input_ids" else 0, dtype=np.int64)
                array[mask] = self.flat[key][index]
            out[key] = torch.from_numpy(array)
        return out

    @classmethod
    def from_features(cls, features: Sequence[Mapping[str, Sequence[int]]]) -> "TokenStore":
        keys = list(features[0]) if features else ["input_ids"]
        lengths = np.fromiter((len(f["input_ids"]) for f in features), dtype=np.int64, count=len(features))
        offsets = np.zeros(len(features) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = {k: np.fromiter(itertools.chain.from_iterable(f[k] for f in features), dtype=_DTYPES.get(k, np.int32),
                               count=int(offsets[-1]))
                for k in keys if k != ATTENTION_MASK}
        return cls(keys, flat, offsets)

    @classmethod
    def concatenate(cls, parts: Sequence["TokenStore"]) -> "TokenStore":
        if not parts:
            return cls.from_features([])
        starts = np.cumsum([0] + [int(p.offsets[-1]) for p in parts[:-1]])
        offsets = np.concatenate([parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, starts)])
        flat = {k: np.concatenate([p.flat[k] for p in parts]) for k in parts[0].flat}
        return cls(parts[0].keys, flat, offsets)


def tokenize_in_threads(tokenize: Callable[..., list[dict]], columns: Sequence[Sequence[str]], threads: int,
                        slice_size: int = 4096) -> TokenStore:
    """``tokenize(*column_slices)`` over slices of the columns in ``threads`` threads, in order; each slice is
    packed into arrays as soon as it is tokenised."""
    n = len(columns[0])
    starts = range(0, n, slice_size)

    def one(lo: int) -> TokenStore:
        return TokenStore.from_features(tokenize(*(list(c[lo:lo + slice_size]) for c in columns)))

    if threads <= 1 or n <= slice_size:
        return TokenStore.concatenate(list(map(one, starts)))
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ecqg-tokenize") as pool:
        return TokenStore.concatenate(list(pool.map(one, starts)))


class TrainingTokens:
    """Every question of the training records and every passage they can put in a batch (the first positive, the
    hard-negative pool), each distinct text tokenised once.

    ``question_rows[i]`` is record i's row in ``questions``; ``positive_rows[i]`` its first positive's row in
    ``passages``, and its hard negatives' rows are ``negative_values[negative_offsets[i]:negative_offsets[i + 1]]``
    (:meth:`negative_rows`), in the order of its ``hard_negative_ctxs``. Only arrays: a DataLoader worker forked from
    the trainer reads them without touching (and so copying) a Python object per record.

    :meth:`cached` keeps them on disk as Arrow files (memory-mapped, as the tokenised corpus is): tokenised once per
    training set, read by every process of a run and by every later run on the same set."""

    def __init__(self, model, records: Sequence[Mapping], threads: int = 1):
        rows = _RecordRows(records)
        self._set(tokenize_in_threads(model.query_features, [rows.questions], threads),
                  tokenize_in_threads(model.passage_features, [rows.titles, rows.texts], threads), rows)

    @classmethod
    def from_arrays(cls, questions: TokenStore, passages: TokenStore, positive_rows: np.ndarray,
                    negative_offsets: np.ndarray, negative_values: np.ndarray) -> "TrainingTokens":
        """Tokens made elsewhere (``bench/bench_loader.py`` builds them at the paper's shapes without a tokenizer)."""
        out = cls.__new__(cls)
        out._set(questions, passages, SimpleNamespace(positive_rows=np.asarray(positive_rows, dtype=np.int64),
                                                      negative_offsets=np.asarray(negative_offsets, dtype=np.int64),
                                                      negative_values=np.asarray(negative_values, dtype=np.int64)))
        return out

    def _set(self, questions: TokenStore, passages: TokenStore, rows: "_RecordRows") -> None:
        self.questions, self.passages = questions, passages
        self.positive_rows, self.negative_offsets, self.negative_values = (
            rows.positive_rows, rows.negative_offsets, rows.negative_values)
        self.question_rows = np.arange(len(rows.positive_rows), dtype=np.int64)

    def negative_rows(self, record: int) -> np.ndarray:
        """Record ``record``'s hard negatives' rows in ``passages``, in its ``hard_negative_ctxs`` order."""
        return self.negative_values[self.negative_offsets[record]:self.negative_offsets[record + 1]]

    @property
    def pool_sizes(self) -> np.ndarray:
        """Hard negatives each record offers."""
        return np.diff(self.negative_offsets)

    def describe(self) -> dict:
        return {"questions": len(self.questions), "distinct_passages": len(self.passages),
                "question_tokens": int(self.questions.offsets[-1]), "passage_tokens": int(self.passages.offsets[-1])}

    # --- on disk ------------------------------------------------------------------------------------------------
    @classmethod
    def cached(cls, model, records: Sequence[Mapping], root: str | Path, threads: int = 1, rank: int = 0,
               world: int = 1, barrier: Callable[[], None] | None = None) -> "TrainingTokens":
        """The records' tokens from ``root/<key>/`` when an earlier run (or another process of this one) wrote them,
        else tokenised and written there (atomically) first. ``key`` hashes every text a batch can hold, the
        retriever class, its tokenizer (:func:`tokenizer_fingerprint`) and both maximum lengths, so another set,
        model or length never reads these ids. A tokenizer without a fingerprint (not a fast one) is tokenised in
        memory, as without a cache.

        With ``world`` processes (``rank`` this one's, ``barrier`` their synchronisation; every process calls this)
        each tokenises a contiguous share of the texts into a part file, and rank 0 joins the parts: no process
        waits while another tokenises a whole set (at the paper's sizes, minutes under a collective's timeout)."""
        rows = _RecordRows(records)
        try:
            tokenizer = tokenizer_fingerprint(model.tokenizer)
        except TypeError:
            log.info("training tokens not cached: %s has no fast tokenizer", type(model).__name__)
            out = cls.__new__(cls)
            out._set(tokenize_in_threads(model.query_features, [rows.questions], threads),
                     tokenize_in_threads(model.passage_features, [rows.titles, rows.texts], threads), rows)
            return out
        identity = {"format": CACHE_FORMAT, "retriever": f"{type(model).__module__}.{type(model).__qualname__}",
                    "tokenizer": tokenizer, "query_max_length": int(model.config.query_max_length),
                    "passage_max_length": int(model.config.passage_max_length), "records": rows.digest}
        key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:20]
        directory = Path(root) / key
        if not (directory / CACHE_CARD).is_file():
            if world > 1:
                _write_shared(model, rows, directory, identity, threads, rank, world, barrier)
            else:
                questions = tokenize_in_threads(model.query_features, [rows.questions], threads)
                passages = tokenize_in_threads(model.passage_features, [rows.titles, rows.texts], threads)
                _write_cache(directory, identity, questions, passages)
            log.info("training tokens written to %s", directory)
        out = cls.__new__(cls)
        out._set(_read_store(directory / "questions.arrow"), _read_store(directory / "passages.arrow"), rows)
        if len(out.questions) != len(records) or len(out.passages) != len(rows.titles):
            raise ValueError(f"{directory}: {len(out.questions)} questions and {len(out.passages)} passages, the "
                             f"records have {len(records)} and {len(rows.titles)}; delete the directory")
        return out


CACHE_FORMAT = 1                 # bump when the files' layout changes: older caches are then not read
CACHE_CARD = "tokens.json"


class _RecordRows:
    """The records' texts laid out for tokenisation (each distinct passage once) and their rows, with a digest of
    everything that decides the ids."""

    def __init__(self, records: Sequence[Mapping]):
        passage_rows: dict[tuple[str, str], int] = {}
        digest = hashlib.sha256()

        def row(ctx: Mapping) -> int:
            key = (ctx.get("title") or "", ctx["text"])
            found = passage_rows.get(key)
            if found is None:
                found = passage_rows[key] = len(passage_rows)
                digest.update(b"P" + key[0].encode("utf-8") + b"\0" + key[1].encode("utf-8") + b"\0")
            return found

        positives, counts, values = [], [], []
        self.questions = []
        for r in records:
            self.questions.append(r["question"])
            digest.update(b"Q" + r["question"].encode("utf-8") + b"\0")
            positives.append(row(r["positive_ctxs"][0]))
            negatives = [row(c) for c in (r.get("hard_negative_ctxs") or [])]
            counts.append(len(negatives))
            values += negatives
            digest.update(json.dumps([positives[-1], negatives]).encode("ascii"))
        self.positive_rows = np.array(positives, dtype=np.int64)
        self.negative_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.negative_offsets[1:])
        self.negative_values = np.array(values, dtype=np.int64)
        self.titles, self.texts = (list(t) for t in zip(*passage_rows)) if passage_rows else ([], [])
        self.digest = digest.hexdigest()


def _share(n: int, rank: int, world: int) -> slice:
    size = -(-n // world)
    return slice(rank * size, min(n, (rank + 1) * size))


def _write_shared(model, rows: "_RecordRows", directory: Path, identity: dict, threads: int, rank: int, world: int,
                  barrier: Callable[[], None] | None) -> None:
    """Each process tokenises its share of the questions and passages into ``.<key>.part-<rank>``; after a barrier
    rank 0 joins the parts in order into the cache (the same ids one process would have written) and removes them;
    a second barrier, and every process reads the cache."""
    if barrier is None:
        raise ValueError("tokenising a share per process needs the processes' barrier")
    part = directory.parent / f".{directory.name}.part-{rank}"
    qs, ps = _share(len(rows.questions), rank, world), _share(len(rows.titles), rank, world)
    questions = tokenize_in_threads(model.query_features, [rows.questions[qs]], threads)
    passages = tokenize_in_threads(model.passage_features, [rows.titles[ps], rows.texts[ps]], threads)
    with atomic_path(part) as tmp:
        tmp.mkdir(parents=True)
        _write_store(tmp / "questions.arrow", questions)
        _write_store(tmp / "passages.arrow", passages)
    barrier()
    if rank == 0:
        parts = [directory.parent / f".{directory.name}.part-{r}" for r in range(world)]
        _write_cache(directory, identity,
                     TokenStore.concatenate([_read_store(p / "questions.arrow") for p in parts]),
                     TokenStore.concatenate([_read_store(p / "passages.arrow") for p in parts]))
        for p in parts:
            shutil.rmtree(p, ignore_errors=True)
    barrier()


def _write_cache(directory: Path, identity: dict, questions: TokenStore, passages: TokenStore) -> None:
    """``questions.arrow`` and ``passages.arrow`` (Arrow IPC files, one record batch of ``large_list`` columns), then
    the card; a directory another process completed first is kept."""
    if (directory / CACHE_CARD).is_file():
        return
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(directory) as tmp:
            tmp.mkdir()
            for name, store in (("questions", questions), ("passages", passages)):
                _write_store(tmp / f"{name}.arrow", store)
            (tmp / CACHE_CARD).write_text(json.dumps({**identity, "questions": len(questions),
                                                      "passages": len(passages)}, indent=2) + "\n",
                                          encoding="utf-8")
    except OSError:
        if not (directory / CACHE_CARD).is_file():     # not a race lost to another process: a real failure
            raise


def _write_store(path: Path, store: TokenStore) -> None:
    # pyarrow only for the on-disk token cache; it is not on the torch+transformers-only GPU image
    import pyarrow as pa

    offsets = pa.array(store.offsets, type=pa.int64())
    columns = {k: pa.LargeListArray.from_arrays(offsets, pa.array(store.flat[k])) for k in store.flat}
    schema = pa.schema([pa.field(k, a.type) for k, a in columns.items()],
                       metadata={"keys": json.dumps(store.keys)})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        writer.write_batch(pa.record_batch(list(columns.values()), schema=schema))


def _read_store(path: Path) -> TokenStore:
    """A store written by :func:`_write_store`, memory-mapped: its arrays are views of the file (read-only), shared
    through the page cache by every process that reads it."""
    # pyarrow only for the on-disk token cache
    import pyarrow as pa

    batch = pa.ipc.open_file(pa.memory_map(str(path), "r")).get_batch(0)
    keys = json.loads(batch.schema.metadata[b"keys"])
    flat, offsets = {}, None
    for name in batch.schema.names:
        column = batch.column(name)
        offsets = column.offsets.to_numpy(zero_copy_only=True)
        flat[name] = column.values.to_numpy(zero_copy_only=True)
    if offsets is None:
        raise ValueError(f"{path}: no token columns")
    return TokenStore(keys, flat, offsets)
