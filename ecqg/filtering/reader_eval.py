"""SQuAD 2.0 scoring of the reader: exact match and F1 (the official normalisation), split into answerable and
unanswerable questions, and how the reader's confidence relates to being right."""

from __future__ import annotations

import collections
import logging
import re
import string
from typing import Any, Mapping, Sequence


from ecqg.core.errors import DataFormatError

log = logging.getLogger(__name__)


_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, punctuation removed, articles (a/an/the) removed, whitespace collapsed."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> int:
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """SQuAD token F1; when either side normalises to nothing (no answer) it is 1 if both do, else 0."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((collections.Counter(pred) & collections.Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def max_over_gold(metric, prediction: str, golds: Sequence[str]) -> float:
    """Best score over the gold answers; no gold answer means the correct prediction is "" (SQuAD 2.0)."""
    return max(metric(prediction, g) for g in (golds or [""]))


def evaluate_mrc(predictions: Mapping[str, Mapping], examples: Sequence[Mapping]) -> dict[str, Any]:
    """SQuAD 2.0 metrics (percent): EM and F1 overall and on HasAns / NoAns, plus no-answer accuracy.

    ``no_answer_accuracy`` is the binary answerable-or-not decision over all examples (NoAns exact is its recall on
    the unanswerables). A missing prediction is an error, not a zero.
    """
    rows = []
    for i, ex in enumerate(examples):
        if ex["id"] not in predictions:
            raise DataFormatError("MRC predictions", i, "id", f"no prediction for example {ex['id']!r}")
        pred = predictions[ex["id"]]["answer"]
        rows.append((bool(ex["answers"]), max_over_gold(exact_match, pred, ex["answers"]),
                     max_over_gold(f1_score, pred, ex["answers"]), (pred != "") == bool(ex["answers"])))

    def pct(values):
        return round(100.0 * sum(values) / len(values), 2) if values else None

    has = [r for r in rows if r[0]]
    no = [r for r in rows if not r[0]]
    return {"n": len(rows), "exact": pct([r[1] for r in rows]), "f1": pct([r[2] for r in rows]),
            "has_ans_n": len(has), "has_ans_exact": pct([r[1] for r in has]), "has_ans_f1": pct([r[2] for r in has]),
            "no_ans_n": len(no), "no_ans_exact": pct([r[1] for r in no]),
            "no_answer_accuracy": pct([r[3] for r in rows])}


def confidence_table(predictions: Mapping[str, Mapping], examples: Sequence[Mapping],
                     thresholds: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)) -> list[dict]:
    """What a round-trip threshold would keep on labelled data: per threshold, the share of answerable questions
    kept (non-null, confidence >= t), of those the share answered with overlap (F1 > 0), and the share of
    unanswerable questions wrongly kept. Used to choose ``filtering.confidence_threshold``."""
    has = [e for e in examples if e["answers"]]
    no = [e for e in examples if not e["answers"]]
    out = []
    for t in thresholds:
        def passes(e, t=t):
            p = predictions[e["id"]]
            return not p["is_null"] and p["confidence"] >= t

        kept = [e for e in has if passes(e)]
        good = [e for e in kept if max_over_gold(f1_score, predictions[e["id"]]["answer"], e["answers"]) > 0]
        out.append({"threshold": t, "answerable_kept": round(len(kept) / max(len(has), 1), 4),
                    "kept_overlapping": round(len(good) / max(len(kept), 1), 4),
                    "unanswerable_kept": round(sum(passes(e) for e in no) / max(len(no), 1), 4)})
    return out
