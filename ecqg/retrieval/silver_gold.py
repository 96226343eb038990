"""Gold passages for test questions that come without any (DPR's csv test sets): the first BM25-retrieved passage
whose text contains an answer.

Why: the mechanism evaluations (07) and the attention analyses of the questions' passages need one passage per
question that the question is about. The bundle's NQ test set names its gold passages; DPR's ``nq-test.csv`` (the
paper's) names none. DPR itself trains on such "positive = best BM25 passage holding an answer" passages (distant
supervision), so the same rule gives a silver gold passage here. It comes from BM25, not from any dense system under
comparison, so no dense system is favoured; questions whose BM25 top-``depth`` holds no answer get none and are
counted (status ``no_gold_ids``). Each record says where its gold ids came from (``gold_source``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

log = logging.getLogger(__name__)

SOURCE = "bm25_first_answer"


def with_silver_gold(questions: Sequence[Mapping], bm25_run: Mapping[str, Sequence[tuple[str, float]]],
                     corpus: Iterable[Mapping], depth: int = 100) -> tuple[list[dict], dict[str, int]]:
    """``questions`` with ``gold_ids`` filled where they were empty, and counts (``annotated``, ``silver``,
    ``none``). ``corpus`` is streamed once and only the passages the run names for those questions are kept."""
    # evaluation brings pyserini (through data.text)
    from ecqg.retrieval import evaluation

    need = [q for q in questions if not q.get("gold_ids")]
    counts = {"annotated": len(questions) - len(need), "silver": 0, "none": 0}
    if not need:
        return [dict(q) for q in questions], counts
    missing = [str(q["id"]) for q in need if str(q["id"]) not in bm25_run]
    if missing:
        raise ValueError(f"the BM25 run has no ranking for question '{missing[0]}' (of {len(missing)} without gold "
                         "passage ids); run stage retrieve@bm25 first")
    wanted = {pid for q in need for pid, _ in bm25_run[str(q["id"])][:depth]}
    texts = evaluation.passage_texts(p for p in corpus if p["id"] in wanted)
    hits = evaluation.hit_matrix({str(q["id"]): bm25_run[str(q["id"])] for q in need}, need, texts, k_max=depth)
    silver: dict[str, str] = {}
    for q, row in zip(need, hits):
        if row.any():
            silver[str(q["id"])] = bm25_run[str(q["id"])][int(row.argmax())][0]
    out = []
    for q in questions:
        pid = silver.get(str(q["id"]))
        out.append({**q, "gold_ids": [pid], "gold_source": SOURCE} if pid else dict(q))
    counts["silver"], counts["none"] = len(silver), len(need) - len(silver)
    log.info("gold passages: %d annotated, %d from BM25's first answer-bearing passage, %d with none in the top %d",
             counts["annotated"], counts["silver"], counts["none"], depth)
    return out, counts
