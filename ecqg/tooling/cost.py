"""What a profile's DAG costs on GPUs, printed: ``python -m ecqg.tooling.cost --profile paper --gpus 1 8 [--write-doc]``.

The numbers are :mod:`ecqg.tooling.cost_model`'s (measured rates times counted work); this module says them: the
DAG's table and the three systems', how each count and rate was obtained, the corrections, what is left out, the
training MFU, the what-ifs at a training MFU goal, and the block of docs/paper_profile.md between its markers
(``tests/test_cost.py`` fails when that block differs from what the command prints).
"""

from __future__ import annotations

import sys
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ecqg.core import cli, config
from ecqg.tooling.cost_model import (
    BERT_BASE_PARAMS, CPU_STAGES, DOC, END, ESTIMATE_MFU, ESTIMATED, FAISS_EFFICIENCY, GPU_HOURS_GOALS,
    H100_BF16_FLOPS, HOST_CORES, QUERY_TOKENS, REHEARSAL_FILE, ROOT, ROWS, START, TRAINING_MFU_GOAL, UNITS,
    WHAT_IF_MFU, Model, Rate, Work, _sum, at_training_goal, benchmark_tokens, build, critical_path, example_tokens,
    read_result, three_systems, unmeasured)
from ecqg.tooling.rate_code import CURRENT, TIMED_CODE


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """A markdown table (ecqg.report.markdown's, without importing the report package, which imports torch)."""
    rule = ["---:" if a == "r" else "---" for a in align]
    return "\n".join("| " + " | ".join(map(str, r)) + " |" for r in [header, rule, *rows]) + "\n"


def _span(lo: float, hi: float, digits: int = 1) -> str:
    a, b = f"{lo:,.{digits}f}", f"{hi:,.{digits}f}"
    return a if a == b else f"{a}-{b}"


def _gpus(n: int) -> str:
    return f"{n} GPU{'s' if n > 1 else ''}"


def _rate_text(rate: Rate) -> str:
    measured, unit = _span(rate.low, rate.high), f"{UNITS[rate.key]}/s"
    if rate.key in ESTIMATED:
        share, peak = ESTIMATED[rate.key]
        return f"{share:.0%} of {peak / 1e12:.0f} TFLOP/s over {rate.field} = {_span(rate.low, rate.high, 0)} {unit}"
    return f"{measured} {unit}" if rate.factor == 1.0 else (
        f"{measured} x {rate.factor:.3f} = {_span(*rate.corrected, 0)} {unit}")


def _work_text(works: Sequence[Work], unit: str) -> str:
    """``17 x 21,015,324 = ...`` or ``02 UnCon 5,000,000 + ... = ...``."""
    parts = [" ".join(p for p in (label, f"{k} x" if k > 1 else "", f"{count:,.0f}") if p)
             for (label, count), k in Counter((w.label, w.count) for w in works).items()]
    total = f"{sum(w.count for w in works):,.0f} {unit}"
    return total if len(works) == 1 else f"{' + '.join(parts)} = {total}"


def table(model: Model, names: Sequence[str], gpus: Sequence[int]) -> str:
    """GPU-hours and wall-clock hours (stages one after another) per stage kind, over the stages ``names``."""
    works = [w for n in names for w in model.works[n]]
    rows, total = [], [(0.0, 0.0)] * (1 + len(gpus))
    for row, key in ROWS.items():
        mine = [w for w in works if w.row == row]
        if mine:
            figures = [_sum(model.hours(w) for w in mine)] + [_sum(model.wall(w, n) for w in mine) for n in gpus]
            total = [(a[0] + b[0], a[1] + b[1]) for a, b in zip(total, figures)]
            rows.append([row, len({w.stage for w in mine}), _work_text(mine, UNITS[key]),
                         _rate_text(model.rates[key])] + [_span(*f) for f in figures])
    if model.host_hours:
        host = (model.host_hours, model.host_hours)
        total = [total[0]] + [(a[0] + host[0], a[1] + host[1]) for a in total[1:]]
        rows.append([f"CPU stages (host side, {HOST_CORES} cores)", len([n for n in names if n.startswith(CPU_STAGES)]),
                     f"`{REHEARSAL_FILE}` projected to {model.sizes.passages:,} passages", "measured on 2 cores, "
                     "projected", "-"] + [_span(*host)] * len(gpus))
    rows.append(["**total**", len(names), "", ""] + [f"**{_span(*f)}**" for f in total])
    header = ["stage kind", "stages", "work", "rate on one H100, corrected", "GPU-hours"] + [
        f"wall h, {_gpus(n)}" for n in gpus]
    return md_table(header, rows, "lrlr" + "r" * (1 + len(gpus)))


def concurrent(model: Model, names: Sequence[str], gpus: Sequence[int]) -> str:
    """The lower bound when independent stages run side by side, one GPU each, none split."""
    path, total = [critical_path(model, names, end) for end in (0, 1)], _sum(model.stage_hours(n) for n in names)
    bounds = [f"{_span(*(max(p, t / n) for p, t in zip(path, total)))} h on {_gpus(n)}" for n in gpus]
    return (f"Run side by side instead, independent stages one GPU each and none split (no scaling assumed), they "
            f"would take at least {', '.join(bounds)}: the longest chain of dvc.yaml's deps ({_span(*path)} h) or "
            "the GPU-hours / N, whichever is longer.")


def counts(model: Model) -> list[str]:
    """How each row's work was counted: the table's counts as formulas."""
    out = []
    for row in ROWS:
        hows = dict.fromkeys(f"{w.label}: {w.how}" if w.label else w.how
                             for ws in model.works.values() for w in ws if w.row == row)
        out += [f"{row}: {'; '.join(hows)}"] if hows else []
    return out


def goal_check(model: Model, gpus: int = 8, mfu: float = TRAINING_MFU_GOAL) -> str:
    """The what-if of :func:`at_training_goal` at ``mfu`` for the DAG and its three-system preset, against the
    goals; the wall figure with the host side."""
    parts, largest, missed = [], None, []
    for m in filter(None, (model, three_systems(model))):
        what = at_training_goal(m, mfu)
        works = [w for n in what.dag for w in what.works[n]]
        hours, wall = _sum(what.hours(w) for w in works), _sum(what.wall(w, gpus) for w in works)
        wall = (wall[0] + m.host_hours, wall[1] + m.host_hours)
        goal = GPU_HOURS_GOALS.get(m.profile)
        missed += [m.profile] if goal is not None and hours[1] > goal else []
        parts.append(f"`{m.profile}` {_span(*hours)} GPU-hours ({_span(*wall)} h wall on {_gpus(gpus)}, the host "
                     "side included)" + (f" against a goal of {goal}" if goal else ""))
        if largest is None:
            by_row = {row: _sum(what.hours(w) for w in works if w.row == row) for row in ROWS}
            largest = max(by_row.items(), key=lambda kv: kv[1][1])
    goal_rates = at_training_goal(model, mfu).rates
    rates = "; ".join(f"{label} {goal_rates[key].low:,.0f} examples/s"
                      for label, key in (("fine-tuning", "finetune"), ("pre-training", "pretrain")))
    return (f"**Training at {mfu:.0%} MFU** (a what-if, not a measurement): with fine-tuning and pre-training at "
            f"{mfu:.0%} MFU ({rates}, by the MFU formula above) and every other rate as above, "
            f"{'; '.join(parts)}. The largest row would then be {largest[0]} at {_span(*largest[1])} GPU-hours. "
            + (f"Still above the GPU-hour goal: {', '.join(f'`{m}`' for m in missed)}."
               if missed else "Every DAG would then be within its GPU-hour goal."))


def mfu(model: Model) -> str:
    """Model FLOPs utilisation of training, at the measured rates and at the corrected ones."""
    bench = benchmark_tokens()
    run = {key: read_result(model.rates[key].files[0])[key] for key in ("finetune", "pretrain")}
    parts = []
    for key, label, measured_hn in (("finetune", "fine-tuning", run["finetune"][0]["hard_negatives"]),
                                    ("pretrain", "pre-training", run["pretrain"]["hard_negatives"])):
        r = model.rates[key]
        measured, profile = QUERY_TOKENS + (1 + measured_hn) * bench, example_tokens(model, key)
        share = [6 * BERT_BASE_PARAMS * x * t / H100_BF16_FLOPS * 100 for x, t in (
            (r.low, measured), (r.high, measured), (r.corrected[0], profile), (r.corrected[1], profile))]
        parts.append(f"{label} {_span(*share[:2])}% as measured ({measured:.0f} tokens per example), "
                     f"{_span(*share[2:])}% at the corrected rate ({profile:.0f} tokens)")
    return (f"**MFU** of training, 6 x {BERT_BASE_PARAMS / 1e6:.1f}M non-embedding parameters (bert-base's 110M "
            "less its embeddings, whose lookup is no matmul; each token goes through "
            f"one of the two towers) x tokens/s over {H100_BF16_FLOPS / 1e12:.0f} TFLOP/s (an H100's dense bf16 "
            f"peak), with {QUERY_TOKENS} tokens per question (assumed) + (1 + hard negatives) x the passage's tokens "
            f"per example, padding and GradCache's second forward not counted: {'; '.join(parts)}.")


def rate_code_note(model: Model) -> str:
    """Per measured rate, whether the code it timed is today's (``ecqg.tooling.rate_code``), and the share of the
    DAG's GPU-hours priced from rates that are not."""
    measured = [r for r in model.rates.values() if r.key not in ESTIMATED]
    hours = {key: 0.0 for key in model.rates}
    for works in model.works.values():
        for work in works:
            hours[ROWS[work.row]] += sum(model.hours(work)) / 2
    total = sum(hours.values())
    old = sum(hours[r.key] for r in measured if r.code != CURRENT)
    cells = "; ".join(f"{r.key} ({r.date}): {r.code}" for r in measured)
    folders = ", ".join(f"`{f}`" for f in sorted({f for group in TIMED_CODE.values() for f in group}))
    share = (f" Rates not of today's code price {old:.0f} of the DAG's {total:.0f} GPU-hours (mid-range, "
             f"{100 * old / total:.1f}%): rerun `bench/gpu_check.py` on a GPU to reprice them."
             if total and old else "")
    return (f"**Code of the rates**: each measured rate against a digest of the code it timed ({folders}; "
            f"`bench/gpu_check.py` records it since 5 Dec 2026): {cells}.{share}")


def render(model: Model, gpus: Sequence[int]) -> str:
    """The markdown block: the DAG's table, the three systems' table, counts, sources, corrections, what is left
    out, MFU."""
    p, names, three = model.settings, list(model.dag), three_systems(model)
    command = f"python -m ecqg.tooling.cost --profile {model.profile} --gpus {' '.join(map(str, gpus))}"
    sources: dict[tuple[str, ...], list[str]] = {}
    for r in model.rates.values():
        if r.key not in ESTIMATED:
            sources.setdefault(r.files, []).append(f"`{r.field}`")
    dates = sorted({r.date for r in model.rates.values() if r.date})
    lines = [
        f"**GPU-hours**, generated by `{command} --write-doc` (`tests/test_cost.py` fails when this block differs "
        f"from what `{command}` prints): each figure is a rate times a count. Counts: the "
        f"{len(names)} stages of the DAG expanded for `params/{model.profile}.yaml` (training seeds "
        f"{p.dpr.seeds}), its sizes, {model.sizes.passages:,} passages (`{model.sizes.corpus}`) and "
        f"{model.sizes.train_examples:,} gold training records (`{Path(p.data.train_gold).name}`). Rates: "
        f"the newest committed device measurement of each (one H100 80GB, {', '.join(dates)}), random-weight models "
        "of the paper's sizes (`bench/results/README.md`), the range of the runs, corrected to the profile as listed "
        "below. Rows marked *estimated* were not measured: their rate is the share of the device's peak stated in the "
        f"row over their FLOPs per unit (`ecqg/tooling/cost.py`: {ESTIMATE_MFU:.0%} of bf16 for models, "
        f"{FAISS_EFFICIENCY:.0%} of float32 for FAISS's GEMMs). The host side is the scale rehearsal's projection of "
        f"the CPU stages to this corpus on {HOST_CORES} cores (`bench/scale_rehearsal.py`'s table in "
        "docs/paper_profile.md): in the "
        "wall columns, not in the GPU-hours.", "",
        "**The whole DAG**", "", table(model, names, gpus), "",
        "`dvc repro` runs the stages one after another: a wall column adds up each stage's time, its GPU-hours / N "
        "on N GPUs where its work splits over `processes: N` (corpus encoding, sampling, the reader, and training, "
        "whose N processes gather their in-batch negatives; near-linear scaling assumed, not measured), its "
        "GPU-hours where it does not (01's attention study, 02's generator trainings, FAISS on device 0, 03's "
        "hardness encoding, in one process), and the host side. " + concurrent(model, names, gpus), "",
    ]
    if three is not None:
        lines += [
            f"**The paper's three systems** (`make profile P={three.profile}`: DPR, UnCon-DPR and Mixed-DPR, with "
            "01-04, 06, 07 and their BM25 hybrids; no Poly-DPR, ETM / RSM or TempQG-DPR, so no pseudo-query or TempQG "
            f"set): its own DAG of {len(three.dag)} stages, at the same sizes and rates.", "",
            table(three, list(three.dag), gpus), "", concurrent(three, list(three.dag), gpus), ""]
    lines += ["**Counts**:", ""]
    lines += [f"- {c}" for c in counts(model)]
    lines += ["", "**Rates** read: " + "; ".join(f"{', '.join(fields)} from {' and '.join(f'`{f}`' for f in files)}"
                                                 for files, fields in sources.items()) + ".", "",
              rate_code_note(model), "",
              "**Corrections** to the benchmark's conditions:", ""]
    lines += [f"- {note}" for note in model.corrections]
    lines += ["", "**Left out** of the totals, neither measured nor estimated, so the totals are lower bounds:", ""]
    lines += [f"- {item}" for item in unmeasured(p.mrc, p.tempqg)] + ["", mfu(model)]
    lines += [block for m in WHAT_IF_MFU for block in ("", goal_check(model, mfu=m))]
    return "\n".join(_wrap(line) for block in lines for line in block.rstrip("\n").split("\n")) + "\n"


def _wrap(line: str) -> str:
    """Prose at the docs' 120 columns (a list item's continuation indented); table rows as they are."""
    if line.startswith("|") or not line:
        return line
    return textwrap.fill(line, 120, subsequent_indent="  " if line.startswith("- ") else "",
                         break_long_words=False, break_on_hyphens=False)


def write_doc(block: str, doc: Path = DOC, markers: tuple[str, str] = (START, END)) -> None:
    """Replace the block between the ``markers`` (the cost table's by default) of ``doc``."""
    first, last = markers
    head, start, rest = doc.read_text(encoding="utf-8").partition(first)
    _, end, tail = rest.partition(last)
    if not (start and end):
        raise ValueError(f"{doc}: no {first} ... {last} markers to write the table between")
    doc.write_text(f"{head}{first}\n{block}{last}{tail}", encoding="utf-8")


def doc_block(doc: Path = DOC) -> str:
    """The block between the cost markers of ``doc`` (what :func:`write_doc` wrote)."""
    return doc.read_text(encoding="utf-8").partition(START)[2].partition(END)[0].removeprefix("\n")


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.tooling.cost", __doc__)
    parser.add_argument("--profile", default="paper", choices=config.PROFILES)
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 8], help="wall-clock hours on these GPU counts")
    parser.add_argument("--passages", type=int, help="corpus passages (known for psgs_w100.tsv)")
    parser.add_argument("--train-examples", type=int, help="gold training records (known for nq-train.json)")
    parser.add_argument("--passage-tokens", type=float, help="mean WordPiece tokens per passage of the corpus")
    parser.add_argument("--by-stage", action="store_true", help="also list every stage's GPU-hours")
    parser.add_argument("--write-doc", action="store_true", help=f"replace the table in {DOC.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    try:
        model = build(args.profile, args.passages, args.train_examples, args.passage_tokens)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    block = render(model, args.gpus)
    print(block)
    if args.by_stage:
        print(md_table(["stage", "GPU-hours"], [[n, _span(*model.stage_hours(n), 2)] for n, w in model.works.items()
                                                if w], "lr"))
    if args.write_doc:
        write_doc(block)
        print(f"written: {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
