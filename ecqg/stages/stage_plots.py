"""Figures of the stages that train or build data (02-05, 08): ``fig = plot_x(data)``, no file I/O.

Why apart from :mod:`ecqg.analysis.plots`: these stages' DVC dependencies are the modules they import, and they
train; a figure of the results notebook must not rerun them.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def plot_training_history(history: Sequence[Mapping], title: str = ""):
    """Training loss per step (with a moving average) and the held-out validation curve (top-k in the pool, rank)."""
    frame = pd.DataFrame(list(history))
    fig, (ax_loss, ax_val) = plt.subplots(1, 2, figsize=(11, 3.6))
    ax_loss.plot(frame.step, frame.loss, color="C0", alpha=0.35, label="loss per step")
    window = max(1, len(frame) // 20)
    ax_loss.plot(frame.step, frame.loss.rolling(window, min_periods=1).mean(), color="C0",
                 label=f"moving average ({window} steps)")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("NLL (in-batch + hard negatives)")
    ax_loss.legend(fontsize=8)
    ax_loss.grid(alpha=0.3)
    val = frame.dropna(subset=["val_top1"]) if "val_top1" in frame else frame.iloc[0:0]
    for i, key in enumerate(("val_top1", "val_top5", "val_top20")):
        if key in val:
            ax_val.plot(val.step, 100 * val[key], marker="o", color=f"C{i + 1}", label=key.replace("val_", "held-out "))
    ax_val.set_xlabel("step")
    ax_val.set_ylabel("positive in top-k of the held-out pool (%)")
    if "val_avg_rank" in val:
        twin = ax_val.twinx()
        twin.plot(val.step, val.val_avg_rank, color="grey", linestyle="--", label="average rank")
        twin.set_ylabel("average rank of the positive", color="grey")
    ax_val.legend(fontsize=8, loc="lower right")
    ax_val.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_filter_histograms(questions: Sequence[Mapping], predictions: Mapping[str, Mapping],
                           dpr_scores: Mapping[str, Mapping], kept_ids: set[str]):
    """Notebook 03: per generator, the reader's span confidence over all generated questions, and the baseline DPR
    score of the stage-1 survivors split into kept (hard) and rejected (easy)."""
    generators = sorted({q["generator"] for q in questions})
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for g in generators:
        conf = [predictions[q["id"]]["confidence"] for q in questions if q["generator"] == g and q["id"] in predictions]
        axes[0].hist(conf, bins=30, range=(0, 1), alpha=0.55, label=f"{g} (n={len(conf)})")
    axes[0].set_xlabel("MRC span confidence"); axes[0].set_ylabel("questions")
    axes[0].set_title("Stage 1: reader confidence"); axes[0].legend()
    for g in generators:
        for kept, style in ((True, "-"), (False, ":")):
            vals = [dpr_scores[q["id"]]["score"] for q in questions
                    if q["generator"] == g and q["id"] in dpr_scores and (q["id"] in kept_ids) == kept]
            if vals:
                axes[1].hist(vals, bins=30, histtype="step", linestyle=style,
                             label=f"{g} {'kept' if kept else 'rejected'} (n={len(vals)})")
    axes[1].set_xlabel("baseline DPR score (question · own passage)"); axes[1].set_ylabel("questions")
    axes[1].set_title("Stage 2: hardness"); axes[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_mixing_statistics(statistics: Mapping):
    """Notebook 04: entity types of the conditioning entities, answer types per generator, and the relative position
    of the conditioned entity vs the unconditioned answer in the passage."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    types = statistics["entity_types"]
    axes[0].barh(list(types)[::-1], list(types.values())[::-1])
    axes[0].set_title("conditioning entity types (Mixed)"); axes[0].set_xlabel("questions")
    labels = sorted(set(statistics["answer_types_uncon"]) | set(statistics["answer_types_con"]))
    y = np.arange(len(labels))
    for offset, key, name in ((-0.2, "answer_types_uncon", "unconditioned"), (0.2, "answer_types_con", "conditioned")):
        counts = statistics[key]
        total = max(sum(counts.values()), 1)
        axes[1].barh(y + offset, [100 * counts.get(lbl, 0) / total for lbl in labels], height=0.4, label=name)
    axes[1].set_yticks(y, labels); axes[1].set_xlabel("% of questions"); axes[1].set_title("answer types")
    axes[1].legend(fontsize=8)
    for key, name in (("uncon_answer_positions", "unconditioned: answer"), ("con_entity_positions",
                                                                            "conditioned: entity")):
        vals = [v for v in statistics[key] if v is not None]
        axes[2].hist(vals, bins=10, range=(0, 1), alpha=0.55, density=True, label=f"{name} (n={len(vals)})")
    axes[2].set_xlabel("relative position in the passage (0 = start)"); axes[2].set_ylabel("density")
    axes[2].set_title("where the questions point"); axes[2].legend(fontsize=8)
    fig.tight_layout()
    return fig
