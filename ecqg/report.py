"""The README's results sections, one per profile, generated from ``results/<profile>/*.json`` so no number in them
is typed by hand.

Why generated: the README is what most readers see; a copied number goes stale the first time a parameter changes.
``python -m ecqg.report`` rewrites the text between ``<!-- results:<profile>:start -->`` and
``<!-- results:<profile>:end -->`` for the profile of ``params.yaml`` (``--profile`` for another one; a profile
without a section gets one after the last section), and writes ``results/<profile>/headline.json``, the dozen
figures a reader looks at first (``dvc metrics show`` prints it readably); ``--check`` exits 1 when the section
differs from what the metrics give (for CI / make); ``--compare A B`` prints the headline figures of two profiles
side by side. The output depends on the metrics only (the run's date is read from them), so the check is stable.

What it reads (each optional except that a missing file is said, not hidden):
``table3.json`` (``ecqg.results.metrics_tree``), ``attention_bias.json`` (stage 01), ``encoder_comparison.json``
(``ecqg.encoder_comparison.metrics_tree``), ``question_generation.json`` / ``filtering.json`` / ``mixing.json``
(rendered generically: whatever keys they hold), ``mechanism.json`` (``ecqg.mechanism_pipeline.metrics_tree``),
``dpr_*_training.json`` (the settings table), and every ``stage_*.json`` (``wall_time_s``, ``finished``).
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

SECTION = re.compile(r"<!-- results:([A-Za-z0-9_-]+):(start|end) -->")
TABLE3_ORDER = ("tfidf", "bm25", "minilm_untrained", "dpr_uncon_pre", "dpr_mixed_pre", "dpr_baseline", "dpr_uncon",
                "dpr_mixed")
LABELS = {**SYSTEM_LABELS, "dpr_uncon": "UnCon-DPR (ours)", "dpr_mixed": "Mixed-DPR (ours)"}
# What the bundled base encoder already learned: said next to every dense number it underlies.
BASE_ENCODER_NOTE = (
    "The dense rows start from the bundled sentence-transformers all-MiniLM-L6-v2, not from a plain BERT: it was "
    "trained contrastively on about a billion pairs, among them Natural Questions, TriviaQA, SQuAD and the 64M "
    "synthetic PAQ questions (its model card lists its training sets). So unconditioned synthetic pre-training at "
    "scale has already happened inside every dense row (UnCon-DPR adds a few more such questions to 64M), "
    "WebQuestions and TriviaQA are not zero-shot for it, and NQ's training questions were seen. What this setting "
    "can test is the paper's specific claim: conditioning on the least-attended entities spreads attention and helps "
    "the questions about them (see the mechanism slices).")
KS = (1, 5, 20, 100)
SYNTHETIC_STAGES = (("question_generation", "02 question generation"), ("filtering", "03 filtering"),
                    ("mixing", "04 mixing"))
# Pipeline order of the stage_<name>.json files; names not listed follow in alphabetical order.
STAGE_ORDER = ("prepare", "index_bm25", "index_tfidf", "retrieve_bm25", "retrieve_tfidf", "training_data",
               "05_dpr_training.baseline", "retrieve_dense_untrained", "retrieve_dense_baseline",
               "01_attention_bias", "02_question_generation", "03_filtering", "04_mixing",
               "05_dpr_training.uncon", "05_dpr_training.mixed", "retrieve_dense_uncon_pre",
               "retrieve_dense_mixed_pre", "retrieve_dense_uncon", "retrieve_dense_mixed",
               "06_results_and_attention_entropy", "07_mechanism")


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
    out = ["#### Table 3: top-k retrieval accuracy\n"]
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
    if setting.get("base_model") == "bundled:minilm":
        out.append(f"**What the base encoder already knows.** {BASE_ENCODER_NOTE}\n")
    if any(s.endswith("_pre") for s in accuracy):
        out.append("_Pre-training only_: UnCon / Mixed right after synthetic pre-training, before fine-tuning "
                   "(the synthetic data's own effect on the base encoder).\n")
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
    out = ["#### Attention bias (stage 01)\n"]
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
    out = ["#### Attention of the dense models (notebook 06)\n"]
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
    return f"#### {title}\n\n" + _table(["metric", "value"], [[f"`{k}`", _value(v)] for k, v in _flatten(metrics)])


# ====================================================================================================== wall times
def render_wall_times(metrics_dir: Path, declared: set[str] | None = None) -> str:
    """Every stage's wall time (``stage_<name>.json``), in pipeline order, and the total. ``declared``: the metrics
    files the current pipeline declares (``ecqg.dvc_stages.metric_files``); stage files outside it are left from an
    earlier run of the profile (more seeds, a renamed stage) and are left out, and counted."""
    times, stale = {}, []
    for path in sorted(metrics_dir.glob("stage_*.json")):
        if declared is not None and path.as_posix() not in declared and str(path) not in declared:
            stale.append(path.name)
            continue
        node = read_json(path, dict, "a JSON object")
        if "wall_time_s" not in node:
            raise ValueError(f"{path}: no 'wall_time_s' (every stage logs its wall time)")
        times[path.stem.removeprefix("stage_")] = float(node["wall_time_s"])
    if not times:
        return "#### Stage wall times\n\n_No stage has run yet._\n"
    rows = [[f"`{s}`", f"{times[s]:,.1f}", f"{times[s] / 60:.1f}"] for s in sorted(times, key=_stage_position)]
    total = sum(times.values())
    rows.append(["**total**", f"**{total:,.1f}**", f"**{total / 60:.1f}**"])
    note = (f" {len(stale)} stage file(s) of earlier runs that the current pipeline no longer declares are left "
            f"out ({', '.join(stale[:4])}{', ...' if len(stale) > 4 else ''}).") if stale else ""
    return (f"#### Stage wall times\n\nLast run of each stage, from `stage_<name>.json`.{note}\n\n"
            + _table(["stage", "seconds", "minutes"], rows))


def _stage_position(name: str) -> tuple[int, str]:
    """Pipeline order; a seeded run (``05_dpr_training.baseline-2022``) sits where its variant does."""
    base = re.sub(r"-\d+$", "", name)
    return (STAGE_ORDER.index(base) if base in STAGE_ORDER else len(STAGE_ORDER), name)


# ======================================================================================================= mechanism
MECHANISM_KS = (1, 5, 20)


def _slice_rows(accuracy: Mapping, slices: Sequence[str], k: int, extra=None) -> list[list[str]]:
    rows = []
    for system in _ordered(accuracy, TABLE3_ORDER):
        node = accuracy[system]
        rows.append([_label(system)] + [_accuracy_cell(node[s], k) if s in node else "–" for s in slices]
                    + ([extra(system)] if extra else []))
    return rows


def _slice_header(accuracy: Mapping, slices: Sequence[str]) -> list[str]:
    n = {s: next((node[s]["n"] for node in accuracy.values() if s in node), "?") for s in slices}
    return [f"{s} (n={n[s]})" for s in slices]


def _paired_slice_rows(paired: Mapping, slices: Sequence[str], ks: Sequence[int]) -> list[list[str]]:
    rows = []
    for pair, by_slice in paired.items():
        a, _, b = pair.partition("_minus_")
        for s in slices:
            node = by_slice.get(s)
            if node is None:
                continue
            rows.append([f"{_label(a)} - {_label(b)}", s, str(node.get("n", "–"))]
                        + [f"{_ci(node, f'top{k}_diff', f'top{k}_ci_low', f'top{k}_ci_high', signed=True)}, "
                           f"p {_p(node.get(f'top{k}_p'))}" if f"top{k}_diff" in node else "–" for k in ks])
    return rows


def render_mechanism(mech: Mapping) -> str:
    """Notebook 07: Top-k by answer position with PSI, by the baseline's attention to the answer entity, and the
    moved-sentence gaps, each with CIs and paired differences of the dense variants."""
    from ecqg.mechanism import BUCKETS, THIRDS

    out = ["#### Where the method acts (notebook 07)\n"]
    setting = mech.get("setting", {})
    out.append(f"NQ test ({setting.get('questions', '?')} questions); dense rows are seed-means; 95% bootstrap CIs"
               + (f" ({setting['n_boot']} resamples)" if setting.get("n_boot") else "") + ".\n")
    position = mech.get("position", {})
    if position.get("accuracy"):
        counts = position.get("counts", {})
        left = {k: v for k, v in counts.items() if k not in BUCKETS and k != "ok"}
        out.append("**Answer position.** Questions by the sentence of their gold passage where an answer first "
                   f"occurs ({counts.get('ok', '?')} located"
                   + ("; left out: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(left.items()))
                      if left else "") + "). PSI = 1 - min / max accuracy over the buckets (0: position does not "
                   "matter), stratified bootstrap CI.\n")
        psi = position.get("psi", {})
        for k in MECHANISM_KS:
            slices = [b for b in BUCKETS if any(b in node for node in position["accuracy"].values())]
            if not any(f"top{k}" in node[s] for node in position["accuracy"].values() for s in slices if s in node):
                continue
            rows = _slice_rows(position["accuracy"], slices, k,
                               lambda system: _ci(psi.get(system, {}), f"top{k}", f"top{k}_ci_low",
                                                  f"top{k}_ci_high", 3))
            out.append(f"Top-{k}:\n")
            out.append(_table(["system"] + _slice_header(position["accuracy"], slices) + ["PSI"], rows))
        pairs = [(key, node) for key, node in psi.items() if "_minus_" in key]
        if pairs:
            out.append("PSI differences A - B (same questions resampled for both; negative: A less position-"
                       "sensitive):\n")
            rows = [[f"{_label(key.partition('_minus_')[0])} - {_label(key.partition('_minus_')[2])}"]
                    + [_ci(node, f"top{k}", f"top{k}_ci_low", f"top{k}_ci_high", 3, signed=True)
                       + f", p {_p(node.get(f'top{k}_p'))}" for k in MECHANISM_KS] for key, node in pairs]
            out.append(_table(["pair"] + [f"Top-{k}" for k in MECHANISM_KS], rows))
        if position.get("paired"):
            out.append("Paired differences per bucket (points [95% CI], bootstrap p):\n")
            out.append(_table(["pair", "answer in", "n"] + [f"Top-{k}" for k in MECHANISM_KS],
                              _paired_slice_rows(position["paired"], BUCKETS, MECHANISM_KS), ["l", "l"] + ["r"] * 4))
    entity = mech.get("entity_attention", {})
    if entity.get("accuracy"):
        counts = entity.get("counts", {})
        out.append("**Entity attention.** Questions whose answer is a named entity of its gold passage, by the "
                   "baseline DPR's [CLS] attention rank of that entity among the passage's entities (first training "
                   f"seed; at least {setting.get('min_entities', '?')} entities; "
                   + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(counts.items()) if k not in THIRDS)
                   + ").\n")
        slices = [t for t in THIRDS if any(t in node for node in entity["accuracy"].values())]
        for k in MECHANISM_KS:
            out.append(f"Top-{k}:\n")
            out.append(_table(["system"] + _slice_header(entity["accuracy"], slices),
                              _slice_rows(entity["accuracy"], slices, k)))
        if entity.get("paired"):
            out.append("Paired differences per third (points [95% CI], bootstrap p):\n")
            out.append(_table(["pair", "answer entity", "n"] + [f"Top-{k}" for k in MECHANISM_KS],
                              _paired_slice_rows(entity["paired"], THIRDS, MECHANISM_KS), ["l", "l"] + ["r"] * 4))
    moved = mech.get("moved_sentence", {})
    if moved.get("systems"):
        counts = moved.get("counts", {})
        out.append("**Moved-sentence probe.** Each question scored against its gold passage with the answer sentence "
                   "moved to the front and to the end (dot product); gap = front - end, a preference for early "
                   f"evidence. {counts.get('probed', '?')} passages probed of {counts.get('eligible', '?')} eligible "
                   f"(answer in sentence 1: {counts.get('answer_in_sentence_1', '?')}; truncated by the encoder: "
                   f"{counts.get('truncated_by_encoder', '?')}).\n")
        rows = []
        for system in _ordered(moved["systems"], TABLE3_ORDER):
            node = moved["systems"][system]
            gap = _ci(node, "gap", "ci_low", "ci_high", 3, signed=True)
            if node.get("seeds", 1) > 1 and node.get("seed_sd") is not None:
                value, _, interval = gap.partition(" ")
                gap = f"{value} ± {_num(node['seed_sd'], 3)} {interval}"
            rows.append([_label(system), str(node.get("n", "–")), str(node.get("seeds", "–")), gap,
                         _num(node.get("front_higher_pct"))])
        out.append(_table(["system", "passages", "seeds", "gap (± sd over seeds) [95% CI]", "front higher %"], rows))
        if moved.get("paired"):
            rows = [[f"{_label(key.partition('_minus_')[0])} - {_label(key.partition('_minus_')[2])}",
                     str(node.get("n", "–")), _ci(node, "gap", "ci_low", "ci_high", 3, signed=True)
                     + f", p {_p(node.get('p'))}"] for key, node in moved["paired"].items()]
            out.append("Gap differences A - B, paired per passage (negative: A less biased toward early evidence):\n")
            out.append(_table(["pair", "passages", "gap difference [95% CI]"], rows))
    return "\n".join(out)


# ======================================================================================================== settings
def _stage_files(metrics_dir: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(metrics_dir.glob("stage_*.json")):
        out[path.stem.removeprefix("stage_")] = read_json(path, dict, "a JSON object")
    return out


def render_settings(metrics_dir: Path) -> str:
    """What this profile's run was: sizes and steps read back from its metrics, and the day it finished."""
    table3 = _load(metrics_dir, "table3.json") or {}
    setting = table3.get("setting", {})
    qg = _load(metrics_dir, "question_generation.json") or {}
    filtering = _load(metrics_dir, "filtering.json") or {}
    mixing = _load(metrics_dir, "mixing.json") or {}
    training = {p.stem: read_json(p, dict, "a JSON object") for p in sorted(metrics_dir.glob("dpr_*_training.json"))}
    baseline = next((v for k, v in training.items() if k.startswith("dpr_baseline_")), {})
    synthetic = next((v for k, v in training.items() if k.startswith("dpr_mixed_")), {})
    rows = []

    def add(name, value):
        if value not in (None, "", {}):
            rows.append([name, _value(value) if not isinstance(value, str) else value])

    add("corpus passages", setting.get("corpus_passages"))
    add("test questions", ", ".join(f"{DATASET_LABELS.get(k, k)} {v:,}"
                                    for k, v in setting.get("questions", {}).items()))
    add("dense training seeds", setting.get("dpr_seeds"))
    add("base encoder", setting.get("base_model"))
    add("QG steps per generator", qg.get("training", {}).get("uncon", {}).get("steps"))
    add("filter stage 1", filtering.get("stage1_rule"))
    mrc = filtering.get("mrc", {})
    if mrc.get("has_ans_f1") is not None:
        add("reader has-answer F1 / no-answer accuracy", f"{mrc['has_ans_f1']:.1f} / "
            f"{mrc.get('no_answer_accuracy', float('nan')):.1f}")
    add("synthetic questions per set (UnCon / Mixed)",
        f"{mixing['sizes']['uncon']:,} / {mixing['sizes']['mixed']:,}" if mixing.get("sizes") else None)
    pre = synthetic.get("pretrain", {})
    add("synthetic pre-training (records / steps)",
        f"{pre['train_examples']:,} / {pre['steps']:,}" if pre.get("steps") else None)
    add("gold fine-tuning (records / steps)",
        f"{baseline['train_examples']:,} / {baseline['steps']:,}" if baseline.get("steps") else None)
    stages = _stage_files(metrics_dir)
    finished = sorted({v["finished"] for v in stages.values() if v.get("finished")})
    add("stage time in all (min)", f"{sum(float(v.get('wall_time_s', 0)) for v in stages.values()) / 60:.1f}"
        if stages else None)
    add("run finished (UTC)", finished[-1] if finished else None)
    return _table(["setting", "value"], rows) if rows else ""


# ======================================================================================================== headline
HEADLINE_SYSTEMS = {"bm25": "bm25", "dpr_baseline": "dpr", "dpr_uncon": "uncon", "dpr_mixed": "mixed"}


def headline(metrics_dir: str | Path, full: bool = False) -> dict:
    """The figures a reader looks at first, flat and short-keyed so ``dvc metrics show`` prints them on one screen:
    NQ Top-5 of BM25 / DPR / UnCon / Mixed, Mixed - DPR at Top-5 with its p-value, PSI at Top-5 and the
    moved-sentence gap of DPR and Mixed. ``full`` adds Top-1, the other paired differences, every system's PSI and
    gap, attention entropy, later-sentence share and the Table 1 probe gap (for ``--compare``)."""
    metrics_dir = Path(metrics_dir)
    out: dict = {}
    table3 = _load(metrics_dir, "table3.json") or {}
    names = {s: s for s in table3.get("accuracy", {})} if full else HEADLINE_SYSTEMS
    for system, short in names.items():
        node = table3.get("accuracy", {}).get(system, {}).get("nq", {}).get("all", {})
        for k in ((1, 5) if full else (5,)):
            if node.get(f"top{k}") is not None:
                out[f"top{k}.{short}"] = node[f"top{k}"]
    pairs = list(table3.get("paired", {})) if full else ["dpr_mixed_minus_dpr_baseline"]
    for pair in pairs:
        node = table3.get("paired", {}).get(pair, {}).get("nq", {}).get("all", {})
        short = pair.replace("dpr_", "").replace("_minus_", "-").replace("baseline", "dpr")
        for k in ((1, 5) if full else (5,)):
            if node.get(f"top{k}_diff") is not None:
                out[f"top{k}.{short}"] = node[f"top{k}_diff"]
                out[f"top{k}.{short}.p"] = node[f"top{k}_p"]
    mech = _load(metrics_dir, "mechanism.json") or {}
    keep = (lambda s: "_minus_" not in s) if full else (lambda s: s in ("dpr_baseline", "dpr_mixed"))
    for system, node in mech.get("position", {}).get("psi", {}).items():
        if keep(system) and node.get("top5") is not None:
            out[f"psi5.{HEADLINE_SYSTEMS.get(system, system)}"] = node["top5"]
    for system, node in mech.get("moved_sentence", {}).get("systems", {}).items():
        if keep(system):
            out[f"gap.{HEADLINE_SYSTEMS.get(system, system)}"] = node.get("gap")
    if full:
        comparison = _load(metrics_dir, "encoder_comparison.json") or {}
        for system, node in comparison.get("attention", {}).get("encoders", {}).items():
            out[f"attention_entropy.{system}"] = node.get("entropy")
            out[f"later_sentence_share.{system}"] = node.get("later_sentence_share")
        for system, node in comparison.get("table1_probe", {}).items():
            out[f"table1_probe_gap.{system}"] = node.get("difference")
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


def render_comparison(a: str | Path, b: str | Path) -> str:
    """Headline figures of two profiles' results side by side (``--compare``), with B - A."""
    a, b = Path(a), Path(b)
    ha, hb = headline(a, full=True), headline(b, full=True)
    rows = []
    for key in list(dict.fromkeys([*ha, *hb])):
        va, vb = ha.get(key), hb.get(key)
        diff = vb - va if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None
        rows.append([f"`{key}`", _num(va, 3) if va is not None else "–", _num(vb, 3) if vb is not None else "–",
                     _num(diff, 3, signed=True) if diff is not None else "–"])
    return _table(["figure", f"`{a}`", f"`{b}`", "B - A"], rows)


# ========================================================================================================== public
def render_results(metrics_dir: str | Path, declared: set[str] | None = None) -> str:
    """One profile's results section (markdown) from the metrics files present in ``metrics_dir`` (``declared``:
    see :func:`render_wall_times`)."""
    metrics_dir = Path(metrics_dir)
    if not metrics_dir.is_dir():
        raise FileNotFoundError(f"{metrics_dir}: no metrics directory (run `dvc repro` first)")
    parts = [f"### Profile `{metrics_dir.name}`\n",
             f"_Generated by `python -m ecqg.report` from `{metrics_dir.as_posix()}/`; do not edit by hand._\n"]
    settings = render_settings(metrics_dir)
    if settings:
        parts.append(settings)
    table3 = _load(metrics_dir, "table3.json")
    parts.append(render_table3(table3) if table3 else "#### Table 3\n\n" + _missing(metrics_dir, "table3.json",
                                                                                       "results"))
    mech = _load(metrics_dir, "mechanism.json")
    parts.append(render_mechanism(mech) if mech else "#### Where the method acts\n\n"
                 + _missing(metrics_dir, "mechanism.json", "mechanism"))
    bias = _load(metrics_dir, "attention_bias.json")
    parts.append(render_attention_bias(bias) if bias else "#### Attention bias\n\n"
                 + _missing(metrics_dir, "attention_bias.json", "attention_bias"))
    comparison = _load(metrics_dir, "encoder_comparison.json")
    parts.append(render_encoder_comparison(comparison) if comparison else "#### Attention of the dense models\n\n"
                 + _missing(metrics_dir, "encoder_comparison.json", "results (encoder comparison)"))
    for name, title in SYNTHETIC_STAGES:
        metrics = _load(metrics_dir, f"{name}.json")
        parts.append(render_generic(metrics, title) if metrics is not None
                     else f"#### {title}\n\n" + _missing(metrics_dir, f"{name}.json", name))
    parts.append(render_wall_times(metrics_dir, declared))
    return "\n".join(p.rstrip("\n") + "\n" for p in parts)


def markers(profile: str) -> tuple[str, str]:
    return f"<!-- results:{profile}:start -->", f"<!-- results:{profile}:end -->"


def _sections(text: str, readme: Path) -> dict[str, tuple[int, int]]:
    """Profile -> (end of its start marker, start of its end marker); each profile once, start before end."""
    found: dict[str, dict[str, list[int]]] = {}
    for m in SECTION.finditer(text):
        found.setdefault(m.group(1), {"start": [], "end": []})[m.group(2)].append(m.start() if m.group(2) == "end"
                                                                                   else m.end())
    spans = {}
    for profile, where in found.items():
        start, end = markers(profile)
        if len(where["start"]) != 1 or len(where["end"]) != 1:
            raise ValueError(f"{readme}: needs exactly one '{start}' and one '{end}' line around the results of "
                             f"profile {profile} (found {len(where['start'])} and {len(where['end'])})")
        if where["end"][0] < where["start"][0]:
            raise ValueError(f"{readme}: '{end}' comes before '{start}'")
        spans[profile] = (where["start"][0], where["end"][0])
    return spans


def updated_readme(readme: str | Path, metrics_dir: str | Path, profile: str | None = None,
                   declared: set[str] | None = None) -> tuple[str, str]:
    """(current text, text with the profile's results section regenerated). A profile without a section gets one
    after the last existing section; a README without any section is an error (where would it go?)."""
    readme, metrics_dir = Path(readme), Path(metrics_dir)
    profile = profile or metrics_dir.name
    text = readme.read_text(encoding="utf-8")
    spans = _sections(text, readme)
    body = f"\n{render_results(metrics_dir, declared)}"
    if profile in spans:
        start, end = spans[profile]
        return text, text[:start] + body + text[end:]
    if not spans:
        start, end = markers(profile)
        raise ValueError(f"{readme}: no results section; add the lines '{start}' and '{end}' where the results of "
                         f"profile {profile} should go")
    last = max(end for _, end in spans.values())
    after = text.index("-->", last) + 3
    start, end = markers(profile)
    return text, f"{text[:after]}\n\n{start}{body}{end}{text[after:]}"


def update_readme(readme: str | Path, metrics_dir: str | Path, profile: str | None = None,
                  declared: set[str] | None = None) -> bool:
    """Regenerate the profile's section between its markers (atomic write); True when the file changed."""
    old, new = updated_readme(readme, metrics_dir, profile, declared)
    if new != old:
        write_text(readme, new)
    return new != old


def write_headline(metrics_dir: str | Path) -> Path:
    from ecqg.io import write_json

    return write_json(Path(metrics_dir) / "headline.json", headline(metrics_dir))


def _current_profile() -> str:
    from ecqg import config

    return config.load()["profile"]


def _declared(metrics_dir: Path) -> set[str] | None:
    """The metrics files the pipeline declares, when ``metrics_dir`` is the current profile's (else None: another
    profile's section is rendered from what its folder holds)."""
    from ecqg import dvc_stages

    if not Path("dvc.yaml").is_file() or not Path("params.yaml").is_file():
        return None
    return dvc_stages.metric_files() if paths.metrics_dir(_current_profile()) == metrics_dir else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ecqg.report", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the README section is stale; write nothing")
    parser.add_argument("--readme", default="README.md")
    parser.add_argument("--profile", help="whose results (default: the profile of params.yaml)")
    parser.add_argument("--metrics-dir", help="default: results/<profile>")
    parser.add_argument("--print", action="store_true", help="print the rendered section instead of writing")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"),
                        help="print the headline figures of two profiles (names, or metrics folders given as "
                             "paths with a /) side by side")
    args = parser.parse_args(argv)
    try:
        if args.compare:
            dirs = [Path(x) if "/" in x else paths.metrics_dir(x) for x in args.compare]  # a name: results/<name>
            for d in dirs:
                if not d.is_dir():
                    raise FileNotFoundError(f"{d}: no results (run that profile first)")
            sys.stdout.write(render_comparison(*dirs))
            return 0
        metrics_dir = Path(args.metrics_dir) if args.metrics_dir else \
            paths.metrics_dir(args.profile or _current_profile())
        declared = _declared(metrics_dir)
        if args.print:
            sys.stdout.write(render_results(metrics_dir, declared))
            return 0
        if args.check:
            old, new = updated_readme(args.readme, metrics_dir, args.profile, declared)
            if old != new:
                print(f"{args.readme}: the results section of {metrics_dir} is stale; run `python -m ecqg.report`",
                      file=sys.stderr)
                return 1
            print(f"{args.readme}: the results section of {metrics_dir} is up to date")
            return 0
        changed = update_readme(args.readme, metrics_dir, args.profile, declared)
        write_headline(metrics_dir)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.readme}: results section of {metrics_dir} {'updated' if changed else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
