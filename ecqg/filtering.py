"""Filtering of generated questions (DESIGN.md §1 step 3): an extractive MRC round trip, then DPR hardness.

Stage 1 (round-trip consistency, Alberti et al. 2019): an extractive reader must answer the generated question from
its own passage, confidently, with an answer that agrees with the generated one. The paper used a SQuAD 2.0 + NQ
reader; offline there are no SQuAD-trained weights, so :func:`train_mrc` trains one here from the bundled MiniLM on
the gold triples plus the SQuAD 2.0 unanswerables (a hub SQuAD2 checkpoint can be passed to
:func:`build_mrc_model` and used as is). Features follow the SQuAD2 recipe of transformers' ``run_qa``: question
first, ``only_second`` truncation, overlapping windows (``stride``) over long passages, unanswerable -> [CLS].

Stage 2 (hardness): the paper keeps the pairs the *baseline* DPR finds hard, i.e. scores low; a synthetic question
the baseline already ranks perfectly teaches it little. :func:`dpr_hardness` gives each question its baseline score
with its own passage and that passage's rank in the dense index; :func:`hardness_filter` keeps the lowest-scored
fraction per generator (``lowest_score``) or those whose own passage is not already in the top ``max_rank``
(``rank``). The cut-off is a parameter: DESIGN.md records no number for it.

Generated-question records (written by the QG stage)::

    {"id", "passage_id", "entity": str | None, "entity_label": str | None, "question", "answer",
     "generator": "uncon" | "con", "sample_score", "sample"}

Passage text always comes from the corpus (``passages``: id -> ``{"title", "text"}``); answer offsets are character
offsets into the passage *text* (the title is not shown to the reader).
"""

from __future__ import annotations

import collections
import logging
import math
import random
import re
import string
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

from ecqg.data.records import _read_validated, require, require_nonempty_str
from ecqg.errors import DataFormatError
from ecqg.io import atomic_path

log = logging.getLogger(__name__)

GENERATORS = ("uncon", "con")
REASONS = ("no_answer", "low_confidence", "answer_mismatch")
HARDNESS_MODES = ("lowest_score", "rank")
MAX_QUESTION_TOKENS = 64  # longer (degenerate) generated questions are cut, so a passage window always fits


# ================================================================================================ generated records
def validate_generated(rec: Mapping[str, Any], path: str | Path, where: int | str) -> dict[str, Any]:
    """Check one generated-question record; returns a copy (extra keys, e.g. earlier filter scores, are kept)."""
    generator = require(rec, "generator", str, path, where)
    if generator not in GENERATORS:
        raise DataFormatError(path, where, "generator", f"must be one of {GENERATORS}, got {generator!r}")
    out = dict(rec)
    for name in ("id", "passage_id", "question", "answer"):
        out[name] = require_nonempty_str(rec, name, path, where)
    entity = require(rec, "entity", str, path, where, optional=True)
    if generator == "con" and not (entity and entity.strip()):
        raise DataFormatError(path, where, "entity", "a conditioned ('con') question needs its entity")
    out["entity"] = entity
    out["entity_label"] = require(rec, "entity_label", str, path, where, optional=True)
    require(rec, "sample_score", (int, float), path, where, optional=True)
    require(rec, "sample", int, path, where, optional=True)
    return out


def read_generated(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream validated generated-question records from a jsonl(.gz) file (ids unique, errors name the line)."""
    return _read_validated(path, validate_generated)


def check_generated(records: Iterable[Mapping], where: str = "generated questions") -> list[dict[str, Any]]:
    """Validate in-memory records (errors name ``where`` and the record index); ids must be unique."""
    out, seen = [], set()
    for i, rec in enumerate(records):
        rec = validate_generated(rec, where, i)
        if rec["id"] in seen:
            raise DataFormatError(where, i, "id", f"duplicate id {rec['id']!r}")
        seen.add(rec["id"])
        out.append(rec)
    return out


def _passage(passages: Mapping[str, Mapping], pid: str, where: str, index: int) -> Mapping:
    try:
        passage = passages[pid]
    except KeyError:
        raise DataFormatError(where, index, "passage_id", f"passage {pid!r} is not in the corpus") from None
    if not isinstance(passage.get("text"), str):
        raise DataFormatError(where, index, "passage_id", f"passage {pid!r} has no text")
    return passage


# ===================================================================================================== MRC model
def build_mrc_model(ref: str, seed: int | None = None, **model_kwargs):
    """``(model, fast tokenizer)`` for extractive QA from a hub id, a directory or ``bundled:minilm``.

    A SQuAD2 checkpoint comes with its trained span head; an encoder (``bundled:minilm``, ``bert-base-uncased``)
    gets a freshly initialised one (transformers warns about it), drawn with ``seed`` so runs repeat.
    """
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, set_seed

    from ecqg.models import from_pretrained

    tokenizer = from_pretrained(AutoTokenizer, ref)
    if not getattr(tokenizer, "is_fast", False):
        raise RuntimeError(f"model '{ref}': the MRC filter needs a fast tokenizer (offset mapping), "
                           f"got {type(tokenizer).__name__}")
    if seed is not None:
        set_seed(seed)
    model = from_pretrained(AutoModelForQuestionAnswering, ref, **model_kwargs)
    return model, tokenizer


def save_mrc(model, tokenizer, directory: str | Path) -> Path:
    """Model (safetensors) and tokenizer, atomically; load again with ``build_mrc_model(directory)``."""
    with atomic_path(directory) as tmp:
        tmp.mkdir(parents=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(directory)


# ============================================================================================== training examples
def mrc_examples(triples: Iterable[Mapping], unanswerables: Iterable[Mapping], passages: Mapping[str, Mapping],
                 where: str = "MRC data") -> list[dict[str, Any]]:
    """SQuAD2-style examples ``{id, question, passage_id, context, answers, answer_starts}``.

    Gold triples (``read_train_gold``) are answerable, with their offset checked against the corpus text;
    SQuAD 2.0 unanswerables (``read_squad2_unanswerable``) get empty ``answers`` (the reader learns [CLS]).
    """
    from ecqg.data.records import check_answer_offset

    out = []
    for i, t in enumerate(triples):
        text = _passage(passages, t["passage_id"], f"{where} (gold triples)", i)["text"]
        check_answer_offset(t, text, f"{where} (gold triples)", i)
        out.append({"id": t["id"], "question": t["question"], "passage_id": t["passage_id"], "context": text,
                    "answers": [t["answer"]], "answer_starts": [t["answer_start"]]})
    for i, u in enumerate(unanswerables):
        text = _passage(passages, u["passage_id"], f"{where} (unanswerables)", i)["text"]
        out.append({"id": u["id"], "question": u["question"], "passage_id": u["passage_id"], "context": text,
                    "answers": [], "answer_starts": []})
    ids = collections.Counter(e["id"] for e in out)
    dup = next((k for k, n in ids.items() if n > 1), None)
    if dup is not None:
        raise DataFormatError(where, None, "id", f"id {dup!r} occurs in both the triples and the unanswerables")
    return out


def split_by_passage(examples: Sequence[Mapping], heldout_fraction: float, seed: int,
                     max_train: int | None = None) -> tuple[list[dict], list[dict]]:
    """``(train, heldout)``: a seeded share of *passages* is held out, so no held-out passage was seen in training.

    ``max_train`` sub-samples the training side (seeded) to fit a time budget; the held-out side is left whole.
    """
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1), got {heldout_fraction}")
    pids = sorted({e["passage_id"] for e in examples})
    rng = random.Random(seed)
    rng.shuffle(pids)
    held = set(pids[:round(heldout_fraction * len(pids))])
    train = [dict(e) for e in examples if e["passage_id"] not in held]
    heldout = [dict(e) for e in examples if e["passage_id"] in held]
    if max_train is not None and len(train) > max_train:
        keep = set(rng.sample(range(len(train)), max_train))
        train = [e for j, e in enumerate(train) if j in keep]
    return train, heldout


# ======================================================================================================= features
def _cut_questions(tokenizer, questions: Sequence[str], max_tokens: int) -> list[str]:
    """Questions stripped and cut to ``max_tokens`` word pieces (at a character boundary of the last kept piece)."""
    questions = [q.strip() for q in questions]
    enc = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    return [q if len(offs) <= max_tokens else q[:offs[max_tokens - 1][1]]
            for q, offs in zip(questions, enc["offset_mapping"])]


def _encode(tokenizer, questions: Sequence[str], contexts: Sequence[str], max_length: int, stride: int):
    if stride >= max_length // 2:
        raise ValueError(f"stride ({stride}) must be well below max_length ({max_length}), e.g. max_length // 4")
    if tokenizer.padding_side != "right":
        raise ValueError("the MRC features assume question-first inputs padded on the right")
    return tokenizer(_cut_questions(tokenizer, questions, MAX_QUESTION_TOKENS), list(contexts),
                     truncation="only_second", max_length=max_length, stride=stride,
                     return_overflowing_tokens=True, return_offsets_mapping=True, padding=False)


def _context_range(sequence_ids: Sequence[int | None]) -> tuple[int, int]:
    first = sequence_ids.index(1)
    last = len(sequence_ids) - 1 - sequence_ids[::-1].index(1)
    return first, last


def _model_inputs(enc, i: int) -> dict[str, list[int]]:
    return {k: enc[k][i] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}


def train_features(tokenizer, examples: Sequence[Mapping], max_length: int = 384, stride: int = 128,
                   answer_windows_only: bool = False) -> list[dict[str, Any]]:
    """Unpadded training features, one per passage window: model inputs + ``start_positions`` / ``end_positions``.

    A window that does not hold the whole answer (and every window of an unanswerable) points at [CLS], as in the
    SQuAD2 recipe of ``run_qa``; answers are located through the offset mapping, so the label is the smallest token
    span covering the answer's characters.

    ``answer_windows_only`` trades the recipe for CPU time: an answerable example keeps only the window that holds
    its answer most centrally, an unanswerable one only its first window, so a long passage costs one window and
    the [CLS] share stays that of the examples (off by default).
    """
    enc = _encode(tokenizer, [e["question"] for e in examples], [e["context"] for e in examples], max_length, stride)
    features, chosen = [], {}
    for i, offsets in enumerate(enc["offset_mapping"]):
        k = enc["overflow_to_sample_mapping"][i]
        ex = examples[k]
        cls = enc["input_ids"][i].index(tokenizer.cls_token_id) if tokenizer.cls_token_id is not None else 0
        start = end = cls
        centrality = -math.inf
        if ex["answers"]:
            s_char = ex["answer_starts"][0]
            e_char = s_char + len(ex["answers"][0])
            first, last = _context_range(enc.sequence_ids(i))
            if offsets[first][0] <= s_char and offsets[last][1] >= e_char:
                start, end = first, last
                while start <= last and offsets[start][1] <= s_char:
                    start += 1
                while end >= first and offsets[end][0] >= e_char:
                    end -= 1
                centrality = -abs((start + end) / 2 - (first + last) / 2)
        feature = {**_model_inputs(enc, i), "start_positions": start, "end_positions": end}
        if not answer_windows_only:
            features.append(feature)
        elif k not in chosen or centrality > chosen[k][0]:
            chosen[k] = (centrality, feature)
    return features if not answer_windows_only else [chosen[k][1] for k in sorted(chosen)]


# ======================================================================================================= training
def train_mrc(model, tokenizer, examples: Sequence[Mapping], checkpoint_dir: str | Path, settings: Mapping[str, Any],
              *, seed: int, max_length: int = 384, stride: int = 128, answer_windows_only: bool = False,
              progress: bool = True) -> dict[str, Any]:
    """Fine-tune ``model`` in place on SQuAD2-style ``examples`` with :func:`ecqg.hf_training.train_with_checkpoints`
    (checkpoints in ``checkpoint_dir``, resumed after a kill); ``settings`` is the params training block.

    Returns the trainer's figures plus example / feature counts; batches are padded per batch, not to max_length.
    """
    from transformers import DataCollatorWithPadding

    from ecqg.hf_training import train_with_checkpoints

    start = time.perf_counter()
    features = train_features(tokenizer, examples, max_length, stride, answer_windows_only)
    log.info("MRC training: %d examples -> %d features (%d pointing at [CLS]) in %.1f s", len(examples),
             len(features), sum(f["start_positions"] == 0 for f in features), time.perf_counter() - start)
    result = train_with_checkpoints(model, features, checkpoint_dir, settings, seed=seed,
                                    data_collator=DataCollatorWithPadding(tokenizer), progress=progress)
    result.update(examples=len(examples), answerable=sum(bool(e["answers"]) for e in examples),
                  features=len(features), max_length=max_length, stride=stride,
                  answer_windows_only=answer_windows_only)
    return result


# ====================================================================================================== inference
def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _best_span(start: np.ndarray, end: np.ndarray, first: int, last: int, max_answer_length: int):
    """Best (score, i, j, confidence) with first <= i <= j <= last, j - i < max_answer_length, plus the null score.

    The confidence is p_start(i) * p_end(j), each a softmax over [CLS] and this window's context tokens only.
    """
    s, e = start[first:last + 1], end[first:last + 1]
    n = len(s)
    scores = s[:, None] + e[None, :]
    offsets = np.arange(n)[None, :] - np.arange(n)[:, None]
    scores = np.where((offsets >= 0) & (offsets < max_answer_length), scores, -np.inf)
    flat = int(np.argmax(scores))
    i, j = divmod(flat, n)
    p_start = _softmax(np.concatenate([start[:1], s]))
    p_end = _softmax(np.concatenate([end[:1], e]))
    return float(scores[i, j]), first + i, first + j, float(p_start[1 + i] * p_end[1 + j])


def _predict_contexts(model, tokenizer, ids: Sequence[str], questions: Sequence[str], contexts: Sequence[str],
                      max_length: int, stride: int, max_answer_length: int, null_threshold: float,
                      batch_size: int, autocast: str | None, bar) -> dict[str, dict[str, Any]]:
    from ecqg.models import inference

    enc = _encode(tokenizer, questions, contexts, max_length, stride)
    n = len(enc["input_ids"])
    order = np.argsort([-len(x) for x in enc["input_ids"]], kind="stable")
    start_logits: list[np.ndarray | None] = [None] * n
    end_logits: list[np.ndarray | None] = [None] * n
    with inference(model, autocast) as device:
        for lo in range(0, n, batch_size):
            idx = order[lo:lo + batch_size]
            batch = tokenizer.pad([_model_inputs(enc, int(j)) for j in idx], return_tensors="pt")
            out = model(**{k: v.to(device) for k, v in batch.items()})
            s_all, e_all = out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()
            for row, j in enumerate(idx):
                length = len(enc["input_ids"][j])
                start_logits[j], end_logits[j] = s_all[row, :length], e_all[row, :length]
    best: dict[int, dict[str, Any]] = {}
    for f in range(n):
        ex = enc["overflow_to_sample_mapping"][f]
        first, last = _context_range(enc.sequence_ids(f))
        s, e = start_logits[f], end_logits[f]
        null = float(s[0] + e[0])
        score, i, j, conf = _best_span(s, e, first, last, max_answer_length)
        cur = best.setdefault(ex, {"best_score": -math.inf, "null_score": math.inf})
        cur["null_score"] = min(cur["null_score"], null)  # run_qa's rule: the least confident window's null score
        if score > cur["best_score"]:
            offsets = enc["offset_mapping"][f]
            cur.update(best_score=score, start=offsets[i][0], end=offsets[j][1], confidence=conf)
    predictions = {}
    for ex, cur in sorted(best.items()):
        diff = cur["null_score"] - cur["best_score"]
        is_null = not math.isfinite(cur["best_score"]) or diff > null_threshold
        context = contexts[ex]
        predictions[ids[ex]] = {
            "answer": "" if is_null else context[cur["start"]:cur["end"]],
            "start": None if is_null else cur["start"],
            "span_text": context[cur["start"]:cur["end"]] if "start" in cur else "",
            "confidence": round(cur.get("confidence", 0.0), 6),
            "score_diff": round(diff, 4),
            "is_null": is_null,
        }
        bar.update(1)
    return predictions


def predict(model, tokenizer, questions: Sequence[Mapping], passages: Mapping[str, Mapping] | None = None,
            max_length: int = 384, stride: int = 128, max_answer_length: int = 30, null_threshold: float = 0.0,
            batch_size: int = 64, chunk_size: int = 2048, autocast: str | None = None, progress: bool = True,
            where: str = "questions") -> dict[str, dict[str, Any]]:
    """Answer each question from its passage: ``{id: {answer, start, span_text, confidence, score_diff, is_null}}``.

    ``questions`` carry ``id``, ``question`` and either ``context`` or a ``passage_id`` looked up in ``passages``.
    Over all windows of a question: the best non-null span is the highest start+end logit sum with start <= end and
    at most ``max_answer_length`` tokens; the null score is the *lowest* [CLS]+[CLS] sum over its windows (``run_qa``).

    * ``score_diff`` = null score - best span score; the prediction is null when it exceeds ``null_threshold``
      (SQuAD 2.0's rule; then ``answer`` is "" and ``start`` None, while ``span_text`` still shows the best span).
    * ``confidence`` = p_start(i) * p_end(j) of the best span, each probability a softmax over [CLS] plus the context
      tokens of the window holding that span (question and padding excluded), as the transformers QA pipeline scores
      spans. It is in [0, 1] and comparable across questions, but only within one window (a long passage's
      windows are normalised separately).

    Windows are batched longest first and padded per batch; ``chunk_size`` questions are tokenised at a time.
    """
    ids = [require_nonempty_str(q, "id", where, i) for i, q in enumerate(questions)]
    if len(set(ids)) != len(ids):
        dup = next(k for k, c in collections.Counter(ids).items() if c > 1)
        raise DataFormatError(where, ids.index(dup), "id", f"duplicate id {dup!r}")
    texts = [require_nonempty_str(q, "question", where, i) for i, q in enumerate(questions)]
    contexts = []
    for i, q in enumerate(questions):
        if "context" in q:
            contexts.append(require_nonempty_str(q, "context", where, i))
        else:
            if passages is None:
                raise DataFormatError(where, i, "context", "no context, and no passages to look the passage_id up")
            contexts.append(_passage(passages, require_nonempty_str(q, "passage_id", where, i), where, i)["text"])
    start = time.perf_counter()
    out: dict[str, dict[str, Any]] = {}
    with tqdm(total=len(ids), desc="MRC predict", unit="q", disable=not progress) as bar:
        for lo in range(0, len(ids), chunk_size):
            hi = lo + chunk_size
            out.update(_predict_contexts(model, tokenizer, ids[lo:hi], texts[lo:hi], contexts[lo:hi], max_length,
                                         stride, max_answer_length, null_threshold, batch_size, autocast, bar))
    seconds = time.perf_counter() - start
    log.info("MRC predict: %d questions in %.1f s (%.1f questions/s)", len(ids), seconds,
             len(ids) / max(seconds, 1e-9))
    return out


# ===================================================================================================== evaluation
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


# ============================================================================================ stage 1: round trip
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
        else:
            kept.append(out)
    stats = _filter_stats(records, kept, rejected, REASONS)
    stats.update(threshold=threshold, require_overlap=require_overlap)
    log.info("round-trip filter: kept %d of %d (%s)", len(kept), len(records), stats["rejected"])
    return kept, rejected, stats


def answer_in_passage_filter(records: Iterable[Mapping], passages: Mapping[str, Mapping],
                             where: str = "generated questions") -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Fallback for stage 1 where no usable reader exists (e.g. a CPU budget too small to train one): keep a
    question only when its generated answer occurs in its passage text (DPR's has_answer), reason
    ``answer_not_in_passage`` otherwise. Weaker than the round trip (it cannot tell whether the question asks for
    that answer); results that used it must say so."""
    from ecqg.text import has_answer

    records = check_generated(records, where)
    kept, rejected = [], []
    for i, rec in enumerate(records):
        text = _passage(passages, rec["passage_id"], where, i)["text"]
        (kept if has_answer(text, [rec["answer"]]) else rejected).append(rec)
    rejected = [{**r, "reason": "answer_not_in_passage"} for r in rejected]
    stats = _filter_stats(records, kept, rejected, ("answer_not_in_passage",))
    stats["method"] = "answer_in_passage (fallback, no MRC round trip)"
    return kept, rejected, stats


def _filter_stats(records, kept, rejected, reasons) -> dict[str, Any]:
    stats: dict[str, Any] = {"in": len(records), "kept": len(kept),
                             "rejected": {r: sum(x["reason"] == r for x in rejected) for r in reasons}}
    for g in GENERATORS:
        stats[f"{g}_in"] = sum(r["generator"] == g for r in records)
        stats[f"{g}_kept"] = sum(r["generator"] == g for r in kept)
    return stats


# ============================================================================================ stage 2: hardness
def dpr_hardness(bi_encoder, records: Iterable[Mapping], passages: Mapping[str, Mapping], index, ids: Sequence[str],
                 depth: int = 100, batch_size: int = 64, progress: bool = True,
                 where: str = "generated questions") -> dict[str, dict[str, Any]]:
    """Baseline DPR view of each question: ``{id: {"score", "rank"}}``.

    ``score`` = dot product of the question vector and its own passage's vector (re-encoded, so any FAISS index kind
    works); ``rank`` = 1-based position of the own passage in the top ``depth`` of a search of ``index`` (with its
    passage ``ids``), None when it is not there.
    """
    from ecqg.retrieval.dense import encode_passages, encode_queries, search

    records = check_generated(records, where)
    for i, rec in enumerate(records):
        _passage(passages, rec["passage_id"], where, i)
    own = sorted({r["passage_id"] for r in records})
    pids, p_vecs = encode_passages(bi_encoder, [{"id": p, "title": passages[p].get("title") or "",
                                                 "text": passages[p]["text"]} for p in own],
                                   batch_size=batch_size, progress=progress)
    row = {p: k for k, p in enumerate(pids)}
    q_vecs = encode_queries(bi_encoder, [r["question"] for r in records], batch_size=max(batch_size, 128),
                            progress=progress)
    run = search(index, ids, q_vecs, k=depth, qids=[r["id"] for r in records], progress=progress)
    out = {}
    for k, rec in enumerate(records):
        ranked = [pid for pid, _ in run[rec["id"]]]
        rank = ranked.index(rec["passage_id"]) + 1 if rec["passage_id"] in ranked else None
        out[rec["id"]] = {"score": round(float(q_vecs[k] @ p_vecs[row[rec["passage_id"]]]), 5), "rank": rank}
    return out


def hardness_filter(records: Iterable[Mapping], scores: Mapping[str, Mapping], mode: str = "lowest_score",
                    keep_fraction: float = 0.5, max_rank: int = 1, where: str = "generated questions"
                    ) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Keep the questions the baseline finds hard: ``(kept, rejected, stats)``, input order kept.

    * ``lowest_score``: per generator, the ``keep_fraction`` with the lowest baseline score (ties by id), so both
      generators lose the same share; rejected reason ``easy_score``.
    * ``rank``: those whose own passage is *not* in the baseline's top ``max_rank`` (1: not already first), or not
      retrieved at all; rejected reason ``easy_rank``.
    Records gain ``dpr_score`` and ``dpr_rank``.
    """
    if mode not in HARDNESS_MODES:
        raise ValueError(f"hardness mode must be one of {HARDNESS_MODES}, not {mode!r}")
    if mode == "lowest_score" and not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction}")
    if mode == "rank" and (not isinstance(max_rank, int) or max_rank < 1):
        raise ValueError(f"max_rank must be a positive integer, got {max_rank!r}")
    records = check_generated(records, where)
    scored = []
    for i, rec in enumerate(records):
        if rec["id"] not in scores:
            raise DataFormatError(where, i, "id", f"no DPR hardness score for question {rec['id']!r}")
        s = scores[rec["id"]]
        scored.append({**rec, "dpr_score": float(s["score"]), "dpr_rank": s["rank"]})
    if mode == "lowest_score":
        keep_ids = set()
        for g in GENERATORS:
            group = sorted((r for r in scored if r["generator"] == g), key=lambda r: (r["dpr_score"], r["id"]))
            keep_ids.update(r["id"] for r in group[:int(keep_fraction * len(group) + 0.5)])
        is_hard = [r["id"] in keep_ids for r in scored]
        reason = "easy_score"
    else:
        is_hard = [r["dpr_rank"] is None or r["dpr_rank"] > max_rank for r in scored]
        reason = "easy_rank"
    kept = [r for r, h in zip(scored, is_hard) if h]
    rejected = [{**r, "reason": reason} for r, h in zip(scored, is_hard) if not h]
    stats = _filter_stats(scored, kept, rejected, (reason,))
    stats.update(mode=mode, keep_fraction=keep_fraction if mode == "lowest_score" else None,
                 max_rank=max_rank if mode == "rank" else None,
                 own_passage_at_rank_1=sum(r["dpr_rank"] == 1 for r in scored),
                 mean_score_kept=round(float(np.mean([r["dpr_score"] for r in kept])), 4) if kept else None,
                 mean_score_rejected=round(float(np.mean([r["dpr_score"] for r in rejected])), 4) if rejected
                 else None)
    log.info("hardness filter (%s): kept %d of %d", mode, len(kept), len(scored))
    return kept, rejected, stats
