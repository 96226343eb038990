"""Figures of the analysis notebooks (01, 06, 07): ``fig = plot_x(data)``; no file I/O here (notebooks save what
they show). The figures of the stages that train or build data are :mod:`ecqg.stages.stage_plots`."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ecqg.analysis.stats import bootstrap_ci


def _panels(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return list(dict.fromkeys(zip(frame.dataset, frame.subset)))


# A figure is at most this wide (inches; at the notebooks' 120 dpi about 1,560 px), whatever the number of panels.
MAX_WIDTH_IN = 13.0


# The paper's systems, drawn in colours no palette below gives another system, each with its own line style: in a
# palette by position they sat side by side and came out three near-identical greens.
MARKED_STYLES = (("black", "-"), ("#e6007e", "--"), ("#7b2cbf", ":"))


def system_colors(systems: Sequence[str], marked: Sequence[str] = ()) -> dict[str, tuple | str]:
    """One distinct colour per system, fixed by its position: matplotlib's 10-colour cycle repeats after ten (TF-IDF
    and the eleventh system shared a blue), so more than ten systems take ``tab20``, more than twenty a sampled
    ``turbo``. The ``marked`` systems (at most three) take :data:`MARKED_STYLES`' colours instead."""
    marked = [s for s in systems if s in marked][:len(MARKED_STYLES)]
    rest = [s for s in systems if s not in marked]
    n = len(rest)
    if n <= 10:
        colors = [plt.get_cmap("tab10")(i) for i in range(n)]
    elif n <= 20:
        colors = [plt.get_cmap("tab20")(i) for i in range(n)]
    else:
        colors = [plt.get_cmap("turbo")(x) for x in np.linspace(0.05, 0.95, n)]
    out = dict(zip(rest, colors))
    out.update({s: color for s, (color, _) in zip(marked, MARKED_STYLES)})
    return {s: out[s] for s in systems}


def _line_style(system: str, systems: Sequence[str], marked: Sequence[str]) -> str:
    order = [s for s in systems if s in marked]
    return MARKED_STYLES[order.index(system)][1] if system in order[:len(MARKED_STYLES)] else "-"


def _label(system: str, labels: Mapping[str, str], marked: Sequence[str]) -> str:
    label = labels.get(system, system)
    return f"{label} (paper)" if system in marked else label


def _grid(n_panels: int, panel_w: float, panel_h: float, max_cols: int = 3):
    cols = max(1, min(max_cols, n_panels))
    rows = int(np.ceil(n_panels / cols))
    width = min(MAX_WIDTH_IN, panel_w * cols)
    return rows, cols, (width, panel_h * rows)


def plot_topk_curves(curves: pd.DataFrame, table: pd.DataFrame, labels: Mapping[str, str] | None = None,
                     titles: Mapping[tuple[str, str], str] | None = None, marked: Sequence[str] = ()):
    """Top-k accuracy against k (log axis), one panel per test set / subset (at most three across), CIs as error
    bars at the reported k. ``marked``: the paper's systems, drawn thick and labelled "(paper)"; the legend sits
    below the panels, one distinct colour per system."""
    labels, titles = labels or {}, titles or {}
    panels = _panels(curves)
    systems = list(dict.fromkeys(curves.system))
    colors = system_colors(systems, marked)
    rows, cols, size = _grid(len(panels), 4.3, 3.2)
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, sharey=True)
    for ax, (dataset, subset) in zip(axes.flat, panels):
        for system in systems:
            thick = system in marked
            c = curves[(curves.system == system) & (curves.dataset == dataset) & (curves.subset == subset)]
            ax.plot(c.k, 100 * c.accuracy, color=colors[system], label=_label(system, labels, marked),
                    linewidth=2.4 if thick else 1.0, zorder=3 if thick else 2,
                    linestyle=_line_style(system, systems, marked))
            t = table[(table.system == system) & (table.dataset == dataset) & (table.subset == subset)]
            err = np.vstack([100 * (t.accuracy - t.ci_low), 100 * (t.ci_high - t.accuracy)])
            ax.errorbar(t.k, 100 * t.accuracy, yerr=err, fmt="o", color=colors[system], markersize=3, capsize=2)
        n = int(table[(table.dataset == dataset) & (table.subset == subset)].n.iloc[0])
        ax.set_title(f"{titles.get((dataset, subset), f'{dataset} {subset}')} (n={n})", fontsize=10)
        ax.set_xscale("log")
        ax.set_xlabel("k (passages retrieved)")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("top-k accuracy (%)")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    handles, names = axes.flat[0].get_legend_handles_labels()
    fig.tight_layout()
    fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(systems)),
               fontsize=8, frameon=False)
    return fig


def plot_accuracy_bars(table: pd.DataFrame, k: int, labels: Mapping[str, str] | None = None,
                       titles: Mapping[tuple[str, str], str] | None = None, marked: Sequence[str] = ()):
    """Top-k accuracy with 95% CI whiskers: one panel per test set / subset (at most three across), one horizontal
    bar per system (a grouped vertical chart grew with panels x systems, 9,860 px for mini). ``marked``: the
    paper's systems, outlined and labelled "(paper)"."""
    labels, titles = labels or {}, titles or {}
    sel = table[table.k == k]
    panels = _panels(sel)
    systems = list(dict.fromkeys(sel.system))
    colors = system_colors(systems, marked)
    rows, cols, size = _grid(len(panels), 4.3, 0.6 + 0.24 * max(1, len(systems)))
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, sharey=True)
    y = np.arange(len(systems))[::-1]
    for ax, (dataset, subset) in zip(axes.flat, panels):
        part = sel[(sel.dataset == dataset) & (sel.subset == subset)].set_index("system").reindex(systems)
        acc = 100 * part.accuracy.to_numpy()
        err = np.vstack([100 * (part.accuracy - part.ci_low), 100 * (part.ci_high - part.accuracy)])
        ax.barh(y, acc, xerr=err, capsize=2, color=[colors[s] for s in systems],
                edgecolor=["black" if s in marked else "none" for s in systems], linewidth=1.2)
        ax.set_title(titles.get((dataset, subset), f"{dataset} {subset}"), fontsize=10)
        ax.set_xlim(0, 100)
        ax.set_xlabel(f"Top-{k} accuracy (%)")
        ax.grid(axis="x", alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_yticks(y, [_label(s, labels, marked) for s in systems], fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def panel_titles(panels: Sequence[tuple[str, str]], dataset_labels: Mapping[str, str],
                 subset_labels: Mapping[str, str]) -> dict[tuple[str, str], str]:
    return {(d, s): f"{dataset_labels.get(d, d)} {subset_labels.get(s, s)}" for d, s in panels}


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

    ``weights`` are per word (word pieces already summed, e.g. ``ecqg.analysis.attention.word_attention``);
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
    fig, axes = plt.subplots(1, len(tables), figsize=(min(MAX_WIDTH_IN, 4.4 * len(tables)), 3.4), squeeze=False,
                             sharey=True)
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


# ----------------------------------------------------------------------------------- encoder comparison (06, Table 1)
def ci_error_bars(frame: pd.DataFrame, value: str, low: str, high: str) -> np.ndarray:
    """Matplotlib's ``yerr`` / ``xerr`` (distances below and above) of a value with its CI columns."""
    return np.vstack([frame[value] - frame[low], frame[high] - frame[value]])


def plot_entropy_violins(entropies: Mapping[str, Sequence[float]], paper: Mapping[str, float] | None = None):
    """Per-passage attention entropy (nats) of several encoders on the same passages, as violins with the mean
    marked; ``paper`` (label -> value) adds the paper's means as crosses (its BERT-base model, other passages)."""
    values = {k: np.asarray(v, dtype=float)[np.isfinite(np.asarray(v, dtype=float))] for k, v in entropies.items()}
    labels = [k for k, v in values.items() if v.size]
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, 1.6 + 1.4 * max(1, len(labels))), 3.6))
    if labels:
        parts = ax.violinplot([values[k] for k in labels], showmeans=True, showextrema=False)
        for i, body in enumerate(parts["bodies"]):
            body.set_facecolor(f"C{i}")
            body.set_alpha(0.45)
    for i, k in enumerate(labels):
        if paper and k in paper:
            ax.plot(i + 1, paper[k], "x", color="black", markersize=7, label="paper" if i == 0 else None)
    ax.set_xticks(np.arange(1, len(labels) + 1), [f"{k}\n(mean {values[k].mean():.2f}, n={values[k].size})"
                                                  for k in labels], fontsize=8)
    ax.set_ylabel("token-level attention entropy (nats)")
    if paper and any(k in paper for k in labels):
        ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_sentence_shares(summary: pd.DataFrame, labels: Mapping[str, str] | None = None,
                         measure: str = "later_sentence_share"):
    """Left: each encoder's mean share of attention on sentences 2.. (95% CI); right: the paired differences between
    encoders over the same passages (points, 95% CI), with the paper's where it reports one.

    ``summary``: ``ecqg.analysis.encoder_comparison.attention_summary`` output.
    """
    labels = labels or {}
    name = lambda k: labels.get(k, k)  # noqa: E731
    rows = summary[summary.measure == measure]
    enc, pair = rows[rows.kind == "encoder"], rows[rows.kind == "paired"]
    fig, (ax_a, ax_d) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [1, 1.2]})
    x = np.arange(len(enc))
    ax_a.bar(x, enc.value, yerr=ci_error_bars(enc, "value", "ci_low", "ci_high"), capsize=3,
             color=[f"C{i}" for i in range(len(enc))])
    ax_a.set_xticks(x, [name(k) for k in enc.encoder], fontsize=8)
    n = int(enc.n.iloc[0]) if len(enc) else 0
    ax_a.set_ylabel("attention on later sentences (%)")
    ax_a.set_title(f"share of text attention after sentence 1 (n={n} passages)", fontsize=9)
    ax_a.grid(axis="y", alpha=0.3)
    y = np.arange(len(pair))
    ax_d.errorbar(pair.value, y, xerr=ci_error_bars(pair, "value", "ci_low", "ci_high"), fmt="o", color="C0", capsize=3,
                  label="ours (95% CI)")
    has_paper = pair.paper.notna() if "paper" in pair else pd.Series(False, index=pair.index)
    if has_paper.any():
        ax_d.plot(pair.paper[has_paper].astype(float), y[has_paper.to_numpy()], "x", color="black", label="paper")
    ax_d.axvline(0, color="grey", linewidth=1)
    ax_d.invert_yaxis()
    ax_d.set_yticks(y, [f"{name(a)} - {name(b)}" for a, b in zip(pair.encoder, pair.reference)], fontsize=8)
    ax_d.set_xlabel("difference (percentage points), paired over passages")
    ax_d.legend(fontsize=8)
    ax_d.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_probe_scores(probe: pd.DataFrame, labels: Mapping[str, str] | None = None):
    """The paper's Table 1 probe: mean dot-product score of questions about the highest- vs the lowest-attended
    entity, per encoder (95% CIs), the paired gap written above each pair. Levels differ between encoders (and from
    the paper's BERT-base DPR); read the gaps.

    ``probe``: ``ecqg.analysis.encoder_comparison.probe_summary`` output.
    """
    labels = labels or {}
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, 1.8 + 1.8 * max(1, len(probe))), 3.6))
    x, width = np.arange(len(probe)), 0.38
    for i, role in enumerate(("highest", "lowest")):
        ax.bar(x + (i - 0.5) * width, probe[role], width, color=f"C{i}", label=f"{role}-attended entity",
               yerr=ci_error_bars(probe, role, f"{role}_ci_low", f"{role}_ci_high"), capsize=3)
    for xi, r in zip(x, probe.itertuples()):
        top = max(r.highest_ci_high, r.lowest_ci_high)
        ax.annotate(f"gap {r.difference:+.2f}\n[{r.difference_ci_low:+.2f}, {r.difference_ci_high:+.2f}]",
                    (xi, top), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7)
    ax.set_xticks(x, [f"{labels.get(e, e)}\n(n={n})" for e, n in zip(probe.encoder, probe.n_passages)], fontsize=8)
    lows = np.r_[probe.lowest_ci_low, probe.highest_ci_low] if len(probe) else np.zeros(1)
    highs = np.r_[probe.lowest_ci_high, probe.highest_ci_high] if len(probe) else np.ones(1)
    span = max(float(highs.max() - lows.min()), 1e-6)
    ax.set_ylim(float(lows.min()) - 0.5 * span, float(highs.max()) + 0.6 * span)
    ax.set_ylabel("question-passage score (dot product)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_slice_accuracy(table: pd.DataFrame, slices: Sequence[str], ks: Sequence[int],
                        labels: Mapping[str, str] | None = None, xlabel: str = ""):
    """Top-k accuracy per slice (answer-position buckets, attention thirds), one line per system, 95% CI bars,
    one panel per k; the slice sizes under the axis.

    ``table``: ``ecqg.analysis.tables.accuracy_table`` rows with the slice in ``subset``.
    """
    labels = labels or {}
    slices = [s for s in slices if s in set(table.subset)]
    fig, axes = plt.subplots(1, len(ks), figsize=(min(MAX_WIDTH_IN, 4.4 * len(ks)), 3.6), squeeze=False)
    x = np.arange(len(slices))
    systems = list(dict.fromkeys(table.system))
    for ax, k in zip(axes[0], ks):
        for i, system in enumerate(systems):
            t = table[(table.system == system) & (table.k == k)].set_index("subset").reindex(slices)
            offset = (i - (len(systems) - 1) / 2) * 0.06
            ax.errorbar(x + offset, 100 * t.accuracy,
                        yerr=[100 * (t.accuracy - t.ci_low), 100 * (t.ci_high - t.accuracy)],
                        fmt="-o", color=f"C{i}", markersize=3, capsize=2, label=labels.get(system, system))
        n = table[(table.k == k)].drop_duplicates("subset").set_index("subset").n.reindex(slices)
        ax.set_xticks(x, [f"{s}\n(n={int(c)})" for s, c in zip(slices, n)], fontsize=8)
        ax.set_title(f"Top-{k}", fontsize=10)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("top-k accuracy (%)")
    axes[0, -1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def plot_moved_sentence(summary: pd.DataFrame, labels: Mapping[str, str] | None = None):
    """The moved-sentence probe: mean score gap (answer sentence at the front minus at the end) per system, 95% CI
    over passages; a positive gap is a preference for early evidence.

    ``summary``: ``ecqg.analysis.mechanism.summarise_gaps`` output (its "system" rows are drawn).
    """
    labels = labels or {}
    rows = summary[summary.kind == "system"]
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, 1.8 + 1.3 * max(1, len(rows))), 3.6))
    x = np.arange(len(rows))
    ax.bar(x, rows.gap, 0.6, yerr=ci_error_bars(rows, "gap", "ci_low", "ci_high"), capsize=3,
           color=[f"C{i}" for i in range(len(rows))])
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, [f"{labels.get(s, s)}\n(n={n})" for s, n in zip(rows.system, rows.n)], fontsize=7)
    ax.set_ylabel("score gap: answer sentence first - last")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
