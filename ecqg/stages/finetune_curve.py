"""The verdict against fine-tuning length (notebook 06): Table 3's Top-k of each variant at every validated snapshot
of its fine-tuning, and the paired differences against DPR at the steps both reached.

The runs come from stage 05 (``dpr.finetune.curve_runs``, first training seed): ``<model>/curve/step-<step>/<set>.trec``,
searched over the same corpus as the ``retrieve_dense`` stages (:mod:`ecqg.stages.finetune_validation`). A variant
that stopped earlier (patience) has no later points; differences are taken only where both variants have a run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ecqg.analysis import tables
from ecqg.analysis.mechanism import summarise_gaps
from ecqg.core import paths
from ecqg.core.io import read_json
from ecqg.core.variants import BASELINE
from ecqg.retrieval import evaluation
from ecqg.retrieval.run_files import read_run
from ecqg.stages.finetune_validation import CURVE_DIR, MOVED_FILE

_STEP_DIR = re.compile(r"^step-(\d{6})$")


def curve_steps(variant: str, seed: int) -> dict[int, Path]:
    """Step -> that snapshot's run directory, for the model of ``variant`` trained with ``seed``."""
    root = paths.model_dir(variant, seed) / CURVE_DIR
    found = {}
    for child in sorted(root.iterdir()) if root.is_dir() else []:
        m = _STEP_DIR.match(child.name)
        if m and child.is_dir():
            found[int(m.group(1))] = child
    return found


def curve_hits(variants: Sequence[str], seed: int, test_sets: Mapping[str, list[dict]], text_of: Mapping[str, str],
               depth: int) -> dict[tuple[str, int, str], object]:
    """``(variant, step, set) -> hit matrix`` of every snapshot run."""
    caches = {name: evaluation.HitCache(text_of) for name in test_sets}
    hits = {}
    for variant in variants:
        for step, directory in curve_steps(variant, seed).items():
            for name, questions in test_sets.items():
                hits[(variant, step, name)] = evaluation.hit_matrix(read_run(directory / f"{name}.trec"), questions,
                                                                    text_of, depth, cache=caches[name])
    return hits


def curve_tables(hits: Mapping, test_sets: Mapping[str, list[dict]], ks: Sequence[int], n_boot: int, seed: int,
                 baseline: str = BASELINE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(accuracy, paired)``: Top-k of every (variant, step, set) on all questions, and variant - baseline at each
    step both have, with paired bootstrap CIs and p-values."""
    rows, paired = [], []
    for (variant, step, name), matrix in hits.items():
        for k in ks:
            rows.append(dict(variant=variant, step=step, dataset=name, k=k,
                             accuracy=float(evaluation.hits_at_k(matrix, [k])[:, 0].mean())))
        if variant != baseline and (baseline, step, name) in hits:
            for k in ks:
                res = tables.paired_bootstrap(matrix, hits[(baseline, step, name)], k, n_boot, seed)
                paired.append(dict(variant=variant, baseline=baseline, step=step, dataset=name, **res))
    accuracy = pd.DataFrame(rows).sort_values(["variant", "dataset", "k", "step"], ignore_index=True) \
        if rows else pd.DataFrame()
    differences = pd.DataFrame(paired).sort_values(["variant", "dataset", "k", "step"], ignore_index=True) \
        if paired else pd.DataFrame()
    return accuracy, differences


def plot_differences(differences: pd.DataFrame, k: int = 1):
    """Variant - DPR (Top-``k``, points, 95% CI) against fine-tuning steps, one panel per test set."""
    sets = list(dict.fromkeys(differences.dataset)) if len(differences) else []
    fig, axes = plt.subplots(1, max(len(sets), 1), figsize=(4.5 * max(len(sets), 1), 3.6), squeeze=False)
    for ax, name in zip(axes[0], sets):
        part = differences[(differences.dataset == name) & (differences.k == k)]
        for variant, rows in part.groupby("variant"):
            ax.errorbar(rows.step, 100 * rows.difference, capsize=3, marker="o", label=f"{variant} - DPR",
                        yerr=[100 * (rows.difference - rows.ci_low), 100 * (rows.ci_high - rows.difference)])
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set(title=f"{name}: Top-{k} difference", xlabel="fine-tuning steps (log)", ylabel="points")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def step_systems(hits: Mapping, test_set: str, baseline: str = BASELINE) -> tuple[dict, list[tuple[str, str]]]:
    """The snapshots of one test set as systems ``dpr_<variant>@<step>`` (what 07's slice tables take) and the pairs
    ``(variant@step, baseline@step)`` at the steps both reached."""
    systems = {f"dpr_{v}@{step}": matrix for (v, step, name), matrix in hits.items() if name == test_set}
    pairs = [(f"dpr_{v}@{step}", f"dpr_{baseline}@{step}") for (v, step, name) in hits
             if name == test_set and v != baseline and (baseline, step, name) in hits]
    return systems, pairs


def curve_gaps(variants: Sequence[str], seed: int) -> dict[str, np.ndarray]:
    """``dpr_<variant>@<step> -> front - end gaps`` of the moved-sentence probe at every snapshot that scored it
    (the same pairs at every snapshot: a snapshot with other question ids is an error)."""
    gaps, ids = {}, None
    for variant in variants:
        for step, directory in curve_steps(variant, seed).items():
            if not (directory / MOVED_FILE).is_file():
                continue
            found = read_json(directory / MOVED_FILE, dict, "the moved-sentence gaps of a snapshot")
            if ids is not None and found["question_ids"] != ids:
                raise ValueError(f"{directory / MOVED_FILE}: other probe questions than the other snapshots'")
            ids = found["question_ids"]
            gaps[f"dpr_{variant}@{step}"] = np.asarray(found["gaps"], dtype=float)
    return gaps


def gap_table(gaps: Mapping[str, np.ndarray], n_boot: int, seed: int, confidence: float,
              baseline: str = BASELINE) -> pd.DataFrame:
    """Each snapshot's mean moved-sentence gap (CI over passages) and variant - DPR at the steps both reached, with
    ``variant`` and ``step`` columns (:func:`ecqg.analysis.mechanism.summarise_gaps`)."""
    pairs = [(name, f"dpr_{baseline}@{name.rsplit('@', 1)[1]}") for name in gaps
             if not name.startswith(f"dpr_{baseline}@")]
    table = summarise_gaps(gaps, [p for p in pairs if p[1] in gaps], n_boot, seed, confidence)
    if not len(table):
        return table
    return table.assign(variant=table.system.str.removeprefix("dpr_").str.rsplit("@", n=1).str[0],
                        step=table.system.str.rsplit("@", n=1).str[1].astype(int))
