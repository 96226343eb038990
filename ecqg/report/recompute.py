"""Every claims-table and dose-curve row of a profile, recomputed from its committed files alone.

    python -m ecqg.report.recompute results/replicates
    python -m ecqg.report.recompute results/replicates --json rows.json

Why: a reviewer should be able to check every interval without running a stage. This reads
``results/<profile>/evidence/`` (first-hit ranks and per-passage values of every run, ``ecqg.analysis.run_evidence``)
and the committed metrics, applies the rule the tables print (``ecqg.report.claims_table.caption``) and prints one line per
row: the comparison, how the arms pair, runs per arm, the difference with its 95% interval over runs, Holm's
adjusted p within the row's family, on the deciding test's own scale at the row's Holm level the smallest significant
difference, the 80%-power detectable effect and the power at the paper's effect (as printed / translated to this
accuracy level), the verdict, and the verdict under each defensible test where they disagree (fragile). Rows the per-run
files cannot give (a profile committed before they existed) are computed from the summaries and marked so.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from ecqg.report.claim import claim_rows
from ecqg.report.claims_table import test_text
from ecqg.report.dose import dose_rows, full_set_size
from ecqg.report.evidence import claim_inputs

COLUMNS = ("family", "row", "test", "runs", "diff", "low", "high", "p_holm", "alpha_holm", "significant_from",
           "detectable", "detectable_low", "detectable_high", "paper", "paper_translated", "power_at_paper",
           "power_at_translated", "verdict", "fragile", "verdicts_by_test", "source")


def rows(metrics_dir: Path) -> list[dict]:
    """The claims rows, then the dose curve's own rows (its fine-tuned rows are claims rows), as flat records."""
    inputs = claim_inputs(metrics_dir)
    claims = claim_rows(inputs)
    dose = dose_rows(inputs["table3"] or {}, full_set_size(inputs["mixing"]), inputs["evidence"], claims) \
        if inputs["table3"] else []
    out = []
    for r in claims + [d for d in dose if d["stage"] != "fine-tuned"]:
        size = f"{r['size']:,}" if r.get("size") else "the full set"
        name = r.get("claim") or f"dose {size}: {r['label']}, Top-{r['k']}"
        low, high = r.get("detectable_range") or (None, None)
        out.append({"family": r["family"], "row": name, "test": test_text(r),
                    "runs": " v ".join(map(str, r.get("arm_runs", ()))), "diff": r["diff"],
                    "low": r["low"] if r["runs"] is not None else None,
                    "high": r["high"] if r["runs"] is not None else None, "p_holm": r["p_holm"],
                    "alpha_holm": r["alpha_holm"], "significant_from": r.get("significant_from"),
                    "detectable": r["detectable"], "detectable_low": low, "detectable_high": high,
                    "paper": r.get("paper"), "paper_translated": r.get("paper_translated"),
                    "power_at_paper": r.get("power_at_paper"), "power_at_translated": r.get("power_at_translated"),
                    "verdict": r["verdict"], "fragile": bool(r.get("fragile")),
                    "verdicts_by_test": r.get("verdicts_by_test") or {}, "source": r.get("source", "summaries")})
    return out


def _cell(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if isinstance(value, float) else str(value)


def render(records: list[dict]) -> str:
    lines = []
    for family in dict.fromkeys(r["family"] for r in records):
        lines.append(f"== {family} (Holm within it)")
        for r in (x for x in records if x["family"] == family):
            interval = (f"{_cell(r['diff'])} [{_cell(r['low'])}, {_cell(r['high'])}]" if r["low"] is not None
                        else f"{_cell(r['diff'])} (no interval over runs)")
            detectable = (f"significant from {r['significant_from']:.3f}, detectable {r['detectable']:.3f} "
                          f"[{r['detectable_low']:.3f}, {r['detectable_high']:.3f}] at alpha {r['alpha_holm']:.4f}"
                          if r["detectable"] is not None else "detectable -")
            p = f"{r['p_holm']:.4f}" if r["p_holm"] is not None else "-"
            power = "" if r.get("power_at_paper") is None else f"; power at the paper's {r['paper']:+g}: " \
                f"{100 * r['power_at_paper']:.0f}%" + ("" if r.get("power_at_translated") is None else
                                                       f", at its translation {r['paper_translated']:+.2f}: "
                                                       f"{100 * r['power_at_translated']:.0f}%")
            fragile = ("; FRAGILE: " + ", ".join(f"{k}: {v}" for k, v in r["verdicts_by_test"].items())
                       if r.get("fragile") else "")
            lines.append(f"{r['row']}\n    {r['test']}; runs {r['runs']}; {interval}; p (Holm) {p}; {detectable}"
                         f"{power}; {r['verdict']}{fragile}; from {r['source']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ecqg.report.recompute", description=__doc__.split("\n\n")[0],
                                     epilog="Reads results/<profile>/evidence/ and the committed metrics; runs no "
                                            "stage and needs no stage output.")
    parser.add_argument("results", type=Path, help="a profile's results folder, e.g. results/replicates")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    if not (args.results / "table3.json").is_file():
        print(f"error: {args.results}: no table3.json (not a profile's results folder)", file=sys.stderr)
        return 2
    records = rows(args.results)
    print(render(records))
    if args.json:
        args.json.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
