"""The results page's fine-tuning section: every training run's epochs and kept step, and Table 3 and the mechanism
against fine-tuning steps, rendered from the tables notebooks 06 and 07 write (built here by the same functions)."""

import json

import numpy as np
import pytest
from metrics_records import write_record

from ecqg.analysis import tables
from ecqg.core import metrics_files
from ecqg.report.fine_tuning import render_curve, render_mechanism_curve, render_training_runs, training_runs
from ecqg.stages import finetune_curve, report
from ecqg.stages import mechanism as mp

N, DEPTH, STEPS = 60, 20, (25, 180, 360)


def _run(variant, seed, phase="finetune", **extra):
    return {"variant": variant, "phase": phase, "seed": seed, "train_examples": 5766, "steps": 900,
            "train_minutes": 65.29, "examples_per_s": 9.44, "val_top1": 0.552, "val_top5": 0.778, "val_top20": 0.906,
            **extra}


def _hits(rng, p):
    """A questions x depth hit matrix whose first hit falls at rank 1 with probability ``p``."""
    first = np.where(rng.random(N) < p, 0, rng.integers(1, DEPTH + 5, N))
    return np.arange(DEPTH)[None, :] >= first[:, None]


@pytest.fixture
def curve_hits():
    """``(variant, step, set) -> hits``: Mixed stops at 180 (patience), so it has no 360 snapshot."""
    rng = np.random.default_rng(0)
    hits = {}
    for variant, p in (("baseline", 0.5), ("mixed", 0.3)):
        for step in STEPS[:2] if variant == "mixed" else STEPS:
            for name in ("nq", "wq"):
                hits[(variant, step, name)] = _hits(rng, p)
    return hits


def test_training_runs_show_epochs_the_kept_step_and_where_validation_ran(tmp_path):
    for name, run in (("dpr_mixed_s2022", _run("mixed", 2022, epochs_trained=4, selected_step=360,
                                                select_metric="val_top20", patience=2, val_passages=7183.0)),
                      ("dpr_mixed_s2023", _run("mixed", 2023, epochs_trained=5, selected_step=720,
                                                select_metric="val_top20", patience=2, val_passages=7183.0)),
                      ("dpr_baseline_s2023", _run("baseline", 2023, val_pool=370.0)),
                      ("dpr_mixed_pre_s2022", _run("mixed", 2022, "pretrain", val_pool=196.0)),
                      ("dpr_poly_mixed_pre_s2022", {"train_examples": 80, "steps": 2})):   # named by its file
        (tmp_path / f"{name}_training.json").write_text(json.dumps(run))
    text = render_training_runs(training_runs(tmp_path))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split(" | ")[0] for r in rows] == ["| DPR (ours)", "| Mixed, pre-training only (ours)",
                                                  "| Mixed-DPR (ours)", "| Mixed-DPR (ours)",
                                                  "| Mixed Poly-DPR, pre-training only (ours)"]
    # 4 epochs of 225 steps, kept the second: two epochs without a better score, so patience ended it
    assert ("| Mixed-DPR (ours) | 2022 | 5,766 | 4 | patience | 900 | 360 (top20) | 55.2 / 77.8 / 90.6 | corpus, "
            "7,183 passages | 65.3 | 9.4 |") in text
    # 5 epochs of 180 steps, kept the fourth: one epoch without a better score, so the cap ended it
    assert "| Mixed-DPR (ours) | 2023 | 5,766 | 5 | cap | 900 | 720 (top20) |" in text
    assert "| DPR (ours) | 2023 | 5,766 | – | – | 900 | last | 55.2 / 77.8 / 90.6 | pool of 370 |" in text
    assert "stop after 2 epochs without a better score" in text
    assert "| Mixed Poly-DPR, pre-training only (ours) | 2022 | 80 | – | – | 2 | last | – / – / – | – |" in text
    (tmp_path / "dpr_oops_training.json").write_text("{}")
    with pytest.raises(ValueError, match="dpr_oops_training.json: not a training record's name"):
        training_runs(tmp_path)
    assert render_training_runs([]) == ""


def test_the_curve_table_has_every_snapshot_the_paired_differences_and_the_kept_steps(curve_hits):
    sets = {"nq": [{}] * N, "wq": [{}] * N}
    accuracy, paired = finetune_curve.curve_tables(curve_hits, sets, [1, 5, 20], 200, 0)
    curve = {"dpr_training_seed": 2022, "accuracy": tables.table_records(accuracy),
             "paired": tables.table_records(paired)}
    runs = [_run("baseline", 2022, selected_step=360), _run("mixed", 2022, selected_step=25),
            _run("mixed", 2023, selected_step=180)]           # another seed's kept step is not this curve's
    text = render_curve(curve, runs)
    nq = text.split("NQ:")[1].split("WebQuestions:")[0]
    assert "| step | DPR Top-1/20 | Mixed-DPR Top-1/20 | Mixed-DPR - DPR, Top-1 | Mixed-DPR - DPR, Top-20 |" in nq
    top1 = {step: 100 * curve_hits[("baseline", step, "nq")][:, 0].mean() for step in STEPS}
    row = {line.split(" | ")[0].removeprefix("| "): line for line in nq.splitlines() if line.startswith("| ")}
    assert row["360 (kept: DPR)"].split(" | ")[1].startswith(f"{top1[360]:.1f} / ")
    assert row["360 (kept: DPR)"].endswith("| – / – | – | – |")          # Mixed stopped before 360
    d = paired[(paired.step == 25) & (paired.dataset == "nq") & (paired.k == 1)].iloc[0]
    p = f"{d.p_value:.3f}" if d.p_value >= 0.001 else "< .001"
    assert row["25 (kept: Mixed-DPR)"].split(" | ")[3] == (
        f"{100 * d.difference:+.1f} [{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}], p {p}")
    # the 2023 seed's kept step (180) is not this curve's: its row carries no mark
    assert "180" in row and "WebQuestions:" in text
    assert render_curve({"accuracy": [], "paired": []}) == ""         # a profile without the curve (mini)


def test_the_mechanism_curve_has_psi_the_least_attended_third_and_the_moved_sentence_gap(curve_hits):
    hits, pairs = finetune_curve.step_systems(curve_hits, "nq")
    rng = np.random.default_rng(1)
    position = {b: np.arange(N) % 3 == i for i, b in enumerate(("sentence 1", "sentence 2", "sentence 3+"))}
    entity = {t: np.arange(N) % 3 == i for i, t in enumerate(("most attended", "middle", "least attended"))}
    psi = mp.psi_table(hits, position, [1, 5], pairs, 200, 0, 0.95)
    _, entity_paired = mp.slice_tables(hits, [{}] * N, entity, [1, 5], pairs, 200, 0, 0.95)
    gaps = finetune_curve.gap_table({name: rng.normal(0.1, 0.2, 40) for name in hits}, 200, 0, 0.95)
    mech = {"dpr_training_seed": 2022, "psi": tables.table_records(psi),
            "entity_paired": tables.table_records(entity_paired),
            "moved_sentence": tables.table_records(gaps)}
    text = render_mechanism_curve(mech, [_run("mixed", 2022, selected_step=180)])
    blocks = [t for t in text.split("\n\n") if t.startswith("| step")]
    assert len(blocks) == 3                                           # PSI, least-attended third, moved sentence
    assert blocks[0].splitlines()[0] == "| step | DPR: PSI | Mixed-DPR: PSI | Mixed-DPR: PSI - DPR's |"
    own = psi[(psi.kind == "system") & (psi.system == "dpr_mixed@180") & (psi.k == 1)].psi.iloc[0]
    assert "| 180 (kept: Mixed-DPR) | " in blocks[0] and f" | {own:.3f} | " in blocks[0]
    d = psi[(psi.kind == "paired") & (psi.system == "dpr_mixed@25") & (psi.k == 1)].iloc[0]
    assert f" | {d.psi:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}], p " in blocks[0]        # PSI: not in points
    n_least = int(entity["least attended"].sum())
    assert f"Mixed-DPR: least attended, Top-1 - DPR's (n={n_least})" in blocks[1]
    d = entity_paired[(entity_paired.system_a == "dpr_mixed@25") & (entity_paired.subset == "least attended")
                      & (entity_paired.k == 1)].iloc[0]
    assert f"| 25 | {100 * d.difference:+.1f} [{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}], p " in blocks[1]
    # a difference needs both snapshots: not at 360, where only DPR has one
    assert [row.split(" | ")[0] for row in blocks[1].splitlines()[2:]] == ["| 25", "| 180 (kept: Mixed-DPR)"]
    assert "moved-sentence gap" in blocks[2] and "gap - DPR's" in blocks[2]
    own = gaps[(gaps.kind == "system") & (gaps.system == "dpr_baseline@360")].gap.iloc[0]
    d = gaps[(gaps.kind == "paired") & (gaps.system == "dpr_mixed@180")].iloc[0]
    assert blocks[2].splitlines()[-1].startswith(f"| 360 | {own:+.3f} | – |")   # only DPR reached 360
    assert f"{d.gap:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}], p " in blocks[2]
    assert render_mechanism_curve({"psi": [], "entity_paired": [], "moved_sentence": []}) == ""


def test_the_results_page_carries_the_section(tmp_path, curve_hits):
    d = tmp_path / "results" / "study"
    d.mkdir(parents=True)
    (d / "dpr_baseline_s2022_training.json").write_text(json.dumps(_run("baseline", 2022, selected_step=180)))
    sets = {"nq": [{}] * N, "wq": [{}] * N}
    accuracy, paired = finetune_curve.curve_tables(curve_hits, sets, [1, 20], 100, 0)
    write_record(d, metrics_files.FinetuneCurve, **{"dpr_training_seed": 2022,
                                                       "accuracy": tables.table_records(accuracy),
                                                       "paired": tables.table_records(paired)})
    page = report.render_page(d)
    assert "## Training runs: epochs and the kept step" in page and "## Table 3 against fine-tuning length" in page
    assert "180 (kept: DPR)" in page and "mechanism against fine-tuning length" not in page
