"""How good the generated questions are: BLEU / ROUGE against gold, entity mention, passage-word rate, answers
found in the passage, duplicates; and side-by-side views."""

from __future__ import annotations

import logging
import random
import re
from typing import Any, Iterable, Mapping, Sequence

from ecqg.qg import wellformed
from ecqg.qg.entities import mentions, reference_key

log = logging.getLogger(__name__)



def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def passage_word_rate(question: str, passage: str, entity: str | None = None) -> float | None:
    """Share of the question's content words (spaCy's English stop words and the entity's own words left out) that
    occur in the passage; None when none is left. Why: BLEU against one or two references cannot tell a question
    about the passage from a fluent generic one; a question written from the passage reuses its words, a
    passage-independent language model does not."""
    # spaCy's stop-word list imports spaCy itself; only the passage-word rate needs it
    from spacy.lang.en.stop_words import STOP_WORDS

    skip = set(STOP_WORDS) | (set(_norm(entity).split()) if entity else set())
    words = [w for w in _norm(question).split() if w not in skip]
    if not words:
        return None
    in_passage = set(_norm(passage).split())
    return sum(w in in_passage for w in words) / len(words)


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 4) if kept else None


def question_scores(hypotheses: Sequence[str], references: Sequence[str | Sequence[str]]) -> dict[str, float]:
    """Corpus BLEU-4 (sacrebleu, lowercased: the bundled tokenizer is uncased) and mean ROUGE-L F (stemmed, best
    reference), both on a 0-100 scale. Each hypothesis has one reference or a list of them (any number)."""
    # sacrebleu and rouge_score (nltk, absl) load only to score; the GPU image that samples has neither
    import sacrebleu
    from rouge_score import rouge_scorer

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        return {"bleu4": float("nan"), "rougeL_f": float("nan")}
    refs = [[r] if isinstance(r, str) else list(r) for r in references]
    if any(not r for r in refs):
        raise ValueError("every hypothesis needs at least one reference")
    streams = [[r[i] if i < len(r) else None for r in refs] for i in range(max(map(len, refs)))]
    bleu = sacrebleu.corpus_bleu(list(hypotheses), streams, lowercase=True)
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    rouge = [scorer.score_multi(r, h)["rougeL"].fmeasure for h, r in zip(hypotheses, refs)]
    return {"bleu4": round(bleu.score, 3), "rougeL_f": round(100 * sum(rouge) / len(rouge), 3)}


def evaluate_generator(records: Sequence[Mapping[str, Any]], references: Mapping[str, str | Sequence[str]],
                       passages: Mapping[str, Mapping[str, str]], *, generated: int | None = None) -> dict[str, Any]:
    """Quality of generated questions against held-out gold questions.

    ``references`` maps an input's :func:`reference_key` (passage id, plus the entity for con inputs) to its gold
    question(s): every gold question of that passage (uncon) or of that passage and entity (con). Every kept sample
    is scored (BLEU-4 / ROUGE-L vs its input's references); rates are shares of kept samples; ``kept_rate`` = kept /
    ``generated`` when given. ``duplicate_rate``: share of samples whose normalised question repeats an earlier
    sample of the same input. ``placeholder_rate``: share of con samples whose entity came from a generated
    placeholder (null when no record says). ``passage_word_rate``: mean :func:`passage_word_rate` of the kept
    questions, beside ``reference_passage_word_rate``, the same for the gold questions of the inputs they came from.
    """
    hyps, refs = [], []
    mention = with_entity = in_passage = dups = via_placeholder = 0
    placeholder_known = False
    seen: dict[str, set[str]] = {}
    for rec in records:
        key = reference_key(rec["passage_id"], rec.get("entity"))
        ref = references.get(key)
        if not ref:
            raise KeyError(f"generated record {rec['id']!r}: no reference question for input {key!r}")
        hyps.append(rec["question"])
        refs.append(ref)
        if rec.get("entity"):
            with_entity += 1
            mention += mentions(rec["question"], rec["entity"])
            if "entity_via_placeholder" in rec:
                placeholder_known = True
                via_placeholder += bool(rec["entity_via_placeholder"])
        in_passage += f" {_norm(rec['answer'])} " in f" {_norm(passages[rec['passage_id']]['text'])} "
        q = _norm(rec["question"])
        bucket = seen.setdefault(key, set())
        dups += q in bucket
        bucket.add(q)
    n = len(records)
    out: dict[str, Any] = {"kept": n, **question_scores(hyps, refs)}
    text = {r["passage_id"]: passages[r["passage_id"]]["text"] for r in records}
    gold = {reference_key(r["passage_id"], r.get("entity")): (r["passage_id"], r.get("entity")) for r in records}
    out["passage_word_rate"] = _mean(passage_word_rate(r["question"], text[r["passage_id"]], r.get("entity"))
                                     for r in records)
    out["reference_passage_word_rate"] = _mean(
        passage_word_rate(q, text[pid], entity) for key, (pid, entity) in gold.items()
        for q in ([references[key]] if isinstance(references[key], str) else references[key]))
    share = (lambda a, b: round(a / b, 4) if b else None)  # None (JSON null): not applicable, e.g. no entities
    out.update({"entity_mention_rate": share(mention, with_entity), "answer_in_passage_rate": share(in_passage, n),
                "duplicate_rate": share(dups, n), "inputs": len(seen),
                "placeholder_rate": share(via_placeholder, with_entity) if placeholder_known else None})
    if generated is not None:
        out["generated"] = generated
        out["kept_rate"] = share(n, generated)
    return out


def side_by_side(uncon: Sequence[Mapping[str, Any]], con: Sequence[Mapping[str, Any]],
                 passages: Mapping[str, Mapping[str, str]], *, n: int = 10, seed: int = 0):
    """A table (pandas DataFrame) of up to ``n`` random passages with both generators' first kept sample."""
    # pandas only for this table, and it is not on the torch+transformers-only GPU image
    import pandas as pd

    first_uncon: dict[str, Mapping] = {}
    for rec in uncon:
        first_uncon.setdefault(rec["passage_id"], rec)
    first_con: dict[str, Mapping] = {}
    for rec in con:
        first_con.setdefault(rec["passage_id"], rec)
    shared = sorted(set(first_uncon) & set(first_con))
    rows = []
    for pid in random.Random(seed).sample(shared, min(n, len(shared))):
        u, c = first_uncon[pid], first_con[pid]
        rows.append({"title": passages[pid]["title"], "entity": c["entity"], "uncon_question": u["question"],
                     "uncon_answer": u["answer"], "con_question": c["question"], "con_answer": c["answer"]})
    return pd.DataFrame(rows, columns=["title", "entity", "uncon_question", "uncon_answer", "con_question",
                                       "con_answer"])


# --------------------------------------------------------------------------------------- the method's bar, per set
# What a synthetic set must look like before a verdict rests on it (issue 56; docs/design.md, "Rules"): most
# generated answers occur in their passage, questions do not repeat a word back to back, conditioned questions ask
# about their entity. Declared once: the pages, the notebooks and the tests read it from here.
BAR = {"answer_in_passage": (">=", 0.60), "repeated_word": ("<=", 0.02), "about_entity": (">=", 0.80)}
_REPEAT = re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)


def has_repeated_word(question: str) -> bool:
    """A word repeated back to back ("dynasty dynasty"): the generators' commonest degeneration."""
    return _REPEAT.search(question) is not None


WELLFORMED_SAMPLE = 400   # questions a set's fragment and wh-type checks parse (a fixed random sample: spaCy's parse)


def set_measures(records: Sequence[Mapping[str, Any]], text_of: Mapping[str, str], nlp=None,
                 seed: int = 0) -> dict[str, Any]:
    """The bar's measures over one set of questions (generated, filtered, a training set, or real ones): each a
    share of its questions, None where it does not apply. ``records``: ``question``, ``answer``, ``passage_id`` and,
    for conditioned questions, ``entity``; ``text_of``: passage id -> text.

    ``answer_in_passage``: the normalised answer occurs in the passage; ``about_entity``: a conditioned question
    mentions its entity (:func:`ecqg.qg.entities.mentions`) or asks for it (its answer is the entity); ``repeated_word``: :func:`has_repeated_word`;
    ``duplicate``: the normalised question repeats an earlier one of the set; ``words``: mean length;
    ``passage_word_rate``: :func:`passage_word_rate`'s mean. With a
    spaCy pipeline ``nlp``, also :func:`ecqg.qg.wellformed.measures` (``fragment``, ``wh_type_agrees``) on a random
    sample of :data:`WELLFORMED_SAMPLE` questions drawn with ``seed`` (``checked`` says how many)."""
    n = len(records)
    seen: set[str] = set()
    answer_in = repeated = dups = about = with_entity = words = 0
    for rec in records:
        text = text_of[str(rec["passage_id"])]
        answer_in += bool(rec.get("answer")) and f" {_norm(rec['answer'])} " in f" {_norm(text)} "
        repeated += has_repeated_word(rec["question"])
        q = _norm(rec["question"])
        dups += q in seen
        seen.add(q)
        words += len(q.split())
        if rec.get("entity"):
            with_entity += 1
            about += mentions(rec["question"], rec["entity"]) or _is_entity(rec.get("answer"), rec["entity"])
    share = (lambda a, b: round(a / b, 4) if b else None)
    out = {"questions": n, "answer_in_passage": share(answer_in, n), "about_entity": share(about, with_entity),
           "repeated_word": share(repeated, n), "duplicate": share(dups, n), "words": share(words, n),
           "passage_word_rate": _mean(passage_word_rate(r["question"], text_of[str(r["passage_id"])], r.get("entity"))
                                      for r in records)}
    if nlp is not None and records:
        sample = random.Random(seed).sample(list(records), min(WELLFORMED_SAMPLE, n))
        out.update(wellformed.measures([r["question"] for r in sample], [r.get("answer") or "" for r in sample], nlp))
    return out


def _is_entity(answer: str | None, entity: str) -> bool:
    return bool(answer) and _norm(answer) == _norm(entity)


def bar_misses(measures: Mapping[str, Any]) -> list[str]:
    """Which of :data:`BAR` a set's measures miss (a measure that does not apply, None, is not a miss)."""
    misses = []
    for key, (op, limit) in BAR.items():
        value = measures.get(key)
        if value is not None and not (value >= limit if op == ">=" else value <= limit):
            misses.append(key)
    return misses
