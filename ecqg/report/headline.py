"""The headline figures (``headline.json``, ``dvc metrics show``) and two profiles side by side."""

from __future__ import annotations

from pathlib import Path

from ecqg.report import evidence
from ecqg.report.claim import claim_rows
from ecqg.report.evidence import claim_inputs
from ecqg.report.markdown import load_metrics, md_table, num, subtree

HEADLINE_SYSTEMS = {"bm25": "bm25", "dpr_baseline": "dpr", "dpr_uncon": "uncon", "dpr_mixed": "mixed"}
# The README's answer: NQ Top-1 of the paper's three systems, their differences over training runs and, where both
# arms ran more than once, the verdict (one comparison, one verdict: the claims table's row).
HEADLINE_PAIRS = {("dpr_uncon", "dpr_baseline"): "uncon-dpr", ("dpr_mixed", "dpr_uncon"): "mixed-uncon",
                  ("dpr_mixed", "dpr_baseline"): "mixed-dpr"}


def headline(metrics_dir: str | Path, full: bool = False) -> dict:
    """The figures a reader looks at first, the README's headline rows, flat so ``dvc metrics show`` prints them on
    one screen: ``top1.<system>`` (NQ Top-1 of DPR, UnCon-DPR, Mixed-DPR), ``top1.<a>-<b>`` (the claims table's
    difference, over training runs where the arms have them) and ``verdict.<a>-<b>`` (its verdict; absent where an
    arm ran once, as in mini: no verdict there). ``full`` (for ``--compare``) gives instead every system's Top-1 /
    Top-5, every paired difference with its question-level p (``p<k>.``) and, where both arms ran more than once,
    its p over runs (``rp<k>.``), every system's PSI and moved-sentence gap, attention entropy, later-sentence share
    and the Table 1 probe gap."""
    metrics_dir = Path(metrics_dir)
    return _full(metrics_dir) if full else _readme_rows(metrics_dir)


def _readme_rows(metrics_dir: Path) -> dict:
    inputs = claim_inputs(metrics_dir)
    out: dict = {}
    for system in ("dpr_baseline", "dpr_uncon", "dpr_mixed"):
        node = subtree(inputs["table3"], "accuracy", system, "nq", "all") or {}
        if node.get("top1") is not None:
            out[f"top1.{HEADLINE_SYSTEMS[system]}"] = node["top1"]
    rows = {(r["pair"], r["k"]): r for r in claim_rows(inputs) if r.get("pair")}
    for pair, short in HEADLINE_PAIRS.items():
        row = rows.get((pair, 1))
        if row is None:
            continue
        out[f"top1.{short}"] = row["diff"]
        if row["runs"] is not None:
            out[f"verdict.{short}"] = row["verdict"] + (" (fragile)" if row.get("fragile") else "")
    return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in out.items()}


def _full(metrics_dir: Path) -> dict:
    out: dict = {}
    table3 = load_metrics(metrics_dir, "table3.json") or {}
    for system in table3.get("accuracy", {}):
        node = table3["accuracy"][system].get("nq", {}).get("all", {})
        for k in (1, 5):
            if node.get(f"top{k}") is not None:
                out[f"top{k}.{HEADLINE_SYSTEMS.get(system, system)}"] = node[f"top{k}"]
    for pair in table3.get("paired", {}):
        node = table3.get("paired", {}).get(pair, {}).get("nq", {}).get("all", {})
        short = pair.replace("dpr_", "").replace("_minus_", "-").replace("baseline", "dpr")
        a, _, b = pair.partition("_minus_")
        for k in (1, 5):
            if node.get(f"top{k}_diff") is not None:
                out[f"top{k}.{short}"] = node[f"top{k}_diff"]
                over_runs = evidence.between_models(
                    *(evidence.arm(table3["accuracy"].get(s, {}).get("nq", {}).get("all"), f"top{k}") for s in (a, b)),
                    node, f"top{k}", f"top{k}")
                out[f"p{k}.{short}"] = node[f"top{k}_p"]
                if over_runs is not None:          # both arms trained more than once: the p a verdict reads
                    out[f"rp{k}.{short}"] = over_runs.p
    mech = load_metrics(metrics_dir, "mechanism.json") or {}
    for system, node in mech.get("position", {}).get("psi", {}).items():
        if "_minus_" not in system and node.get("top5") is not None:
            out[f"psi.{HEADLINE_SYSTEMS.get(system, system)}"] = node["top5"]
    for system, node in mech.get("moved_sentence", {}).get("systems", {}).items():
        out[f"gap.{HEADLINE_SYSTEMS.get(system, system)}"] = node.get("gap")
    comparison = load_metrics(metrics_dir, "encoder_comparison.json") or {}
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
        rows.append([f"`{key}`", num(va, 3) if va is not None else "–", num(vb, 3) if vb is not None else "–",
                     num(diff, 3, signed=True) if diff is not None else "–"])
    return md_table(["figure", f"`{a}`", f"`{b}`", "B - A"], rows)
