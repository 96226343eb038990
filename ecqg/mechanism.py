"""Evaluations aimed at where entity-conditioned pre-training should act (notebook 07, ``mechanism.json``).

Why: on a small corpus, Table 3's totals barely move (Top-1 is saturated by BM25), and the paper's claim is specific:
a [CLS] passage vector under-represents entities that sit late in the passage or draw little attention, and
questions about them retrieve worse; conditioning synthetic questions on those entities should help exactly there.
So the evaluations slice NQ test questions by where the answer sits in its gold passage and by how much the baseline
attends to the answer entity, and probe the encoders with the same passage in two sentence orders:

* **Answer position** (after SQuAD-PosQ, Zeng et al. 2025): the sentence of the gold passage where an answer first
  occurs (``sentence 1`` / ``sentence 2`` / ``sentence 3+``), Top-k per bucket, and the position sensitivity index
  PSI = 1 - min / max accuracy over the buckets (0: position does not matter).
* **Entity attention**: questions whose answer is a named entity of its gold passage, split by the baseline DPR's
  [CLS] attention rank of that entity among the passage's entities (most / middle / least attended third).
* **Moved-sentence probe** (the design of Fayyaz et al., ACL 2025): the question scored against its gold passage
  with the answer sentence moved to the front and to the end; the gap front - end measures position bias in the
  score itself, paired per passage. The paper's mechanism predicts a smaller gap for Mixed-DPR.

Definitions: the gold passage of a question is the first of its ``gold_ids`` whose text contains an answer (DPR's
has_answer: NFD, DrQA tokens, uncased); the answer's position is its earliest token-sequence match, mapped back to
characters of the original text; sentences are spaCy's (``ecqg.text.analyze``). Questions without such a passage
are left out and counted.
"""

from __future__ import annotations

import logging
import math
import random
import unicodedata
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ecqg import evaluation
from ecqg.errors import DataFormatError
from ecqg.text import Analysis, _TOKEN_RE, dpr_tokens

log = logging.getLogger(__name__)

BUCKETS = ("sentence 1", "sentence 2", "sentence 3+")
THIRDS = ("most attended", "middle", "least attended")
_BOOT_CHUNK = 500  # bootstrap resamples drawn at once (bounds memory; results depend on the seed only)


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

    Found exactly when ``ecqg.text.has_answer(text, answers)`` is true (a test checks both on the same inputs).
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


def bucket_masks(locations: pd.DataFrame, column: str = "bucket", labels: Sequence[str] = BUCKETS) -> dict:
    """``{label: boolean mask over the questions}`` for each label present in ``column`` (order of ``labels``)."""
    values = locations[column].to_numpy()
    return {label: values == label for label in labels if (values == label).any()}


# ============================================================================================================ PSI
def _stratified_means(values: np.ndarray, groups: Sequence[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """``(n_boot, n_groups, m)``: column means of ``values`` over resamples drawn within each group separately."""
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, len(groups), values.shape[1]))
    for g, idx in enumerate(groups):
        for start in range(0, n_boot, _BOOT_CHUNK):
            stop = min(n_boot, start + _BOOT_CHUNK)
            draw = idx[rng.integers(0, len(idx), size=(stop - start, len(idx)))]
            out[start:stop, g] = values[draw].mean(axis=1)
    return out


def psi(accuracies: np.ndarray) -> np.ndarray:
    """Position sensitivity index over the last axis (buckets): 1 - min / max; NaN when every bucket is 0."""
    accuracies = np.asarray(accuracies, dtype=float)
    top = accuracies.max(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(top > 0, 1.0 - accuracies.min(axis=-1) / top, np.nan)


def position_sensitivity(at_k: Mapping[str, np.ndarray], masks: Mapping[str, np.ndarray],
                         pairs: Sequence[tuple[str, str]] = (), n_boot: int = 2000, seed: int = 0,
                         confidence: float = 0.95) -> pd.DataFrame:
    """PSI per system with a stratified bootstrap CI, and PSI differences A - B for ``pairs`` (paired: the same
    resampled questions for both systems) with a CI and a two-sided p-value.

    ``at_k``: system -> per-question hit within the top k (0/1, or a seed-mean in [0, 1]); ``masks``: bucket ->
    question mask. Rows: kind ("system" | "paired"), system, reference, psi, ci_low, ci_high, p_value.
    """
    groups = [np.flatnonzero(m) for m in masks.values()]
    if len(groups) < 2:
        raise ValueError(f"PSI needs at least two non-empty buckets, got {list(masks)}")
    systems = list(at_k)
    values = np.column_stack([np.asarray(at_k[s], dtype=float) for s in systems])
    boot = psi(np.moveaxis(_stratified_means(values, groups, n_boot, seed), 1, 2))   # (n_boot, systems)
    observed = psi(np.array([[values[idx, j].mean() for idx in groups] for j in range(len(systems))]))
    alpha = (1.0 - confidence) / 2.0

    def interval(samples: np.ndarray) -> tuple[float, float]:
        samples = samples[np.isfinite(samples)]   # a resample with every bucket at 0 has no PSI
        if not len(samples):
            return math.nan, math.nan
        return float(np.quantile(samples, alpha)), float(np.quantile(samples, 1 - alpha))

    rows = []
    for j, system in enumerate(systems):
        low, high = interval(boot[:, j])
        rows.append({"kind": "system", "system": system, "reference": None, "psi": float(observed[j]),
                     "ci_low": low, "ci_high": high, "p_value": math.nan})
    for a, b in pairs:
        ja, jb = systems.index(a), systems.index(b)
        diff, obs = boot[:, ja] - boot[:, jb], float(observed[ja] - observed[jb])
        low, high = interval(diff)
        diff = diff[np.isfinite(diff)]
        p = (1 + np.sum(np.abs(diff - obs) >= abs(obs) - 1e-12)) / (1 + len(diff)) if len(diff) and \
            math.isfinite(obs) else math.nan
        rows.append({"kind": "paired", "system": a, "reference": b, "psi": obs, "ci_low": low, "ci_high": high,
                     "p_value": float(p)})
    return pd.DataFrame(rows)


# ============================================================================================= entity attention
def answer_entity(analysis: Analysis, answers: Sequence[str]) -> int | None:
    """Index (in ``analysis.entities``) of the entity whose surface form IS one of the answers (same DrQA tokens),
    the earliest in the passage when several are; None when the answer is not a named entity of the passage."""
    needles = {tuple(dpr_tokens(a)) for a in answers} - {()}
    matches = [i for i, e in enumerate(analysis.entities) if tuple(dpr_tokens(e.text)) in needles]
    return min(matches, key=lambda i: analysis.entities[i].start_char) if matches else None


def attention_third(rank: int, n: int) -> str:
    """The third of a passage's entities that attention rank ``rank`` (0 = most attended, of ``n``) falls in.

    Symmetric around the median rank: relative rank ``rank / (n - 1)`` below 1/3 is the most attended third, above
    2/3 the least attended, the rest (both bounds included) the middle; integers only, so no rounding decides.
    """
    if n < 2:
        raise ValueError(f"attention thirds need at least 2 entities, got {n}")
    if not 0 <= rank < n:
        raise ValueError(f"rank {rank} is outside 0..{n - 1}")
    return THIRDS[0] if 3 * rank < n - 1 else THIRDS[2] if 3 * rank > 2 * (n - 1) else THIRDS[1]


def entity_attention_ranks(entity_rows: Sequence[Sequence[Mapping]], answer_index: Sequence[int | None],
                           min_entities: int = 3) -> pd.DataFrame:
    """Per question: where its answer entity ranks by the encoder's attention among its passage's entities.

    ``entity_rows[i]``: ``ecqg.attention.entity_scores`` of question i's gold passage (one record per unique
    entity, in ``Analysis.entities`` order); ``answer_index[i]``: ``answer_entity`` of it. Only entities encoded
    whole count (``eligible``); rank 0 is the most attended (ties: the earlier entity first). Columns: status
    ("ok", "answer_not_an_entity", "answer_entity_truncated", "too_few_entities"), rank, n_entities, third.
    """
    rows = []
    for scores, index in zip(entity_rows, answer_index):
        row = {"status": "ok", "rank": -1, "n_entities": 0, "third": None, "attention": math.nan}
        if index is None:
            rows.append({**row, "status": "answer_not_an_entity"})
            continue
        eligible = [i for i, e in enumerate(scores) if e["eligible"] and not math.isnan(e["attention"])]
        row["n_entities"] = len(eligible)
        if index not in eligible:
            rows.append({**row, "status": "answer_entity_truncated"})
            continue
        if len(eligible) < min_entities:
            rows.append({**row, "status": "too_few_entities"})
            continue
        order = sorted(eligible, key=lambda i: (-scores[i]["attention"], scores[i]["start_char"]))
        rank = order.index(index)
        rows.append({**row, "rank": rank, "third": attention_third(rank, len(eligible)),
                     "attention": float(scores[index]["attention"])})
    return pd.DataFrame(rows, columns=["status", "rank", "n_entities", "third", "attention"])


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


def summarise_gaps(gaps: Mapping[str, np.ndarray], pairs: Sequence[tuple[str, str]] = (), n_boot: int = 2000,
                   seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Mean front - end score gap per system (``gaps``: system -> per-passage gaps, seeds x passages for a system
    trained with several seeds) with a CI over passages, the spread over seeds, and paired differences A - B.

    A system's per-passage gap is its seed-mean, so its CI resamples passages and its ``seed_sd`` is the sd of the
    per-seed mean gaps. Rows: kind ("system" | "paired"), system, reference, n, gap, ci_low, ci_high, p_value,
    seeds, seed_sd, share_front_higher (% of passages where the front version scores higher).
    """
    from ecqg.encoder_comparison import paired_mean_difference

    rows, per_passage = [], {}
    for system, g in gaps.items():
        g = np.atleast_2d(np.asarray(g, dtype=float))
        mean = g.mean(axis=0)
        per_passage[system] = mean
        res = paired_mean_difference(mean, n_boot, seed, confidence)
        per_seed = g.mean(axis=1)
        rows.append({"kind": "system", "system": system, "reference": None, "n": res["n"], "gap": res["difference"],
                     "ci_low": res["ci_low"], "ci_high": res["ci_high"], "p_value": res["p_value"],
                     "seeds": len(g), "seed_sd": float(np.std(per_seed, ddof=1)) if len(g) > 1 else math.nan,
                     "share_front_higher": float(100 * (mean > 0).mean()) if len(mean) else math.nan})
    for a, b in pairs:
        if a not in per_passage or b not in per_passage:
            continue
        res = paired_mean_difference(per_passage[a] - per_passage[b], n_boot, seed, confidence)
        rows.append({"kind": "paired", "system": a, "reference": b, "n": res["n"], "gap": res["difference"],
                     "ci_low": res["ci_low"], "ci_high": res["ci_high"], "p_value": res["p_value"],
                     "seeds": math.nan, "seed_sd": math.nan, "share_front_higher": math.nan})
    return pd.DataFrame(rows)


def moved_sentence_scores(model, pairs: Sequence[Mapping], batch_size: int = 64, autocast: str | None = None,
                          progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(front, end) scores of each pair's question against its two passage versions with the retriever's own
    retrieval score (DPR: dot product of [CLS] vectors), encoded as at retrieval time."""
    from ecqg.retrieval.dense import encode_passages, encode_queries

    if not pairs:
        return np.zeros(0), np.zeros(0)
    q = encode_queries(model, [p["question"] for p in pairs], batch_size, progress=progress, autocast=autocast)
    versions = [{"id": f"{p['passage_id']}#{side}", "title": p["title"], "text": p[side]}
                for side in ("front", "end") for p in pairs]
    _, v = encode_passages(model, versions, batch_size, progress=progress, autocast=autocast)
    n = len(pairs)
    return model.pair_scores(q, v[:n]), model.pair_scores(q, v[n:])
