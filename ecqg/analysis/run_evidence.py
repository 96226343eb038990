"""Per-run evidence: what every trained run did on every test question and analysed passage, in compact committed
files, so each interval over training runs can be recomputed from a clone without running a stage.

Why files of their own: the metrics JSON keeps means and spreads per arm, from which neither a paired analysis
(seeds pair the arms) nor the hierarchical bootstrap (runs, then questions) can be computed. Stages 06 and 07 write,
under ``results/<profile>/evidence/``:

* ``ranks.parquet`` (06): system, dataset, seed, question, rank: the 1-based rank of the first passage that holds an
  answer (0: none in the run's depth), per test question (its index in the prepared test set) and run;
* ``passages.parquet`` (06): measure, system, seed, unit, value: per analysed passage and run, the [CLS] attention
  entropy and later-sentence share, and the Table 1 probe's highest- minus lowest-attended question score;
* ``mechanism.parquet`` (07): the same columns, for the moved-sentence probe's front - end gap per question;
* ``slices.parquet`` (07): kind, slice, dataset, question: which test questions each mechanism slice holds.

``seed`` is the run's training seed (the replicate's pre-training and fine-tuning seed), ``-1`` for a system that is
not trained (BM25, TF-IDF, the untrained encoder). Parquet with zstd: a few MB per profile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

UNTRAINED_SEED = -1
RANKS, PASSAGES, MECHANISM, SLICES = "ranks.parquet", "passages.parquet", "mechanism.parquet", "slices.parquet"
MOVED_MEASURE = "moved_gap"                                 # front - end score of the moved-sentence probe
ENTITY_SLICES = "entity_attention"                          # 07's slice kinds
POSITION_SLICES = "answer_position"
VALUE_COLUMNS = ["measure", "system", "seed", "unit", "value"]
_SEED = re.compile(r"_s(\d+)$")


def run_seed(run: str) -> int:
    """A run's training seed from its name (``dpr_uncon_s2023`` -> 2023); :data:`UNTRAINED_SEED` without one."""
    match = _SEED.search(run)
    return int(match.group(1)) if match else UNTRAINED_SEED


def first_hit_ranks(hits: np.ndarray) -> np.ndarray:
    """``hits`` (questions x depth, or questions x runs x depth; True where a ranked passage holds an answer) ->
    the 1-based rank of the first hit, 0 where there is none (questions, or questions x runs)."""
    hits = np.asarray(hits, dtype=bool)
    first = hits.argmax(axis=-1) + 1
    return np.where(hits.any(axis=-1), first, 0).astype(np.int16)


def ranks_frame(hits: Mapping[tuple[str, str], np.ndarray], runs: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Long table of first-hit ranks from 06's hit matrices (``(system, dataset) -> hits``; ``runs``: a system's
    run names, one per seed, in the stack's order)."""
    frames = []
    for (system, dataset), matrix in hits.items():
        ranks = first_hit_ranks(matrix)
        ranks = ranks[:, None] if ranks.ndim == 1 else ranks
        names = list(runs.get(system, [system]))
        if len(names) != ranks.shape[1]:
            raise ValueError(f"{system} on {dataset}: {ranks.shape[1]} runs in its hits but {len(names)} run names")
        for column, name in enumerate(names):
            frames.append(pd.DataFrame({"system": system, "dataset": dataset, "seed": run_seed(name),
                                        "question": np.arange(len(ranks), dtype=np.int32),
                                        "rank": ranks[:, column]}))
    return _typed(pd.concat(frames, ignore_index=True), ("system", "dataset"))


def values_frame(frame: pd.DataFrame, measures: Sequence[str], system: str = "encoder", unit: str = "passage_id",
                 seed: int | str = "seed") -> pd.DataFrame:
    """Long table of per-unit values (``VALUE_COLUMNS``) from a tidy frame with one row per unit, system and run
    (``seed``: a column name, or one seed for the whole frame). Units are numbered in the order of their first
    appearance, so every system and run of one frame shares the numbering."""
    codes = {u: i for i, u in enumerate(dict.fromkeys(frame[unit]))}
    seeds = frame[seed] if isinstance(seed, str) else pd.Series(seed, index=frame.index)
    out = [pd.DataFrame({"measure": m, "system": frame[system].to_numpy(), "seed": seeds.to_numpy(),
                         "unit": frame[unit].map(codes).to_numpy(), "value": frame[m].to_numpy(dtype=float)})
           for m in measures]
    return _typed(pd.concat(out, ignore_index=True), ("measure", "system"))


def slices_frame(masks: Mapping[str, np.ndarray], kind: str, dataset: str) -> pd.DataFrame:
    """Which questions each slice holds (``slice -> boolean mask over the dataset's questions``)."""
    rows = [pd.DataFrame({"kind": kind, "slice": name, "dataset": dataset,
                          "question": np.flatnonzero(mask).astype(np.int32)}) for name, mask in masks.items()]
    return _typed(pd.concat(rows, ignore_index=True), ("kind", "slice", "dataset"))


def _typed(frame: pd.DataFrame, categorical: Sequence[str]) -> pd.DataFrame:
    frame = frame.astype({c: "category" for c in categorical})
    frame["seed"] = frame["seed"].astype(np.int32) if "seed" in frame else None
    if "value" in frame:
        frame["value"] = frame["value"].astype(np.float32)
    return frame


def write(frame: pd.DataFrame, path: Path) -> Path:
    """Atomic parquet write (zstd): a killed stage leaves no file that looks complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    frame.to_parquet(tmp, index=False, compression="zstd")
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------------------------------------- reading
@dataclass
class Evidence:
    """A profile's per-run files, loaded once; every accessor returns units x runs matrices with the runs' seeds."""

    folder: Path
    ranks: pd.DataFrame | None = None
    values: pd.DataFrame | None = None
    slices: pd.DataFrame | None = None
    _rank_cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, results_dir: str | Path) -> "Evidence | None":
        """The evidence of ``results/<profile>`` (None when the profile has none: older committed results)."""
        folder = Path(results_dir) / "evidence"
        if not folder.is_dir():
            return None
        read = (lambda name: pd.read_parquet(folder / name) if (folder / name).is_file() else None)
        values = [f for f in (read(PASSAGES), read(MECHANISM)) if f is not None]
        return cls(folder, read(RANKS), pd.concat(values, ignore_index=True) if values else None, read(SLICES))

    def seeds(self, system: str, dataset: str = "nq") -> tuple[int, ...]:
        return self._ranks(system, dataset)[1]

    def _ranks(self, system: str, dataset: str) -> tuple[np.ndarray | None, tuple[int, ...]]:
        key = (system, dataset)
        if key not in self._rank_cache:
            if self.ranks is None:
                self._rank_cache[key] = (None, ())
            else:
                sel = self.ranks[(self.ranks.system == system) & (self.ranks.dataset == dataset)]
                if sel.empty:
                    self._rank_cache[key] = (None, ())
                else:
                    wide = sel.pivot(index="question", columns="seed", values="rank").sort_index()
                    self._rank_cache[key] = (wide.to_numpy(), tuple(int(s) for s in wide.columns))
        return self._rank_cache[key]

    def hits(self, system: str, dataset: str, k: int, questions: np.ndarray | None = None
             ) -> tuple[np.ndarray, tuple[int, ...]] | None:
        """Top-k hits (0/1, questions x runs) of ``system`` on ``dataset``, restricted to ``questions`` (indices)."""
        ranks, seeds = self._ranks(system, dataset)
        if ranks is None:
            return None
        if questions is not None:
            ranks = ranks[questions]
        return ((ranks >= 1) & (ranks <= k)).astype(float), seeds

    def unit_values(self, measure: str, system: str) -> tuple[np.ndarray, tuple[int, ...]] | None:
        """Per-unit values of ``measure`` (units x runs) of ``system``; None when absent."""
        if self.values is None:
            return None
        sel = self.values[(self.values.measure == measure) & (self.values.system == system)]
        if sel.empty:
            return None
        wide = sel.pivot(index="unit", columns="seed", values="value").sort_index()
        return wide.to_numpy(dtype=float), tuple(int(s) for s in wide.columns)

    def slice_questions(self, kind: str, name: str, dataset: str = "nq") -> np.ndarray | None:
        if self.slices is None:
            return None
        sel = self.slices[(self.slices.kind == kind) & (self.slices.slice == name) & (self.slices.dataset == dataset)]
        return None if sel.empty else np.sort(sel.question.to_numpy())
