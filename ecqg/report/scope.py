"""What a profile's runs can and cannot speak to, said beside every verdict (the README's answer and each results
page), generated from the run's own files.

Why: a verdict ("reversed", "not shown") reads as a finding about the paper's claim unless the regime is next to it:
which base the dense models started from and whether it had already learned retrieval, how many steps and examples
each training phase had, how large the corpus is and how high the untrained base already scores on it, which
attention row is analysed and whether training moved it, what wrote the synthetic questions, and how much power the
Table 3 rows had at the paper's effect carried to this accuracy level. Every figure is read from the metrics, the
base table (``ecqg.core.bases``) and the generator registry; nothing is typed by hand.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ecqg.core import paper as reported
from ecqg.core.bases import base_name, describe
from ecqg.core.variants import UNTRAINED, UNTRAINED_SYSTEM
from ecqg.qg.generators import describe as describe_generator
from ecqg.report.fine_tuning import training_runs
from ecqg.report.markdown import load_metrics, num, subtree


def _phase(runs: Sequence[Mapping], variant: str, phase: str) -> Mapping:
    return next((r for r in runs if r["variant"] == variant and r["phase"] == phase), {})


def _top1(table3: Mapping, system: str) -> float | None:
    node = subtree(table3, "accuracy", system, "nq", "all")
    return None if node is None else node.get("top1")


def _generator(metrics_dir: Path) -> str | None:
    qg = load_metrics(metrics_dir, "question_generation.json") or {}
    architecture = qg.get("architecture")
    if not architecture:
        return None
    try:
        return describe_generator(architecture)
    except (KeyError, ValueError):
        return f"a `{architecture}` generator"


def facts(metrics_dir: Path, claims: Sequence[Mapping]) -> dict:
    """The scope's figures, each None where the run's files lack it."""
    table3 = load_metrics(metrics_dir, "table3.json") or {}
    setting = table3.get("setting", {})
    runs = training_runs(metrics_dir)
    fine, pre = _phase(runs, "baseline", "finetune"), _phase(runs, "mixed", "pretrain")
    bias = subtree(load_metrics(metrics_dir, "attention_bias.json"), "encoders") or {}
    powers = [r["power_at_translated"] for r in claims
              if r["claim"].startswith("Table 3") and r.get("power_at_translated") is not None]
    translated = [abs(r["paper_translated"]) for r in claims
                  if r["claim"].startswith("Table 3") and r.get("paper_translated") is not None]
    premise = [r for r in claims if r.get("premise")]
    return {
        "base_ref": setting.get("base_model"), "base": describe(setting.get("base_model")),
        "finetune": (fine.get("train_examples"), fine.get("steps")), "pretrain": (pre.get("train_examples"),
                                                                                   pre.get("steps")),
        "corpus": setting.get("corpus_passages"), "untrained": _top1(table3, UNTRAINED_SYSTEM),
        "bm25": _top1(table3, "bm25"), "dpr": _top1(table3, "dpr_baseline"),
        "entropy": tuple((bias.get(key) or {}).get("mean_entropy") for key in ("dpr_baseline", UNTRAINED)),
        "generator": _generator(metrics_dir),
        "power": (min(powers), max(powers)) if powers else None,
        "translated": (min(translated), max(translated)) if translated else None,
        "premise": [_premise_item(r) for r in premise],
        "verdicts": {r["verdict"] for r in claims},
    }


def _premise_item(row: Mapping) -> tuple[str, str]:
    """("highest-attended entity in the first half", "+26.2 points over 50%, one run") from a premise row."""
    what = row["claim"].split(": ", 1)[-1].removesuffix(row.get("detail", ""))
    over_half = ", % of passages - 50" in what
    what = re.sub(r"(, % of passages - 50)? [<>] 0$", "", what)
    unit = "points over 50% of passages" if over_half else row["unit"]
    return what, f"{num(row['diff'], row['digits'], signed=True)} {unit}, {row['verdict']}"


def _count(pair: tuple) -> str | None:
    records, steps = pair
    return None if not steps else f"{steps:,} steps over {records:,} records" if records else f"{steps:,} steps"


def render_scope(f: Mapping, compact: bool = False) -> str:
    """The block: a few lines, then what follows for reading the verdicts; ``compact``: one paragraph (the README)."""
    lines = []
    base = f["base"]
    if base is not None:
        lines.append(f"**Base**: {base.trained_on}; "
                     + ("it had **already learned retrieval** before any training here"
                        if base.learned_retrieval else "it had not learned retrieval before the training here")
                     + (f", and it pools by the {base.pooling}" if base.pooling == "mean" else "") + ".")
    elif f["base_ref"]:
        lines.append(f"**Base**: `{f['base_ref']}` (not in the table of known bases: what it was trained on is not "
                     "stated here).")
    phases = [f"synthetic pre-training {x}" for x in [_count(f["pretrain"])] if x] + \
             [f"gold fine-tuning {x}" for x in [_count(f["finetune"])] if x]
    if phases:
        lines.append("**Training, per run**: " + "; ".join(phases) + " (the paper: 10 epochs of pre-training on "
                     "1M questions, 40 of fine-tuning).")
    if f["corpus"]:
        levels = ", ".join(f"{name} {num(v)}" for name, v in (
            (f"the untrained {base_name(f['base_ref'])}", f["untrained"]), ("BM25", f["bm25"]), ("DPR", f["dpr"]))
            if v is not None)
        theirs = (f"BM25 {num(reported.table3_accuracy('bm25', 1))}, DPR {num(reported.table3_accuracy('dpr_baseline', 1))}"
                  f" on {reported.PASSAGES / 1e6:.0f}M passages")
        lines.append(f"**Corpus**: {f['corpus']:,} passages" + (f"; NQ Top-1: {levels} (the paper: {theirs})"
                                                                 if levels else "") + ".")
    dpr_entropy, untrained_entropy = f["entropy"]
    if dpr_entropy is not None:
        row = ("the last layer's [CLS] row" + (", which this mean-pooled base never used as its output"
                                                if base is not None and base.pooling == "mean" else ""))
        moved = (f"; DPR's entropy {num(dpr_entropy, 2)} nats against the untrained base's "
                 f"{num(untrained_entropy, 2)}" if untrained_entropy is not None else "")
        lines.append(f"**Attention analysed**: {row}{moved}.")
    if f["generator"]:
        lines.append(f"**Synthetic questions**: {f['generator']}.")
    if f["power"]:
        low, high = f["power"]
        t_low, t_high = f["translated"]
        lines.append(f"**Power**: the paper's Table 3 gains, carried to this accuracy level as the same relative "
                     f"error reduction, are {num(t_low, 2)}-{num(t_high, 2)} points; the Table 3 rows had "
                     f"{100 * low:.0f}-{100 * high:.0f}% power to show them.")
    if f["premise"]:
        lines.append("**The premise** the method remedies, measured on this DPR: "
                     + "; ".join(f"{what}: {v}" for what, v in f["premise"]) + " (the claims table's first rows).")
    reading = []
    if f["power"] and f["power"][1] < 0.5 and "not shown" in f["verdicts"]:
        reading.append("\"not shown\" cannot be read as \"no effect\": effects of the paper's size were out of reach")
    if base is not None and base.learned_retrieval and "reversed" in f["verdicts"]:
        steps = f["pretrain"][1]
        reading.append("\"reversed\" describes what " + (f"{steps} steps of " if steps else "")
                       + "synthetic pre-training do to a retriever that already knows the task, not the paper's "
                       "claim, which is about a DPR trained from an MLM-only BERT")
    if reading:
        lines.append("**So**: " + "; ".join(reading) + ".")
    if not lines:
        return ""
    if compact:
        return "**What these runs can speak to** (from the run's files). " + " ".join(lines) + "\n"
    return "**What these runs can speak to** (from the run's files):\n\n" + "\n".join(f"- {x}" for x in lines) + "\n"
