"""Retrieval evaluation: DPR has_answer hits, top-k accuracy per subset, bootstrap CIs, TREC run files.

Why this shape: every number in the results table comes from one boolean matrix ``hits[q, r]`` ("the passage at rank
r+1 for question q contains an answer"), computed once per run with DPR's exact matching (``ecqg.text``). Top-k
accuracy, subsets, confidence intervals and paired comparisons are then cheap numpy over that matrix, so a notebook
can re-slice results without re-reading passages. A model trained with several seeds gives a stack
``hits[q, s, r]`` (question x seed x rank): its top-k accuracy is the mean over seeds, its CIs resample questions
(each question carrying its seed-mean), and the spread over seeds is reported beside them.

A run is ``dict[question id, list[(passage id, score)]]``, best first. Questions are dicts with ``id``, ``answers``,
``subsets`` and ``answer_type`` ("text" or "regex"); see docs/design.md, "Evaluation".
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ecqg.errors import DataFormatError
from ecqg.stats import bootstrap_ci, bootstrap_means, null_centred_p
from ecqg.run_files import RunError
from ecqg.text import TokenizedPassages, answer_regex_match, dpr_tokens

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


def _masks(questions: Sequence[Mapping], masks: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
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


def accuracy_table(
    hits: np.ndarray,
    questions: Sequence[Mapping],
    ks: Sequence[int] = DEFAULT_KS,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    system: str = "",
    dataset: str = "",
    masks: Mapping[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Top-k accuracy with percentile-bootstrap CIs, for the full set and each subset (one row per subset and k).

    Columns: system, dataset, subset, n, k, hits, accuracy, ci_low, ci_high, n_boot, seed, seeds, seed_sd, seed_min,
    seed_max. Accuracies are fractions (0..1). Each subset is resampled on its own, with the same seed, so a table is
    reproducible from its params. ``hits`` may be a seed stack (questions x seeds x ranks): accuracy and ``hits`` are
    then means over seeds, the CI resamples questions with their seed-mean, and ``seed_sd`` (n-1) / ``seed_min`` /
    ``seed_max`` describe the per-seed accuracies (NaN sd for one seed). ``masks`` (name -> boolean row mask)
    replaces the questions' own subsets, e.g. to slice by where the answer sits in its passage.
    """
    if len(hits) != len(questions):
        raise ValueError(f"hits has {len(hits)} rows but there are {len(questions)} questions")
    per_seed = seed_hits_at_k(hits, ks)
    at_k = per_seed.mean(axis=1)
    rows = []
    for subset, mask in _masks(questions, masks).items():
        sub = at_k[mask]
        low, high = bootstrap_ci(sub, n_boot, seed, confidence)
        seed_acc = per_seed[mask].mean(axis=0) if mask.any() else np.full(per_seed.shape[1:], np.nan)  # seeds x ks
        for j, k in enumerate(ks):
            n_hits = float(sub[:, j].sum())
            acc = n_hits / len(sub) if len(sub) else math.nan
            spread = seed_acc[:, j]
            rows.append(dict(system=system, dataset=dataset, subset=subset, n=int(len(sub)), k=int(k),
                             hits=int(n_hits) if n_hits.is_integer() else n_hits, accuracy=acc,
                             ci_low=float(low[j]), ci_high=float(high[j]), n_boot=int(n_boot), seed=int(seed),
                             seeds=int(len(spread)),
                             seed_sd=float(np.std(spread, ddof=1)) if len(spread) > 1 else math.nan,
                             seed_min=float(spread.min()), seed_max=float(spread.max())))
    return pd.DataFrame(rows)


def paired_bootstrap(
    hits_a: np.ndarray, hits_b: np.ndarray, k: int, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95
) -> dict:
    """Top-k accuracy difference A - B on the same questions, with a paired percentile CI and two-sided p-value.

    Questions are resampled jointly for both systems (the pairing removes between-question variance). The p-value is
    the share of null-centred resampled differences at least as extreme as the observed one, with the +1 correction
    (so it is never 0 from a finite number of resamples). Accepts hit matrices (n x ranks), seed stacks
    (n x seeds x ranks: each question counts with its seed-mean) or per-question hit vectors already at k.
    """
    a, b = _at_k_vector(hits_a, k), _at_k_vector(hits_b, k)
    if a.shape != b.shape:
        raise ValueError(f"paired bootstrap needs the same questions: {a.shape[0]} vs {b.shape[0]} rows")
    diff = a.astype(float) - b.astype(float)
    observed = float(diff.mean()) if len(diff) else math.nan
    means = bootstrap_means(diff, n_boot, seed)
    if means is None:
        return dict(k=int(k), n=0, accuracy_a=math.nan, accuracy_b=math.nan, difference=math.nan,
                    ci_low=math.nan, ci_high=math.nan, p_value=math.nan, n_boot=int(n_boot), seed=int(seed))
    boot = means[:, 0]
    alpha = (1.0 - confidence) / 2.0
    return dict(k=int(k), n=int(len(diff)), accuracy_a=float(a.mean()), accuracy_b=float(b.mean()),
                difference=observed, ci_low=float(np.quantile(boot, alpha)),
                ci_high=float(np.quantile(boot, 1.0 - alpha)),
                p_value=null_centred_p(boot, observed), n_boot=int(n_boot), seed=int(seed))


def _at_k_vector(hits: np.ndarray, k: int) -> np.ndarray:
    """Per question: hit within the top k (bool), or the share of seeds with one (float) for a seed stack."""
    hits = np.asarray(hits)
    if hits.ndim == 1:
        return hits
    return hits_at_k(hits, [k])[:, 0]


def paired_table(
    hits_a: np.ndarray,
    hits_b: np.ndarray,
    questions: Sequence[Mapping],
    ks: Sequence[int] = DEFAULT_KS,
    n_boot: int = 10000,
    seed: int = 0,
    system_a: str = "",
    system_b: str = "",
    dataset: str = "",
    masks: Mapping[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """``paired_bootstrap`` for every subset and k, as a tidy table (system_a, system_b, dataset, subset, k, ...);
    ``masks`` as in :func:`accuracy_table`."""
    if not len(hits_a) == len(hits_b) == len(questions):
        raise ValueError(f"hits ({len(hits_a)}, {len(hits_b)} rows) must match the {len(questions)} questions")
    rows = []
    for subset, mask in _masks(questions, masks).items():
        for k in ks:
            res = paired_bootstrap(np.asarray(hits_a)[mask], np.asarray(hits_b)[mask], k, n_boot, seed)
            rows.append(dict(system_a=system_a, system_b=system_b, dataset=dataset, subset=subset, **res))
    return pd.DataFrame(rows)


def table_records(table: pd.DataFrame) -> list[dict]:
    """JSON-ready rows (plain Python scalars; NaN becomes None) for metrics files."""
    records = table.astype(object).where(table.notna(), None).to_dict(orient="records")
    return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()} for r in records]


# -------------------------------------------------------------------------------------------------- convenience
def evaluate_run(
    run: Mapping[str, Sequence[tuple[str, float]]],
    questions: Sequence[Mapping],
    text_of: Callable[[str], str] | Mapping[str, str],
    ks: Sequence[int] = DEFAULT_KS,
    n_boot: int = 1000,
    seed: int = 0,
    system: str = "",
    dataset: str = "",
) -> tuple[np.ndarray, pd.DataFrame]:
    """``hit_matrix`` then ``accuracy_table``: the hits (kept for paired tests) and the tidy accuracy table."""
    hits = hit_matrix(run, questions, text_of, k_max=max(ks))
    return hits, accuracy_table(hits, questions, ks, n_boot, seed, system=system, dataset=dataset)

