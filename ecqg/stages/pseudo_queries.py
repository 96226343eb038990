"""Stage `pseudo_queries`: the generator-free ETM and RSM pre-training sets (Luo et al. 2022, §5).

``python -m ecqg.stages.pseudo_queries`` reads stage 04's UnCon set (its passages), the corpus and the BM25 index and
writes ``outputs/pseudo/etm.json`` and ``outputs/pseudo/rsm.json`` (DPR retriever json, as stage 04's sets), which
stage 05 pre-trains ETM-DPR and RSM-DPR on. Its figures (counts, negatives, the ``pseudo.m`` sweep) go to
``results/<profile>/stage_pseudo_queries.json``.

Stage ``pseudo_queries`` in the pipeline: the generator-free ETM and RSM pre-training sets (Luo et al. 2022, §5).

Both are built over the UnCon set's passages, entry for entry (a passage UnCon uses twice gets two pseudo-queries),
so ETM-DPR and RSM-DPR pre-train on the same passages and the same number of examples as UnCon-DPR and Mixed-DPR:
only how the query is made differs. Hard negatives follow the synthetic sets' rule (one BM25 negative per query)
with the same-title guard of :mod:`ecqg.retrieval.pseudo_queries`. The stage also measures what ``pseudo.m`` does: for each m
of ``pseudo.m_sweep``, how often BM25 ranks a pseudo-query's own passage first (among the queries whose passage is in
the searched corpus), beside the same figure for UnCon's generated questions (how lexically easy each kind of query
is), on a seeded sample of ``pseudo.sweep_queries`` entries (all of mini's and the study's).
"""

from __future__ import annotations

import logging
import random
import sys
from collections.abc import Sequence
from typing import Mapping

from ecqg.core import cli, config, paths, settings, variants
from ecqg.core.errors import DataFormatError
from ecqg.core.io import empty_directory
from ecqg.core.stage_record import timed_stage
from ecqg.data import text
from ecqg.data.dpr import read_dpr_retriever_json, write_dpr_retriever_json
from ecqg.data.records import read_corpus
from ecqg.retrieval import pseudo_queries
from ecqg.retrieval.bm25 import BM25Searcher
from ecqg.stages.common import passages_by_id, pool_passages

log = logging.getLogger(__name__)

POOL_SET = "uncon"      # the set whose passages (with their repeats) the pseudo-query sets reuse
NEGATIVE_DEPTH = 100    # BM25 hits searched for the hard negative, as for the synthetic sets
N_HARD = 1              # hard negatives per query, as for the synthetic sets
SPACY_TEXTS_PER_PROCESS = 5_000   # below this many passages per core, spaCy's worker start-up outweighs the split


def passage_pool() -> tuple[list[str], list[str]]:
    """(passage ids, questions) of the UnCon set's records, in its order."""
    records = list(read_dpr_retriever_json(variants.SETS[POOL_SET].path))
    for i, rec in enumerate(records):
        if not rec["positive_ctxs"] or not rec["positive_ctxs"][0].get("passage_id"):
            raise DataFormatError(variants.SETS[POOL_SET].path, f"record {i + 1}", "positive_ctxs",
                                  "the first positive needs a passage_id (the pseudo-query sets reuse the passage)")
    return [r["positive_ctxs"][0]["passage_id"] for r in records], [r["question"] for r in records]


def sentence_texts(passages: Mapping[str, Mapping], ids: list[str]) -> dict[str, list[str]]:
    """spaCy's sentences of each passage (the parser's boundaries, as everywhere else in the pipeline)."""
    distinct = list(dict.fromkeys(ids))
    processes = max(1, min(config.host_cores(), len(distinct) // SPACY_TEXTS_PER_PROCESS))
    analyses = text.analyze([passages[pid]["text"] for pid in distinct], n_process=processes)
    return {pid: [passages[pid]["text"][a:b] for a, b in analysis.sentences]
            for pid, analysis in zip(distinct, analyses)}


def sweep_sample(entries: int, size: int, seed: int) -> list[int]:
    """Which entries of the pool the m sweep searches: all of them when there are at most ``size``, else a seeded
    sample of ``size`` in pool order. The sweep is a diagnostic (a share of queries): at the paper's 1M entries, its
    9 BM25 passes over all of them would be most of the stage's time (``bench/scale_rehearsal.py``)."""
    if entries <= size:
        return list(range(entries))
    return sorted(random.Random(f"{seed}-pseudo-sweep").sample(range(entries), size))


def _lexical_ease(run: Mapping, positives: Mapping[str, str], indexed: set[str]) -> dict:
    """How often BM25 ranks a query's own passage first, over the queries whose passage the index holds (the
    study draws synthetic passages from the whole bundle, most of them outside the searched corpus: a share over
    all queries would measure the corpus, not the queries); ``positives_in_index`` says how many that is."""
    held = {q: pid for q, pid in positives.items() if pid in indexed}
    top1 = sum(bool(run[q]) and run[q][0][0] == pid for q, pid in held.items())
    return {"positive_bm25_top1": round(top1 / max(len(held), 1), 4), "positives_in_index": len(held),
            "queries": len(positives)}


def build_sets(pseudo: settings.Pseudo, bm25: settings.Bm25, seed: int, progress: bool = True
               ) -> tuple[dict[str, list[dict]], dict]:
    """The ETM and RSM sets as DPR examples, and the stage's figures (counts, negatives, the m sweep); ``bm25``:
    the searcher's settings (hard negatives, the sweep); ``seed``: the profile's."""
    pool, uncon_questions = passage_pool()
    passages = passages_by_id(set(pool))       # the pool's passages; a set's negatives are added below
    weights = pseudo_queries.TermWeights(p["text"] for p in pool_passages())   # streamed: O(vocabulary)
    sentences = sentence_texts(passages, pool)
    searcher = BM25Searcher(paths.BM25_INDEX, k1=bm25.k1, b=bm25.b)
    indexed = {p["id"] for p in read_corpus(paths.CORPUS)}       # what the BM25 index holds
    threads = bm25.threads

    def search(records: list[dict]) -> dict:
        return searcher.search({r["id"]: r["question"] for r in records}, k=NEGATIVE_DEPTH, threads=threads,
                               progress=progress)

    sample = sweep_sample(len(pool), pseudo.sweep_queries, seed)
    uncon = [{"id": f"uncon-{i}", "question": uncon_questions[i], "passage_id": pool[i]} for i in sample]
    uncon_ease = {**_lexical_ease(search(uncon), {r["id"]: r["passage_id"] for r in uncon}, indexed),
                  "mean_words": round(sum(len(r["question"].split()) for r in uncon) / max(len(uncon), 1), 2)}
    figures: dict = {"pool_set": POOL_SET, "m": pseudo.m, "sweep_entries": len(sample),
                     "sweep": {"uncon": uncon_ease}}
    for m in pseudo.m_sweep:
        for kind in pseudo_queries.KINDS:
            records, counts = pseudo_queries.build(kind, [pool[i] for i in sample], passages, weights, m, seed,
                                                   sentences)
            figures["sweep"][f"{kind}_m{m}"] = {
                **_lexical_ease(search(records), {r["id"]: r["passage_id"] for r in records}, indexed),
                "mean_words": counts["mean_words"]}
    sets = {}
    for kind in pseudo_queries.KINDS:
        records, counts = pseudo_queries.build(kind, pool, passages, weights, pseudo.m, seed, sentences)
        run = search(records)
        passages.update(passages_by_id({pid for hits in run.values() for pid, _ in hits} - passages.keys()))
        examples, negatives = pseudo_queries.dpr_examples(records, run, passages, n_hard=N_HARD)
        sets[kind] = examples
        figures[kind] = {**counts, **{f"negatives_{k}": v for k, v in negatives.items() if k != "questions"}}
        log.info("%s: %d queries over %d passages (%s)", kind, counts["queries"], counts["passages"], figures[kind])
    searcher.close()
    return sets, figures


def write_sets(sets: Mapping[str, list[dict]]) -> dict[str, int]:
    """Write each set as DPR retriever json under ``outputs/pseudo/`` (emptied first); sizes."""
    empty_directory(paths.PSEUDO)
    return {kind: write_dpr_retriever_json(variants.SETS[kind].path, examples) for kind, examples in sets.items()}


def main(argv: Sequence[str] = ()) -> int:
    cli.parser("ecqg.stages.pseudo_queries", __doc__, paragraphs=2).parse_args(argv)
    s = settings.of(config.load())
    with timed_stage("pseudo_queries", s.profile, s.device) as figures:
        sets, built = build_sets(s.pseudo, s.bm25, s.seed)
        figures.update({"sizes": write_sets(sets), **built})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
