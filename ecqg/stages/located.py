"""The NQ test questions located in their gold passages: which sentence holds the answer, the spaCy analysis of
each passage, and the moved-sentence probe's pairs built from them. Notebook 07 slices by these; stage 05's
fine-tuning curve scores the same probe pairs at every snapshot. Apart from :mod:`ecqg.stages.mechanism` because
that module loads trained models (``ecqg.stages.dpr_training``), which stage 05 itself provides.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence

from ecqg.core import paths, settings
from ecqg.core.io import read_jsonl
from ecqg.data.records import read_corpus
from ecqg.data.text import analyze
from ecqg.retrieval import probes
from ecqg.retrieval.run_files import read_run
from ecqg.retrieval.silver_gold import with_silver_gold
from ecqg.runtime.models import from_pretrained

log = logging.getLogger(__name__)

TEST_SET = "nq"


def nq_questions(data: settings.Data, retrieval: settings.Retrieval) -> list[dict]:
    """The NQ test questions, each with its gold passage ids: annotated (the bundle), or for a test set that has
    none (DPR's nq-test.csv) the first passage of BM25's ranking that contains an answer (:mod:`ecqg.retrieval.silver_gold`;
    ``gold_source`` says so, :func:`gold_counts` counts them; ``retrieval.depth``: the ranking's depth)."""
    if TEST_SET not in data.test_sets:
        raise ValueError(f"the mechanism evaluations need the '{TEST_SET}' test set in data.test_sets")
    questions = [q for _, q in read_jsonl(paths.questions_file(TEST_SET))]
    if all(q.get("gold_ids") for q in questions):
        return questions
    run = read_run(paths.run_file("bm25", TEST_SET))
    return with_silver_gold(questions, run, read_corpus(paths.CORPUS), retrieval.depth)[0]


def gold_counts(questions: Sequence[Mapping]) -> dict[str, int]:
    """How many questions have annotated gold passages, silver ones (``gold_source``), or none."""
    return dict(Counter("none" if not q.get("gold_ids") else q.get("gold_source", "annotated") for q in questions))


def gold_passage_records(questions: Sequence[Mapping]) -> dict[str, dict]:
    """The corpus records of every gold passage the questions name (one pass over the corpus)."""
    wanted = {pid for q in questions for pid in q.get("gold_ids", [])}
    return {p["id"]: p for p in read_corpus(paths.CORPUS) if p["id"] in wanted}


def locate(questions: Sequence[Mapping], passages: Mapping[str, Mapping], spacy_batch_size: int = 64):
    """(locations, analyses): each question's gold passage and answer sentence, and the spaCy analysis (entities,
    sentences) of every located passage."""
    gold = probes.gold_passages(questions, {pid: p["text"] for pid, p in passages.items()})
    located = list(dict.fromkeys(gold.passage_id[gold.status == "ok"]))
    start = time.perf_counter()
    analyses = dict(zip(located, analyze([passages[pid]["text"] for pid in located], batch_size=spacy_batch_size)))
    log.info("locate: spaCy analysis of %d gold passages in %.1f s", len(located), time.perf_counter() - start)
    return probes.locate_answers(gold, {pid: p["text"] for pid, p in passages.items()}, analyses), analyses


def fits_encoder(dpr: settings.Dpr):
    """``fits(title, text)``: whether the passage encoder reads the whole passage (no truncation)."""
    # transformers: kept out of finetune_curve's import (notebooks 06, 07)
    from transformers import AutoTokenizer

    tokenizer = from_pretrained(AutoTokenizer, dpr.base_model)
    limit = dpr.passage_max_length
    return lambda title, text: len(tokenizer(title, text)["input_ids"]) <= limit


def moved_pairs(dpr: settings.Dpr, data: settings.Data, retrieval: settings.Retrieval, seed: int,
                max_pairs: int | None, located: tuple | None = None) -> tuple[list[dict], dict]:
    """The moved-sentence probe's pairs (a sample of ``max_pairs`` drawn with ``seed``, the profile's; None: every
    eligible one; ``dpr``: the passage encoder that must read a whole passage) and the counts
    of what was left out: the same pairs for notebook 07 (``evaluation.probes.moved_sentence_passages``) and for
    stage 05's fine-tuning curve (``dpr.finetune.curve_probe_passages``) when the two counts agree. ``located``:
    ``(questions, passages, locations, analyses)`` when the caller has them (07), else computed here (``data``,
    ``retrieval``: :func:`nq_questions`'s)."""
    if located is None:
        questions = nq_questions(data, retrieval)
        passages = gold_passage_records(questions)
        locations, analyses = locate(questions, passages)
    else:
        questions, passages, locations, analyses = located
    return probes.moved_sentence_pairs(questions, locations, passages, analyses, max_pairs, seed,
                                          fits_encoder(dpr))
