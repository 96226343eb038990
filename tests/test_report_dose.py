"""The dose curve's rows (ecqg.report.dose): one interval over training runs per difference, the verdict after Holm
over the curve, runs that disagree left "not shown", and the figure drawn from the same rows."""

import json

from metrics_records import write_record

from ecqg.core import metrics_files
from ecqg.report import dose, evidence
from ecqg.stages.report import render_results

SEEDS = (2022, 2023, 2024, 2025, 2026)


def _accuracy(values: dict[int, list[float]]) -> dict:
    """An NQ accuracy node with each run's Top-1 / Top-5 (``values[k]``: one per seed)."""
    node = {"n": 1000, "seeds": len(values[1])}
    for k, runs in values.items():
        mean = sum(runs) / len(runs)
        node[f"top{k}"] = mean
        node[f"top{k}_seed_sd"] = (sum((v - mean) ** 2 for v in runs) / (len(runs) - 1)) ** 0.5 if len(runs) > 1 \
            else None
        node.update({f"top{k}_s{s}": v for s, v in zip(SEEDS, runs)})
    return {"nq": {"all": node}}


def _paired(diff: float) -> dict:
    node = {"n": 1000}
    for k in (1, 5):
        node.update({f"top{k}_diff": diff, f"top{k}_ci_low": diff - 0.5, f"top{k}_ci_high": diff + 0.5,
                     f"top{k}_p": 0.01})
    return {"nq": {"all": node}}


def _table3(mixed_gain: float, spread: float) -> dict:
    """Doses 400 and 800 and the full set; Mixed pre-trained ``mixed_gain`` points above UnCon at every size, its runs
    scattered by +-``spread``."""
    wiggle = [-2, -1, 0, 1, 2]
    accuracy = {"minilm_untrained": {"nq": {"all": {"n": 1000, "top1": 60.0, "top5": 80.0}}}}
    paired = {}
    for tag in ("_d400_pre", "_d800_pre", "_pre"):
        accuracy[f"dpr_uncon{tag}"] = _accuracy({k: [b + 0.1 * w for w in wiggle] for k, b in ((1, 62.0), (5, 82.0))})
        accuracy[f"dpr_mixed{tag}"] = _accuracy({k: [b + mixed_gain + spread * w for w in wiggle]
                                                 for k, b in ((1, 62.0), (5, 82.0))})
        paired[f"dpr_mixed{tag}_minus_dpr_uncon{tag}"] = _paired(mixed_gain)
        paired[f"dpr_uncon{tag}_minus_minilm_untrained"] = _paired(2.0)
        paired[f"dpr_mixed{tag}_minus_minilm_untrained"] = _paired(2.0 + mixed_gain)
    for name in ("dpr_baseline", "dpr_uncon", "dpr_mixed"):
        accuracy[name] = _accuracy({k: [b + 0.3 * w for w in wiggle] for k, b in ((1, 65.0), (5, 85.0))})
    paired["dpr_mixed_minus_dpr_uncon"] = _paired(0.0)
    paired["dpr_mixed_minus_dpr_baseline"] = _paired(0.0)
    return {"accuracy": accuracy, "paired": paired}


def test_the_curve_has_every_size_and_the_fine_tuned_rows_at_the_full_set():
    rows = dose.dose_rows(_table3(mixed_gain=5.0, spread=0.1), full_size=1600)
    sizes = [p[0] for p in dose.dose_points(_table3(5.0, 0.1), 1600)]
    assert sizes == [400, 800, 1600]
    assert len(rows) == 3 * 2 * 3 + 2 * 2                      # 3 sizes x Top-1/5 x 3 differences, + 2 x 2 fine-tuned
    fine_tuned = [r for r in rows if r["stage"] == "fine-tuned"]
    assert {r["size"] for r in fine_tuned} == {1600} and {r["label"] for r in fine_tuned} == {"Mixed - UnCon",
                                                                                               "Mixed - DPR"}
    assert all(r["runs"] is not None and r["arm_runs"] in ((5, 5), (5,)) for r in rows)


def test_runs_that_agree_on_a_large_effect_hold_and_runs_that_disagree_are_not_shown():
    agree = [r for r in dose.dose_rows(_table3(mixed_gain=5.0, spread=0.1), 1600)
             if r["label"] == "Mixed - UnCon" and r["stage"] == "pre-training only"]
    assert {r["verdict"] for r in agree} == {"holds"}
    assert all(r["detectable"] is not None and r["detectable"] < 5.0 for r in agree)
    scattered = [r for r in dose.dose_rows(_table3(mixed_gain=1.0, spread=3.0), 1600)
                 if r["label"] == "Mixed - UnCon" and r["stage"] == "pre-training only"]
    assert {r["verdict"] for r in scattered} == {"not shown"}
    assert all(r["low"] < 0 < r["high"] and r["detectable"] > 1.0 for r in scattered)
    # the question-level interval (which excludes 0 here) is kept beside it, not used for the verdict
    assert all(r["q_low"] > 0 for r in scattered)


def test_against_the_untrained_base_the_runs_are_one_arm_and_one_run_gives_no_interval():
    arm = evidence.Arm(62.0, 0.5, 5, (61.5, 62.0, 62.5, 61.8, 62.2))
    interval = evidence.against_fixed(arm, 60.0, {"top1_ci_low": 1.5, "top1_ci_high": 2.5}, "top1")
    assert interval.runs == (5,) and abs(interval.diff - 2.0) < 1e-9 and interval.low > 0
    assert evidence.against_fixed(evidence.Arm(62.0, None, 1, (62.0,)), 60.0, {}, "top1") is None


def test_no_doses_no_section_and_the_page_shows_the_curve_and_its_figure(tmp_path):
    plain = _table3(1.0, 0.1)
    plain["accuracy"] = {k: v for k, v in plain["accuracy"].items() if "_d" not in k}
    assert dose.dose_rows(plain, 1600) == []
    folder = tmp_path / "replicates"
    folder.mkdir()
    (folder / "table3.json").write_text(json.dumps(_table3(5.0, 0.1)))
    write_record(folder, metrics_files.Mixing, **{"sets": {"total": 1600}})
    for name, examples in (("dpr_baseline_s2022", 400), ("dpr_mixed_d400_pre_s2022", 392),
                           ("dpr_mixed_d800_pre_s2022", 792), ("dpr_mixed_pre_s2022", 1592)):
        (folder / f"{name}_training.json").write_text(json.dumps({"train_examples": examples}))
    page = render_results(folder)
    assert "#### The dose curve" in page
    assert "| 1,600 | 4.0x | fine-tuned | Mixed - DPR, Top-1 |" in page
    assert "| 400 | 1.0x | pre-training only | Mixed - UnCon, Top-5 |" in page
    figure = dose.draw_dose_curve(folder, tmp_path / "dose.png")
    assert figure is not None and figure.stat().st_size > 10_000
