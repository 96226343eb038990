"""Mixing the filtered synthetic questions into DPR pre-training sets (docs/design.md, "Method", step 4).

* :func:`dedupe` drops repeated questions (by :func:`ecqg.data.records.question_key`) and any question that equals a
  test question of any test set (never pre-train on a test question), counting each reason.
* :func:`build_sets`: Mixed = conditioned + unconditioned in equal halves (paper: 500k + 500k), UnCon =
  unconditioned only with the same total (paper: 1M). Mixed's unconditioned half is a subset of UnCon, so the two
  sets differ only in the half that Mixed takes from the conditioned generator.
* :func:`dpr_examples` adds one BM25 hard negative per question (the top BM25 passage that is neither the positive
  nor answer-bearing, DPR's rule, through :func:`ecqg.retrieval.distant.gold_training_records`), and
  :func:`write_set` writes DPR retriever json (``ecqg.data.dpr``), which DPR and Tevatron read.
* :func:`mixing_statistics`: what the notebook shows about the sets (entity and answer types, positions).
"""

from __future__ import annotations

import collections
import logging
import random
import re
import statistics
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ecqg.data.dpr import write_dpr_retriever_json
from ecqg.data.records import question_key, read_test_questions
from ecqg.core.errors import DataFormatError
from ecqg.filtering import check_generated, passage_of

log = logging.getLogger(__name__)

DROP_REASONS = ("test_question", "duplicate", "empty_key")
# spaCy en_core_web_sm's NER labels (OntoNotes 5): answer types are not restricted to the conditioning types.
ANSWER_LABELS = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE",
                 "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = re.compile(rf"\b(1[0-9]{{3}}|20[0-9]{{2}}|{_MONTHS})\b|\b[0-9]{{1,4}}s\b|\bcentury\b", re.IGNORECASE)
_DIGIT = re.compile(r"\d")


# ================================================================================================ dedupe / exclude
def question_keys_of(paths: Iterable[str | Path]) -> set[str]:
    """The question keys of every test set (bundle test-question files, e.g. ``data.test_sets`` values)."""
    return {question_key(q["question"]) for path in paths for q in read_test_questions(path)}


def dedupe(records: Iterable[Mapping], test_keys: set[str] | frozenset[str],
           where: str = "generated questions") -> tuple[list[dict], dict[str, Any]]:
    """Keep the first record of each question key that is not a test question; ``(kept, stats)``.

    Reasons, checked in this order: ``test_question`` (its key is a test question's key), ``duplicate`` (an earlier
    kept record has the key: across generators too, so the same question never enters one set twice),
    ``empty_key`` (no word characters at all). Pass the scarcer pool first (the conditioned questions), so that a
    question both generators produced is kept as the conditioned one.
    """
    records = check_generated(records, where)
    kept, seen = [], set()
    dropped = collections.Counter()
    for rec in records:
        key = question_key(rec["question"])
        reason = ("empty_key" if not key else "test_question" if key in test_keys else
                  "duplicate" if key in seen else None)
        if reason:
            dropped[reason] += 1
            continue
        seen.add(key)
        kept.append(rec)
    stats = {"in": len(records), "kept": len(kept), "dropped": {r: dropped[r] for r in DROP_REASONS}}
    for g in ("uncon", "con"):
        stats[f"{g}_kept"] = sum(r["generator"] == g for r in kept)
    log.info("dedupe: kept %d of %d (%s)", len(kept), len(records), stats["dropped"])
    return kept, stats


# ========================================================================================================= sets
def build_sets(uncon: Sequence[Mapping], con: Sequence[Mapping], total: int, seed: int,
               require_total: bool = False) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """``(mixed, uncon_set, stats)``, both of the same size ``2 * half``.

    ``half = min(total // 2, len(con), len(uncon) // 2)``: UnCon needs ``2 * half`` unconditioned questions and
    Mixed ``half`` of each kind, so a short pool shrinks both sets alike (logged, and ``shrunk`` in the stats);
    with ``require_total`` (params' ``mixing.require_total``: the paper profile) a short pool is refused instead,
    naming the pools, the sizes and the settings that raise them, so a profile that promises 1M questions never
    pre-trains on fewer without saying so.
    UnCon is a seeded sample of the unconditioned pool; Mixed takes the first ``half`` of that sample plus a seeded
    sample of ``half`` conditioned questions, shuffled together (seeded).
    """
    if not isinstance(total, int) or total < 2:
        raise ValueError(f"total must be an integer >= 2, got {total!r}")
    for name, pool, gen in (("uncon", uncon, "uncon"), ("con", con, "con")):
        for i, rec in enumerate(pool):
            if rec.get("generator") != gen:
                raise DataFormatError(f"{name} pool", i, "generator", f"expected {gen!r}, got {rec.get('generator')!r}")
    half = min(total // 2, len(con), len(uncon) // 2)
    if require_total and 2 * half < total:
        raise ValueError(short_pools_message(len(uncon), len(con), total))
    rng = random.Random(seed)
    uncon_set = [dict(r) for r in rng.sample(list(uncon), 2 * half)]
    mixed = uncon_set[:half] + [dict(r) for r in rng.sample(list(con), half)]
    rng.shuffle(mixed)
    stats = {"requested_total": total, "total": 2 * half, "half": half, "uncon_pool": len(uncon),
             "con_pool": len(con), "shrunk": 2 * half < total, "seed": seed,
             "mixed_con": half, "mixed_uncon": half, "uncon_set": 2 * half}
    if stats["shrunk"]:
        log.warning("mixing: asked for %d questions per set, but the pools allow %d (%d conditioned, %d "
                    "unconditioned available: a set needs total/2 conditioned and total unconditioned)", total,
                    2 * half, len(con), len(uncon))
    return mixed, uncon_set, stats


def short_pools_message(uncon: int, con: int, total: int) -> str:
    """Why ``mixing.require_total`` refuses pools of ``uncon`` unconditioned and ``con`` conditioned questions."""
    short = []
    if uncon < 2 * (total // 2):
        short.append(f"UnCon needs {2 * (total // 2):,} unconditioned questions, stage 03 kept {uncon:,} (raise "
                     "'qg.generate.uncon_passages')")
    if con < total // 2:
        short.append(f"Mixed needs {total // 2:,} conditioned questions, stage 03 kept {con:,} (raise "
                     "'attention.condition_passages')")
    return ("mixing: 'mixing.total' is {:,} and 'mixing.require_total' is true, but the filtered pools are short: "
            .format(total) + "; ".join(short) + ". The keep rates came out below what `python -m ecqg.core.config check` "
            "planned with ('yields' less 'yields.margin'): raise the sampling count and rerun from stage 02 (or "
            "measure the yields on this run and raise 'yields.margin'), or set 'mixing.require_total: false' to let "
            "both sets shrink alike")


def dose_sets(uncon_set: Sequence[Mapping], mixed: Sequence[Mapping], sizes: Sequence[int], seed: int
              ) -> dict[int, tuple[list[dict], list[dict]]]:
    """``{size: (uncon, mixed)}``: the two sets cut to each dose of the dose curve (``mixing.doses``).

    UnCon's dose is the first ``size`` of its seeded sample, Mixed's the first ``size // 2`` questions of each
    generator in its shuffled order, shuffled again (seeded): random subsets, each dose inside every larger one, so
    the curve adds questions rather than drawing new sets. A dose above what the sets hold is an error.
    """
    con = [dict(r) for r in mixed if r["generator"] == "con"]
    unc = [dict(r) for r in mixed if r["generator"] == "uncon"]
    out = {}
    for size in sizes:
        half = size // 2
        if size > len(uncon_set) or half > min(len(con), len(unc)):
            raise ValueError(f"mixing.doses: a dose of {size} questions, but the sets hold {len(uncon_set)} "
                             f"(UnCon) and {len(con)} + {len(unc)} (Mixed); lower the dose or raise mixing.total")
        dose_mixed = con[:half] + unc[:half]
        random.Random(f"{seed}-dose-{size}").shuffle(dose_mixed)
        out[size] = ([dict(r) for r in uncon_set[:2 * half]], dose_mixed)
    return out


# ============================================================================================== hard negatives
def dpr_examples(records: Sequence[Mapping], searcher, passages: Mapping[str, Mapping], depth: int = 100,
                 threads: int = 2, progress: bool = True, where: str = "generated questions"
                 ) -> tuple[dict[str, dict], dict[str, Any]]:
    """DPR retriever examples ``{record id: example}`` with one BM25 hard negative each; ``(examples, stats)``.

    Searches all questions once with ``searcher`` (:class:`~ecqg.retrieval.bm25.BM25Searcher`) at ``depth``; the
    hard negative is the best-ranked hit that is not the positive and does not contain the generated answer (DPR's
    has_answer on the passage text). Questions without such a hit keep an empty ``hard_negative_ctxs`` and are
    counted (``fewer_hard_negatives``). The positive's ``score`` is its BM25 score when it is in the top ``depth``,
    else None. ``dataset`` is ``ecqg_uncon`` / ``ecqg_con``; ``id``, ``entity`` and ``generator`` ride along.
    """
    # retrieval.distant brings pyserini (through data.text), needed only for BM25 hard negatives
    from ecqg.retrieval.distant import gold_training_records

    records = check_generated(records, where)
    triples = []
    for i, rec in enumerate(records):
        passage = passage_of(passages, rec["passage_id"], where, i)
        triples.append({"id": rec["id"], "question": rec["question"], "answer": rec["answer"],
                        "passage_id": rec["passage_id"], "source": f"ecqg_{rec['generator']}",
                        "title": passage.get("title") or "", "text": passage["text"]})
    run = searcher.search({t["id"]: t["question"] for t in triples}, k=depth, threads=threads, progress=progress)
    examples, stats = gold_training_records(triples, run, passages, n_hard=1, where=where, progress=progress)
    out = {}
    for rec, ex in zip(records, examples):
        positive_score = dict(run[rec["id"]]).get(rec["passage_id"])
        ex["positive_ctxs"][0]["score"] = positive_score
        ex.update(id=rec["id"], generator=rec["generator"], entity=rec["entity"])
        out[rec["id"]] = ex
    stats = {"questions": len(records), "without_hard_negative": stats["fewer_hard_negatives"], "depth": depth,
             "positive_in_bm25_top": sum(ex["positive_ctxs"][0]["score"] is not None for ex in out.values())}
    log.info("BM25 hard negatives: %d questions, %d without one in the top %d", stats["questions"],
             stats["without_hard_negative"], depth)
    return out, stats


def write_set(path: str | Path, records: Sequence[Mapping], examples: Mapping[str, Mapping]) -> int:
    """Write one set (records in order) as DPR retriever json, atomically; every record needs its example."""
    for i, rec in enumerate(records):
        if rec["id"] not in examples:
            raise DataFormatError(path, i, "id", f"no DPR example (hard negative) for question {rec['id']!r}")
    return write_dpr_retriever_json(path, (examples[r["id"]] for r in records))


# ==================================================================================================== statistics
def answer_types(answers: Sequence[str], spacy_model: str = "bundled:en_core_web_sm") -> list[str]:
    """One type per answer string: the spaCy NER label of its longest entity (any OntoNotes label), else DATE
    (a year, month or decade pattern), NUM (any digit) or OTHER. NER runs on the answer alone, which is cheaper
    than parsing every passage and good enough for a distribution."""
    # data.text brings pyserini; spaCy loads on the call
    from ecqg.data.text import analyze

    out = []
    for answer, analysis in zip(answers, analyze(answers, types=ANSWER_LABELS, model=spacy_model)):
        if analysis.entities:
            out.append(max(analysis.entities, key=lambda e: e.end_char - e.start_char).label)
        elif _DATE.search(answer):
            out.append("DATE")
        elif _DIGIT.search(answer):
            out.append("NUM")
        else:
            out.append("OTHER")
    return out


def relative_position(text: str, surface: str) -> float | None:
    """Character start of the first occurrence of ``surface`` in ``text`` (exact, else case-insensitive) divided by
    the text length; None when it does not occur."""
    pos = text.find(surface)
    if pos < 0:
        pos = text.lower().find(surface.lower())
    return None if pos < 0 or not text else pos / len(text)


def _position_summary(values: list[float | None]) -> dict[str, Any]:
    found = [v for v in values if v is not None]
    return {"n": len(found), "not_found": len(values) - len(found),
            "mean": round(statistics.fmean(found), 4) if found else None,
            "median": round(statistics.median(found), 4) if found else None,
            "second_half_share": round(sum(v >= 0.5 for v in found) / len(found), 4) if found else None}


def _distribution(labels: Iterable[str]) -> dict[str, int]:
    return dict(collections.Counter(labels).most_common())


def mixing_statistics(uncon: Sequence[Mapping], con: Sequence[Mapping], passages: Mapping[str, Mapping],
                      spacy_model: str = "bundled:en_core_web_sm", where: str = "generated questions"
                      ) -> dict[str, Any]:
    """Distributions for the notebook: entity types of the conditioning entities, answer types per generator, and
    relative positions (char start / passage length) of the conditioned *entity* vs the unconditioned *answer*:
    the paper's point is that conditioning on low-attention entities reaches later parts of the passage.
    The per-question positions are returned too (``*_positions``) for plotting."""
    uncon, con = check_generated(uncon, f"{where} (uncon)"), check_generated(con, f"{where} (con)")

    def positions(records, field, label):
        return [relative_position(passage_of(passages, r["passage_id"], label, i)["text"], r[field])
                for i, r in enumerate(records)]

    con_pos = positions(con, "entity", f"{where} (con)")
    uncon_pos = positions(uncon, "answer", f"{where} (uncon)")
    return {
        "entity_types": _distribution(r["entity_label"] or "unknown" for r in con),
        "answer_types_uncon": _distribution(answer_types([r["answer"] for r in uncon], spacy_model)),
        "answer_types_con": _distribution(answer_types([r["answer"] for r in con], spacy_model)),
        "con_entity_position": _position_summary(con_pos),
        "uncon_answer_position": _position_summary(uncon_pos),
        "con_entity_positions": con_pos,
        "uncon_answer_positions": uncon_pos,
    }
