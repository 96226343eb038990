"""The extractive reader of the round-trip filter (stage 1): SQuAD2-style examples, features, training, inference.

The paper used a SQuAD 2.0 + NQ reader; offline there are no SQuAD-trained weights, so :func:`train_mrc` trains one
here from the bundled MiniLM on the gold triples plus the SQuAD 2.0 unanswerables (a hub SQuAD2 checkpoint can be
passed to :func:`build_mrc_model` and used as is). Features follow the SQuAD2 recipe of transformers' ``run_qa``:
question first, ``only_second`` truncation, overlapping windows (``stride``) over long passages, unanswerable ->
[CLS]. Answer offsets are character offsets into the passage *text* (the title is not shown to the reader).
"""

from __future__ import annotations

import collections
import logging
import math
import random
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

from ecqg.data.fields import require_nonempty_str
from ecqg.data.records import check_answer_offset
from ecqg.core.errors import DataFormatError
from ecqg.core.io import atomic_path

from ecqg.filtering.generated import passage_of
from ecqg.runtime import parallel
from ecqg.runtime.hf_training import train_with_checkpoints
from ecqg.runtime.models import from_pretrained, inference
from ecqg.runtime.parallel import MODEL_DIR, block

log = logging.getLogger(__name__)

MAX_QUESTION_TOKENS = 64  # longer (degenerate) generated questions are cut, so a passage window always fits


def build_mrc_model(ref: str, seed: int | None = None, **model_kwargs):
    """``(model, fast tokenizer)`` for extractive QA from a hub id, a directory or ``bundled:minilm``.

    A SQuAD2 checkpoint comes with its trained span head; an encoder (``bundled:minilm``, ``bert-base-uncased``)
    gets a freshly initialised one (transformers warns about it), drawn with ``seed`` so runs repeat.
    """
    # transformers loads when a reader is built: the filtering package imports without it
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, set_seed

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


def mrc_examples(triples: Iterable[Mapping], unanswerables: Iterable[Mapping], passages: Mapping[str, Mapping],
                 where: str = "MRC data") -> list[dict[str, Any]]:
    """SQuAD2-style examples ``{id, question, passage_id, context, answers, answer_starts}``.

    Gold triples (``read_train_gold``) are answerable, with their offset checked against the corpus text;
    SQuAD 2.0 unanswerables (``read_squad2_unanswerable``) get empty ``answers`` (the reader learns [CLS]).
    """
    out = []
    for i, t in enumerate(triples):
        text = passage_of(passages, t["passage_id"], f"{where} (gold triples)", i)["text"]
        check_answer_offset(t, text, f"{where} (gold triples)", i)
        out.append({"id": t["id"], "question": t["question"], "passage_id": t["passage_id"], "context": text,
                    "answers": [t["answer"]], "answer_starts": [t["answer_start"]]})
    for i, u in enumerate(unanswerables):
        text = passage_of(passages, u["passage_id"], f"{where} (unanswerables)", i)["text"]
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
    # the question must leave the window more tokens than the stride (a RoBERTa pair costs 4 special tokens, and a
    # byte-level BPE spends more tokens on a question than WordPiece): else the tokenizer panics mid-run
    room = max_length - stride - tokenizer.num_special_tokens_to_add(pair=True) - 1
    if room < 8:
        raise ValueError(f"mrc.max_length ({max_length}) minus mrc.stride ({stride}) leaves {room} tokens for a "
                         "question: raise mrc.max_length or lower mrc.stride")
    return tokenizer(_cut_questions(tokenizer, questions, min(MAX_QUESTION_TOKENS, room)), list(contexts),
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
    the [CLS] share stays that of the examples (off unless asked).
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


def train_mrc(model, tokenizer, examples: Sequence[Mapping], checkpoint_dir: str | Path, settings: Mapping[str, Any],
              *, seed: int, max_length: int = 384, stride: int = 128, answer_windows_only: bool = False,
              progress: bool = True) -> dict[str, Any]:
    """Fine-tune ``model`` in place on SQuAD2-style ``examples`` with :func:`ecqg.runtime.hf_training.train_with_checkpoints`
    (checkpoints in ``checkpoint_dir``, resumed after a kill); ``settings`` is the params training block.

    Returns the trainer's figures plus example / feature counts; batches are padded per batch, not to max_length.
    """
    # transformers loads when a reader trains
    from transformers import DataCollatorWithPadding

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
    ids, texts, contexts = questions_with_contexts(questions, passages, where)
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


def questions_with_contexts(questions: Sequence[Mapping], passages: Mapping[str, Mapping] | None = None,
                            where: str = "questions") -> tuple[list[str], list[str], list[str]]:
    """``(ids, questions, contexts)``, checked: unique non-empty ids, a question, and a ``context`` or a
    ``passage_id`` found in ``passages`` (errors name the record and field)."""
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
            contexts.append(passage_of(passages, require_nonempty_str(q, "passage_id", where, i), where, i)["text"])
    return ids, texts, contexts


def predict_in_processes(model, tokenizer, questions: Sequence[Mapping], passages: Mapping[str, Mapping] | None,
                         progress: bool = True, where: str = "questions", *, processes: int | str = 1,
                         launcher_args: Sequence[str] | None = None, **settings) -> dict[str, dict[str, Any]]:
    """:func:`predict` split over ``processes`` torchrun workers (:mod:`ecqg.runtime.parallel`; started with
    ``launcher_args``), whole chunks each, so the predictions are the single process's; with one process it is
    :func:`predict` itself."""
    if parallel.processes(processes) <= 1:
        return predict(model, tokenizer, questions, passages, progress=progress, where=where, **settings)
    ids, texts, contexts = questions_with_contexts(questions, passages, where)
    job = {"questions": [{"id": i, "question": q, "context": c} for i, q, c in zip(ids, texts, contexts)],
           "settings": {"chunk_size": 2048, **settings}}
    with parallel.job_directory("read") as job_dir:
        save_mrc(model, tokenizer, job_dir / parallel.MODEL_DIR)
        parts = parallel.run("read", job, job_dir, processes, launcher_args, progress)
    return {qid: prediction for part in parts for qid, prediction in part.items()}


def predict_part(job: Mapping[str, Any], rank: int, world: int, job_dir) -> dict[str, dict[str, Any]]:
    """One torchrun worker of :func:`predict_in_processes`: whole chunks of its block."""
    questions, settings = job["questions"], job["settings"]
    lo, hi = block(len(questions), settings["chunk_size"], rank, world)
    if lo == hi:
        return {}
    model, tokenizer = build_mrc_model(str(Path(job_dir) / MODEL_DIR))
    return predict(model, tokenizer, questions[lo:hi], progress=job["progress"] and rank == 0, **settings)
