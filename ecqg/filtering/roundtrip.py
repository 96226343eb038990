"""Stage 1 (round-trip consistency, Alberti et al. 2019): the reader must answer the generated question from its own
passage, confidently, with an answer that agrees with the generated one (or, as a weaker substitute, the generated
answer must occur in the passage). Rejections are counted by reason."""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping


from ecqg.core.errors import DataFormatError

from ecqg.filtering.generated import check_generated, filter_stats, passage_of
from ecqg.filtering.reader_eval import f1_score

log = logging.getLogger(__name__)

REASONS = ("no_answer", "low_confidence", "answer_mismatch")


def roundtrip_filter(records: Iterable[Mapping], predictions: Mapping[str, Mapping], threshold: float,
                     require_overlap: bool = True, where: str = "generated questions"
                     ) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Round-trip consistency: ``(kept, rejected, stats)``; every rejected record has a ``reason``.

    Checked in this order: ``no_answer`` (the reader predicts null), ``low_confidence`` (confidence < threshold),
    ``answer_mismatch`` (with ``require_overlap``: the reader's answer and the generated one share no token after
    SQuAD normalisation, i.e. token F1 = 0). Alberti et al. demand an exact match; token overlap is used instead
    because a generated answer and a reader's span often differ only in their boundaries ("July 20, 1969" vs
    "1969"), which does not make the question wrong. The F1 is kept (``mrc_answer_f1``) for a stricter cut later.
    Kept and rejected records carry ``mrc_answer``, ``mrc_confidence``, ``mrc_score_diff`` and ``mrc_answer_f1``.

    Without ``require_overlap`` the rule is answerability only: the reader must find a confident span for the
    question in its own passage, whatever the generator wrote after the question. The kept record's ``answer``
    then becomes the reader's span (the answer the question has in that passage; later steps such as BM25 hard
    negatives use it) and the generator's is kept as ``generated_answer``.
    """
    records = check_generated(records, where)
    kept, rejected = [], []
    for i, rec in enumerate(records):
        pred = predictions.get(rec["id"])
        if pred is None:
            raise DataFormatError(where, i, "id", f"no MRC prediction for question {rec['id']!r}")
        f1 = f1_score(pred["answer"], rec["answer"]) if pred["answer"] else 0.0
        out = {**rec, "mrc_answer": pred["answer"], "mrc_confidence": pred["confidence"],
               "mrc_score_diff": pred["score_diff"], "mrc_answer_f1": round(f1, 4)}
        if pred["is_null"] or not pred["answer"]:
            rejected.append({**out, "reason": "no_answer"})
        elif pred["confidence"] < threshold:
            rejected.append({**out, "reason": "low_confidence"})
        elif require_overlap and f1 <= 0.0:
            rejected.append({**out, "reason": "answer_mismatch"})
        elif require_overlap:
            kept.append(out)
        else:
            kept.append({**out, "answer": pred["answer"], "generated_answer": rec["answer"]})
    stats = filter_stats(records, kept, rejected, REASONS)
    stats.update(threshold=threshold, require_overlap=require_overlap)
    log.info("round-trip filter: kept %d of %d (%s)", len(kept), len(records), stats["rejected"])
    return kept, rejected, stats


def answer_in_passage_filter(records: Iterable[Mapping], passages: Mapping[str, Mapping],
                             where: str = "generated questions") -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Fallback for stage 1 where no usable reader exists (e.g. a CPU budget too small to train one): keep a
    question only when its generated answer occurs in its passage text (DPR's has_answer), reason
    ``answer_not_in_passage`` otherwise. Weaker than the round trip (it cannot tell whether the question asks for
    that answer); results that used it must say so."""
    # data.text brings pyserini: only this fallback needs it
    from ecqg.data.text import has_answer

    records = check_generated(records, where)
    kept, rejected = [], []
    for i, rec in enumerate(records):
        text = passage_of(passages, rec["passage_id"], where, i)["text"]
        (kept if has_answer(text, [rec["answer"]]) else rejected).append(rec)
    rejected = [{**r, "reason": "answer_not_in_passage"} for r in rejected]
    stats = filter_stats(records, kept, rejected, ("answer_not_in_passage",))
    stats["method"] = "answer_in_passage (fallback, no MRC round trip)"
    return kept, rejected, stats


