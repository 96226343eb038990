"""DPR-style distant supervision: turn (question, answers) into retriever training records with BM25.

DPR (Karpukhin et al. 2020, sec. 5.1) trains on NQ with positive = the highest-ranked BM25 passage that contains an
answer, and hard negative = the top BM25 passage that does not. We do the same for NQ dev questions, whose gold
passages are not in our corpus. Answer containment is DPR's has_answer on the passage *text* (not the title), via
:class:`ecqg.data.text.TokenizedPassages` so each passage is tokenised once. Questions with no answer-bearing passage in the
top ``depth`` are dropped and counted, never silently.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterable, Mapping, Sequence

from tqdm.auto import tqdm

from ecqg.core.errors import DataFormatError
from ecqg.data.text import TokenizedPassages, dpr_tokens

log = logging.getLogger(__name__)

Run = dict[str, list[tuple[str, float]]]
PassageLookup = Callable[[str], Mapping] | Mapping[str, Mapping]


def _lookup_fn(passages: PassageLookup) -> Callable[[str], Mapping]:
    return passages.__getitem__ if isinstance(passages, Mapping) else passages


def _check_question(q: Mapping, i: int, where: str) -> None:
    for field, kind in (("id", str), ("question", str), ("answers", list)):
        if not isinstance(q.get(field), kind):
            raise DataFormatError(where, i, field, f"expected {kind.__name__}, got {type(q.get(field)).__name__}")


def _ctx(passage: Mapping, pid: str, score: float) -> dict:
    return {"title": passage["title"], "text": passage["text"], "passage_id": pid, "score": float(score)}


def select_contexts(hits: Sequence[tuple[str, float]], answer_tokens: list[list[str]], corpus: TokenizedPassages,
                    n_hard: int) -> tuple[int | None, list[int]]:
    """Return (rank index of the positive or None, rank indices of the first ``n_hard`` answer-free hits).

    Stops scanning once both are found, so most questions tokenise only a few passages.
    """
    positive, negatives = None, []
    for rank, (pid, _) in enumerate(hits):
        if positive is not None and len(negatives) >= n_hard:
            break
        if corpus.contains(pid, answer_tokens):
            positive = rank if positive is None else positive
        elif len(negatives) < n_hard:
            negatives.append(rank)
    return positive, negatives


def distant_supervision(questions: Iterable[Mapping], run: Run, passages: PassageLookup, depth: int = 100,
                        n_hard: int = 1, dataset: str = "nq_dev", where: str = "questions",
                        cache_questions: int = 2000, progress: bool = True) -> tuple[list[dict], dict]:
    """Build DPR retriever-json records from a BM25 ``run``; returns ``(records, stats)``.

    ``passages`` maps a passage id to ``{"title", "text"}`` (a dict, or a callable such as
    ``BM25Searcher.passage``). The token cache is reset every ``cache_questions`` questions to bound memory on a
    21M-passage corpus. A question missing from ``run`` is an error (it was never searched), not a drop.
    """
    lookup = _lookup_fn(passages)
    records, ranks = [], []
    stats = {"questions_in": 0, "kept": 0, "dropped_no_positive": 0, "fewer_hard_negatives": 0,
             "depth": depth, "n_hard": n_hard}
    corpus = TokenizedPassages(lambda pid: lookup(pid)["text"])
    start = time.perf_counter()
    for i, q in enumerate(tqdm(questions, desc="distant supervision", unit="q", disable=not progress)):
        _check_question(q, i, where)
        if q["id"] not in run:
            raise DataFormatError(where, i, "id", f"question {q['id']!r} has no BM25 run")
        if i and i % cache_questions == 0:
            corpus = TokenizedPassages(lambda pid: lookup(pid)["text"])
        stats["questions_in"] += 1
        hits = run[q["id"]][:depth]
        positive, negatives = select_contexts(hits, [dpr_tokens(a) for a in q["answers"]], corpus, n_hard)
        if positive is None:
            stats["dropped_no_positive"] += 1
            continue
        stats["fewer_hard_negatives"] += len(negatives) < n_hard
        ranks.append(positive + 1)
        ctx = lambda r: _ctx(lookup(hits[r][0]), hits[r][0], hits[r][1])  # noqa: E731
        records.append({"dataset": dataset, "question": q["question"], "answers": list(q["answers"]),
                        "positive_ctxs": [ctx(positive)], "negative_ctxs": [],
                        "hard_negative_ctxs": [ctx(r) for r in negatives]})
    stats["kept"] = len(records)
    stats["mean_positive_rank"] = round(sum(ranks) / len(ranks), 3) if ranks else None
    stats["positive_at_rank_1"] = sum(r == 1 for r in ranks)
    stats["wall_s"] = round(time.perf_counter() - start, 3)
    log.info("distant supervision: %d of %d questions kept (%d without an answer-bearing passage in the top %d), "
             "mean positive rank %s", stats["kept"], stats["questions_in"], stats["dropped_no_positive"], depth,
             stats["mean_positive_rank"])
    return records, stats


def bm25_distant_supervision(questions: Sequence[Mapping], searcher, depth: int = 100, n_hard: int = 1,
                             threads: int = 2, passages: PassageLookup | None = None,
                             **kwargs) -> tuple[list[dict], dict]:
    """Search every question with ``searcher`` (a :class:`~ecqg.retrieval.bm25.BM25Searcher`) at ``depth``, then
    build the records. Passage text comes from ``passages`` or, if None, from the index's stored raw documents
    (indexes built with ``store_raw=True``)."""
    seen: set[str] = set()
    for i, q in enumerate(questions):
        _check_question(q, i, kwargs.get("where", "questions"))
        if q["id"] in seen:
            raise DataFormatError(kwargs.get("where", "questions"), i, "id", f"duplicate question id {q['id']!r}")
        seen.add(q["id"])
    if passages is None and not searcher.stores_raw:
        raise ValueError(f"{searcher.index_dir}: index has no stored passages (store_raw=False); pass passages=")
    run = searcher.search({q["id"]: q["question"] for q in questions}, k=depth, threads=threads,
                          progress=kwargs.get("progress", True))
    return distant_supervision(questions, run, passages if passages is not None else searcher.passage,
                               depth=depth, n_hard=n_hard, **kwargs)


def gold_training_records(triples: Sequence[Mapping], run: Run, passages: PassageLookup, n_hard: int = 1,
                          where: str = "triples", progress: bool = True) -> tuple[list[dict], dict]:
    """Annotated (question, passage, answer) triples -> DPR records with BM25 hard negatives.

    The positive is the annotated passage (title and text inlined in the triple). Hard negatives are the top BM25
    passages for the question that are not the positive and do not contain the answer (DPR's rule for its gold NQ
    data). A triple whose question has no BM25 ranking is an error; one with fewer negatives is kept and counted.
    """
    lookup = _lookup_fn(passages)
    corpus = TokenizedPassages(lambda pid: lookup(pid)["text"])
    records, stats = [], {"triples_in": len(triples), "fewer_hard_negatives": 0, "n_hard": n_hard}
    for i, t in enumerate(tqdm(triples, desc="gold hard negatives", unit="q", disable=not progress)):
        if t["id"] not in run:
            raise DataFormatError(where, i, "id", f"triple {t['id']!r} has no BM25 run")
        answer_tokens = [dpr_tokens(t["answer"])]
        negatives = [(pid, score) for pid, score in run[t["id"]]
                     if pid != t["passage_id"] and not corpus.contains(pid, answer_tokens)][:n_hard]
        stats["fewer_hard_negatives"] += len(negatives) < n_hard
        records.append({"dataset": t["source"], "question": t["question"], "answers": [t["answer"]],
                        "positive_ctxs": [{"title": t["title"], "text": t["text"], "passage_id": t["passage_id"]}],
                        "negative_ctxs": [],
                        "hard_negative_ctxs": [_ctx(lookup(pid), pid, score) for pid, score in negatives]})
    stats["kept"] = len(records)
    return records, stats
