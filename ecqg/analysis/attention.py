"""[CLS] attention of a passage encoder, aggregated onto words, entities and sentences (docs/design.md, "Method",
steps 1 and 6).

Why [CLS]: a DPR passage encoder returns the last layer's [CLS] vector, so the attention *from* [CLS] in the last
layer, averaged over heads, says which passage tokens that vector is built from. Everything here starts from that
one vector per passage (``cls_attention``) and maps it back to characters of the passage text through the fast
tokenizer's offsets, so any span from any tool (spaCy entities, sentences, answer strings) can be scored.

Definitions (the paper leaves them implicit; these are the choices made here):

* **Inputs** are formatted exactly as the passage encoder sees them: ``[CLS] title [SEP] text [SEP]``, only the text
  truncated (``BiEncoder.tokenize_passages``). The raw attention row sums to 1 over *all* tokens, [CLS], [SEP] and
  title included.
* **Span attention** = sum of the raw attention over the word pieces of the TEXT segment whose character offsets
  overlap the span. A span cut by truncation keeps only its surviving pieces and is flagged ``truncated``.
* **Repeated entities**: an entity's attention is the **max** over its occurrences that were not truncated. The
  [CLS] vector can draw on an entity through any mention, so it is "ignored" only when its best mention is; the sum
  would rank an entity high merely for being repeated, and the first occurrence would tie the measure to position,
  the very bias under study. The first-occurrence and summed values are kept as extra columns. Position = the start
  of the chosen (max) occurrence. An entity is *eligible* for selection when at least one occurrence was encoded
  whole.
* **Entropy** = natural-log entropy over the TEXT word pieces only (no [CLS], [SEP] or title pieces), after
  renormalising their attention to sum to 1.
* **Sentence shares** use the same renormalised text distribution; a word piece belongs to the sentence its first
  character falls in. ``first_sentence_share`` = the mass in sentence 1; ``first_sentence_mean`` /
  ``later_sentence_mean`` = mean per-piece attention in sentence 1 / in sentences 2+ (length-independent).
* **First half** of a passage: ``start_char / len(text) < 0.5`` (character position of the entity's start relative to
  the full text length, truncated tail included).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ecqg.core.errors import DataFormatError
from ecqg.runtime.models import inference
from ecqg.data.text import Analysis, Entity, analyze

log = logging.getLogger(__name__)

SPECIAL, TITLE, TEXT = -1, 0, 1     # sequence ids as stored here (the tokenizer's None -> -1)


class AttentionUnavailableError(RuntimeError):
    """The model returned no attention weights (transformers 5 needs ``attn_implementation="eager"``)."""


@dataclass(frozen=True)
class PassageAttention:
    """Last-layer [CLS] attention over one encoded passage, with what maps it back to characters."""
    attention: np.ndarray       # (n,) float32, head-averaged, sums to 1 over all n tokens
    offsets: np.ndarray         # (n, 2) character offsets into the title (seq 0) or the text (seq 1)
    sequence_ids: np.ndarray    # (n,) -1 special, 0 title, 1 text
    word_ids: np.ndarray        # (n,) the tokenizer's word index within its segment, -1 for specials
    cut_char: int | None        # first text character dropped by truncation; None when the whole text was encoded

    @property
    def truncated(self) -> bool:
        return self.cut_char is not None

    @property
    def text_mask(self) -> np.ndarray:
        return self.sequence_ids == TEXT


class SpanScore(NamedTuple):
    attention: float    # summed attention of the surviving text pieces
    n_pieces: int       # word pieces that overlap the span
    truncated: bool     # the span reaches past the truncation point


class SentenceShares(NamedTuple):
    first_sentence_share: float     # share of the text attention mass in sentence 1
    first_sentence_mean: float      # mean per-piece (renormalised) attention in sentence 1
    later_sentence_mean: float      # the same over sentences 2+ (NaN when none was encoded)
    n_sentences: int                # sentences with at least one encoded piece


@dataclass
class AttentionStudy:
    """Everything ``analyze_passages`` computed, aligned by position with the input passages."""
    passages: pd.DataFrame              # one row per passage
    entities: pd.DataFrame              # one row per unique entity
    attention: list[PassageAttention]
    analyses: list[Analysis]


# ======================================================================================================= extraction
def _encoder_parts(model, tokenizer, max_length):
    """(transformers model, fast tokenizer, max length) from a BiEncoder or a plain model + tokenizer."""
    if hasattr(model, "passage_encoder"):
        tokenizer = tokenizer or model.tokenizer
        max_length = max_length or model.config.passage_max_length
        model = model.passage_encoder
    if tokenizer is None:
        raise ValueError("cls_attention: pass tokenizer= with a plain transformers model (or pass a BiEncoder)")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"cls_attention needs a fast tokenizer (character offsets); got {type(tokenizer).__name__}")
    if max_length is None:
        max_length = min(tokenizer.model_max_length, getattr(model.config, "max_position_embeddings", 512))
    return model, tokenizer, int(max_length)


def _pad(features: list[dict], pad_id: int, device) -> dict[str, torch.Tensor]:
    """Right-pad one batch to its own longest row (absolute positions stay those of the unpadded input)."""
    width = max(len(f["input_ids"]) for f in features)
    out = {}
    for key in features[0]:
        fill = pad_id if key == "input_ids" else 0
        out[key] = torch.tensor([f[key] + [fill] * (width - len(f[key])) for f in features], device=device)
    return out


def _last_layer_cls(model, batch: dict[str, torch.Tensor]) -> np.ndarray:
    """(batch, length) attention from [CLS] in the last layer, averaged over heads."""
    out = model(**batch, output_attentions=True, return_dict=True)
    atts = getattr(out, "attentions", None)
    if not atts or atts[-1] is None:
        impl = getattr(model.config, "_attn_implementation", "?")
        raise AttentionUnavailableError(
            f"the model returned no attentions (attn_implementation={impl!r}); load it with "
            "attn_implementation='eager', e.g. BiEncoder.load(path, attn_implementation='eager')")
    return atts[-1][:, :, 0, :].float().mean(dim=1).cpu().numpy()


def _cut_char(encoding) -> int | None:
    """Start of the first text piece that truncation moved to the overflow (None: nothing was cut)."""
    for over in encoding.overflowing:
        for seq, (start, _) in zip(over.sequence_ids, over.offsets):
            if seq == TEXT:
                return int(start)
    return None


def _passage_attention(encoding, attn: np.ndarray) -> PassageAttention:
    seq = np.array([SPECIAL if s is None else s for s in encoding.sequence_ids], dtype=np.int8)
    words = np.array([-1 if w is None else w for w in encoding.word_ids], dtype=np.int32)
    return PassageAttention(attn.astype(np.float32), np.array(encoding.offsets, dtype=np.int64).reshape(-1, 2),
                            seq, words, _cut_char(encoding))


def cls_attention(model, titles: Sequence[str], texts: Sequence[str], batch_size: int = 32, tokenizer=None,
                  max_length: int | None = None, progress: bool = False) -> list[PassageAttention]:
    """Last-layer, head-averaged [CLS] attention per passage, in input order.

    ``model`` is a ``BiEncoder`` (its passage encoder, tokenizer and passage max length are used) or any transformers
    encoder loaded with ``attn_implementation="eager"`` plus ``tokenizer=``. Passages are tokenised once, run in
    longest-first batches padded to their own maximum, and scattered back.
    """
    if len(titles) != len(texts):
        raise ValueError(f"cls_attention: {len(titles)} titles but {len(texts)} texts")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    encoder, tokenizer, max_length = _encoder_parts(model, tokenizer, max_length)
    enc = tokenizer(list(titles), list(texts), truncation="only_second", max_length=max_length)
    keys = [k for k in tokenizer.model_input_names if k in enc]
    features = [{k: enc[k][i] for k in keys} for i in range(len(texts))]
    order = np.argsort([-len(f["input_ids"]) for f in features], kind="stable")
    results: list[PassageAttention | None] = [None] * len(features)
    start_time = time.perf_counter()
    with inference(encoder) as device, tqdm(total=len(features), desc="[CLS] attention", unit="psg",
                                             disable=not progress) as bar:
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            attn = _last_layer_cls(encoder, _pad([features[j] for j in idx], tokenizer.pad_token_id or 0, device))
            for row, j in enumerate(idx):
                results[j] = _passage_attention(enc.encodings[j], attn[row, :len(features[j]["input_ids"])])
            bar.update(len(idx))
    seconds = time.perf_counter() - start_time
    log.info("cls_attention: %d passages in %.1f s (%.1f/s), batch %d", len(features), seconds,
             len(features) / max(seconds, 1e-9), batch_size)
    return results


# ========================================================================================================= spans
def _seq_array(seq_ids) -> np.ndarray:
    return np.array([SPECIAL if s is None else s for s in seq_ids], dtype=np.int8)


def span_attention(attn, offsets, seq_ids, start_char: int, end_char: int, cut_char: int | None = None,
                   segment: int = TEXT) -> SpanScore:
    """Summed attention of the ``segment`` word pieces overlapping ``[start_char, end_char)``.

    Overlap, not containment: a piece such as "##s" in "Obama's" or a piece that also covers an accent counts for
    the span it touches. ``cut_char`` (``PassageAttention.cut_char``) says where truncation cut the text.
    """
    if end_char <= start_char:
        raise ValueError(f"empty character span [{start_char}, {end_char})")
    offsets = np.asarray(offsets).reshape(-1, 2)
    mask = (_seq_array(seq_ids) == segment) & (offsets[:, 0] < end_char) & (offsets[:, 1] > start_char) \
        & (offsets[:, 1] > offsets[:, 0])
    truncated = cut_char is not None and end_char > cut_char
    return SpanScore(float(np.asarray(attn)[mask].sum()), int(mask.sum()), bool(truncated))


def score_span(pa: PassageAttention, start_char: int, end_char: int) -> SpanScore:
    """``span_attention`` on one ``cls_attention`` result."""
    return span_attention(pa.attention, pa.offsets, pa.sequence_ids, start_char, end_char, pa.cut_char)


def entity_scores(pa: PassageAttention, entities: Sequence[Entity], text_length: int) -> list[dict]:
    """One record per unique entity: max attention over its untruncated occurrences (see module docstring)."""
    rows = []
    for ent in entities:
        scores = [score_span(pa, s, e) for s, e in ent.occurrences]
        whole = [i for i, sc in enumerate(scores) if not sc.truncated and sc.n_pieces > 0]
        best = max(whole, key=lambda i: (scores[i].attention, -i)) if whole else 0
        start, end = ent.occurrences[best]
        rows.append({
            "entity": ent.text, "label": ent.label, "start_char": start, "end_char": end,
            "relative_position": start / max(text_length, 1),
            "attention": scores[best].attention if whole else float("nan"),
            "attention_first": scores[0].attention if 0 in whole else float("nan"),
            "attention_sum": sum(sc.attention for sc in scores),
            "n_occurrences": len(scores), "n_pieces": scores[best].n_pieces,
            "truncated": scores[best].truncated, "eligible": bool(whole),
            "occurrences": [list(o) for o in ent.occurrences],
        })
    return rows


# ====================================================================================================== measures
def _text_distribution(attn, mask) -> np.ndarray | None:
    p = np.asarray(attn, dtype=np.float64)[np.asarray(mask, dtype=bool)]
    total = p.sum()
    return p / total if p.size and total > 0 else None


def attention_entropy(attn, mask) -> float:
    """Entropy (nats) of the attention over the ``mask`` tokens (the text pieces), renormalised to sum to 1.

    Uniform over n pieces gives log n, one-hot gives 0; NaN when no piece is selected.
    """
    p = _text_distribution(attn, mask)
    if p is None:
        return float("nan")
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def sentence_shares(attn, offsets, seq_ids, sentences: Sequence[tuple[int, int]]) -> SentenceShares:
    """Attention on the first sentence vs the rest, over the renormalised text-piece distribution."""
    mask = _seq_array(seq_ids) == TEXT
    p = _text_distribution(attn, mask)
    if p is None or not sentences:
        return SentenceShares(float("nan"), float("nan"), float("nan"), 0)
    starts = np.array([s for s, _ in sentences])
    piece_starts = np.asarray(offsets).reshape(-1, 2)[mask, 0]
    sent = np.clip(np.searchsorted(starts, piece_starts, side="right") - 1, 0, None)
    first = sent == 0
    later = p[~first]
    return SentenceShares(float(p[first].sum()), float(p[first].mean()) if first.any() else float("nan"),
                          float(later.mean()) if later.size else float("nan"), int(np.unique(sent).size))


# ===================================================================================================== selection
def lowest_attended_entities(entities_with_scores: Sequence[Mapping], n: int = 3,
                             min_entities: int = 5) -> dict | None:
    """The ``n`` lowest-attended eligible entities of one passage and the highest-attended one.

    None unless the passage has at least ``min_entities`` eligible entities (the paper: more than 4). Ties go to the
    entity that starts earlier (for both ends), so the choice is deterministic.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if min_entities <= n:
        raise ValueError(f"min_entities ({min_entities}) must exceed n ({n}) so lowest and highest differ")
    eligible = [e for e in entities_with_scores if e.get("eligible", True) and not math.isnan(e["attention"])]
    if len(eligible) < min_entities:
        return None
    ranked = sorted(eligible, key=lambda e: (e["attention"], e["start_char"]))
    highest = min(eligible, key=lambda e: (-e["attention"], e["start_char"]))
    return {"n_entities": len(eligible), "lowest": ranked[:n], "highest": highest}


def select_entities(entities: pd.DataFrame, n: int = 3, min_entities: int = 5) -> pd.DataFrame:
    """Tidy selection over a study's entity table: rows with ``role`` "lowest" (``rank`` 1..n) or "highest"."""
    rows = []
    for pid, group in entities.groupby("passage_id", sort=False):
        chosen = lowest_attended_entities(group.to_dict("records"), n, min_entities)
        if chosen is None:
            continue
        for rank, ent in enumerate(chosen["lowest"], 1):
            rows.append({**ent, "role": "lowest", "rank": rank, "n_entities": chosen["n_entities"]})
        rows.append({**chosen["highest"], "role": "highest", "rank": 1, "n_entities": chosen["n_entities"]})
    columns = list(entities.columns) + ["role", "rank", "n_entities"]
    return pd.DataFrame(rows, columns=columns)


def position_bias(records, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> dict:
    """Share of passages whose highest-attended entity starts in the first half and whose (rank-1) lowest-attended
    entity starts in the second half (paper: 65% and 60%), with percentile-bootstrap CIs over passages.

    ``records``: ``select_entities`` output (or its records): passage_id, role, rank, relative_position.
    """
    # stats brings scipy; only the bootstrap needs it
    from ecqg.analysis.stats import bootstrap_ci

    frame = pd.DataFrame(list(records) if not isinstance(records, pd.DataFrame) else records)
    if frame.empty:
        nan = float("nan")
        return {"n_passages": 0, "highest_first_half": nan, "highest_first_half_ci": [nan, nan],
                "lowest_second_half": nan, "lowest_second_half_ci": [nan, nan]}
    high = frame[frame.role == "highest"].set_index("passage_id").relative_position
    low = frame[(frame.role == "lowest") & (frame["rank"] == 1)].set_index("passage_id").relative_position
    values = np.column_stack([(high < 0.5).to_numpy(), (low.reindex(high.index) >= 0.5).to_numpy()]).astype(float)
    lo, hi = bootstrap_ci(values, n_boot=n_boot, seed=seed, confidence=confidence)
    mean = values.mean(axis=0)
    return {"n_passages": len(values),
            "highest_first_half": float(mean[0]), "highest_first_half_ci": [float(lo[0]), float(hi[0])],
            "lowest_second_half": float(mean[1]), "lowest_second_half_ci": [float(lo[1]), float(hi[1])]}


# ========================================================================================================= words
def word_attention(pa: PassageAttention, text: str) -> pd.DataFrame:
    """Text word pieces summed into whitespace-delimited words (columns word, start_char, end_char, attention).

    Display words rather than the tokenizer's ``word_ids`` words, so the heat-map shows the passage as written
    ("Saint-Germain-des-Prés", "(Paris),"); a piece belongs to the word its first character falls in. Words past the
    truncation point are left out.
    """
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    if pa.cut_char is not None:
        spans = [sp for sp in spans if sp[0] < pa.cut_char]
    weights = np.zeros(len(spans))
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    mask = pa.text_mask & (pa.offsets[:, 1] > pa.offsets[:, 0])
    word = np.searchsorted(starts, pa.offsets[mask, 0], side="right") - 1
    keep = word >= 0
    np.add.at(weights, word[keep], pa.attention[mask][keep])
    return pd.DataFrame({"word": [text[s:e] for s, e in spans], "start_char": starts,
                         "end_char": np.array([e for _, e in spans], dtype=np.int64), "attention": weights})


def word_spans(words: pd.DataFrame, char_spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Character spans (e.g. entity occurrences) as ``[first, last + 1)`` word-index ranges of ``words``."""
    out = []
    for start, end in char_spans:
        hit = np.flatnonzero((words.start_char.to_numpy() < end) & (words.end_char.to_numpy() > start))
        if hit.size:
            out.append((int(hit[0]), int(hit[-1]) + 1))
    return out


# ====================================================================================================== pipeline
def _checked_passages(passages: Sequence[Mapping]) -> tuple[list[str], list[str], list[str]]:
    ids, titles, texts = [], [], []
    for i, p in enumerate(passages):
        for field in ("id", "text"):
            if field not in p:
                raise DataFormatError("<passages>", i, field, "missing")
        if not isinstance(p["text"], str) or not p["text"].strip():
            raise DataFormatError("<passages>", i, "text", "must be a non-empty string")
        ids.append(str(p["id"]))
        titles.append(p.get("title") or "")
        texts.append(p["text"])
    return ids, titles, texts


def _passage_row(pid: str, pa: PassageAttention, analysis: Analysis, n_eligible: int) -> dict:
    shares = sentence_shares(pa.attention, pa.offsets, pa.sequence_ids, analysis.sentences)
    return {"passage_id": pid, "n_tokens": len(pa.attention), "n_text_tokens": int(pa.text_mask.sum()),
            "truncated": pa.truncated,
            "text_share": float(pa.attention[pa.text_mask].sum()),
            "title_share": float(pa.attention[pa.sequence_ids == TITLE].sum()),
            "special_share": float(pa.attention[pa.sequence_ids == SPECIAL].sum()),
            "entropy": attention_entropy(pa.attention, pa.text_mask), **shares._asdict(),
            "n_entities": len(analysis.entities), "n_eligible_entities": n_eligible}


def analyze_passages(model, passages: Sequence[Mapping], batch_size: int = 32, spacy_batch_size: int = 64,
                     n_process: int = 1, tokenizer=None, max_length: int | None = None,
                     progress: bool = True) -> AttentionStudy:
    """The whole study over passages ``{id, title, text}``: [CLS] attention, spaCy entities and sentences, then a
    per-passage table (entropy, sentence shares, attention on title / specials) and a per-entity table."""
    ids, titles, texts = _checked_passages(passages)
    attention = cls_attention(model, titles, texts, batch_size, tokenizer, max_length, progress)
    analyses = analyze(texts, batch_size=spacy_batch_size, n_process=n_process)
    passage_rows, entity_rows = [], []
    for pid, text, pa, an in zip(ids, texts, attention, analyses):
        ents = [{"passage_id": pid, **row} for row in entity_scores(pa, an.entities, len(text))]
        entity_rows.extend(ents)
        passage_rows.append(_passage_row(pid, pa, an, sum(e["eligible"] for e in ents)))
    entity_columns = ["passage_id", "entity", "label", "start_char", "end_char", "relative_position", "attention",
                      "attention_first", "attention_sum", "n_occurrences", "n_pieces", "truncated", "eligible",
                      "occurrences"]
    return AttentionStudy(pd.DataFrame(passage_rows), pd.DataFrame(entity_rows, columns=entity_columns),
                          attention, analyses)
