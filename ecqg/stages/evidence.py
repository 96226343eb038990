"""What stages 06 and 07 commit below their metrics: each trained run's result on every test question and analysed
passage (``ecqg.analysis.run_evidence``), so the report's intervals over runs, and a reviewer's, need no stage output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ecqg.core import paths
from ecqg.analysis import run_evidence as re_
from ecqg.analysis.encoder_comparison import MEASURES, ROLES

ATTENTION_MEASURES = ("entropy", "later_sentence_share")   # per passage, scaled as the summaries (nats, %)
PROBE_MEASURE = "probe_difference"                          # highest- minus lowest-attended question's score
MOVED_MEASURE, ENTITY_SLICES, POSITION_SLICES = re_.MOVED_MEASURE, re_.ENTITY_SLICES, re_.POSITION_SLICES


def write_ranks(hits: Mapping[tuple[str, str], np.ndarray], runs: Mapping[str, Sequence[str]], profile: str) -> Path:
    """06: every system's first-hit rank of every test question, per run (``runs``: 06's ``seed_runs``)."""
    return re_.write(re_.ranks_frame(hits, runs), paths.evidence_file(profile, re_.RANKS))


def probe_differences(probe: pd.DataFrame) -> pd.DataFrame:
    """Per encoder and passage: the mean score of its highest-attended entity's questions minus its lowest's (the
    passages ``probe_summary`` averages over: both roles present)."""
    frames = []
    for encoder, group in probe.groupby("encoder", sort=False):
        per = group.pivot_table(index="passage_id", columns="role", values="score", aggfunc="mean")
        per = per.reindex(columns=list(ROLES)).dropna()
        frames.append(pd.DataFrame({"encoder": encoder, "passage_id": per.index,
                                    PROBE_MEASURE: (per["highest"] - per["lowest"]).to_numpy()}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["encoder", "passage_id",
                                                                                    PROBE_MEASURE])


def passage_frame(by_seed: Mapping[int, tuple[pd.DataFrame, pd.DataFrame]]) -> pd.DataFrame:
    """06's per-passage values of every run: ``seed -> (compare_attention's frame, probe_scores' frame)``; passages
    numbered once over all runs, so a unit is the same passage in every run."""
    attention = pd.concat([a.assign(seed=int(s)) for s, (a, _) in by_seed.items()], ignore_index=True)
    attention = attention.assign(**{m: attention[m] * MEASURES[m][1] for m in ATTENTION_MEASURES})
    frames = [re_.values_frame(attention, ATTENTION_MEASURES)]
    diffs = pd.concat([probe_differences(p).assign(seed=int(s)) for s, (_, p) in by_seed.items()], ignore_index=True)
    if len(diffs):
        frames.append(re_.values_frame(diffs, [PROBE_MEASURE]))
    return pd.concat(frames, ignore_index=True)


def write_passages(by_seed: Mapping[int, tuple[pd.DataFrame, pd.DataFrame]], profile: str) -> Path:
    return re_.write(passage_frame(by_seed), paths.evidence_file(profile, re_.PASSAGES))


def write_mechanism(moved_scores: pd.DataFrame, slices: Mapping[str, Mapping[str, np.ndarray]], dataset: str,
                    profile: str) -> list[Path]:
    """07: the moved-sentence gap per question and run (``moved_sentence_gaps``' tidy scores), and which questions
    each slice holds (``kind -> slice -> mask over the dataset's questions``)."""
    frames = [re_.slices_frame(masks, kind, dataset) for kind, masks in slices.items() if masks]
    slice_table = (pd.concat(frames, ignore_index=True) if frames
                   else pd.DataFrame({"kind": [], "slice": [], "dataset": [], "question": []}))
    if len(moved_scores):
        scores = moved_scores.assign(seed=moved_scores.seed.fillna(re_.UNTRAINED_SEED).astype(int), measure="gap")
        moved = re_.values_frame(scores.rename(columns={"gap": MOVED_MEASURE}), [MOVED_MEASURE], system="system",
                                 unit="question_id")
    else:
        moved = pd.DataFrame({c: [] for c in re_.VALUE_COLUMNS})
    return [re_.write(slice_table, paths.evidence_file(profile, re_.SLICES)),
            re_.write(moved, paths.evidence_file(profile, re_.MECHANISM))]
