"""DrQA-style TF-IDF retrieval (the paper's TF-IDF row) built from scikit-learn parts.

DrQA (Chen et al. 2017, ``drqa/retriever``) hashes unigrams and bigrams into 2**24 buckets (murmurhash3), weights a
document term by ``log(1 + tf) * idf`` with the BM25-style ``idf = log((N - df + 0.5) / (df + 0.5))`` clipped at 0,
does not normalise, and scores by the sparse dot product of query and document vectors.

Here: ``HashingVectorizer`` (unigrams + bigrams, 2**24 features, ``alternate_sign=False``, lowercase, English stop
words) and ``TfidfTransformer``. Where they differ from DrQA, and what we do:

* idf: by default (``idf="drqa"``) the transformer's ``idf_`` is set to DrQA's clipped BM25-style idf computed from the
  hashed document frequencies, so terms in more than half the passages get weight 0 exactly as in DrQA.
  ``idf="sklearn"`` keeps sklearn's smooth ``ln((1 + N) / (1 + df)) + 1``.
* tf: sklearn's ``sublinear_tf`` is ``1 + log(tf)``, not DrQA's ``log(1 + tf)`` (equal ordering for one term,
  different ratios: tf=1 weighs 1 instead of 0.69). sklearn has no ``log1p`` option.
* normalisation: ``norm="l2"`` (cosine) by default; ``norm=None`` gives DrQA's unnormalised dot product. On
  <=100-word passages the length effect is small.
* tokens: sklearn's ``\\b\\w\\w+\\b`` tokens (one-character tokens dropped) instead of DrQA's tokenizer, and stop words
  are removed *before* bigrams are formed (so "capital of France" yields the bigram "capital france"), whereas DrQA
  forms bigrams on the full sequence and drops those that start or end with a stop word. Hash function: sklearn's
  signed murmurhash3 folded to its absolute value, DrQA's unsigned murmurhash3 — a different, equally good bucketing.

The index is saved without pickle: ``matrix.npz`` (scipy CSR, documents x terms; in memory it is held as terms x
documents CSR so a batch of queries is one sparse product),
``ids.json``, ``params.json`` and the idf of the seen features as ``idf_features.npy`` / ``idf_values.npy`` (a dense
2**24 idf vector would be 128 MB for any corpus).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer
from tqdm.auto import tqdm

from ecqg.core.errors import DataFormatError
from ecqg.core.io import atomic_path, write_json

log = logging.getLogger(__name__)

Run = dict[str, list[tuple[str, float]]]
FORMAT_VERSION = 1
DEFAULT_PARAMS = {"n_features": 2**24, "ngram_range": [1, 2], "stop_words": "english", "lowercase": True,
                  "sublinear_tf": True, "norm": "l2", "idf": "drqa", "dtype": "float32"}


def _vectorizer(options: Mapping) -> HashingVectorizer:
    """The hashing vectorizer of an index's ``options`` (:data:`DEFAULT_PARAMS` and their overrides)."""
    return HashingVectorizer(n_features=int(options["n_features"]), ngram_range=tuple(options["ngram_range"]),
                             stop_words=options["stop_words"], lowercase=bool(options["lowercase"]),
                             alternate_sign=False, norm=None, dtype=np.dtype(options["dtype"]))


def drqa_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """DrQA's ``log((N - df + 0.5) / (df + 0.5))`` clipped at 0 (``drqa/retriever/build_tfidf.py``)."""
    return np.maximum(np.log((n_docs - df + 0.5) / (df + 0.5)), 0.0)


def _transformer(options: Mapping, idf: np.ndarray) -> TfidfTransformer:
    """A TfidfTransformer whose idf is given, not fitted: the same object serves build, reload and queries."""
    transformer = TfidfTransformer(norm=options["norm"], use_idf=True, sublinear_tf=bool(options["sublinear_tf"]))
    transformer.idf_ = idf.astype(np.dtype(options["dtype"]))
    transformer.n_features_in_ = int(options["n_features"])
    return transformer


def _idf_from_df(df: np.ndarray, n_docs: int, kind: str) -> np.ndarray:
    if kind == "drqa":
        return drqa_idf(df, n_docs)
    if kind == "sklearn":
        return np.log((1.0 + n_docs) / (1.0 + df)) + 1.0
    raise ValueError(f"tfidf idf must be 'drqa' or 'sklearn', got {kind!r}")


def _passage_texts(passages: Iterable[Mapping], ids: list[str], where: str) -> Iterator[str]:
    """Yield ``title + text`` per passage, recording ids and rejecting malformed records by position."""
    seen: set[str] = set()
    for i, passage in enumerate(passages):
        for field in ("id", "title", "text"):
            if not isinstance(passage.get(field), str):
                raise DataFormatError(where, i, field, "expected a string")
        if passage["id"] in seen:
            raise DataFormatError(where, i, "id", f"duplicate passage id {passage['id']!r}")
        seen.add(passage["id"])
        ids.append(passage["id"])
        yield f"{passage['title']}\n{passage['text']}"


def _batched(items: Iterable, size: int) -> Iterator[list]:
    batch: list = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class TfidfIndex:
    """A TF-IDF index in memory: ``matrix`` is terms x documents CSR, ``ids`` the passage ids in corpus order."""

    def __init__(self, matrix: sp.csr_matrix, ids: list[str], options: Mapping, idf: np.ndarray):
        self.matrix, self.ids, self.params = matrix, ids, dict(options)
        self.vectorizer = _vectorizer(self.params)
        self.transformer = _transformer(self.params, idf)

    @classmethod
    def build(cls, passages: Iterable[Mapping], batch_size: int = 10_000, progress: bool = True,
              where: str = "passages", **params) -> "TfidfIndex":
        """Hash passages in streamed batches, then weight them; ``params`` override :data:`DEFAULT_PARAMS`."""
        unknown = set(params) - set(DEFAULT_PARAMS)
        if unknown:
            raise ValueError(f"unknown tfidf parameters: {sorted(unknown)}")
        params = {**DEFAULT_PARAMS, **params}
        start, ids = time.perf_counter(), []
        vectorizer = _vectorizer(params)
        texts = _passage_texts(passages, ids, where)
        counts = [vectorizer.transform(b) for b in tqdm(_batched(texts, batch_size), desc="TF-IDF hash",
                                                        unit="batch", disable=not progress)]
        if not ids:
            raise DataFormatError(where, None, None, "no passages to index")
        counts = sp.vstack(counts, format="csr")
        df = np.bincount(counts.indices, minlength=int(params["n_features"]))
        idf = _idf_from_df(df.astype(np.float64), len(ids), params["idf"])
        docs = _transformer(params, idf).transform(counts, copy=False)
        matrix = sp.csr_matrix(docs.T)  # terms x documents: a query row times this is one sparse product
        matrix.sort_indices()
        elapsed = time.perf_counter() - start
        log.info("TF-IDF index: %d passages, %d non-zeros in %.1f s (%.0f passages/s)", len(ids), matrix.nnz,
                 elapsed, len(ids) / max(elapsed, 1e-9))
        return cls(matrix, ids, params, idf)

    def save(self, index_dir: str | Path) -> Path:
        """Write the index atomically into ``index_dir`` (npz + json + npy, no pickle)."""
        index_dir = Path(index_dir)
        seen = np.flatnonzero(np.diff(self.matrix.indptr)).astype(np.int64)  # features with df > 0
        unseen_idf = float(_idf_from_df(np.zeros(1), len(self.ids), self.params["idf"])[0])
        with atomic_path(index_dir) as tmp:
            tmp.mkdir()
            # stored documents x terms: its indptr has n_docs + 1 entries instead of 2**24 + 1
            sp.save_npz(tmp / "matrix.npz", sp.csr_matrix(self.matrix.T), compressed=False)
            np.save(tmp / "idf_features.npy", seen)
            np.save(tmp / "idf_values.npy", self.transformer.idf_[seen])
            write_json(tmp / "ids.json", self.ids)
            write_json(tmp / "params.json", {"format_version": FORMAT_VERSION, "n_docs": len(self.ids),
                                             "nnz": int(self.matrix.nnz), "unseen_idf": unseen_idf, **self.params})
        return index_dir

    @classmethod
    def load(cls, index_dir: str | Path) -> "TfidfIndex":
        """Read an index written by :meth:`save`; scores are bit-identical to the saved index's."""
        index_dir = Path(index_dir)
        params = json.loads((index_dir / "params.json").read_text(encoding="utf-8"))
        if params.get("format_version") != FORMAT_VERSION:
            raise DataFormatError(index_dir / "params.json", None, "format_version",
                                  f"expected {FORMAT_VERSION}, got {params.get('format_version')!r}")
        ids = json.loads((index_dir / "ids.json").read_text(encoding="utf-8"))
        matrix = sp.csr_matrix(sp.load_npz(index_dir / "matrix.npz").T)
        matrix.sort_indices()
        if matrix.shape != (params["n_features"], len(ids)):
            raise DataFormatError(index_dir / "matrix.npz", None, None,
                                  f"shape {matrix.shape} does not match {params['n_features']} x {len(ids)} ids")
        idf = np.full(int(params["n_features"]), params["unseen_idf"], dtype=np.float64)
        idf[np.load(index_dir / "idf_features.npy")] = np.load(index_dir / "idf_values.npy")
        params = {k: params[k] for k in DEFAULT_PARAMS}
        return cls(matrix, ids, params, idf)

    def query_vectors(self, texts: Sequence[str]) -> sp.csr_matrix:
        return sp.csr_matrix(self.transformer.transform(self.vectorizer.transform(list(texts)), copy=False))

    def search(self, queries: Mapping[str, str], k: int = 100, batch_size: int = 256, progress: bool = True) -> Run:
        """Top-``k`` passages per query by sparse dot product; ties broken by corpus order (deterministic)."""
        qids = list(queries)
        run: Run = {}
        start = time.perf_counter()
        for batch in tqdm(list(_batched(qids, batch_size)), desc="TF-IDF search", unit="batch",
                          disable=not progress):
            scores = sp.csr_matrix(self.query_vectors([queries[q] for q in batch]) @ self.matrix)
            for row, qid in enumerate(batch):
                lo, hi = scores.indptr[row], scores.indptr[row + 1]
                docs, vals = top_k(scores.indices[lo:hi], scores.data[lo:hi], k)
                run[qid] = [(self.ids[d], float(v)) for d, v in zip(docs, vals)]
        elapsed = time.perf_counter() - start
        log.info("TF-IDF search: %d queries, k=%d in %.1f s (%.1f queries/s)", len(qids), k, elapsed,
                 len(qids) / max(elapsed, 1e-9))
        return run


def top_k(doc_idx: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best (doc, score) pairs, score descending then doc index ascending; zero scores never count.

    argpartition alone would pick arbitrarily among documents tied at the cut-off, so every document scoring at least
    the k-th best score is kept and the final order comes from a lexsort.
    """
    keep = scores > 0
    doc_idx, scores = doc_idx[keep], scores[keep]
    if len(scores) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth
        doc_idx, scores = doc_idx[keep], scores[keep]
    order = np.lexsort((doc_idx, -scores))[:k]
    return doc_idx[order], scores[order]


def build_tfidf_index(passages: Iterable[Mapping], index_dir: str | Path, **params) -> dict:
    """Build and save a TF-IDF index; returns its size and timings for the stage metrics."""
    start = time.perf_counter()
    index = TfidfIndex.build(passages, **params)
    built = time.perf_counter()
    index.save(index_dir)
    size = sum(f.stat().st_size for f in Path(index_dir).iterdir())
    return {"documents": len(index.ids), "nnz": int(index.matrix.nnz), "bytes": size,
            "build_s": round(built - start, 3), "save_s": round(time.perf_counter() - built, 3)}
