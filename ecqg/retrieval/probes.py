"""Where an answer sits in its gold passage, and the moved-sentence probe: the inputs of notebook 07's slices and of
the probe that stage 05 scores at every fine-tuning snapshot.

Definitions: the gold passage of a question is the first of its ``gold_ids`` whose text contains an answer (DPR's
has_answer: NFD, DrQA tokens, uncased); the answer's position is its earliest token-sequence match, mapped back to
characters of the original text; sentences are spaCy's (``ecqg.data.text.analyze``). Questions without such a passage
are left out and counted. The moved-sentence probe (the design of Fayyaz et al., ACL 2025) scores a question against
its gold passage with the answer sentence moved to the front and to the end.

Why apart from :mod:`ecqg.analysis.mechanism` (the statistics over these): training scores the probe at its
snapshots, and training code depends on no analysis module.
"""

from __future__ import annotations

import math
import random
import unicodedata
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ecqg.retrieval import evaluation
from ecqg.core.errors import DataFormatError
from ecqg.data.text import Analysis, _TOKEN_RE, dpr_tokens

BUCKETS = ("sentence 1", "sentence 2", "sentence 3+")


# ================================================================================================ answer position
def _nfd_tokens(text: str) -> tuple[list[str], list[int], list[int]]:
    """DrQA tokens of ``text`` (NFD, lower-cased) with their start / end offsets in the ORIGINAL text.

    NFD is applied character by character so every normalised index maps back to the character it came from.
    """
    pieces, origin = [], []
    for i, ch in enumerate(text):
        norm = unicodedata.normalize("NFD", ch)
        pieces.append(norm)
        origin.extend([i] * len(norm))
    nfd = "".join(pieces)
    tokens, starts, ends = [], [], []
    for m in _TOKEN_RE.finditer(nfd):
        tokens.append(m.group().lower())
        starts.append(origin[m.start()])
        ends.append(origin[m.end() - 1] + 1)
    return tokens, starts, ends


def answer_span(text: str, answers: Sequence[str]) -> tuple[int, int] | None:
    """Character span of the earliest answer occurrence in ``text`` (DPR's token-sequence match), or None.

    Found exactly when ``ecqg.data.text.has_answer(text, answers)`` is true (a test checks both on the same inputs).
    """
    tokens, starts, ends = _nfd_tokens(text)
    best: tuple[int, int] | None = None
    for answer in answers:
        needle = dpr_tokens(answer)
        if not needle:
            continue
        n = len(needle)
        for i in range(len(tokens) - n + 1):
            if tokens[i:i + n] == needle:
                if best is None or starts[i] < best[0]:
                    best = (starts[i], ends[i + n - 1])
                break
    return best


def gold_passages(questions: Sequence[Mapping], text_of: Mapping[str, str]) -> pd.DataFrame:
    """Per question, the first gold passage that contains an answer and the answer's character span there.

    Columns: question_id, passage_id, start_char, end_char, status ("ok", "no_gold_ids", "gold_not_in_corpus",
    "no_answer_in_gold"). Only "ok" rows are located; the others are counted so the reader sees what was left out.
    """
    rows = []
    for i, q in enumerate(questions):
        gold = q.get("gold_ids")
        if gold is None:
            raise DataFormatError("<questions>", i, "gold_ids", "missing (only a test set with gold passages, NQ, "
                                  "can be sliced by answer position)")
        answers = evaluation._answers_of(q)
        row = {"question_id": str(q["id"]), "passage_id": None, "start_char": -1, "end_char": -1}
        present = [pid for pid in gold if pid in text_of]
        status = "no_gold_ids" if not gold else "gold_not_in_corpus" if not present else "no_answer_in_gold"
        for pid in present:
            span = answer_span(text_of[pid], answers)
            if span is not None:
                row.update(passage_id=pid, start_char=span[0], end_char=span[1])
                status = "ok"
                break
        rows.append({**row, "status": status})
    return pd.DataFrame(rows, columns=["question_id", "passage_id", "start_char", "end_char", "status"])


def sentence_index(sentences: Sequence[tuple[int, int]], char: int) -> int:
    """0-based index of the sentence that holds character ``char`` (the last sentence starting at or before it)."""
    starts = np.array([s for s, _ in sentences], dtype=np.int64)
    if not len(starts):
        return 0
    return int(max(0, np.searchsorted(starts, char, side="right") - 1))


def bucket_of(sentence: int) -> str:
    return BUCKETS[min(sentence, len(BUCKETS) - 1)]


def locate_answers(gold: pd.DataFrame, text_of: Mapping[str, str],
                   analyses: Mapping[str, Analysis]) -> pd.DataFrame:
    """``gold_passages`` plus, for located questions: answer sentence (0-based), number of sentences, relative
    character position of the answer, and its bucket (``BUCKETS``; None when not located)."""
    out = gold.copy()
    sentence, n_sent, relative, bucket = [], [], [], []
    for r in gold.itertuples():
        if r.status != "ok":
            sentence.append(-1), n_sent.append(0), relative.append(math.nan), bucket.append(None)
            continue
        sents = analyses[r.passage_id].sentences
        j = sentence_index(sents, r.start_char)
        sentence.append(j)
        n_sent.append(len(sents))
        relative.append(r.start_char / max(len(text_of[r.passage_id]), 1))
        bucket.append(bucket_of(j))
    return out.assign(answer_sentence=sentence, n_sentences=n_sent, relative_position=relative, bucket=bucket)


# ======================================================================================== moved-sentence probe
def moved_sentence_pairs(questions: Sequence[Mapping], locations: pd.DataFrame, passages: Mapping[str, Mapping],
                         analyses: Mapping[str, Analysis], max_pairs: int | None = None, seed: int = 0,
                         fits: Callable[[str, str], bool] | None = None) -> tuple[list[dict], dict]:
    """For located questions whose answer is NOT in sentence 1: the gold passage with the answer sentence moved to
    the front and, separately, to the end (other sentences in their order, joined by single spaces; the title
    unchanged). One question per passage (the first), a seeded sample of ``max_pairs`` (None: all). ``fits(title,
    text)``: whether the encoder reads the whole passage; passages it would truncate are left out, since moving the
    answer past the cut would measure truncation, not attention.

    Returns the pairs (question_id, question, passage_id, title, front, end, answer_sentence, n_sentences) and the
    counts of what was left out.
    """
    by_id = {str(q["id"]): q for q in questions}
    candidates, seen = [], set()
    counts = {"located": int((locations.status == "ok").sum()), "answer_in_sentence_1": 0,
              "passage_already_used": 0, "truncated_by_encoder": 0}
    for r in locations[locations.status == "ok"].itertuples():
        if r.answer_sentence == 0:
            counts["answer_in_sentence_1"] += 1
            continue
        if r.passage_id in seen:
            counts["passage_already_used"] += 1
            continue
        seen.add(r.passage_id)
        passage = passages[r.passage_id]
        text = passage["text"]
        if fits is not None and not fits(passage.get("title") or "", text):
            counts["truncated_by_encoder"] += 1
            continue
        sentences = [text[s:e].strip() for s, e in analyses[r.passage_id].sentences]
        moved = sentences[r.answer_sentence]
        rest = [s for i, s in enumerate(sentences) if i != r.answer_sentence and s]
        candidates.append({"question_id": r.question_id, "question": by_id[r.question_id]["question"],
                           "passage_id": r.passage_id, "title": passage.get("title") or "",
                           "front": " ".join([moved] + rest), "end": " ".join(rest + [moved]),
                           "answer_sentence": int(r.answer_sentence), "n_sentences": int(r.n_sentences)})
    counts["eligible"] = len(candidates)
    if max_pairs is not None and len(candidates) > max_pairs:
        keep = sorted(random.Random(f"{seed}-moved-sentence").sample(range(len(candidates)), max_pairs))
        candidates = [candidates[i] for i in keep]
    counts["probed"] = len(candidates)
    return candidates, counts


def moved_sentence_scores(model, pairs: Sequence[Mapping], batch_size: int = 64, autocast: str | None = None,
                          progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(front, end) scores of each pair's question against its two passage versions with the retriever's own
    retrieval score (DPR: dot product of [CLS] vectors), encoded as at retrieval time."""
    # dense brings torch and FAISS; the probe sets and buckets (read by analysis) import without them
    from ecqg.retrieval.dense import encode_passages, encode_queries

    if not pairs:
        return np.zeros(0), np.zeros(0)
    q = encode_queries(model, [p["question"] for p in pairs], batch_size, progress=progress, autocast=autocast)
    versions = [{"id": f"{p['passage_id']}#{side}", "title": p["title"], "text": p[side]}
                for side in ("front", "end") for p in pairs]
    _, v = encode_passages(model, versions, batch_size, progress=progress, autocast=autocast)
    n = len(pairs)
    return model.pair_scores(q, v[:n]), model.pair_scores(q, v[n:])
