"""Figures: ``fig = plot_x(data)``; no file I/O here (notebooks save what they show)."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def _panels(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return list(dict.fromkeys(zip(frame.dataset, frame.subset)))


def plot_topk_curves(curves: pd.DataFrame, table: pd.DataFrame, labels: Mapping[str, str] | None = None,
                     titles: Mapping[tuple[str, str], str] | None = None):
    """Top-k accuracy against k (log axis), one panel per test set / subset, CIs as error bars at the reported k."""
    labels, titles = labels or {}, titles or {}
    panels = _panels(curves)
    cols = min(3, len(panels))
    rows = int(np.ceil(len(panels) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False, sharey=True)
    for ax, (dataset, subset) in zip(axes.flat, panels):
        for i, system in enumerate(dict.fromkeys(curves.system)):
            color = f"C{i}"
            c = curves[(curves.system == system) & (curves.dataset == dataset) & (curves.subset == subset)]
            ax.plot(c.k, 100 * c.accuracy, color=color, label=labels.get(system, system))
            t = table[(table.system == system) & (table.dataset == dataset) & (table.subset == subset)]
            err = np.vstack([100 * (t.accuracy - t.ci_low), 100 * (t.ci_high - t.accuracy)])
            ax.errorbar(t.k, 100 * t.accuracy, yerr=err, fmt="o", color=color, markersize=3, capsize=2)
        n = int(table[(table.dataset == dataset) & (table.subset == subset)].n.iloc[0])
        ax.set_title(f"{titles.get((dataset, subset), f'{dataset} {subset}')} (n={n})", fontsize=10)
        ax.set_xscale("log")
        ax.set_xlabel("k (passages retrieved)")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("top-k accuracy (%)")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    axes.flat[0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def plot_accuracy_bars(table: pd.DataFrame, k: int, labels: Mapping[str, str] | None = None,
                       titles: Mapping[tuple[str, str], str] | None = None):
    """Grouped bars of Top-k accuracy per test set / subset, one bar per system, 95% CI whiskers."""
    labels, titles = labels or {}, titles or {}
    sel = table[table.k == k]
    panels = _panels(sel)
    systems = list(dict.fromkeys(sel.system))
    width = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(1.2 + 1.3 * len(panels) * max(1, len(systems)) * 0.6, 3.6))
    x = np.arange(len(panels))
    for i, system in enumerate(systems):
        rows = [sel[(sel.system == system) & (sel.dataset == d) & (sel.subset == s)].iloc[0] for d, s in panels]
        acc = np.array([100 * r.accuracy for r in rows])
        err = np.array([[100 * (r.accuracy - r.ci_low) for r in rows], [100 * (r.ci_high - r.accuracy) for r in rows]])
        ax.bar(x + (i - (len(systems) - 1) / 2) * width, acc, width, yerr=err, capsize=2,
               label=labels.get(system, system), color=f"C{i}")
    ax.set_xticks(x, [titles.get(p, f"{p[0]} {p[1]}") for p in panels], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(f"Top-{k} accuracy (%)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def panel_titles(panels: Sequence[tuple[str, str]], dataset_labels: Mapping[str, str],
                 subset_labels: Mapping[str, str]) -> dict[tuple[str, str], str]:
    return {(d, s): f"{dataset_labels.get(d, d)} {subset_labels.get(s, s)}" for d, s in panels}


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
