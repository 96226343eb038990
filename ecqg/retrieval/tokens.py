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
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ATTENTION_MASK = "attention_mask"     # all ones on an unpadded text: rebuilt, not stored
_DTYPES = {"token_type_ids": np.int8}  # segment ids are 0 / 1; every other key is stored as int32


def tokenize_threads() -> int:
    """Threads that tokenise on the host: this process's share of the machine's cores (torchrun's
    ``LOCAL_WORLD_SIZE`` processes share them), one left for the loop feeding the device.

    Why: one tokenizer thread gave 2,200 bert-base passages/s on an H100 host while the GPU encodes 7,300
    (``bench/gpu_check.py``, 27 Nov 2026); ``TOKENIZERS_PARALLELISM`` stays false (``ecqg/env.py``) because the
    tokenizer's own threads do not survive the forks of torchrun and DataLoader workers, so the split is ours."""
    from ecqg.config import host_cores

    return max(1, min(8, host_cores() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))) - 1))


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

    ``question_rows[i]`` is record i's row in ``questions``; ``positive_rows[i]`` and ``negative_rows[i]`` (a list)
    its passages' rows in ``passages``."""

    def __init__(self, model, records: Sequence[Mapping], threads: int = 1):
        passage_rows: dict[tuple[str, str], int] = {}

        def row(ctx: Mapping) -> int:
            return passage_rows.setdefault((ctx.get("title") or "", ctx["text"]), len(passage_rows))

        self.positive_rows = np.array([row(r["positive_ctxs"][0]) for r in records], dtype=np.int64)
        self.negative_rows = [[row(c) for c in (r.get("hard_negative_ctxs") or [])] for r in records]
        titles, texts = zip(*passage_rows) if passage_rows else ((), ())
        self.questions = tokenize_in_threads(model.query_features, [[r["question"] for r in records]], threads)
        self.passages = tokenize_in_threads(model.passage_features, [titles, texts], threads)
        self.question_rows = np.arange(len(records), dtype=np.int64)

    def describe(self) -> dict:
        return {"questions": len(self.questions), "distinct_passages": len(self.passages),
                "question_tokens": int(self.questions.offsets[-1]), "passage_tokens": int(self.passages.offsets[-1])}
