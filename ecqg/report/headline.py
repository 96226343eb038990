"""The headline figures (``headline.json``, ``dvc metrics show``) and two profiles side by side."""

from __future__ import annotations

from pathlib import Path

from ecqg.report import evidence
from ecqg.report.markdown import load_metrics, md_table, num



HEADLINE_SYSTEMS = {"bm25": "bm25", "dpr_baseline": "dpr", "dpr_uncon": "uncon", "dpr_mixed": "mixed"}


def headline(metrics_dir: str | Path, full: bool = False) -> dict:
    """The figures a reader looks at first, flat and short-keyed so ``dvc metrics show`` prints them on one screen:
    NQ Top-5 of BM25 / DPR / UnCon / Mixed, Mixed - DPR at Top-5 with its p-value, PSI at Top-5 and the
    moved-sentence gap of DPR and Mixed. ``full`` adds Top-1, the other paired differences, every system's PSI and
    gap, attention entropy, later-sentence share and the Table 1 probe gap (for ``--compare``).

    Keys: ``top5.<system>``; ``top5.mixed-dpr`` (the difference, points) with, where both arms were trained more
    than once, ``rp5.mixed-dpr`` (its p-value over training runs, :mod:`ecqg.report.evidence`, the one a verdict
    reads), else ``p5.mixed-dpr`` (its p-value over questions; ``full`` gives both);
    ``psi.<system>`` (PSI at Top-5); ``gap.<system>`` (moved-sentence gap). Short, because ``dvc metrics show`` sizes
    its columns by the keys (the smoke test holds the table within 180 characters)."""
    metrics_dir = Path(metrics_dir)
    out: dict = {}
    table3 = load_metrics(metrics_dir, "table3.json") or {}
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
        a, _, b = pair.partition("_minus_")
        for k in ((1, 5) if full else (5,)):
            if node.get(f"top{k}_diff") is not None:
                out[f"top{k}.{short}"] = node[f"top{k}_diff"]
                over_runs = evidence.between_models(
                    *(evidence.arm(table3["accuracy"].get(s, {}).get("nq", {}).get("all"), f"top{k}") for s in (a, b)),
                    node, f"top{k}", f"top{k}")
                if over_runs is None or full:      # an arm trained once: the question-level p is all there is
                    out[f"p{k}.{short}"] = node[f"top{k}_p"]
                if over_runs is not None:          # both arms trained more than once: the p a verdict reads
                    out[f"rp{k}.{short}"] = over_runs.p
    mech = load_metrics(metrics_dir, "mechanism.json") or {}
    keep = (lambda s: "_minus_" not in s) if full else (lambda s: s in ("dpr_baseline", "dpr_mixed"))
    for system, node in mech.get("position", {}).get("psi", {}).items():
        if keep(system) and node.get("top5") is not None:
            out[f"psi.{HEADLINE_SYSTEMS.get(system, system)}"] = node["top5"]
    for system, node in mech.get("moved_sentence", {}).get("systems", {}).items():
        if keep(system):
            out[f"gap.{HEADLINE_SYSTEMS.get(system, system)}"] = node.get("gap")
    if full:
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
