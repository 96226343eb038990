"""Fine-tuning to convergence: snapshots at fixed points, validated; a patience rule over epochs; the best one kept.

Why: a fine-tuning of a fixed, short length (the study's former 25 steps) compares starting points, not converged models, and
the paper fine-tunes every variant to convergence on its target task (40 epochs). The rule here is the same for every
variant, and only held-out validation decides:

* a **snapshot** is taken at every epoch end and at the extra ``snapshot_steps`` (e.g. 25, the study's former fixed length); each
  is validated (by the pool validation, or the caller's ``validate``: in the pipeline, the held-out gold
  questions retrieved over the whole corpus) and the caller may keep what it needs from it (a curve over steps);
* **patience**: training stops after ``patience`` epoch ends in a row without a strictly better ``select_metric``
  than the best so far (or at ``epochs``, the cap, which also sets the learning-rate schedule);
* the **best** epoch-end snapshot (earliest among ties) is the model the run returns and saves.

Everything is read back from the history, so a resumed run decides exactly as an uninterrupted one.
"""

from __future__ import annotations

from typing import Sequence

SNAPSHOT = "snapshot"           # history flag: this step was a snapshot (validated)
EPOCH_END = "epoch_end"         # ... at the end of an epoch (the ones patience and the selection look at)
BEST = "best"                   # ... and the best epoch end so far (its model is in <output>/best/)


def epoch_end_scores(history: Sequence[dict], metric: str) -> list[tuple[int, float]]:
    """``(step, score)`` of every validated epoch end, in order."""
    out = []
    for entry in history:
        if entry.get(EPOCH_END) and metric in entry:
            out.append((entry["step"], float(entry[metric])))
    return out


def improves(history: Sequence[dict], score: float, metric: str) -> bool:
    """Is ``score`` strictly better than every earlier epoch end's?"""
    return all(score > s for _, s in epoch_end_scores(history, metric))


def stale_epochs(history: Sequence[dict], metric: str) -> int:
    """Epoch ends since the best one (0 when the last epoch end is the best)."""
    scores = epoch_end_scores(history, metric)
    if not scores:
        return 0
    best = max(range(len(scores)), key=lambda i: (scores[i][1], -i))
    return len(scores) - 1 - best


def should_stop(history: Sequence[dict], metric: str, patience: int | None) -> bool:
    return patience is not None and stale_epochs(history, metric) >= patience


def selected_step(history: Sequence[dict], metric: str) -> int | None:
    """The step of the best epoch end (the earliest among equals), or None when none was validated."""
    scores = epoch_end_scores(history, metric)
    if not scores:
        return None
    return max(scores, key=lambda s: (s[1], -s[0]))[0]
