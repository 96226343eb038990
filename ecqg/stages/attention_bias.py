"""Stage 01 in the pipeline: which passages to study, which one to draw, and what QG receives.

Notebook 01 calls these around :func:`ecqg.analysis.attention.analyze_passages`, which does the measuring.
"""

from __future__ import annotations

import random
from typing import Mapping

import numpy as np
import pandas as pd

from ecqg.analysis.attention import AttentionStudy, analyze_passages, select_entities
from ecqg.core import settings
from ecqg.stages.common import pool_passages, subset, test_gold_ids  # noqa: F401  (notebook 06: attention_bias.subset)


def sample_passages(attention: settings.Attention, test_sets: Mapping[str, str], seed: int, size: int | None = None,
                    purpose: str = "attention") -> tuple[list[dict], dict]:
    """A seeded sample of pool passages (``data.synthetic_pool``: the corpus, or every input passage); optionally
    (``attention.exclude_test_gold``) without the gold passages of ``test_sets`` (``data.test_sets``; a leak guard:
    synthetic questions are later generated on these passages). Returns the sample and what was excluded. ``size``:
    how many (default ``attention.sample_passages``); ``purpose`` names the sample in its seed (the params' ``seed``;
    another purpose draws an independent sample)."""
    excluded = test_gold_ids(test_sets) if attention.exclude_test_gold else set()
    pool = [p for p in pool_passages() if p["id"] not in excluded]
    size = min(attention.sample_passages if size is None else size, len(pool))
    chosen = sorted(random.Random(f"{seed}-{purpose}").sample(range(len(pool)), size))
    return [pool[i] for i in chosen], {"pool": len(pool), "excluded_test_gold": len(excluded), "sampled": size}


def conditioning_input(attention: settings.Attention, test_sets: Mapping[str, str], seed: int, model,
                       studied: list[dict], study: AttentionStudy, selection: pd.DataFrame) -> tuple[list[dict], dict]:
    """What stage 02 conditions on: per passage its lowest-attended entities under ``model`` (the baseline DPR).

    ``attention.condition_passages`` null: the studied passages (their study is reused). A number N: a seeded sample
    of N pool passages of its own (the paper studies 20k passages for the bias but conditions on enough passages for
    500k questions), measured with the same analysis (:func:`sample_passages`: ``test_sets``, ``seed``). Returns
    the records and how many passages were measured.
    """
    wanted = attention.condition_passages
    if wanted is None:
        return qg_entities(selection, studied), {"passages": len(studied), "reused_study": True}
    passages, _ = sample_passages(attention, test_sets, seed, wanted, purpose="condition")
    measured = analyze_passages(model, passages, batch_size=attention.batch_size)
    return qg_entities(selection_for(measured, attention), passages), {"passages": len(passages),
                                                                      "reused_study": False}


def pick_example(selection: pd.DataFrame, passage_id: str | None = None) -> str:
    """The passage drawn as Figure 1: the one named in params, else the passage that shows the bias most plainly
    (highest-attended entity earliest, lowest-attended entity latest, ties by id)."""
    if passage_id is not None:
        if passage_id not in set(selection.passage_id):
            raise ValueError(f"attention.example_passage '{passage_id}' is not among the studied passages with "
                             "enough entities; pick one of the ids in the selection table")
        return passage_id
    high = selection[selection.role == "highest"].set_index("passage_id").relative_position
    low = selection[(selection.role == "lowest") & (selection["rank"] == 1)].set_index("passage_id").relative_position
    gap = (low.reindex(high.index) - high).dropna()
    return str(gap[gap == gap.max()].sort_index().index[0])


def qg_entities(selection: pd.DataFrame, passages: list[dict]) -> list[dict]:
    """Per passage, its lowest-attended entities (ascending attention) with spans and scores, the input of the
    entity-conditioned question generator (stage 02), and its highest-attended entity (Table 1's other probe)."""
    by_id = {p["id"]: p for p in passages}

    def entity(r) -> dict:
        return {"entity": r.entity, "label": r.label, "start_char": int(r.start_char), "end_char": int(r.end_char),
                "attention": float(r.attention), "rank": int(r.rank)}

    highest = {r.passage_id: entity(r) for r in selection[selection.role == "highest"].itertuples()}
    out = []
    for pid, group in selection[selection.role == "lowest"].groupby("passage_id", sort=False):
        passage = by_id[pid]
        out.append({"passage_id": pid, "title": passage["title"], "text": passage["text"],
                    "n_entities": int(group.n_entities.iloc[0]),
                    "entities": [entity(r) for r in group.sort_values("rank").itertuples()],
                    "highest": highest[pid]})  # for the paper's Table 1 probe (highest vs lowest)
    return out


def summary(study: AttentionStudy, selection: pd.DataFrame, bias: Mapping) -> dict:
    """The figures the notebook reports per encoder (and writes to the metrics file)."""
    p = study.passages
    finite = lambda s: s[np.isfinite(s)]  # noqa: E731
    return {"passages": int(len(p)), "passages_with_enough_entities": int(selection.passage_id.nunique()),
            "entities": int(len(study.entities)), "mean_entropy": float(finite(p.entropy).mean()),
            "mean_first_sentence_share": float(finite(p.first_sentence_share).mean()),
            "mean_first_sentence_per_token": float(finite(p.first_sentence_mean).mean()),
            "mean_later_sentence_per_token": float(finite(p.later_sentence_mean).mean()),
            "truncated_passages": int(p.truncated.sum()), **bias}


def selection_for(study: AttentionStudy, attention: settings.Attention) -> pd.DataFrame:
    """The studied entities stage 02 may condition on (``attention.lowest_entities`` of passages with at least
    ``attention.min_entities``)."""
    return select_entities(study.entities, attention.lowest_entities, attention.min_entities)
