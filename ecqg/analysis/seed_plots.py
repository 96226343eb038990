"""Figures of the spread between training seeds: whether a comparison belongs to the method or to one seed.

Kept apart from ``ecqg.analysis.plots`` (the per-run figures every stage draws) because only the results stage draws it, so
a change here reruns that stage alone.
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ecqg.analysis.plots import MAX_WIDTH_IN, ci_error_bars

SEED_PANELS = (("attention", "later_sentence_share", "later-sentence share, A - B (points)"),
               ("attention", "entropy", "attention entropy, A - B (nats)"),
               ("probe", "difference", "Table 1 probe gap, highest - lowest"))


def plot_seed_differences(rows: pd.DataFrame, labels: Mapping[str, str] | None = None):
    """Each training seed's comparisons side by side: one panel per measure (``SEED_PANELS``), one row per
    comparison, one marker per seed with its 95% CI over passages. Seeds that agree in sign and each exclude 0
    make a claim about the method; seeds that straddle 0 make it one about a seed.

    ``rows``: ``ecqg.analysis.encoder_comparison.seed_rows`` output.
    """
    labels = labels or {}

    def name(key: str) -> str:
        a, sep, b = key.partition("_minus_")
        return f"{labels.get(a, a)} - {labels.get(b, b)}" if sep else labels.get(key, key)

    panels = [p for p in SEED_PANELS if ((rows.kind == p[0]) & (rows.measure == p[1])).any()]
    seeds = sorted(rows.seed.unique())
    height = 0.9 + 0.55 * max(1, rows.name.nunique() if len(rows) else 1)
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(min(MAX_WIDTH_IN, 4.6 * max(len(panels), 1)), height),
                             squeeze=False)
    for ax, (kind, measure, title) in zip(axes[0], panels):
        part = rows[(rows.kind == kind) & (rows.measure == measure)]
        names = list(dict.fromkeys(part.name))
        for i, seed in enumerate(seeds):
            mine = part[part.seed == seed].set_index("name").reindex(names).dropna(subset=["value"])
            y = np.array([names.index(k) for k in mine.index]) + (i - (len(seeds) - 1) / 2) * 0.18
            ax.errorbar(mine.value, y, xerr=ci_error_bars(mine, "value", "ci_low", "ci_high"), fmt="o", color=f"C{i}",
                        capsize=2, markersize=4, label=f"seed {seed}")
        ax.axvline(0, color="grey", linewidth=1)
        ax.set_yticks(np.arange(len(names)), [name(k) for k in names], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(title, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    if panels:
        axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig
