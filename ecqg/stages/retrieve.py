"""Stage `retrieve@<system>`: top-``retrieval.depth`` passages for every test question, as TREC run files.

``python -m ecqg.stages.retrieve bm25`` (or ``tfidf``) writes ``outputs/runs/<system>/<set>.trec``.
"""

from __future__ import annotations

import time

from ecqg.core import cli, config, paths, settings
from ecqg.core.io import read_jsonl
from ecqg.core.stage_record import log, timed_stage
from ecqg.retrieval.bm25 import BM25Searcher
from ecqg.retrieval.run_files import write_run

SYSTEMS = ("bm25", "tfidf")


def open_searcher(system: str, bm25: settings.Bm25):
    """``search(queries, k)`` of ``system``: BM25 with its settings (``bm25``), or the TF-IDF index."""
    if system == "bm25":
        searcher = BM25Searcher(paths.BM25_INDEX, k1=bm25.k1, b=bm25.b)
        return lambda queries, k: searcher.search(queries, k=k, threads=bm25.threads)
    # scikit-learn, pandas: kept out of --help and the bm25 runs
    from ecqg.retrieval.tfidf import TfidfIndex

    index = TfidfIndex.load(paths.TFIDF_INDEX)
    return lambda queries, k: index.search(queries, k=k)


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.stages.retrieve", __doc__, paragraphs=2)
    parser.add_argument("system", choices=SYSTEMS)
    system = parser.parse_args(argv).system
    s = settings.of(config.load())
    depth = s.retrieval.depth
    with timed_stage(f"retrieve_{system}", s.profile, s.device) as figures:
        search = open_searcher(system, s.bm25)
        for name in s.data.test_sets:
            queries = {q["id"]: q["question"] for _, q in read_jsonl(paths.questions_file(name))}
            start = time.perf_counter()
            run = search(queries, depth)
            seconds = time.perf_counter() - start
            write_run(paths.run_file(system, name), run, tag=system)
            figures[f"{name}_empty_rankings"] = sum(1 for ranking in run.values() if not ranking)
            figures[f"{name}_queries_per_s"] = round(len(queries) / max(seconds, 1e-9), 1)
            log.info("%s on %s: %d queries in %.1f s", system, name, len(queries), seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
