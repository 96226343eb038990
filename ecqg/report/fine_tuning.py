"""The report's sections on fine-tuning length: every training run of stage 05 (epochs, why it stopped, the step the
held-out validation kept, its held-out Top-k, time), and, where the profile records the curve
(``dpr.finetune.curve_runs``), Table 3 and the mechanism slices at every validated snapshot of the first seed's
fine-tuning.

Why on the page: whether a verdict holds depends on how long every variant was fine-tuned (the study's first
verdict rested on 25 steps), so the page says how long each one ran and what the verdict was along the way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ecqg.core.io import read_json
from ecqg.analysis.mechanism import THIRDS
from ecqg.retrieval.probes import BUCKETS
from ecqg.analysis.labels import DATASET_LABELS, SYSTEM_LABELS
from ecqg.core.variants import BASELINE
from ecqg.report.markdown import EXPLORATORY, TABLE3_ORDER, label, md_table, num, ordered, pval, with_ci

CURVE_KS = (1, 20)          # the curve's Top-k on the page (the metrics hold every k of evaluation.ks)
_RUN_FILE = re.compile(r"^dpr_(?P<variant>.+?)(?P<pre>_pre)?_s(?P<seed>\d+)_training$")


def training_runs(metrics_dir: Path) -> list[dict]:
    """The ``dpr_<variant>[_pre]_s<seed>_training.json`` records of a profile, their variant, phase and seed read
    from the file name where the record lacks them."""
    runs = []
    for path in sorted(Path(metrics_dir).glob("dpr_*_training.json")):
        m = _RUN_FILE.match(path.stem)
        if m is None:
            raise ValueError(f"{path}: not a training record's name (dpr_<variant>[_pre]_s<seed>_training.json)")
        run = read_json(path, dict, "a JSON object")
        runs.append({"variant": m["variant"], "phase": "pretrain" if m["pre"] else "finetune",
                     "seed": int(m["seed"]), **run})
    return runs


def _short(system: str) -> str:
    """``dpr_mixed`` -> ``Mixed-DPR``: a label for column headers."""
    return label(system).removesuffix(" (ours)")


def _run_label(run: Mapping) -> str:
    """Table 3's label, or for a pre-training Table 3 does not show (Poly's), its system's label so marked."""
    system = f"dpr_{run['variant']}" + ("_pre" if run.get("phase") == "pretrain" else "")
    if system in SYSTEM_LABELS or run.get("phase") != "pretrain":
        return label(system)
    return f"{_short(system.removesuffix('_pre'))}, pre-training only (ours)"


def _count(x) -> str:
    return "–" if x is None else f"{x:,}"


def _stopped(run: Mapping) -> str:
    """Why the run ended, as the trainer recorded it (``stopped_by``: patience, or the cap of ``epochs`` /
    ``max_steps``); for a record from before the trainer kept it, worked out from the epochs and the kept step
    (patience when the run ended ``patience`` epochs after its kept one, else the cap); ``–`` without the patience
    rule."""
    recorded = run.get("stopped_by")
    if recorded:
        return "patience" if recorded == "patience" else "cap"
    epochs, kept, steps, patience = (run.get(k) for k in ("epochs_trained", "selected_step", "steps", "patience"))
    if None in (epochs, kept, steps, patience) or not epochs:
        return "–"
    return "patience" if epochs - round(kept / (steps / epochs)) >= patience else "cap"


def _kept(run: Mapping) -> str:
    if run.get("selected_step") is None:
        return "last"
    return f"{run['selected_step']:,} ({run.get('select_metric', '?').removeprefix('val_')})"


def _validated_over(run: Mapping) -> str:
    if run.get("val_passages") is not None:
        return f"corpus, {int(run['val_passages']):,} passages"
    if run.get("val_pool") is not None:
        return f"pool of {int(run['val_pool']):,}"
    return "–"


def _variant_order(variants) -> list[str]:
    """Variants (``mixed``, ``baseline``, ...) in Table 3's order of their fine-tuned systems."""
    return [s.removeprefix("dpr_") for s in ordered({f"dpr_{v}" for v in variants}, TABLE3_ORDER)]


def render_training_runs(runs: Sequence[Mapping]) -> str:
    """One row per training run: records, epochs and why it stopped, steps, the kept step, held-out Top-1 / 5 / 20
    at it, time."""
    if not runs:
        return ""
    order = _variant_order({r["variant"] for r in runs})
    rows = []      # each system's pre-training, then its fine-tuning by seed, in Table 3's order
    for run in sorted(runs, key=lambda r: (order.index(r["variant"]), r.get("phase") != "pretrain",
                                           r.get("seed", 0))):
        held = " / ".join(num(100 * run[f"val_top{k}"]) if run.get(f"val_top{k}") is not None else "–"
                          for k in (1, 5, 20))
        rows.append([_run_label(run), str(run.get("seed", "–")), _count(run.get("train_examples")),
                     str(run.get("epochs_trained", "–")), _stopped(run), _count(run.get("steps")), _kept(run), held,
                     _validated_over(run), num(run.get("train_minutes")), num(run.get("examples_per_s"))])
    patience = sorted({r["patience"] for r in runs if r.get("patience") is not None})
    rule = (f"Runs with the patience rule (`dpr.finetune`) validate at every epoch end, stop after "
            f"{' or '.join(map(str, patience))} epochs without a better score (_patience_) or at the epoch cap "
            "(_cap_), and keep the best epoch end (its metric in brackets); the others keep their last step. "
            if patience else "Every run keeps its last step (no patience rule in this profile). ")
    return "\n".join([
        "#### Training runs: epochs and the kept step\n",
        "Every training of stage 05 (`dpr_<variant>[_pre]_s<seed>_training.json`): the gold fine-tunings and the "
        f"synthetic pre-trainings (_pre-training only_ rows). {rule}Held-out: Top-1 / 5 / 20 (%) of the held-out "
        "questions at the kept step, retrieved over the whole corpus or ranked within a pool of their positives and "
        "hard negatives. Minutes: the training process's wall time, validation included (a resumed run counts "
        "from its resume); examples/s over the whole run.\n",
        md_table(["system", "seed", "records", "epochs", "stopped by", "steps", "kept step", "held-out Top-1 / 5 / 20",
                  "validated over", "minutes", "examples/s"], rows, ["l"] * 2 + ["r"] * 2 + ["l"] + ["r"] * 3
                 + ["l"] + ["r"] * 2)])


def _kept_steps(runs: Sequence[Mapping], seed) -> dict[str, int]:
    """Variant -> the step its final model (this seed's) comes from: the kept step, else its last."""
    return {r["variant"]: r["selected_step"] if r.get("selected_step") is not None else r.get("steps")
            for r in runs if r.get("phase") == "finetune" and r.get("seed") == seed}


def _paired_cell(node: Mapping | None, key: str, scale: float = 1, digits: int = 1) -> str:
    """``-0.7 [-1.4, -0.1], p 0.020`` from a tidy paired row (``key`` and ``ci_low`` / ``ci_high`` times ``scale``)."""
    if node is None or node.get(key) is None:
        return "–"
    scaled = {k: scale * node[k] if node.get(k) is not None else None for k in (key, "ci_low", "ci_high")}
    return f"{with_ci(scaled, key, 'ci_low', 'ci_high', digits, signed=True)}, p {pval(node.get('p_value'))}"


def _step_label(step: int, kept: Mapping[str, int], variants: Sequence[str]) -> str:
    marks = [_short(f"dpr_{v}") for v in variants if kept.get(v) == step]
    return f"{step:,}" + (f" (kept: {', '.join(marks)})" if marks else "")


def render_curve(curve: Mapping, runs: Sequence[Mapping] = ()) -> str:
    """Table 3 against fine-tuning steps (``finetune_curve.json``, notebook 06): per test set, each variant's
    Top-1 / Top-20 at every snapshot and variant - DPR at the steps both reached."""
    accuracy, paired = curve.get("accuracy") or [], curve.get("paired") or []
    if not accuracy:
        return ""
    seed = curve.get("dpr_training_seed")
    kept = _kept_steps(runs, seed)
    ks = [k for k in CURVE_KS if any(r["k"] == k for r in accuracy)] or sorted({r["k"] for r in accuracy})
    variants = _variant_order({r["variant"] for r in accuracy})
    others = [v for v in variants if v != BASELINE]
    acc = {(r["variant"], r["step"], r["dataset"], r["k"]): r["accuracy"] for r in accuracy}
    diff = {(r["variant"], r["step"], r["dataset"], r["k"]): r for r in paired}
    out = ["#### Table 3 against fine-tuning length\n",
           f"Training seed {seed}: every validated snapshot of each variant's fine-tuning searched the test sets over "
           "the whole corpus (`dpr.finetune.curve_runs`); Top-k accuracy (%), then variant - DPR at the same step "
           f"(points [95% paired bootstrap CI], {EXPLORATORY}). A variant that stopped earlier has no later snapshots; `kept` "
           "marks the step each variant's final model comes from (Table 3 above uses the final models of every "
           "seed). Data: `finetune_curve.json`; figure: `outputs/figures/06/finetune_curve.png`.\n"]
    for dataset in ordered({r["dataset"] for r in accuracy}, tuple(DATASET_LABELS)):
        rows = []
        for step in sorted({r["step"] for r in accuracy if r["dataset"] == dataset}):
            cells = [" / ".join(num(100 * acc[(v, step, dataset, k)]) if (v, step, dataset, k) in acc else "–"
                                for k in ks) for v in variants]
            cells += [_paired_cell(diff.get((v, step, dataset, k)), "difference", 100) for k in ks for v in others]
            rows.append([_step_label(step, kept, variants)] + cells)
        header = (["step"] + [f"{_short('dpr_' + v)} Top-{'/'.join(map(str, ks))}" for v in variants]
                  + [f"{_short('dpr_' + v)} - DPR, Top-{k}" for k in ks for v in others])
        out.append(f"{DATASET_LABELS.get(dataset, dataset)}:\n")
        out.append(md_table(header, rows, ["l"] + ["r"] * (len(header) - 1)))
    return "\n".join(out)


def _split(system: str) -> tuple[str, int]:
    """``dpr_mixed@360`` -> ``("mixed", 360)``."""
    name, _, step = system.rpartition("@")
    return name.removeprefix("dpr_"), int(step)


def render_mechanism_curve(mech: Mapping, runs: Sequence[Mapping] = ()) -> str:
    """The mechanism against fine-tuning steps (``mechanism_curve.json``, notebook 07): PSI at Top-1, the
    least-attended entity third's Top-1 difference and the moved-sentence gap, each with variant - DPR per step."""
    psi, entity, moved = (mech.get(key) or [] for key in ("psi", "entity_paired", "moved_sentence"))
    if not (psi or entity or moved):
        return ""
    least = THIRDS[-1]
    tables: dict[str, dict[tuple[str, str], dict[int, str]]] = {}    # table -> (column, variant) -> step -> cell

    def put(table: str, column: str, variant: str, step: int, cell: str) -> None:
        tables.setdefault(table, {}).setdefault((column, variant), {})[step] = cell

    for r in psi:
        if r.get("k") == 1:
            variant, step = _split(r["system"])
            if r["kind"] == "system":
                put("psi", "PSI", variant, step, num(r.get("psi"), 3))
            else:
                put("psi", "PSI - DPR's", variant, step, _paired_cell(r, "psi", digits=3))
    for r in entity:
        if r.get("k") == 1 and r.get("subset") == least:
            variant, step = _split(r["system_a"])
            put("entity", f"{least}, Top-1 - DPR's (n={r.get('n', '?')})", variant, step,
                _paired_cell(r, "difference", 100))
    for r in moved:
        variant, step = _split(r["system"])
        if r["kind"] == "system":
            put("moved", "moved-sentence gap", variant, step, num(r.get("gap"), 3, True))
        else:
            put("moved", "gap - DPR's", variant, step, _paired_cell(r, "gap", digits=3))
    variants = _variant_order({v for columns in tables.values() for _, v in columns})
    kept = _kept_steps(runs, mech.get("dpr_training_seed"))
    out = ["#### The mechanism against fine-tuning length\n",
           "NQ, the same snapshots (notebook 07, `mechanism_curve.json`). PSI: position sensitivity at Top-1 (1 - min "
           f"/ max accuracy over the answer-position buckets {' / '.join(BUCKETS)}; 0: position does not matter). "
           f"{least.capitalize()}: questions whose answer entity DPR attends to least, variant - DPR at Top-1 "
           "(points). Moved-sentence gap: front - end score of the answer sentence moved (positive: the encoder "
           "prefers the evidence early). Differences: [95% bootstrap CI], p.\n"]
    for columns in tables.values():
        keys = sorted(columns, key=lambda cv: (" - DPR" in cv[0], variants.index(cv[1])))
        steps = sorted({s for key in keys for s in columns[key]})
        rows = [[_step_label(step, kept, variants)] + [columns[key].get(step, "–") for key in keys] for step in steps]
        header = ["step"] + [f"{_short('dpr_' + v)}: {m}" for m, v in keys]
        out.append(md_table(header, rows, ["l"] + ["r"] * (len(header) - 1)))
    return "\n".join(out)


def render_fine_tuning(metrics_dir: Path, curve: Mapping | None, mech_curve: Mapping | None) -> str:
    """The training runs, then the two curves where the profile has them."""
    runs = training_runs(metrics_dir)
    parts = [render_training_runs(runs), render_curve(curve or {}, runs),
             render_mechanism_curve(mech_curve or {}, runs)]
    return "\n".join(p for p in parts if p)
