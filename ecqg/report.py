"""The README's results section, generated from ``outputs/metrics/*.json`` so no number in it is typed by hand.

Why generated: the README is what most readers see; a copied number goes stale the first time a parameter changes.
``python -m ecqg.report`` rewrites the text between ``<!-- results:start -->`` and ``<!-- results:end -->``;
``python -m ecqg.report --check`` exits 1 when that text differs from what the current metrics give (for CI / make).
The output is deterministic (no dates, fixed ordering), so the check is stable.

What it reads (each optional except that a missing file is said, not hidden):
``table3.json`` (``ecqg.results.metrics_tree``), ``attention_bias.json`` (stage 01), ``encoder_comparison.json``
(``ecqg.encoder_comparison.metrics_tree``), ``question_generation.json`` / ``filtering.json`` / ``mixing.json``
(rendered generically: whatever keys they hold), and every ``stage_*.json`` (``wall_time_s``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ecqg import paths
from ecqg.encoder_comparison import ENCODER_LABELS, PAPER
from ecqg.io import read_json, write_text
from ecqg.results import DATASET_LABELS, PAPER_TABLE3, SUBSET_LABELS, SYSTEM_LABELS

START, END = "<!-- results:start -->", "<!-- results:end -->"
TABLE3_ORDER = ("tfidf", "bm25", "minilm_untrained", "dpr_baseline", "dpr_uncon", "dpr_mixed")
LABELS = {**SYSTEM_LABELS, "dpr_uncon": "UnCon-DPR (ours)", "dpr_mixed": "Mixed-DPR (ours)"}
KS = (1, 5, 20, 100)
SYNTHETIC_STAGES = (("question_generation", "02 question generation"), ("filtering", "03 filtering"),
                    ("mixing", "04 mixing"))
# Pipeline order of the stage_<name>.json files; names not listed follow in alphabetical order.
STAGE_ORDER = ("prepare", "index_bm25", "index_tfidf", "retrieve_bm25", "retrieve_tfidf", "training_data",
               "05_dpr_training.baseline", "retrieve_dense_untrained", "retrieve_dense_baseline",
               "01_attention_bias", "02_question_generation", "03_filtering", "04_mixing",
               "05_dpr_training.uncon", "05_dpr_training.mixed", "retrieve_dense_uncon", "retrieve_dense_mixed",
               "06_results_and_attention_entropy")


# ========================================================================================================= helpers
def _load(metrics_dir: Path, name: str) -> dict | None:
    path = metrics_dir / name
    return read_json(path, dict, "a JSON object") if path.is_file() else None


def _missing(metrics_dir: Path, name: str, stage: str) -> str:
    return f"_The {stage} stage has not run yet (no `{metrics_dir / name}`)._\n"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> str:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _num(x, digits: int = 1, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _ci(node: Mapping, key: str, low: str, high: str, digits: int = 1, signed: bool = False) -> str:
    if node.get(key) is None:
        return "–"
    text = _num(node[key], digits, signed)
    if node.get(low) is None or node.get(high) is None:
        return text
    return f"{text} [{_num(node[low], digits, signed)}, {_num(node[high], digits, signed)}]"


def _p(x) -> str:
    return "–" if x is None else ("< .001" if x < 0.001 else f"{x:.3f}")


def _ordered(keys, order: Sequence[str]) -> list[str]:
    keys = list(keys)
    return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def _label(system: str) -> str:
    return LABELS.get(system, ENCODER_LABELS.get(system, system))


# ========================================================================================================= table 3
def _paper_cells(dataset: str, subset: str) -> dict[tuple[str, int], float]:
    rows = PAPER_TABLE3[(PAPER_TABLE3.dataset == dataset) & (PAPER_TABLE3.subset == subset)]
    return {(r.system, int(r.k)): float(r.paper_accuracy) for r in rows.itertuples()}


def _accuracy_cell(node: Mapping, k: int) -> str:
    """``71.5 [69.9, 73.2]``, or ``71.5 ± 0.4 [69.9, 73.2]`` for a seed-mean (sd over seeds)."""
    text = _ci(node, f"top{k}", f"top{k}_ci_low", f"top{k}_ci_high")
    sd = node.get(f"top{k}_seed_sd")
    if sd is None or text == "–":
        return text
    value, _, interval = text.partition(" ")
    return f"{value} ± {_num(sd)} {interval}".rstrip()


def render_table3(table3: Mapping) -> str:
    """Top-k accuracy (%) with 95% CIs, one table per test set / subset, systems in the paper's order, the paper's
    numbers beside ours where it reports them; then the paired differences the results stage computed."""
    setting, accuracy = table3.get("setting", {}), table3.get("accuracy", {})
    out = ["### Table 3: top-k retrieval accuracy\n"]
    facts = [f"profile `{setting['profile']}`" if "profile" in setting else None,
             f"{setting['corpus_passages']:,} corpus passages" if "corpus_passages" in setting else None]
    if any(facts):
        seeds = sorted({c.get("seeds", 1) for subs in accuracy.values() for sets in subs.values()
                        for c in sets.values()})
        spread = f" Dense rows trained with {seeds[-1]} seeds: mean ± sd over seeds." if seeds[-1] > 1 else ""
        out.append("Setting: " + ", ".join(f for f in facts if f) + ". Cells: accuracy % [95% bootstrap CI]."
                   + spread + "\n")
    if setting.get("note"):
        out.append(f"_{setting['note']}._\n")
    systems = _ordered(accuracy, TABLE3_ORDER)
    panels = list(dict.fromkeys((d, s) for sys_ in systems for d, subs in accuracy[sys_].items() for s in subs))
    for dataset, subset in panels:
        cells = {s: accuracy[s][dataset][subset] for s in systems if subset in accuracy[s].get(dataset, {})}
        ns = sorted({c.get("n") for c in cells.values()}, key=str)
        ks = [k for k in KS if any(f"top{k}" in c for c in cells.values())]
        paper = _paper_cells(dataset, subset)
        paper_ks = sorted({k for _, k in paper})
        header = ["system"] + [f"Top-{k}" for k in ks] + [f"paper Top-{k}" for k in paper_ks]
        rows = []
        for system, node in cells.items():
            rows.append([_label(system)] + [_accuracy_cell(node, k) for k in ks]
                        + [_num(paper.get((system, k))) for k in paper_ks])
        n_text = ", ".join(f"n={n}" for n in ns)
        out.append(f"**{DATASET_LABELS.get(dataset, dataset)} {SUBSET_LABELS.get(subset, subset)}** ({n_text})\n")
        out.append(_table(header, rows))
    if any(PAPER_TABLE3.system.isin(systems)):
        out.append("Paper columns: the paper's Table 3 on the 21M-passage Wikipedia; compare orderings, not levels.\n")
    paired = table3.get("paired", {})
    if paired:
        out.append("Paired differences A - B on the same questions (points [95% CI], bootstrap p):\n")
        rows = []
        for pair, by_set in paired.items():
            a, _, b = pair.partition("_minus_")
            for dataset, subs in by_set.items():
                for subset, node in subs.items():
                    rows.append([f"{_label(a)} - {_label(b)}",
                                 f"{DATASET_LABELS.get(dataset, dataset)} {SUBSET_LABELS.get(subset, subset)}",
                                 str(node.get("n", "–"))]
                                + [f"{_ci(node, f'top{k}_diff', f'top{k}_ci_low', f'top{k}_ci_high', signed=True)}, "
                                   f"p {_p(node.get(f'top{k}_p'))}" if f"top{k}_diff" in node else "–" for k in KS])
        out.append(_table(["pair", "test set", "n"] + [f"Top-{k}" for k in KS], rows, ["l", "l"] + ["r"] * 5))
    return "\n".join(out)


# ======================================================================================================= attention
def render_attention_bias(bias: Mapping) -> str:
    """Stage 01: position bias of the highest / lowest-attended entities and the entropy, per encoder."""
    out = ["### Attention bias (stage 01)\n"]
    sampling = bias.get("sampling", {})
    if sampling:
        out.append(f"{sampling.get('sampled', '?')} passages sampled from a pool of {sampling.get('pool', '?'):,}"
                   + (f" ({sampling['excluded_test_gold']:,} test gold passages excluded)"
                      if sampling.get("excluded_test_gold") else "") + ".\n")
    rows = []
    for key, node in bias.get("encoders", {}).items():
        rows.append([ENCODER_LABELS.get(key, _label(key)), str(node.get("passages", "–")),
                     str(node.get("passages_with_enough_entities", node.get("n_passages", "–"))),
                     _num(node.get("mean_entropy"), 2), _num(_pct(node.get("mean_first_sentence_share"))),
                     _pct_ci(node, "highest_first_half"), _pct_ci(node, "lowest_second_half")])
    paper = bias.get("paper", {})
    if paper:
        rows.append(["paper (BERT-base DPR)", "–", "–", "–", "–", _num(_pct(paper.get("highest_first_half"))),
                     _num(_pct(paper.get("lowest_second_half")))])
    out.append(_table(["encoder", "passages", "with enough entities", "entropy (nats)", "first-sentence share %",
                       "highest in 1st half %", "lowest in 2nd half %"], rows))
    return "\n".join(out)


def _pct(x):
    return None if x is None else 100.0 * x


def _pct_ci(node: Mapping, key: str) -> str:
    ci = node.get(f"{key}_ci") or [None, None]
    return _ci({"v": _pct(node.get(key)), "lo": _pct(ci[0]), "hi": _pct(ci[1])}, "v", "lo", "hi")


def render_encoder_comparison(comparison: Mapping) -> str:
    """The three dense models on the same passages: entropy and later-sentence share with CIs, paired differences
    (points), and the Table 1 probe; the paper's numbers beside ours."""
    out = ["### Attention of the dense models (notebook 06)\n"]
    setting = comparison.get("setting", {})
    if setting.get("passages"):
        out.append(f"{setting['passages']} passages, every model on the same ones; 95% bootstrap CIs"
                   + (f" ({setting['n_boot']} resamples)" if setting.get("n_boot") else "") + ".\n")
    if setting.get("note"):
        out.append(f"_{setting['note']}._\n")
    attention = comparison.get("attention", {})
    rows = []
    for key, node in attention.get("encoders", {}).items():
        rows.append([ENCODER_LABELS.get(key, key), str(node.get("entropy_n", "–")),
                     _ci(node, "entropy", "entropy_ci_low", "entropy_ci_high", 2),
                     _num(PAPER["entropy"].get(key), 2),
                     _ci(node, "later_sentence_share", "later_sentence_share_ci_low",
                         "later_sentence_share_ci_high")])
    if rows:
        out.append(_table(["encoder", "n", "entropy (nats)", "paper entropy", "later-sentence share %"], rows))
    rows = []
    for pair, node in attention.get("paired", {}).items():
        a, _, b = pair.partition("_minus_")
        rows.append([f"{ENCODER_LABELS.get(a, a)} - {ENCODER_LABELS.get(b, b)}",
                     str(node.get("later_sentence_share_n", "–")),
                     _ci(node, "entropy_diff", "entropy_ci_low", "entropy_ci_high", 3, signed=True)
                     + f", p {_p(node.get('entropy_p'))}",
                     _ci(node, "later_sentence_share_diff", "later_sentence_share_ci_low",
                         "later_sentence_share_ci_high", 2, signed=True)
                     + f", p {_p(node.get('later_sentence_share_p'))}",
                     _num(PAPER["later_sentence_share_diff"].get(pair), 1, signed=True)])
    if rows:
        out.append("Paired over passages (A - B):\n")
        out.append(_table(["pair", "n", "entropy diff (nats)", "later-sentence share diff (points)",
                           "paper (points)"], rows))
    probe = comparison.get("table1_probe", {})
    if probe:
        out.append("Table 1 probe: questions about each passage's highest- vs lowest-attended entity, scored against "
                   "their own passage (dot product). Levels depend on the encoder (MiniLM here, BERT-base in the "
                   "paper); the gap is what compares.\n")
        rows = []
        for key, node in probe.items():
            paper = PAPER["table1_probe"].get(key, {})
            rows.append([ENCODER_LABELS.get(key, key), str(node.get("n_passages", "–")),
                         _ci(node, "highest", "highest_ci_low", "highest_ci_high", 2),
                         _ci(node, "lowest", "lowest_ci_low", "lowest_ci_high", 2),
                         _ci(node, "difference", "difference_ci_low", "difference_ci_high", 2, signed=True)
                         + f", p {_p(node.get('difference_p'))}",
                         _ci(node, "highest_wins", "highest_wins_ci_low", "highest_wins_ci_high"),
                         f"{paper['highest']} vs {paper['lowest']}" if paper else "–"])
        out.append(_table(["encoder", "passages", "highest", "lowest", "gap", "highest wins %", "paper"], rows))
    return "\n".join(out)


# ====================================================================================================== synthetic
def _flatten(tree: Mapping, prefix: str = "") -> list[tuple[str, object]]:
    items = []
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            items += _flatten(value, name + ".")
        else:
            items.append((name, value))
    return items


def _value(v) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_value(x) for x in v)
    return "`" + str(v).replace("|", "\\|") + "`" if isinstance(v, str) else str(v)


def render_generic(metrics: Mapping, title: str) -> str:
    """Any metrics file as a key / value table (nested keys dotted), so new keys show up without code changes."""
    return f"### {title}\n\n" + _table(["metric", "value"], [[f"`{k}`", _value(v)] for k, v in _flatten(metrics)])


# ====================================================================================================== wall times
def render_wall_times(metrics_dir: Path) -> str:
    """Every stage's wall time (``stage_<name>.json``), in pipeline order, and the total."""
    times = {}
    for path in sorted(metrics_dir.glob("stage_*.json")):
        node = read_json(path, dict, "a JSON object")
        if "wall_time_s" not in node:
            raise ValueError(f"{path}: no 'wall_time_s' (every stage logs its wall time)")
        times[path.stem.removeprefix("stage_")] = float(node["wall_time_s"])
    if not times:
        return "### Stage wall times\n\n_No stage has run yet._\n"
    rows = [[f"`{s}`", f"{times[s]:,.1f}", f"{times[s] / 60:.1f}"] for s in sorted(times, key=_stage_position)]
    total = sum(times.values())
    rows.append(["**total**", f"**{total:,.1f}**", f"**{total / 60:.1f}**"])
    return ("### Stage wall times\n\nLast run of each stage, from `stage_<name>.json`.\n\n"
            + _table(["stage", "seconds", "minutes"], rows))


def _stage_position(name: str) -> tuple[int, str]:
    """Pipeline order; a seeded run (``05_dpr_training.baseline-2022``) sits where its variant does."""
    base = re.sub(r"-\d+$", "", name)
    return (STAGE_ORDER.index(base) if base in STAGE_ORDER else len(STAGE_ORDER), name)


# ========================================================================================================== public
def render_results(metrics_dir: str | Path = paths.METRICS) -> str:
    """The whole results section (markdown) from the metrics files present in ``metrics_dir``."""
    metrics_dir = Path(metrics_dir)
    if not metrics_dir.is_dir():
        raise FileNotFoundError(f"{metrics_dir}: no metrics directory (run `dvc repro` first)")
    parts = [f"_Generated by `python -m ecqg.report` from `{metrics_dir}/`; do not edit by hand._\n"]
    table3 = _load(metrics_dir, "table3.json")
    parts.append(render_table3(table3) if table3 else "### Table 3\n\n" + _missing(metrics_dir, "table3.json",
                                                                                      "results"))
    bias = _load(metrics_dir, "attention_bias.json")
    parts.append(render_attention_bias(bias) if bias else "### Attention bias\n\n"
                 + _missing(metrics_dir, "attention_bias.json", "attention_bias"))
    comparison = _load(metrics_dir, "encoder_comparison.json")
    parts.append(render_encoder_comparison(comparison) if comparison else "### Attention of the dense models\n\n"
                 + _missing(metrics_dir, "encoder_comparison.json", "results (encoder comparison)"))
    for name, title in SYNTHETIC_STAGES:
        metrics = _load(metrics_dir, f"{name}.json")
        parts.append(render_generic(metrics, title) if metrics is not None
                     else f"### {title}\n\n" + _missing(metrics_dir, f"{name}.json", name))
    parts.append(render_wall_times(metrics_dir))
    return "\n".join(p.rstrip("\n") + "\n" for p in parts)


def _split(text: str, readme: Path) -> tuple[str, str]:
    if text.count(START) != 1 or text.count(END) != 1:
        raise ValueError(f"{readme}: needs exactly one '{START}' and one '{END}' line around the results section "
                         f"(found {text.count(START)} and {text.count(END)})")
    head, rest = text.split(START)
    if END not in rest:
        raise ValueError(f"{readme}: '{END}' comes before '{START}'")
    return head + START, END + rest.split(END, 1)[1]


def updated_readme(readme: str | Path = "README.md", metrics_dir: str | Path = paths.METRICS) -> tuple[str, str]:
    """(current text, text with the results section regenerated)."""
    readme = Path(readme)
    text = readme.read_text(encoding="utf-8")
    head, tail = _split(text, readme)
    return text, f"{head}\n{render_results(metrics_dir)}{tail}"


def update_readme(readme: str | Path = "README.md", metrics_dir: str | Path = paths.METRICS) -> bool:
    """Regenerate the section between the markers (atomic write); True when the file changed."""
    old, new = updated_readme(readme, metrics_dir)
    if new != old:
        write_text(readme, new)
    return new != old


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ecqg.report", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the README section is stale; write nothing")
    parser.add_argument("--readme", default="README.md")
    parser.add_argument("--metrics-dir", default=str(paths.METRICS))
    parser.add_argument("--print", action="store_true", help="print the rendered section instead of writing")
    args = parser.parse_args(argv)
    if args.print:
        sys.stdout.write(render_results(args.metrics_dir))
        return 0
    try:
        if args.check:
            old, new = updated_readme(args.readme, args.metrics_dir)
            if old != new:
                print(f"{args.readme}: the results section is stale; run `python -m ecqg.report`", file=sys.stderr)
                return 1
            print(f"{args.readme}: the results section is up to date")
            return 0
        changed = update_readme(args.readme, args.metrics_dir)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.readme}: results section {'updated' if changed else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
