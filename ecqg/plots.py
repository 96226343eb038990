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


# ------------------------------------------------------------------------------------------------ attention study
def _wrap_words(words: Sequence[str], width: int) -> list[list[int]]:
    """Greedy line breaking of word indices at ``width`` characters (monospace layout, so no renderer is needed)."""
    lines: list[list[int]] = [[]]
    used = 0
    for i, w in enumerate(words):
        need = len(w) + (1 if lines[-1] else 0)
        if lines[-1] and used + need > width:
            lines.append([])
            used, need = 0, len(w)
        lines[-1].append(i)
        used += need
    return lines


def plot_attention_heatmap(words: Sequence[str], weights: Sequence[float],
                           highlight_spans: Sequence[tuple[int, int]] = (), title: str = "", width: int = 90,
                           cmap: str = "Reds", fontsize: float = 9):
    """Figure 1 of the paper: [CLS] attention over the words of one passage, wrapped in lines.

    ``weights`` are per word (word pieces already summed, e.g. ``ecqg.attention.word_attention``);
    ``highlight_spans`` are ``[first, last + 1)`` word-index ranges (entities) drawn bold and outlined.
    """
    weights = np.asarray(weights, dtype=float)
    bold = np.zeros(len(words), dtype=bool)
    for a, b in highlight_spans:
        bold[a:b] = True
    lines = _wrap_words(words, width)
    char_in, line_in, margin, bar_in = 0.602 * fontsize / 72, 2.1 * fontsize / 72, 0.25, 0.9
    fig_w, fig_h = width * char_in + 2 * margin + bar_in, len(lines) * line_in + 2 * margin + 0.3
    fig = plt.figure(figsize=(fig_w, fig_h))
    ax = fig.add_axes([margin / fig_w, margin / fig_h, width * char_in / fig_w, len(lines) * line_in / fig_h])
    ax.set_xlim(0, width)
    ax.set_ylim(len(lines), 0)
    norm = plt.Normalize(0.0, max(float(weights.max()) if weights.size else 0.0, 1e-12))
    colors = plt.get_cmap(cmap)
    for row, line in enumerate(lines):
        col = 0
        for i in line:
            shade = norm(weights[i])
            ax.text(col, row + 0.5, words[i], family="monospace", fontsize=fontsize, va="center", ha="left",
                    weight="bold" if bold[i] else "normal", color="white" if shade > 0.6 else "black",
                    bbox={"boxstyle": "square,pad=0.12", "facecolor": colors(norm(weights[i])),
                          "edgecolor": "black" if bold[i] else "none", "linewidth": 0.8})
            col += len(words[i]) + 1
    ax.set_axis_off()
    cax = fig.add_axes([(fig_w - bar_in + 0.15) / fig_w, margin / fig_h, 0.12 / fig_w, len(lines) * line_in / fig_h])
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=colors), cax=cax, label="[CLS] attention")
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    return fig


def _binned_means(frame: pd.DataFrame, bins: np.ndarray, n_boot: int, seed: int) -> pd.DataFrame:
    from ecqg.evaluation import bootstrap_ci

    which = np.clip(np.digitize(frame.relative_position, bins) - 1, 0, len(bins) - 2)
    rows = []
    for b in range(len(bins) - 1):
        values = frame.attention.to_numpy()[which == b]
        lo, hi = bootstrap_ci(values[:, None], n_boot=n_boot, seed=seed)
        rows.append({"center": (bins[b] + bins[b + 1]) / 2, "mean": values.mean() if values.size else np.nan,
                     "low": lo[0], "high": hi[0], "n": values.size})
    return pd.DataFrame(rows)


def plot_entity_position(tables: Mapping[str, pd.DataFrame], bins: int = 10, n_boot: int = 1000, seed: int = 0):
    """Entity attention against relative position in the passage (binned means, 95% bootstrap CIs), one panel per
    encoder (``tables``: label -> entity table with ``relative_position``, ``attention``, optional ``eligible``)."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    fig, axes = plt.subplots(1, len(tables), figsize=(4.4 * len(tables), 3.4), squeeze=False, sharey=True)
    for i, (ax, (label, frame)) in enumerate(zip(axes.flat, tables.items())):
        if "eligible" in frame:
            frame = frame[frame.eligible.astype(bool)]
        frame = frame[np.isfinite(frame.attention)]
        stats = _binned_means(frame, edges, n_boot, seed)
        err = np.vstack([stats["mean"] - stats.low, stats.high - stats["mean"]])
        ax.errorbar(stats.center, stats["mean"], yerr=err, fmt="o-", color=f"C{i}", capsize=2, markersize=4)
        ax.axvline(0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{label} (n={len(frame)} entities)", fontsize=10)
        ax.set_xlabel("relative position of the entity (start / passage length)")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("[CLS] attention on the entity")
    fig.tight_layout()
    return fig


def plot_entropy_hist(entropies: Mapping[str, Sequence[float]], bins: int = 40):
    """Overlaid histograms of per-passage attention entropy (nats) for several encoders, means marked."""
    fig, ax = plt.subplots(figsize=(5.6, 3.4))
    values = {k: np.asarray(v, dtype=float)[np.isfinite(np.asarray(v, dtype=float))] for k, v in entropies.items()}
    everything = np.concatenate([v for v in values.values() if v.size] or [np.zeros(1)])
    edges = np.histogram_bin_edges(everything, bins=bins)
    for i, (label, v) in enumerate(values.items()):
        ax.hist(v, bins=edges, color=f"C{i}", alpha=0.35, label=f"{label} (mean {v.mean():.2f}, n={v.size})")
        ax.axvline(v.mean(), color=f"C{i}", linestyle="--", linewidth=1)
    ax.set_xlabel("token-level attention entropy (nats, text pieces)")
    ax.set_ylabel("passages")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
