"""BM25 over a Lucene index built and searched with pyserini (Anserini 0.25), the paper's sparse baseline.

Why pyserini and not a Python BM25: the paper's BM25 numbers (and DPR's hard negatives) come from Lucene's BM25 with
Anserini's analyzer (Porter stemming, English stop words); reproducing them needs the same engine.

Index layout follows pyserini's prebuilt ``wikipedia-dpr`` index: a JsonCollection of ``{"id", "contents"}`` where
``contents = title + "\\n" + text``, indexed with positions and document vectors. Storing the raw JSON as well
(``store_raw=True``, as the prebuilt index does) lets :meth:`BM25Searcher.passage` give back title and text without
holding the corpus in memory (psgs_w100 is 21M passages), but it is off by default: Lucene loads each hit's stored
document to read its id, and with the raw JSON in the stored-fields blocks that made k=100 search several times
slower.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from tqdm.auto import tqdm

import ecqg  # noqa: F401  (sets OPENAI_API_KEY before pyserini is imported)
from ecqg.core.java import require_java
from ecqg.core.errors import DataFormatError
from ecqg.core.io import atomic_path, write_json

log = logging.getLogger(__name__)

Run = dict[str, list[tuple[str, float]]]
META_FILE = "ecqg_meta.json"  # Lucene ignores files that do not look like its own, so metadata can live inside.
DEFAULT_K1, DEFAULT_B = 0.9, 0.4  # the paper's (and pyserini's wikipedia-dpr) BM25 parameters


def passage_contents(passage: Mapping, where: str = "passages", index: int | None = None) -> tuple[str, str]:
    """Return ``(id, title + "\\n" + text)`` for one passage, or raise a DataFormatError naming the bad field."""
    for field in ("id", "title", "text"):
        if not isinstance(passage.get(field), str):
            raise DataFormatError(where, index, field, f"expected a string, got {type(passage.get(field)).__name__}")
    if not passage["id"]:
        raise DataFormatError(where, index, "id", "empty passage id")
    title = " ".join(passage["title"].split())  # a newline in the title would break the title/text split
    return passage["id"], f"{title}\n{passage['text']}"


def write_json_collection(passages: Iterable[Mapping], out_dir: str | Path, shard_size: int = 100_000,
                          where: str = "passages") -> int:
    """Stream passages into ``docs-NNNNN.jsonl`` shards; returns the count. Shards let Anserini index in parallel."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    count, handle = 0, None
    try:
        for i, passage in enumerate(passages):
            pid, contents = passage_contents(passage, where, i)
            if pid in seen:
                raise DataFormatError(where, i, "id", f"duplicate passage id {pid!r}")
            seen.add(pid)
            if count % shard_size == 0:
                if handle is not None:
                    handle.close()
                handle = open(out_dir / f"docs-{count // shard_size:05d}.jsonl", "w", encoding="utf-8")
            handle.write(json.dumps({"id": pid, "contents": contents}, ensure_ascii=False) + "\n")
            count += 1
    finally:
        if handle is not None:
            handle.close()
    return count


def _run_anserini_indexer(collection_dir: Path, index_dir: Path, threads: int, optimize: bool,
                          store_raw: bool) -> None:
    """Run Anserini's IndexCollection in this process's JVM (saves a JVM start; errors surface as JavaException)."""
    require_java()
    # pyserini's Lucene side runs in the JVM: loaded only once Java is checked
    from pyserini.pyclass import autoclass

    args = ["-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
            "-input", str(collection_dir), "-index", str(index_dir), "-threads", str(int(threads)),
            "-storePositions", "-storeDocvectors"]
    if store_raw:
        args.append("-storeRaw")
    if optimize:
        args.append("-optimize")
    autoclass("io.anserini.index.IndexCollection").main(args)


def index_doc_count(index_dir: str | Path) -> int:
    """Number of documents Lucene holds in ``index_dir``."""
    require_java()
    # pyserini's Lucene side runs in the JVM: loaded only once Java is checked
    from pyserini.index.lucene import IndexReader

    return int(IndexReader(str(index_dir)).stats()["documents"])


def build_bm25_index(passages: Iterable[Mapping], index_dir: str | Path, threads: int = 2,
                     shard_size: int = 100_000, optimize: bool = True, store_raw: bool = False,
                     where: str = "passages") -> dict:
    """Build a Lucene index atomically into ``index_dir``; returns (and stores) counts and timings.

    The indexed document count must equal the number of input passages: Anserini silently skips empty or
    unparsable documents, and a silently smaller index would bias every BM25 number downstream.
    ``optimize`` merges to one segment (faster search, doc order independent of indexing threads).
    """
    start = time.perf_counter()
    index_dir = Path(index_dir)
    index_dir.parent.mkdir(parents=True, exist_ok=True)  # the collection goes next to the index: /tmp may be small
    with tempfile.TemporaryDirectory(prefix=f".{index_dir.name}.jsoncoll.", dir=index_dir.parent) as coll:
        n_input = write_json_collection(passages, coll, shard_size, where)
        if n_input == 0:
            raise DataFormatError(where, None, None, "no passages to index")
        written = time.perf_counter()
        with atomic_path(index_dir) as tmp:
            _run_anserini_indexer(Path(coll), tmp, threads, optimize, store_raw)
            n_indexed = index_doc_count(tmp)
            if n_indexed != n_input:
                raise RuntimeError(f"{index_dir}: Lucene indexed {n_indexed} documents but {n_input} were given "
                                   "(empty or unparsable passages?)")
            meta = {"documents": n_indexed, "k1_default": DEFAULT_K1, "b_default": DEFAULT_B, "threads": threads,
                    "optimize": optimize, "store_raw": store_raw, "collection_write_s": round(written - start, 3),
                    "index_s": round(time.perf_counter() - written, 3)}
            meta["wall_s"] = round(time.perf_counter() - start, 3)
            write_json(tmp / META_FILE, meta)
    log.info("BM25 index %s: %d passages in %.1f s (%.0f passages/s)", index_dir, n_indexed, meta["wall_s"],
             n_indexed / max(meta["wall_s"], 1e-9))
    return meta


def _chunks(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class BM25Searcher:
    """A pyserini LuceneSearcher with the paper's BM25 (k1=0.9, b=0.4) and a run-returning batch search."""

    def __init__(self, index_dir: str | Path, k1: float = DEFAULT_K1, b: float = DEFAULT_B):
        require_java()
        # pyserini's Lucene side runs in the JVM: loaded only once Java is checked
        from pyserini.search.lucene import LuceneSearcher

        self.index_dir = Path(index_dir)
        if not self.index_dir.is_dir():
            raise FileNotFoundError(f"{self.index_dir}: no BM25 index here (build it with build_bm25_index)")
        self.k1, self.b = float(k1), float(b)
        self._searcher = LuceneSearcher(str(self.index_dir))
        self._searcher.set_bm25(self.k1, self.b)

    @property
    def stores_raw(self) -> bool:
        """Whether :meth:`passage` works (the index was built with ``store_raw=True``)."""
        meta = self.index_dir / META_FILE
        if meta.is_file():
            return bool(json.loads(meta.read_text(encoding="utf-8")).get("store_raw"))
        return self._searcher.doc(0) is not None and self._searcher.doc(0).raw() is not None

    @property
    def num_docs(self) -> int:
        return int(self._searcher.num_docs)

    def search(self, queries: Mapping[str, str], k: int = 100, threads: int = 2, chunk_size: int = 1000,
               progress: bool = True) -> Run:
        """Search every query; returns ``{qid: [(passage_id, score), ...]}`` best first (empty list: no match).

        Queries go through Anserini's default bag-of-words query builder (analyzer tokens, no query parser), so
        Lucene syntax such as ``"``, ``:``, ``(`` or ``?`` in a question is plain text and cannot crash the search.
        Chunking keeps the JNI result lists small and gives tqdm something to count.
        """
        qids = list(queries)
        run: Run = {}
        start = time.perf_counter()
        for chunk in tqdm(list(_chunks(qids, chunk_size)), desc="BM25 search", unit="chunk", disable=not progress):
            hits = self._searcher.batch_search([str(queries[q]) for q in chunk], chunk, k=int(k), threads=int(threads))
            for qid in chunk:
                run[qid] = [(h.docid, float(h.score)) for h in hits.get(qid, [])]
        elapsed = time.perf_counter() - start
        log.info("BM25 search: %d queries, k=%d, %d threads in %.1f s (%.1f queries/s)", len(qids), k, threads,
                 elapsed, len(qids) / max(elapsed, 1e-9))
        return run

    def passage(self, pid: str) -> dict:
        """The stored passage ``{"id", "title", "text"}`` (from the raw JSON; KeyError if the id is not indexed)."""
        doc = self._searcher.doc(pid)
        if doc is None:
            raise KeyError(f"{self.index_dir}: no passage with id {pid!r}")
        if doc.raw() is None:
            raise ValueError(f"{self.index_dir}: built without store_raw, so passages must come from the corpus")
        title, _, text = json.loads(doc.raw())["contents"].partition("\n")
        return {"id": pid, "title": title, "text": text}

    def close(self) -> None:
        self._searcher.close()
