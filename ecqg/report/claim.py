"""The paper's orderings, each checked against one profile's metrics: which hold, which are reversed, which this run
cannot tell apart from no difference.

Why a table of its own: the claim is spread over five metrics files (Table 3, the attention comparison, the Table 1
probe, the position-bias study, the mechanism slices); a reader asking "does it reproduce?" should not have to
assemble it. Every row is a paired difference (A - B on the same questions or passages) with its 95% bootstrap CI
and p-value, read from the metrics; the paper's values come from the constants the project keeps them in
(``PAPER_TABLE3``, ``encoder_comparison.PAPER``, ``attention_bias.PAPER_POSITION_BIAS``), only to give each row its
direction. A verdict needs p < 0.05 (uncorrected for the number of rows: read the p-values too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ecqg.encoder_comparison import PAPER
from ecqg.pipeline.attention_bias import PAPER_POSITION_BIAS
from ecqg.pipeline.results import PAPER_TABLE3
from ecqg.report.format import md_table, num, pval

ALPHA = 0.05
Getter = Callable[[Mapping], "Mapping | None"]


def _path(tree: Mapping | None, *keys: str) -> Mapping | None:
    for key in keys:
        if not isinstance(tree, Mapping):
            return None
        tree = tree.get(key)
    return tree if isinstance(tree, Mapping) else None


def _table3(pair: str, k: int) -> Getter:
    def get(m: Mapping) -> Mapping | None:
        node = _path(m.get("table3"), "paired", pair, "nq", "all")
        if node is None or node.get(f"top{k}_diff") is None:
            return None
        return {"n": node.get("n"), "diff": node[f"top{k}_diff"], "low": node.get(f"top{k}_ci_low"),
                "high": node.get(f"top{k}_ci_high"), "p": node.get(f"top{k}_p"), "digits": 1}
    return get


def _seed_detail(m: Mapping, branch: str, name: str, measure: str) -> str:
    """Where notebook 06 measured several training seeds: how many agree with the mean's sign (and have p < alpha
    within their seed), since the row's own p-value is the first seed's and resamples passages only."""
    seeds = _path(m.get("comparison"), "seeds")
    across = _path(seeds, branch, name, "across")
    if not seeds or seeds.get("n_seeds", 0) < 2 or across is None or across.get(f"{measure}_mean") is None:
        return ""
    return (f" (first training seed; over {seeds['n_seeds']} seeds: mean {num(across[f'{measure}_mean'], 2, True)}, "
            f"{across.get(f'{measure}_same_sign')} of {seeds['n_seeds']} with its sign, "
            f"{across.get(f'{measure}_significant_same_sign')} of them p < {seeds.get('alpha', ALPHA):g})")


def _attention(pair: str, metric: str, digits: int) -> Getter:
    def get(m: Mapping) -> Mapping | None:
        node = _path(m.get("comparison"), "attention", "paired", pair)
        if node is None or node.get(f"{metric}_diff") is None:
            return None
        return {"n": node.get(f"{metric}_n"), "diff": node[f"{metric}_diff"], "low": node.get(f"{metric}_ci_low"),
                "high": node.get(f"{metric}_ci_high"), "p": node.get(f"{metric}_p"), "digits": digits,
                "detail": _seed_detail(m, "attention_paired", pair, metric)}
    return get


def _probe(system: str) -> Getter:
    def get(m: Mapping) -> Mapping | None:
        node = _path(m.get("comparison"), "table1_probe", system)
        if node is None or node.get("difference") is None:
            return None
        return {"n": node.get("n_passages"), "diff": node["difference"], "low": node.get("difference_ci_low"),
                "high": node.get("difference_ci_high"), "p": node.get("difference_p"), "digits": 2,
                "detail": _seed_detail(m, "table1_probe", system, "difference")}
    return get


def _position_bias(system: str, key: str) -> Getter:
    """Stage 01's share (of passages) minus the 50% of no bias; a CI, no p-value (the verdict reads the CI)."""
    def get(m: Mapping) -> Mapping | None:
        node = _path(m.get("bias"), "encoders", system)
        if node is None or node.get(key) is None:
            return None
        ci = node.get(f"{key}_ci") or [None, None]
        shift = (lambda x: None if x is None else 100 * x - 50)
        return {"n": node.get("n_passages"), "diff": shift(node[key]), "low": shift(ci[0]), "high": shift(ci[1]),
                "p": None, "digits": 1}
    return get


def _moved_sentence(system: str, reference: str) -> Getter:
    """The paired difference A - B of front - end gaps. The prediction is that A's gap lies nearer 0 than B's: the
    difference must point against B's gap (its ``direction``) without carrying A past 0 to a larger gap on the other
    side (``overshoot``); both gaps go into the row's text, since the difference alone cannot tell."""
    def get(m: Mapping) -> Mapping | None:
        moved = _path(m.get("mechanism"), "moved_sentence")
        node = _path(moved, "paired", f"{system}_minus_{reference}")
        a, b = _path(moved, "systems", system), _path(moved, "systems", reference)
        if node is None or a is None or b is None or node.get("gap") is None or not b.get("gap") \
                or a.get("gap") is None:
            return None
        return {"n": node.get("n"), "diff": node["gap"], "low": node.get("ci_low"), "high": node.get("ci_high"),
                "p": node.get("p"), "digits": 3, "direction": -1.0 if b["gap"] > 0 else 1.0,
                "overshoot": abs(a["gap"]) >= abs(b["gap"]),
                "detail": f" (gaps: {num(b['gap'], 3, signed=True)} -> {num(a['gap'], 3, signed=True)})"}
    return get


def _entity_split(pair: str, split: str, k: int) -> Getter:
    def get(m: Mapping) -> Mapping | None:
        node = _path(m.get("mechanism"), "entity_attention", "paired", pair, split)
        if node is None or node.get(f"top{k}_diff") is None:
            return None
        return {"n": node.get("n"), "diff": node[f"top{k}_diff"], "low": node.get(f"top{k}_ci_low"),
                "high": node.get(f"top{k}_ci_high"), "p": node.get(f"top{k}_p"), "digits": 1}
    return get


def _paper_table3(a: str, b: str, k: int) -> float:
    top = PAPER_TABLE3[(PAPER_TABLE3.dataset == "nq") & (PAPER_TABLE3.subset == "all") & (PAPER_TABLE3.k == k)]
    value = dict(zip(top.system, top.paper_accuracy))
    return round(value[a] - value[b], 2)


def _paper_entropy(a: str, b: str) -> float:
    return round(PAPER["entropy"][a] - PAPER["entropy"][b], 2)


def _paper_share_over_half(key: str) -> float:
    """The paper's position-bias share as points above the 50% of no bias."""
    return round(100 * PAPER_POSITION_BIAS[key] - 50, 1)


_PROBE = PAPER["table1_probe"]["dpr_baseline"]
# (what the paper says, the paper's value with its sign (None: a prediction, direction +), where ours is read).
CLAIMS: tuple[tuple[str, float | None, str, Getter], ...] = (
    *((f"Table 3, NQ Top-{k}: {name} > 0", _paper_table3(a, b, k), "points", _table3(f"{a}_minus_{b}", k))
      for k in (1, 5)
      for a, b, name in (("dpr_uncon", "dpr_baseline", "UnCon-DPR - DPR"),
                         ("dpr_mixed", "dpr_uncon", "Mixed-DPR - UnCon-DPR"),
                         ("dpr_mixed", "dpr_baseline", "Mixed-DPR - DPR"))),
    ("attention entropy: Mixed-DPR - DPR > 0", _paper_entropy("dpr_mixed", "dpr_baseline"), "nats",
     _attention("dpr_mixed_minus_dpr_baseline", "entropy", 3)),
    ("attention entropy: UnCon-DPR - DPR < 0", _paper_entropy("dpr_uncon", "dpr_baseline"), "nats",
     _attention("dpr_uncon_minus_dpr_baseline", "entropy", 3)),
    ("attention entropy: Mixed-DPR - UnCon-DPR > 0", _paper_entropy("dpr_mixed", "dpr_uncon"), "nats",
     _attention("dpr_mixed_minus_dpr_uncon", "entropy", 3)),
    ("later-sentence share: Mixed-DPR - DPR > 0", PAPER["later_sentence_share_diff"]["dpr_mixed_minus_dpr_baseline"],
     "points", _attention("dpr_mixed_minus_dpr_baseline", "later_sentence_share", 2)),
    ("later-sentence share: Mixed-DPR - UnCon-DPR > 0", PAPER["later_sentence_share_diff"]["dpr_mixed_minus_dpr_uncon"],
     "points", _attention("dpr_mixed_minus_dpr_uncon", "later_sentence_share", 2)),
    ("Table 1 probe, DPR: highest- minus lowest-attended entity's questions > 0",
     round(_PROBE["highest"] - _PROBE["lowest"], 2), "score", _probe("dpr_baseline")),
    ("position bias, DPR: highest-attended entity in the first half, % of passages - 50 > 0",
     _paper_share_over_half("highest_first_half"), "points", _position_bias("dpr_baseline", "highest_first_half")),
    ("position bias, DPR: lowest-attended entity in the second half, % of passages - 50 > 0",
     _paper_share_over_half("lowest_second_half"), "points", _position_bias("dpr_baseline", "lowest_second_half")),
    ("mechanism: moved-sentence gap (front - end score), Mixed-DPR - DPR, toward 0", None, "score",
     _moved_sentence("dpr_mixed", "dpr_baseline")),
    ("mechanism: Mixed-DPR - DPR, Top-5 on the least-attended answer entity's questions > 0", None, "points",
     _entity_split("dpr_mixed_minus_dpr_baseline", "least attended", 5)),
)


def verdict(diff: float | None, low: float | None, high: float | None, p: float | None, direction: float,
            overshoot: bool = False) -> str:
    """holds / reversed at p < ALPHA (or, without a p-value, a CI that excludes 0); otherwise not shown.
    ``overshoot``: the difference points the predicted way but lands past the target (a gap meant to shrink towards
    0 that ends larger on the other side)."""
    if diff is None:
        return "–"
    if p is not None:
        significant = p < ALPHA
    else:
        significant = low is not None and high is not None and (low > 0 or high < 0)
    if not significant:
        return "not shown"
    if diff * direction <= 0:
        return "reversed"
    return "overshoots" if overshoot else "holds"


def claim_rows(metrics: Mapping) -> list[dict]:
    """One dict per claim whose metrics exist: claim, paper, unit, n, diff, low, high, p, digits, verdict.
    ``metrics``: table3, comparison (encoder_comparison.json), bias (attention_bias.json), mechanism."""
    rows = []
    for claim, paper, unit, get in CLAIMS:
        ours = get(metrics)
        if ours is None:
            continue
        direction = ours.get("direction", -1.0 if paper is not None and paper < 0 else 1.0)
        rows.append({"claim": claim + ours.get("detail", ""), "paper": paper, "unit": unit, **ours,
                     "verdict": verdict(ours["diff"], ours["low"], ours["high"], ours["p"], direction,
                                        ours.get("overshoot", False))})
    return rows


def claim_intro(profile: str) -> str:
    return f"The paper's claims, checked on the `{profile}` profile:"


def render_claim(metrics: Mapping, heading: bool = True) -> str:
    rows = claim_rows(metrics)
    if not rows:
        return ""
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("holds", "overshoots", "reversed", "not shown")}
    table = [[r["claim"], "prediction" if r["paper"] is None else num(r["paper"], 2 if r["unit"] == "nats" else 1,
                                                                     signed=True),
              str(r["n"] if r["n"] is not None else "–"),
              f"{num(r['diff'], r['digits'], signed=True)} [{num(r['low'], r['digits'], signed=True)}, "
              f"{num(r['high'], r['digits'], signed=True)}] {r['unit']}",
              pval(r["p"]) if r["p"] is not None else "CI", r["verdict"]] for r in rows]
    return (("#### The paper's claims, checked\n\n" if heading else "")
            + f"Each row is a paired difference on the same questions or passages with its 95% bootstrap CI; a verdict "
            f"needs p < {ALPHA} (uncorrected; position-bias rows have a CI only). The paper's values come from its "
            f"21M-passage Wikipedia and BERT-base: compare directions, not sizes. Here: {counts['holds']} hold, "
            + (f"{counts['overshoots']} overshoot, " if counts["overshoots"] else "")
            + f"{counts['reversed']} reversed, {counts['not shown']} not shown.\n\n"
            + md_table(["the paper's claim", "paper", "n", "here [95% CI]", "p", "verdict"], table,
                       ["l", "r", "r", "r", "r", "l"]))
