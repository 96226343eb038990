"""The paper's claims, each checked against one profile's metrics with training runs as the unit: which hold, which
are reversed, which this run cannot tell apart from no difference, and how large an effect it could have found.

Why a table of its own: the claim is spread over five metrics files (Table 3, the attention comparison, the Table 1
probe, the position-bias study, the mechanism slices); a reader asking "does it reproduce?" should not have to
assemble it. The paper's premise comes first (is DPR's attention biased here, and do questions about its
least-attended entities retrieve worse?), then the claims that rest on it.

Every row is a difference between trained models (or, for the premise, within one model) with its 95% interval over
training runs (:mod:`ecqg.report.evidence`): a t-interval over the runs with the question-level noise added, or the
hierarchical bootstrap over runs and questions, whichever is wider. A row holds or is reversed only when that interval
excludes 0 and its p-value, Holm-corrected over the rows of the table (one family), is below 0.05; an arm trained once
gives no interval over runs ("one run"). Beside each: the smallest difference the run could have detected at 80%
power, the power it had for an effect of the paper's size, and the question-level interval of before, named for
what it is. The paper's values come from :mod:`ecqg.core.paper`, where they are declared once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from ecqg.core import paper

from ecqg.analysis.run_evidence import ENTITY_SLICES, MOVED_MEASURE
from ecqg.report import evidence
from ecqg.report.markdown import num, subtree
from ecqg.analysis.over_runs import TESTS
from ecqg.analysis.power import critical_difference, detectable, detectable_range, power_of, translated_effect
from ecqg.analysis.stats import holm_checked, holm_levels, verdict

Getter = Callable[[Mapping], "dict | None"]


def _from_evidence(got: "evidence.Measured | None", digits: int, **extra) -> dict | None:
    """A row computed from the committed per-run files (None where they lack its systems)."""
    if got is None:
        return None
    return {"n": got.n, "q_diff": got.q_diff, "q_low": got.q_low, "q_high": got.q_high, "q_p": None,
            "digits": digits, "runs": got.interval, "arm_runs": got.arm_runs, "tests": got.tests,
            "source": "per-run files", **extra}


def _reference(m: Mapping, b: str, k: int) -> dict:
    """Arm B's NQ Top-k here and in the paper: what a Top-k row's paper effect is translated with."""
    here = subtree(m.get("table3"), "accuracy", b, "nq", "all")
    theirs = _paper_accuracy(b, k)
    if here is None or here.get(f"top{k}") is None or theirs is None:
        return {}
    return {"reference": (theirs, float(here[f"top{k}"]))}


def _table3(a: str, b: str, k: int) -> Getter:
    def get(m: Mapping) -> dict | None:
        ev = m.get("evidence")
        if ev is not None and (row := _from_evidence(evidence.topk_difference(ev, a, b, k), 1, pair=(a, b),
                                                     k=k, **_reference(m, b, k))) is not None:
            return row
        acc = subtree(m.get("table3"), "accuracy")
        node = subtree(m.get("table3"), "paired", f"{a}_minus_{b}", "nq", "all")
        if node is None or node.get(f"top{k}_diff") is None:
            return None
        arms = [evidence.arm(subtree(acc, s, "nq", "all"), f"top{k}") for s in (a, b)]
        return {"n": node.get("n"), "q_diff": node[f"top{k}_diff"], "q_low": node.get(f"top{k}_ci_low"),
                "q_high": node.get(f"top{k}_ci_high"), "q_p": node.get(f"top{k}_p"), "digits": 1,
                "runs": evidence.between_models(*arms, node, f"top{k}", f"top{k}"),
                "arm_runs": tuple(x.runs if x else 1 for x in arms), "source": "summaries", "pair": (a, b), "k": k,
                **_reference(m, b, k)}
    return get


def _attention(pair: str, metric: str, digits: int) -> Getter:
    def get(m: Mapping) -> dict | None:
        ev = m.get("evidence")
        if ev is not None:
            got = evidence.values_difference(ev, metric, *pair.split("_minus_"))
            if got is not None:
                return _from_evidence(got, digits, detail=_runs_detail(list(got.per_run), digits))
        node = subtree(m.get("comparison"), "attention", "paired", pair)
        if node is None or node.get(f"{metric}_diff") is None:
            return None
        seeds = subtree(m.get("comparison"), "seeds", "attention_paired", pair)
        interval, values = evidence.per_run(seeds, f"{metric}_diff", ci=metric)
        return {"n": node.get(f"{metric}_n"), "q_diff": node[f"{metric}_diff"],
                "q_low": node.get(f"{metric}_ci_low"), "q_high": node.get(f"{metric}_ci_high"),
                "q_p": node.get(f"{metric}_p"), "q_note": "run 1" if values else "", "digits": digits,
                "runs": interval, "arm_runs": (max(len(values), 1),) * 2, "detail": _runs_detail(values, digits),
                "source": "summaries"}
    return get


def _runs_detail(values: list[float], digits: int) -> str:
    return f" (runs: {', '.join(num(v, digits, signed=True) for v in values)})" if len(values) > 1 else ""


def _probe(system: str) -> Getter:
    def get(m: Mapping) -> dict | None:
        ev = m.get("evidence")
        if ev is not None and (got := evidence.values_difference(ev, "probe_difference", system)) is not None:
            return _from_evidence(replace(got, interval=got.interval and _one_model(got.interval)), 2)
        node = subtree(m.get("comparison"), "table1_probe", system)
        if node is None or node.get("difference") is None:
            return None
        interval, values = evidence.per_run(subtree(m.get("comparison"), "seeds", "table1_probe", system),
                                            "difference")
        if interval is not None:
            interval = _one_model(interval)
        return {"n": node.get("n_passages"), "q_diff": node["difference"], "q_low": node.get("difference_ci_low"),
                "q_high": node.get("difference_ci_high"), "q_p": node.get("difference_p"),
                "q_note": "run 1" if values else "", "digits": 2, "runs": interval,
                "arm_runs": (max(len(values), 1),), "detail": _runs_detail(values, 2), "source": "summaries"}
    return get


def _one_model(interval):
    """A measure of one system over its runs: report its runs as one arm."""
    return replace(interval, runs=interval.runs[:1], method="one model: " + interval.method.partition(": ")[-1])


def _position_bias(system: str, key: str) -> Getter:
    """Stage 01's share (of passages) minus the 50% of no bias: measured on the first run's DPR only, so no interval
    over runs; its passage-level CI is shown."""
    def get(m: Mapping) -> dict | None:
        node = subtree(m.get("bias"), "encoders", system)
        if node is None or node.get(key) is None:
            return None
        ci = node.get(f"{key}_ci") or [None, None]
        shift = (lambda x: None if x is None else 100 * x - 50)
        return {"n": node.get("n_passages"), "q_diff": shift(node[key]), "q_low": shift(ci[0]),
                "q_high": shift(ci[1]), "q_p": None, "q_note": "run 1", "digits": 1, "runs": None,
                "arm_runs": (1,), "source": "summaries"}
    return get


def _retrieval_premise(system: str, k: int) -> Getter:
    """Top-k on the questions whose answer is the system's least-attended entity of the gold passage, minus on those
    whose answer is its most-attended one (07's slices): the paper's premise says below 0."""
    def get(m: Mapping) -> dict | None:
        ev = m.get("evidence")
        if ev is not None:
            got = evidence.slices_difference(ev, system, ENTITY_SLICES, "least attended", "most attended", k)
            if got is not None:
                return _from_evidence(got, 1)
        node = subtree(m.get("mechanism"), "entity_attention", "accuracy", system)
        least, most = subtree(node, "least attended"), subtree(node, "most attended")
        if least is None or most is None or least.get(f"top{k}") is None or most.get(f"top{k}") is None:
            return None
        diff = least[f"top{k}"] - most[f"top{k}"]
        runs = int(least.get("seeds", 1))
        return {"n": f"{least.get('n')} v {most.get('n')}", "q_diff": diff, "q_low": None, "q_high": None,
                "q_p": None, "digits": 1, "runs": evidence.between_slices(node, "least attended", "most attended",
                                                                           f"top{k}"),
                "arm_runs": (runs,), "source": "summaries",
                "detail": f" ({num(least[f'top{k}'])} vs {num(most[f'top{k}'])})"}
    return get


def _moved_sentence(system: str, reference: str) -> Getter:
    """The paired difference A - B of front - end gaps. The prediction is that A's gap lies nearer 0 than B's: the
    difference must point against B's gap (its ``direction``) without carrying A past 0 to a larger gap on the other
    side (``overshoot``); both gaps go into the row's text, since the difference alone cannot tell."""
    def get(m: Mapping) -> dict | None:
        ev = m.get("evidence")
        if ev is not None and (got := evidence.values_difference(ev, MOVED_MEASURE, system, reference)) is not None:
            gap_a, gap_b = (float(np.nanmean(ev.unit_values(MOVED_MEASURE, s)[0])) for s in (system, reference))
            return _from_evidence(got, 3, direction=-1.0 if gap_b > 0 else 1.0, overshoot=abs(gap_a) >= abs(gap_b),
                                  detail=f" (gaps: {num(gap_b, 3, signed=True)} -> {num(gap_a, 3, signed=True)})")
        moved = subtree(m.get("mechanism"), "moved_sentence")
        node = subtree(moved, "paired", f"{system}_minus_{reference}")
        a, b = subtree(moved, "systems", system), subtree(moved, "systems", reference)
        if node is None or a is None or b is None or node.get("gap") is None or not b.get("gap") \
                or a.get("gap") is None:
            return None
        arms = [evidence.Arm(x["gap"], x.get("seed_sd"), int(x.get("seeds") or 1)) for x in (a, b)]
        return {"n": node.get("n"), "q_diff": node["gap"], "q_low": node.get("ci_low"), "q_high": node.get("ci_high"),
                "q_p": node.get("p"), "digits": 3, "direction": -1.0 if b["gap"] > 0 else 1.0,
                "overshoot": abs(a["gap"]) >= abs(b["gap"]),
                "runs": evidence.between_models(*arms, {"gap_ci_low": node.get("ci_low"),
                                                        "gap_ci_high": node.get("ci_high")}, "gap", "gap"),
                "arm_runs": tuple(x.runs for x in arms), "source": "summaries",
                "detail": f" (gaps: {num(b['gap'], 3, signed=True)} -> {num(a['gap'], 3, signed=True)})"}
    return get


def _entity_split(a: str, b: str, split: str, k: int) -> Getter:
    def get(m: Mapping) -> dict | None:
        ev = m.get("evidence")
        if ev is not None and (questions := ev.slice_questions(ENTITY_SLICES, split)) is not None:
            got = evidence.topk_difference(ev, a, b, k, questions=questions)
            if got is not None:
                return _from_evidence(got, 1)
        mech = subtree(m.get("mechanism"), "entity_attention")
        node = subtree(mech, "paired", f"{a}_minus_{b}", split)
        if node is None or node.get(f"top{k}_diff") is None:
            return None
        arms = [evidence.arm(subtree(mech, "accuracy", s, split), f"top{k}") for s in (a, b)]
        return {"n": node.get("n"), "q_diff": node[f"top{k}_diff"], "q_low": node.get(f"top{k}_ci_low"),
                "q_high": node.get(f"top{k}_ci_high"), "q_p": node.get(f"top{k}_p"), "digits": 1,
                "runs": evidence.between_models(*arms, node, f"top{k}", f"top{k}"),
                "arm_runs": tuple(x.runs if x else 1 for x in arms), "source": "summaries"}
    return get


def _paper_accuracy(system: str, k: int) -> float | None:
    return paper.table3_accuracy(system, k)


def _paper_table3(a: str, b: str, k: int) -> float:
    return round(_paper_accuracy(a, k) - _paper_accuracy(b, k), 2)


def _paper_entropy(a: str, b: str) -> float:
    return round(paper.ATTENTION["entropy"][a] - paper.ATTENTION["entropy"][b], 2)


def _paper_share_over_half(key: str) -> float:
    """The paper's position-bias share as points above the 50% of no bias."""
    return round(100 * paper.POSITION_BIAS[key] - 50, 1)


@dataclass(frozen=True)
class Claim:
    """One row: what the paper says, its value with its sign (None: a prediction, whose sign is ``direction``),
    the unit, where ours is read, and whether it is part of the premise the method rests on."""

    text: str
    paper: float | None
    unit: str
    get: Getter
    direction: float | None = None
    premise: bool = False
    notebook: str = "06"        # the notebook that measures it (and shows its row): 01, 06 or 07

    @property
    def sign(self) -> float:
        if self.direction is not None:
            return self.direction
        return -1.0 if self.paper is not None and self.paper < 0 else 1.0


_PROBE = paper.ATTENTION["table1_probe"]["dpr_baseline"]
_PAIRS = (("dpr_uncon", "dpr_baseline", "UnCon-DPR - DPR"), ("dpr_mixed", "dpr_uncon", "Mixed-DPR - UnCon-DPR"),
          ("dpr_mixed", "dpr_baseline", "Mixed-DPR - DPR"))
CLAIMS: tuple[Claim, ...] = (
    Claim("premise, position bias, DPR: highest-attended entity in the first half, % of passages - 50 > 0",
          _paper_share_over_half("highest_first_half"), "points", _position_bias("dpr_baseline", "highest_first_half"),
          premise=True, notebook="01"),
    Claim("premise, position bias, DPR: lowest-attended entity in the second half, % of passages - 50 > 0",
          _paper_share_over_half("lowest_second_half"), "points", _position_bias("dpr_baseline", "lowest_second_half"),
          premise=True, notebook="01"),
    Claim("premise, Table 1 probe, DPR: highest- minus lowest-attended entity's questions > 0",
          round(_PROBE["highest"] - _PROBE["lowest"], 2), "score", _probe("dpr_baseline"), premise=True),
    Claim("premise, DPR Top-5: questions on its least- minus most-attended answer entity < 0", None, "points",
          _retrieval_premise("dpr_baseline", 5), direction=-1.0, premise=True, notebook="07"),
    *(Claim(f"Table 3, NQ Top-{k}: {name} > 0", _paper_table3(a, b, k), "points", _table3(a, b, k))
      for k in (1, 5) for a, b, name in _PAIRS),
    Claim("attention entropy: Mixed-DPR - DPR > 0", _paper_entropy("dpr_mixed", "dpr_baseline"), "nats",
          _attention("dpr_mixed_minus_dpr_baseline", "entropy", 3)),
    Claim("attention entropy: UnCon-DPR - DPR < 0", _paper_entropy("dpr_uncon", "dpr_baseline"), "nats",
          _attention("dpr_uncon_minus_dpr_baseline", "entropy", 3)),
    Claim("attention entropy: Mixed-DPR - UnCon-DPR > 0", _paper_entropy("dpr_mixed", "dpr_uncon"), "nats",
          _attention("dpr_mixed_minus_dpr_uncon", "entropy", 3)),
    Claim("later-sentence share: Mixed-DPR - DPR > 0", paper.ATTENTION["later_sentence_share_diff"]["dpr_mixed_minus_dpr_baseline"],
          "points", _attention("dpr_mixed_minus_dpr_baseline", "later_sentence_share", 2)),
    Claim("later-sentence share: Mixed-DPR - UnCon-DPR > 0",
          paper.ATTENTION["later_sentence_share_diff"]["dpr_mixed_minus_dpr_uncon"], "points",
          _attention("dpr_mixed_minus_dpr_uncon", "later_sentence_share", 2)),
    Claim("mechanism: moved-sentence gap (front - end score), Mixed-DPR - DPR, toward 0", None, "score",
          _moved_sentence("dpr_mixed", "dpr_baseline"), notebook="07"),
    Claim("mechanism: Mixed-DPR - DPR, Top-5 on the least-attended answer entity's questions > 0", None, "points",
          _entity_split("dpr_mixed", "dpr_baseline", "least attended", 5), notebook="07"),
)


# Every comparison belongs to exactly one Holm family, named here and in its table's caption; a table that shows a
# row of another family (the dose curve's fine-tuned rows are claims rows) takes that family's adjusted p and verdict.
CLAIMS_FAMILY = "the claims table"
DOSE_FAMILY = "the dose curve's pre-training rows"


def with_verdicts(rows: list[dict], family: str = CLAIMS_FAMILY) -> list[dict]:
    """Holm over the rows (one family), then each row's verdict and, on the scale of the test that decided it (its
    own standard error and degrees of freedom, at the level Holm's step-down makes it face: ``alpha / (m - r)`` for
    the r-th smallest p), the smallest difference that test calls significant (``significant_from``), the effect it
    finds with 80% power (``detectable``, with its range when the runs' sd is anywhere in its 95% chi-square
    interval: five runs, x0.6 to x2.9), and its power at the paper's effect, as printed and translated to this
    testbed's accuracy level (``stats.translated_effect``, Top-k rows). Rows with every defensible test computed
    (``over_runs.TESTS``) get the verdict of each, Holm within the family under that test, and ``fragile`` where
    they disagree."""
    intervals = [r["runs"] for r in rows]
    adjusted = holm_checked(intervals)
    levels = holm_levels([i.p if i is not None else None for i in intervals])
    for row, p_holm, level, by_test in zip(rows, adjusted, levels, _verdicts_by_test(rows)):
        interval = row["runs"]
        row["family"], row["p_holm"], row["alpha_holm"] = family, p_holm, level
        row["verdict"] = verdict(interval, p_holm, row["direction"], row.get("overshoot", False))
        reference = row.get("reference")
        row["paper_translated"] = (None if row["paper"] is None or not reference
                                   else translated_effect(row["paper"], *reference))
        if interval is None:
            row.update(significant_from=None, detectable=None, detectable_range=None, power_at_paper=None,
                       power_at_translated=None)
        else:
            row["significant_from"] = critical_difference(interval, level)
            row["detectable"] = detectable(interval, level)
            row["detectable_range"] = detectable_range(interval, level)
            row["power_at_paper"] = None if row["paper"] is None else power_of(interval, row["paper"], level)
            row["power_at_translated"] = (None if row["paper_translated"] is None
                                          else power_of(interval, row["paper_translated"], level))
        row["verdicts_by_test"] = by_test
        row["fragile"] = bool(by_test) and len({row["verdict"], *(part.removeprefix("alone: ")
                                                                  for v in by_test.values()
                                                                  for part in v.split(" / "))}) > 1
        for key in ("diff", "low", "high", "p"):
            row[key] = getattr(interval, key) if interval is not None else row.get(f"q_{key}")
    return rows


def _verdicts_by_test(rows: list[dict]) -> list[dict[str, str]]:
    """Each row's verdict under each defensible test, Holm over the family under that test (a row without the
    tests keeps its printed interval in the family) and, after a slash where it differs, the verdict of the row
    tested alone (its unadjusted p): a row is fragile when these are not all one verdict. Empty for rows without
    the tests."""
    out: list[dict[str, str]] = [{} for _ in rows]
    for name in TESTS:
        intervals = [(r.get("tests") or {}).get(name, r["runs"]) if r["runs"] is not None else None for r in rows]
        for i, (row, interval, p_holm) in enumerate(zip(rows, intervals, holm_checked(intervals))):
            if row.get("tests"):
                family = verdict(interval, p_holm, row["direction"], row.get("overshoot", False))
                alone = verdict(interval, interval.p, row["direction"], row.get("overshoot", False))
                out[i][name] = family if alone == family else f"{family} / alone: {alone}"
    return out


def claim_rows(metrics: Mapping) -> list[dict]:
    """One dict per claim whose metrics exist: claim (with detail), detail, paper, unit, n, digits, premise,
    direction; ``runs`` (the interval over runs, None for one run) with diff / low / high / p taken from it (from
    the question-level figures where there is none), ``p_holm``, ``detectable``, ``power_at_paper``, the
    question-level ``q_diff`` / ``q_low`` / ``q_high`` / ``q_p``, and the verdict. ``metrics``: table3,
    comparison (encoder_comparison.json), bias (attention_bias.json), mechanism, and evidence (the profile's
    committed per-run files, ``ecqg.analysis.run_evidence.Evidence``, or None: each row is then computed from the
    summaries, and its ``source`` says so)."""
    rows = []
    for claim in CLAIMS:
        ours = claim.get(metrics)
        if ours is None:
            continue
        rows.append({"claim": claim.text + ours.get("detail", ""), "detail": ours.get("detail", ""),
                     "paper": claim.paper, "unit": claim.unit, "premise": claim.premise, "notebook": claim.notebook,
                     "direction": ours.get("direction", claim.sign), **ours})
    return with_verdicts(rows)
