"""The report's stage records: every stage's settings and figures (``stage_<name>.json``), the wall times in
pipeline order with the host each ran on, and any metrics file as a key / value table."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ecqg.analysis.labels import DATASET_LABELS
from ecqg.core.io import read_json
from ecqg.report.fine_tuning import training_runs
from ecqg.report.markdown import STAGE_ORDER, load_metrics, md_table


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
    return f"#### {title}\n\n" + md_table(["metric", "value"], [[f"`{k}`", _value(v)] for k, v in _flatten(metrics)])


def render_wall_times(metrics_dir: Path, declared: set[str] | None = None) -> str:
    """Every stage's wall time (``stage_<name>.json``), in pipeline order, and the total. ``declared``: the metrics
    files the current pipeline declares (``ecqg.tooling.dvc_stages.metric_files``); stage files outside it are left from an
    earlier run of the profile (more seeds, a renamed stage) and are left out, and counted."""
    times, nodes, stale = {}, {}, []
    for path in sorted(metrics_dir.glob("stage_*.json")):
        if declared is not None and path.as_posix() not in declared and str(path) not in declared:
            stale.append(path.name)
            continue
        node = read_json(path, dict, "a JSON object")
        if "wall_time_s" not in node:
            raise ValueError(f"{path}: no 'wall_time_s' (every stage logs its wall time)")
        times[path.stem.removeprefix("stage_")] = float(node["wall_time_s"])
        nodes[path.stem.removeprefix("stage_")] = node
    if not times:
        return "#### Stage wall times\n\n_No stage has run yet._\n"
    rows = [[f"`{s}`", f"{times[s]:,.1f}", f"{times[s] / 60:.1f}", nodes[s].get("finished", "-"),
             host_label(nodes[s].get("host"))] for s in sorted(times, key=_stage_position)]
    total = sum(times.values())
    rows.append(["**total**", f"**{total:,.1f}**", f"**{total / 60:.1f}**", "", ""])
    note = (f" {len(stale)} stage file(s) of earlier runs that the current pipeline no longer declares are left "
            f"out ({', '.join(stale[:4])}{', ...' if len(stale) > 4 else ''}).") if stale else ""
    hosts = {row[-1] for row in rows[:-1]} - {"-"}
    if len(hosts) > 1:
        note += f" The stages ran on {len(hosts)} kinds of host (a run resumed over sessions): compare times by host."
    return (f"#### Stage wall times\n\nLast run of each stage, from `stage_<name>.json` (host: the CPU, its cores, "
            f"whether it has native bf16, and any GPUs; '-' for stages recorded before 2 Dec 2026).{note}\n\n"
            + md_table(["stage", "seconds", "minutes", "finished", "host"], rows))


def host_label(host: Mapping | None) -> str:
    """``AMD EPYC, 2 cores, no native bf16`` (+ GPUs) from a stage's ``host`` record; '-' when it has none."""
    if not host:
        return "-"
    label = f"{host['cpu']}, {host['cores']} cores, {'native' if host['cpu_native_bf16'] else 'no native'} bf16"
    return label + (f", {len(host['gpus'])} x {host['gpus'][0]}" if host.get("gpus") else "")


def _stage_position(name: str) -> tuple[int, bool, str]:
    """Pipeline order; a seeded run (``05_dpr_training.baseline-2022``) sits where its variant does, a replicate's
    pre-training (``05_dpr_training.uncon-pre-2022``; an older run's: one per variant, ``...uncon-pre``) first."""
    base = re.sub(r"(-pre)?(-\d+)?$", "", name)
    pre = "-pre-" in name or name.endswith("-pre")
    return (STAGE_ORDER.index(base) if base in STAGE_ORDER else len(STAGE_ORDER), not pre, name)


def _stage_files(metrics_dir: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(metrics_dir.glob("stage_*.json")):
        out[path.stem.removeprefix("stage_")] = read_json(path, dict, "a JSON object")
    return out


def render_settings(metrics_dir: Path) -> str:
    """What this profile's run was: sizes and steps read back from its metrics, and the day it finished."""
    table3 = load_metrics(metrics_dir, "table3.json") or {}
    setting = table3.get("setting", {})
    qg = load_metrics(metrics_dir, "question_generation.json") or {}
    filtering = load_metrics(metrics_dir, "filtering.json") or {}
    mixing = load_metrics(metrics_dir, "mixing.json") or {}
    runs = training_runs(metrics_dir)
    baseline = next((r for r in runs if r["variant"] == "baseline" and r["phase"] == "finetune"), {})
    pre = next((r for r in runs if r["variant"] == "mixed" and r["phase"] == "pretrain"), {})
    rows = []

    def add(name, value):
        if value not in (None, "", {}):
            rows.append([name, _value(value) if not isinstance(value, str) else value])

    add("corpus passages", setting.get("corpus_passages"))
    add("test questions", ", ".join(f"{DATASET_LABELS.get(k, k)} {v:,}"
                                    for k, v in setting.get("questions", {}).items()))
    add("dense training seeds", setting.get("dpr_seeds"))
    if setting.get("dpr_related_seeds", setting.get("dpr_seeds")) != setting.get("dpr_seeds"):
        add("training seeds of the related system's retrievers and the hybrids", setting.get("dpr_related_seeds"))
    add("base encoder", setting.get("base_model"))
    add("QG steps per generator", qg.get("training", {}).get("uncon", {}).get("steps"))
    add("filter stage 1", filtering.get("stage1_rule"))
    mrc = filtering.get("mrc", {})
    if mrc.get("has_ans_f1") is not None:
        add("reader has-answer F1 / no-answer accuracy", f"{mrc['has_ans_f1']:.1f} / "
            f"{mrc.get('no_answer_accuracy', float('nan')):.1f}")
    add("synthetic questions per set (UnCon / Mixed)",
        f"{mixing['sizes']['uncon']:,} / {mixing['sizes']['mixed']:,}" if mixing.get("sizes") else None)
    add("synthetic pre-training (records / steps)",
        f"{pre['train_examples']:,} / {pre['steps']:,}" if pre.get("steps") else None)
    add("gold fine-tuning (records / steps)",
        f"{baseline['train_examples']:,} / {baseline['steps']:,}" if baseline.get("steps") else None)
    stages = _stage_files(metrics_dir)
    finished = sorted({v["finished"] for v in stages.values() if v.get("finished")})
    add("stage time in all (min)", f"{sum(float(v.get('wall_time_s', 0)) for v in stages.values()) / 60:.1f}"
        if stages else None)
    add("run finished (UTC)", finished[-1] if finished else None)
    return md_table(["setting", "value"], rows) if rows else ""
