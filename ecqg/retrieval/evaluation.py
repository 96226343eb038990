"""Retrieval evaluation: DPR has_answer hits and top-k per question, the subsets of a test set.

Why this shape: every number in the results table comes from one boolean matrix ``hits[q, r]`` ("the passage at rank
r+1 for question q contains an answer"), computed once per run with DPR's exact matching (``ecqg.data.text``). Top-k
accuracy, subsets and (in :mod:`ecqg.analysis.tables`) confidence intervals and paired comparisons are then cheap
numpy over that matrix, so a notebook can re-slice results without re-reading passages. A model trained with several
seeds gives a stack ``hits[q, s, r]`` (question x seed x rank). Training's validation scores its held-out questions
with the same matrix, so this module carries no statistics: an edit to one reruns no training.

A run is ``dict[question id, list[(passage id, score)]]``, best first. Questions are dicts with ``id``, ``answers``,
``subsets`` and ``answer_type`` ("text" or "regex"); see docs/design.md, "Evaluation".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ecqg.core.errors import DataFormatError
from ecqg.retrieval.run_files import RunError
from ecqg.data.text import TokenizedPassages, answer_regex_match, dpr_tokens

log = logging.getLogger(__name__)

Run = dict[str, list[tuple[str, float]]]
DEFAULT_KS = (1, 5, 20, 100)
FULL_SET = "all"


# ----------------------------------------------------------------------------------------------------- hit matrix
class HitCache:
    """Answer matches shared by every run scored on one test set: each passage tokenised once, each question's
    answers prepared once, each (question, passage) pair tested once.

    Why: the runs of one table (seeds, variants, pre-training-only models, hybrids) retrieve largely the same passages
    for a question, so with a shared cache a table of twenty systems costs little more than a few. Keyed by question
    id: use one cache per test set (the same ids must always carry the same answers).
    """

    def __init__(self, text_of: Callable[[str], str] | Mapping[str, str]):
        self.lookup = _text_lookup(text_of)
        self.passages = TokenizedPassages(self.lookup)
        self._matchers: dict[str, Callable[[str], bool] | None] = {}
        self._hits: dict[tuple[str, str], bool] = {}

    def matcher(self, q: Mapping) -> Callable[[str], bool] | None:
        """The question's ``pid -> bool`` test (None: no answer can ever match)."""
        qid = str(q["id"])
        if qid not in self._matchers:
            self._matchers[qid] = _question_matcher(q, self.passages, self.lookup)
        return self._matchers[qid]

    def hit(self, qid: str, matcher: Callable[[str], bool], pid: str) -> bool:
        key = (qid, pid)
        found = self._hits.get(key)
        if found is None:
            found = self._hits[key] = bool(matcher(pid))
        return found


def hit_matrix(
    run: Mapping[str, Sequence[tuple[str, float]]],
    questions: Sequence[Mapping],
    text_of: Callable[[str], str] | Mapping[str, str],
    k_max: int = 100,
    cache: HitCache | None = None,
) -> np.ndarray:
    """``hits[i, r]``: does the passage at rank r+1 for ``questions[i]`` contain one of its answers (DPR has_answer)?

    Only the passage *text* is matched, not its title, as DPR does. Ranks past the end of a short ranking are False.
    A question missing from the run raises: counting it as a miss would quietly lower the accuracy. ``cache``: a
    :class:`HitCache` shared with other runs on the same questions (then ``text_of`` is the cache's).
    """
    if k_max < 1:
        raise ValueError(f"k_max must be >= 1, got {k_max}")
    _check_question_ids(questions)
    missing = [str(q["id"]) for q in questions if str(q["id"]) not in run]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise RunError(f"the run has no ranking for question '{missing[0]}'{more}")
    start = time.perf_counter()
    cache = cache or HitCache(text_of)
    hits = np.zeros((len(questions), k_max), dtype=bool)
    unmatchable = []
    for i, q in enumerate(questions):
        qid = str(q["id"])
        matcher = cache.matcher(q)
        if matcher is None:
            unmatchable.append(qid)
            continue
        for r, (pid, _) in enumerate(run[qid][:k_max]):
            hits[i, r] = cache.hit(qid, matcher, pid)
    if unmatchable:
        log.warning("%d question(s) have no usable answer and count as misses, e.g. %s",
                    len(unmatchable), unmatchable[:5])
    seconds = time.perf_counter() - start
    log.info("hit_matrix: %d questions x %d ranks, %d distinct passages, %.1f s (%.0f pairs/s)", len(questions),
             k_max, len(cache.passages), seconds, hits.size / max(seconds, 1e-9))
    return hits


def passage_texts(passages: Iterable[Mapping], path: str | Path = "<corpus>") -> dict[str, str]:
    """``{passage id: text}`` for ``hit_matrix``: the text only, never the title, because DPR matches the text only."""
    texts: dict[str, str] = {}
    for i, p in enumerate(passages):
        for field in ("id", "text"):
            if not isinstance(p.get(field), str):
                raise DataFormatError(path, i, field, "missing or not a string")
        if p["id"] in texts:
            raise DataFormatError(path, i, "id", f"duplicate passage id '{p['id']}'")
        texts[p["id"]] = p["text"]
    return texts


def _check_question_ids(questions: Sequence[Mapping]) -> None:
    seen = set()
    for i, q in enumerate(questions):
        if "id" not in q:
            raise DataFormatError("<questions>", i, "id", "missing")
        qid = str(q["id"])
        if qid in seen:
            raise DataFormatError("<questions>", f"question '{qid}'", "id", "duplicate question id")
        seen.add(qid)


def _text_lookup(text_of: Callable[[str], str] | Mapping[str, str]) -> Callable[[str], str]:
    """Wrap ``text_of`` so an unknown passage id is reported as such, not as a bare KeyError from a dict."""
    get = text_of.__getitem__ if isinstance(text_of, Mapping) else text_of

    def lookup(pid: str) -> str:
        try:
            text = get(pid)
        except KeyError:
            raise RunError(f"the run ranks passage '{pid}', which is not in the corpus") from None
        if not isinstance(text, str):
            raise RunError(f"passage '{pid}': text is {type(text).__name__}, expected str")
        return text

    return lookup


def _answers_of(q: Mapping) -> list[str]:
    answers = q.get("answers")
    if not isinstance(answers, (list, tuple)) or not all(isinstance(a, str) for a in answers):
        raise DataFormatError("<questions>", f"question '{q['id']}'", "answers", "expected a list of strings")
    return list(answers)


def _question_matcher(q: Mapping, passages: TokenizedPassages, lookup: Callable[[str], str]):
    """A ``pid -> bool`` test for one question, with its answers prepared once; None if no answer can ever match.

    Answers without any token (or blank patterns) are dropped: DrQA would match them everywhere.
    """
    answer_type = q.get("answer_type", "text")
    answers = _answers_of(q)
    if answer_type == "regex":
        patterns = [a for a in answers if a.strip()]
        if not patterns:
            return None
        return lambda pid: any(answer_regex_match(lookup(pid), p) for p in patterns)
    if answer_type != "text":
        raise DataFormatError("<questions>", f"question '{q['id']}'", "answer_type",
                              f"expected 'text' or 'regex', got {answer_type!r}")
    needles = TokenizedPassages.needles(dpr_tokens(a) for a in answers)
    if not needles:
        return None
    return lambda pid: passages.contains_needles(pid, needles)


# ------------------------------------------------------------------------------------------------------ accuracy
def hits_at_k(hits: np.ndarray, ks: Sequence[int] = DEFAULT_KS) -> np.ndarray:
    """``(n_questions, len(ks))``: is there a hit within the top k? (a hit at rank r counts for every k >= r).

    Bool for one run (questions x ranks); for a seed stack (questions x seeds x ranks) the share of seeds with a hit
    (float), so that its column means are the seed-mean accuracies.
    """
    per_seed = seed_hits_at_k(hits, ks)
    return per_seed[:, 0] if np.asarray(hits).ndim == 2 else per_seed.mean(axis=1)


def seed_hits_at_k(hits: np.ndarray, ks: Sequence[int] = DEFAULT_KS) -> np.ndarray:
    """``(n_questions, n_seeds, len(ks))`` bool; one run (questions x ranks) counts as a single seed."""
    hits = np.asarray(hits, dtype=bool)
    if hits.ndim not in (2, 3):
        raise ValueError(f"hits must be questions x ranks or questions x seeds x ranks, got shape {hits.shape}")
    if hits.ndim == 2:
        hits = hits[:, None, :]
    bad = [k for k in ks if not 1 <= k <= hits.shape[2]]
    if bad:
        raise ValueError(f"k={bad[0]} is outside 1..{hits.shape[2]} (the hit matrix has {hits.shape[2]} ranks)")
    first_hit = np.logical_or.accumulate(hits, axis=2) if hits.size else hits
    return first_hit[:, :, [k - 1 for k in ks]]


def subset_masks(questions: Sequence[Mapping]) -> dict[str, np.ndarray]:
    """``{"all": all-True, subset name: mask, ...}`` for every subset named in the questions, names sorted."""
    names = sorted({s for q in questions for s in _subsets_of(q)})
    masks = {FULL_SET: np.ones(len(questions), dtype=bool)}
    for name in names:
        if name == FULL_SET:
            raise DataFormatError("<questions>", None, "subsets", f"'{FULL_SET}' is reserved for the full set")
        masks[name] = np.array([name in _subsets_of(q) for q in questions], dtype=bool)
    return masks


def slice_masks(questions: Sequence[Mapping], masks: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    """The given slices (checked against the number of questions), or the questions' own subsets."""
    if masks is None:
        return subset_masks(questions)
    out = {}
    for name, mask in masks.items():
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (len(questions),):
            raise ValueError(f"mask '{name}' has shape {mask.shape}; expected ({len(questions)},)")
        out[name] = mask
    return out


def _subsets_of(q: Mapping) -> list[str]:
    subsets = q.get("subsets", [])
    if not isinstance(subsets, (list, tuple)) or not all(isinstance(s, str) for s in subsets):
        raise DataFormatError("<questions>", f"question '{q.get('id')}'", "subsets", "expected a list of strings")
    return list(subsets)
