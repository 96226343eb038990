"""The claims table as the pages print it: its caption (the rule applied, the family, what power means), its cells,
the fragile rows, and the short forms the README's answer, the dose curve and the recompute listing share.

Why apart from :mod:`ecqg.report.claim`: that module decides each row (what the paper says, where ours is read, the
interval, Holm, the verdict); this one only says it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ecqg.analysis.stats import ALPHA, ONE_RUN, POWER, verdict
from ecqg.report.claim import CLAIMS_FAMILY, claim_rows
from ecqg.report.markdown import interval_text, md_table, num, pval
from ecqg.report.questions import what_varies


def claim_intro(profile: str) -> str:
    return f"The paper's claims, checked on the `{profile}` profile:"


VERDICTS = ("holds", "overshoots", "reversed", "not shown", ONE_RUN)


def counts(rows: list[dict]) -> dict[str, int]:
    return {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}


def runs_text(row: Mapping) -> str:
    return " v ".join(str(n) for n in row.get("arm_runs", ())) or "–"


def test_text(row: Mapping) -> str:
    """How the row's arms were compared: paired by seed, unpaired, against one model, one model over its runs;
    "bootstrap" where the hierarchical bootstrap was the wider; "summaries" where no per-run files exist."""
    interval = row.get("runs")
    if interval is None:
        return "–"
    kind, _, how = interval.method.partition(":")
    text = kind if how else "t over runs"
    text += ", bootstrap" if "bootstrap" in interval.method else ""
    return text + (" (summaries)" if row.get("source") == "summaries" else "")


def detectable_text(row: Mapping, digits: int) -> str:
    if row.get("detectable") is None:
        return "–"
    low, high = row.get("detectable_range") or (None, None)
    spread = f" [{num(low, digits)}, {num(high, digits)}]" if low is not None and high != low else ""
    return num(row["detectable"], digits) + spread


def power_text(row: Mapping) -> str:
    """``6% / 2%``: power at the paper's effect as printed and as translated to this accuracy level."""
    cells = [f"{100 * row[key]:.0f}%" if row.get(key) is not None else "–"
             for key in ("power_at_paper", "power_at_translated")]
    return " / ".join(cells) if cells[1] != "–" else cells[0]


def paper_text(row: Mapping) -> str:
    """The paper's value, and beside it (Top-k rows) the same relative error reduction at this accuracy level."""
    if row["paper"] is None:
        return "prediction"
    text = num(row["paper"], 2 if row["unit"] == "nats" else 1, signed=True)
    if row.get("paper_translated") is not None:
        text += f" (here {num(row['paper_translated'], 2, signed=True)})"
    return text


def verdict_text(row: Mapping) -> str:
    return row["verdict"] + (" · fragile" if row.get("fragile") else "")


def fragile_note(rows: list[dict]) -> str:
    """The rows whose verdict another defensible test reverses or confirms otherwise, each with every test's."""
    fragile = [r for r in rows if r.get("fragile")]
    if not fragile:
        return ""
    lines = [f"- {r['claim']}: " + "; ".join(f"{name}: {v}" for name, v in r["verdicts_by_test"].items())
             + f" (printed: {r['verdict']})" for r in fragile]
    return ("\n*Fragile* verdicts: another defensible test of the same runs (each Holm-corrected over this family; "
            "after the slash, the row tested alone, uncorrected) decides otherwise, so the verdict rests on the "
            "choice of test or of correction, not on the data alone:\n\n"
            + "\n".join(lines) + "\n")


def caption(tested: int, family: str, with_summaries: bool) -> str:
    """What every claims-like table says above itself: the rule applied, the family, what power means."""
    return ("Each row is a difference with its 95% interval **over training runs** (runs per arm in `runs`; `test` "
            "says how the arms were compared: *paired by seed* where both arms ran with the same seeds, which fix "
            "the gold sub-sample, the held-out split and the batch order in every arm, so the interval is over the "
            "per-seed differences; *against one model* where one arm is a fixed model, e.g. the untrained base; "
            "*unpaired* (Welch) otherwise; *one model* for one system's measure over its runs). The interval is the "
            "t-interval over the runs with the questions' (or passages') noise added (Satterthwaite's degrees of "
            "freedom), or the hierarchical bootstrap over runs then questions, whichever is wider (*bootstrap* when it "
            "was); both are computed from the per-run files under `evidence/`"
            + (", except rows marked *(summaries)*, computed from the metrics' means and spreads (t only) for lack "
               "of them" if with_summaries else "")
            + f". A row holds or is reversed only when that interval excludes 0 and its p-value, Holm-corrected over "
            f"the {tested} rows of {family} that have such an interval (one family), is below {ALPHA}; \"{ONE_RUN}\" "
            "marks a measure taken on one trained model, which says nothing of training's spread; *fragile*: the "
            "t-interval with the questions' noise, the t over the runs alone and the hierarchical bootstrap, each "
            "Holm-corrected over the family or the row tested alone, do not all give the printed verdict. Power is computed **on the deciding test's own scale** (its standard error "
            "and degrees of freedom) at the level Holm's step-down makes the row face "
            f"({ALPHA} / (m - r) for the r-th smallest p): `significant from`: the smallest difference that test calls "
            f"significant there (every significant row lies beyond it); `detectable`: the difference it finds with "
            f"{POWER:.0%} power, with, in brackets, its range when the runs' sd lies anywhere in its 95% interval (a "
            "handful of runs estimate it loosely); `power`: the chance to find the paper's difference, as printed / "
            "translated to this testbed's accuracy level. `paper (here ...)`: for Top-k rows, the paper's "
            "difference as the same relative error reduction of the comparison's arm B (the paper's arm B "
            "accuracy -> ours); other rows' units do not scale with accuracy. The last interval is the run-averaged "
            "difference resampling questions (or passages) only: it measures the test set's noise, not training's.")


def render_claim(metrics: Mapping, heading: bool = True, rows: list[dict] | None = None) -> str:
    rows = claim_rows(metrics) if rows is None else rows
    if not rows:
        return ""
    n = counts(rows)
    table = []
    for r in rows:
        d = r["digits"]
        over_runs = (interval_text(r["diff"], r["low"], r["high"], d, r["unit"]) if r["runs"] is not None else "–")
        question_level = interval_text(r["q_diff"], r.get("q_low"), r.get("q_high"), d, "")
        if r.get("q_note") and question_level != "–":
            question_level += f"({r['q_note']})"
        significant = "–" if r.get("significant_from") is None else num(r["significant_from"], d)
        table.append([r["claim"], paper_text(r), runs_text(r), test_text(r), str(r["n"] if r["n"] is not None else "–"),
                      over_runs, pval(r["p_holm"]) if r["p_holm"] is not None else "–", significant,
                      detectable_text(r, d), power_text(r), question_level.rstrip(), verdict_text(r)])
    tested = sum(r["runs"] is not None for r in rows)
    summary = (f"Here: {n['holds']} hold, " + (f"{n['overshoots']} overshoot, " if n["overshoots"] else "")
               + f"{n['reversed']} reversed, {n['not shown']} not shown"
               + (f", {n[ONE_RUN]} measured on one run only" if n[ONE_RUN] else "")
               + (f"; {sum(bool(r.get('fragile')) for r in rows)} of the verdicts fragile"
                  if any(r.get("fragile") for r in rows) else "") + ".")
    with_summaries = any(r.get("source") == "summaries" and r["runs"] is not None for r in rows)
    return (("#### The paper's claims, checked\n\n" if heading else "")
            + caption(tested, CLAIMS_FAMILY, with_summaries)
            + (f" {varies}" if (varies := what_varies(metrics.get("mixing"), metrics)) else "")
            + " The paper's values come from its 21M-passage Wikipedia and BERT-base: compare directions; sizes "
            f"only as a scale. Premise rows first. {summary}\n\n"
            + md_table(["the paper's claim", "paper", "runs", "test", "n", "here [95% CI over runs]", "p (Holm)",
                        "significant from", "detectable", "power at paper's", "over questions only [95% CI]",
                        "verdict"], table,
                       ["l", "r", "r", "l", "r", "r", "r", "r", "r", "r", "r", "l"])
            + fragile_note(rows))


def claims_frame(rows: list[dict], notebook: str | None = None, family: bool = True) -> pd.DataFrame:
    """The claims rows as a notebook shows them, one line each, from the rows the page prints (:func:`claim_rows`):
    ``notebook`` keeps the rows that notebook measures; ``family=False`` shows each row tested alone (its own p and
    verdict, no Holm, no power: that is computed at Holm's level) for a notebook that runs before the family's other
    rows exist."""
    out = []
    for r in rows:
        if notebook is not None and r.get("notebook") != notebook:
            continue
        d, interval = r["digits"], r["runs"]
        over_runs = interval_text(r["diff"], r["low"], r["high"], d, r["unit"]) if interval is not None else "–"
        if family:
            p, decided = r["p_holm"], verdict_text(r)
        else:
            p = interval.p if interval is not None else None
            decided = (verdict(interval, p, r["direction"], r.get("overshoot", False)) if interval is not None
                       else r["verdict"])
        questions = interval_text(r["q_diff"], r.get("q_low"), r.get("q_high"), d, "").rstrip()
        row = {"the paper's claim": r["claim"], "paper": paper_text(r), "runs": runs_text(r),
               "here [95% CI over runs]": over_runs,
               ("p (Holm)" if family else "p (alone)"): pval(p) if p is not None else "–"}
        if family:                          # power is computed at the level Holm's step-down sets
            row["power at paper's"] = power_text(r)
        out.append({**row, "over questions only [95% CI]": questions, "verdict": decided})
    return pd.DataFrame(out)
