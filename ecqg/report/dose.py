"""The dose curve (issue 47): what the synthetic pre-training does as its set grows, with intervals over training runs.

Why a section of its own: the paper pre-trains on about four times the examples fine-tuning then sees; the first study
pre-trained on 0.2-0.4 times, and whatever its sets did before fine-tuning was gone after it. The curve asks whether a
larger dose moves the retriever, and whether Mixed moves it differently from UnCon. Its rows are read from
``table3.json``: the pre-training-only models at each size of ``mixing.doses`` (``dpr_<set>_d<n>_pre``) and at the
full set (``dpr_<set>_pre``), each pre-trained with every seed of ``dpr.seeds``; the fine-tuned models, which exist at
the full set only. Every difference gets its interval over training runs (:mod:`ecqg.report.evidence`: from the
per-run files where the profile has them), the smallest effect the run could detect, and a verdict. The
pre-training-only rows are a Holm family of their own (``DOSE_FAMILY``); the fine-tuned rows at the full set are rows
of the claims table, and show the claims family's adjusted p and verdict (one comparison, one p-value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ecqg.core.variants import UNTRAINED_SYSTEM
from ecqg.report import evidence
from ecqg.report.claim import CLAIMS_FAMILY, DOSE_FAMILY, claim_rows, with_verdicts
from ecqg.report.claims_table import caption, detectable_text, test_text
from ecqg.report.markdown import interval_text, load_metrics, md_table, pval, subtree

DOSE_SYSTEM = re.compile(r"dpr_(uncon|mixed)_d(\d+)_pre")
KS = (1, 5)
DATASET = "nq"


def dose_points(table3: Mapping, full_size: int | None) -> list[tuple[int | None, str, str]]:
    """``(questions per set, Mixed's system, UnCon's system)`` of each pre-training-only point, smallest first; the
    full set last (its size from mixing.json, None where unknown). Empty without a dose below the full set."""
    accuracy = table3.get("accuracy") or {}
    sizes = sorted({int(m.group(2)) for name in accuracy if (m := DOSE_SYSTEM.fullmatch(name))})
    points = [(n, f"dpr_mixed_d{n}_pre", f"dpr_uncon_d{n}_pre") for n in sizes
              if f"dpr_mixed_d{n}_pre" in accuracy and f"dpr_uncon_d{n}_pre" in accuracy]
    if points and "dpr_mixed_pre" in accuracy and "dpr_uncon_pre" in accuracy:
        points.append((full_size, "dpr_mixed_pre", "dpr_uncon_pre"))
    return points


def _arm(table3: Mapping, system: str, k: int) -> evidence.Arm | None:
    return evidence.arm(subtree(table3.get("accuracy"), system, DATASET, "all"), f"top{k}")


def _paired(table3: Mapping, a: str, b: str) -> Mapping | None:
    return subtree(table3.get("paired"), f"{a}_minus_{b}", DATASET, "all")


def _row(table3: Mapping, label: str, size: int | None, a: str, b: str, k: int, stage: str, ev=None) -> dict | None:
    """A - B at Top-k over runs: from the per-run files (``ev``) where they hold both systems, else from the
    summaries: two arms of runs, or (B the untrained base, one fixed model) A's runs against it."""
    base = {"label": label, "size": size, "k": k, "stage": stage, "paper": None, "direction": 1.0, "digits": 1,
            "pair": (a, b)}
    got = None if ev is None else evidence.topk_difference(ev, a, b, k, DATASET)
    if got is not None:
        return {**base, "runs": got.interval, "arm_runs": got.arm_runs, "q_diff": got.q_diff, "q_low": got.q_low,
                "q_high": got.q_high, "q_p": None, "n": got.n, "source": "per-run files"}
    arm_a, arm_b, node = _arm(table3, a, k), _arm(table3, b, k), _paired(table3, a, b)
    if arm_a is None or arm_b is None or node is None:
        return None
    if b == UNTRAINED_SYSTEM:
        interval = evidence.against_fixed(arm_a, arm_b.mean, node, f"top{k}")
        runs = (arm_a.runs,)
    else:
        interval = evidence.between_models(arm_a, arm_b, node, f"top{k}", f"top{k}")
        runs = (arm_a.runs, arm_b.runs)
    return {**base, "runs": interval, "arm_runs": runs, "q_diff": node.get(f"top{k}_diff"),
            "q_low": node.get(f"top{k}_ci_low"), "q_high": node.get(f"top{k}_ci_high"), "q_p": node.get(f"top{k}_p"),
            "n": node.get("n"), "source": "summaries"}


def dose_rows(table3: Mapping, full_size: int | None, ev=None, claims: list[dict] | None = None) -> list[dict]:
    """Every row of the curve with its verdict: at each size, Mixed-pre - UnCon-pre and each pre-trained set against
    the untrained base (Holm over these rows: ``DOSE_FAMILY``); at the full set, the fine-tuned Mixed - UnCon and
    Mixed - DPR, which are claims-table rows: taken from ``claims`` (``claim_rows``' output) with that family's
    adjusted p and verdict, or computed and corrected with the claims table's rows when not given."""
    rows = []
    points = dose_points(table3, full_size)
    for size, mixed, uncon in points:
        for k in KS:
            rows += [_row(table3, "Mixed - UnCon", size, mixed, uncon, k, "pre-training only", ev),
                     _row(table3, "UnCon - untrained", size, uncon, UNTRAINED_SYSTEM, k, "pre-training only", ev),
                     _row(table3, "Mixed - untrained", size, mixed, UNTRAINED_SYSTEM, k, "pre-training only", ev)]
    rows = with_verdicts([r for r in rows if r is not None], DOSE_FAMILY)
    if points:
        if claims is None:
            claims = claim_rows({"table3": table3, "evidence": ev})
        shared = {(r.get("pair"), r.get("k")): r for r in claims if r.get("pair")}
        size = points[-1][0]
        for k in KS:
            for label, pair in (("Mixed - UnCon", ("dpr_mixed", "dpr_uncon")),
                                ("Mixed - DPR", ("dpr_mixed", "dpr_baseline"))):
                if (pair, k) in shared:
                    rows.append({**shared[(pair, k)], "label": label, "size": size, "k": k, "stage": "fine-tuned"})
    return rows


def _examples(metrics_dir: Path, pattern: str) -> int | None:
    """The mean examples a training phase saw over its runs' training files."""
    counts = [load_metrics(p.parent, p.name).get("train_examples") for p in sorted(metrics_dir.glob(pattern))]
    counts = [c for c in counts if c]
    return round(sum(counts) / len(counts)) if counts else None


def dose_ratios(metrics_dir: Path, points: list[tuple[int | None, str, str]]) -> dict[int | None, float]:
    """Pre-training examples per fine-tuning example at each point (Mixed's pre-training; UnCon's is the same size)."""
    finetune = _examples(metrics_dir, "dpr_baseline_s*_training.json")
    out = {}
    for size, mixed, _ in points:
        pre = _examples(metrics_dir, f"{mixed}_s*_training.json")
        if pre and finetune:
            out[size] = pre / finetune
    return out


def full_set_size(mixing: Mapping | None) -> int | None:
    total = subtree(mixing, "sets")
    return int(total["total"]) if total and total.get("total") else None


def render_dose_curve(metrics_dir: Path, inputs: Mapping) -> str:
    """The page's section: the table of the curve and where its figure is; empty without doses. ``inputs``:
    ``ecqg.report.evidence.claim_inputs``."""
    table3, mixing = inputs.get("table3"), inputs.get("mixing")
    if not table3:
        return ""
    points = dose_points(table3, full_set_size(mixing))
    rows = dose_rows(table3, full_set_size(mixing), inputs.get("evidence"))
    if not rows:
        return ""
    ratios = dose_ratios(metrics_dir, points)
    table = [[f"{r['size']:,}" if r["size"] else "full set",
              f"{ratios[r['size']]:.1f}x" if r["size"] in ratios else "–", r["stage"], f"{r['label']}, Top-{r['k']}",
              " v ".join(str(n) for n in r["arm_runs"]), test_text(r),
              interval_text(r["diff"], r["low"], r["high"], 1, "").rstrip() if r["runs"] is not None else "–",
              pval(r["p_holm"]) if r["p_holm"] is not None else "–", r["family"].removeprefix("the "),
              detectable_text(r, 1), interval_text(r["q_diff"], r["q_low"], r["q_high"], 1, "").rstrip(),
              r["verdict"]] for r in rows]
    own = sum(r["runs"] is not None and r["family"] == DOSE_FAMILY for r in rows)
    with_summaries = any(r.get("source") == "summaries" and r["runs"] is not None for r in rows)
    per_replicate = len((mixing or {}).get("replicates") or {}) > 1
    own_sets = ", and each cuts its dose from its own replicate's set" if per_replicate else ""
    return ("#### The dose curve\n\n"
            "NQ test Top-k as the synthetic set grows (questions per set; `dose`: pre-training examples per example "
            "fine-tuning sees, the paper's is about 4x). At every size each set is pre-trained with every training "
            "seed and searched right after pre-training; the fine-tuned models exist at the full set only. "
            "untrained: the base every model starts from (one fixed model). A point's runs differ by their pre-training "
            f"seed (and with it the batch order{own_sets}); a dose is the set cut to that size, pre-trained for the same "
            "number of epochs as the full set, so a larger dose is also more steps: data and steps vary together. "
            + caption(own, DOSE_FAMILY, with_summaries)
            + f" The fine-tuned rows are rows of {CLAIMS_FAMILY} and show its adjusted p (`family`). Figure: "
            f"`{figure_path(metrics_dir.name).as_posix()}` (`python -m ecqg.stages.report` draws it).\n\n"
            + md_table(["questions per set", "dose", "models", "difference", "runs", "test", "here [95% CI over runs]",
                        "p (Holm)", "family", "detectable", "over questions only [95% CI]", "verdict"], table,
                       ["r", "r", "l", "l", "r", "l", "r", "r", "l", "r", "r", "l"]))


def figure_path(profile: str) -> Path:
    return Path("docs") / "figures" / f"{profile}_dose_curve.png"


def draw_dose_curve(metrics_dir: Path, out: Path) -> Path | None:
    """Mixed - UnCon (and each set against the untrained base) against the dose, one panel per Top-k, each point
    with its 95% interval over training runs; the fine-tuned differences at the full set beside them. None without
    doses."""
    inputs = evidence.claim_inputs(metrics_dir)
    rows = dose_rows(inputs["table3"] or {}, full_set_size(inputs["mixing"]), inputs["evidence"])
    if not rows:
        return None
    # matplotlib: kept out of --help; the Agg backend is set before pyplot loads, only when a curve is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib: after the backend is set

    sizes = list(dict.fromkeys(r["size"] for r in rows))      # rows run from the smallest size to the full set
    xs = {size: i for i, size in enumerate(sizes)}
    styles = {("pre-training only", "Mixed - UnCon"): ("C3", "o", 0.0),
              ("pre-training only", "UnCon - untrained"): ("C0", "s", -0.12),
              ("pre-training only", "Mixed - untrained"): ("C1", "^", 0.12),
              ("fine-tuned", "Mixed - UnCon"): ("C3", "D", 0.3), ("fine-tuned", "Mixed - DPR"): ("k", "D", 0.42)}
    fig, axes = plt.subplots(1, len(KS), figsize=(5.2 * len(KS), 4), sharex=True)
    for ax, k in zip(axes, KS):
        for (stage, label), (color, marker, shift) in styles.items():
            points = [r for r in rows if r["k"] == k and r["stage"] == stage and r["label"] == label
                      and r["runs"] is not None]
            if not points:
                continue
            x = [xs[r["size"]] + shift for r in points]
            y = [r["diff"] for r in points]
            err = [[r["diff"] - r["low"] for r in points], [r["high"] - r["diff"] for r in points]]
            ax.errorbar(x, y, yerr=err, color=color, marker=marker, capsize=3,
                        linestyle="-" if stage == "pre-training only" else "none",
                        mfc="white" if stage == "fine-tuned" else color, label=f"{label} ({stage})")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(sizes)), [f"{s:,}" if s else "full" for s in sizes])
        ax.set_xlabel("synthetic questions per set")
        ax.set_ylabel(f"NQ Top-{k} difference (points)")
        ax.set_title(f"Top-{k}, 95% CI over training runs")
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(f"The dose curve ({metrics_dir.name} profile)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
