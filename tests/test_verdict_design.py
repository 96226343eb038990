"""Verdicts as strong as their design (issue 64): power on the deciding test's own scale, the paper's effect carried to
this accuracy level, fragile verdicts marked, one family per comparison, the scope block beside every verdict,
DVC's headline the README's, question checks that can fail, and agreement only between runs of one design."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ecqg.analysis.over_runs import TESTS, printed_rule, runs_difference, defensible_tests
from ecqg.analysis.power import critical_difference, detectable, power_of, translated_effect
from ecqg.analysis.stats import hierarchical_bootstrap, verdict

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ("replicates", "study")          # the committed profiles with intervals over runs


def _arms(rng, runs=5, units=600, effect=0.03):
    base = rng.random((units, 1)) < 0.7
    a = (base | (rng.random((units, runs)) < effect)).astype(float)
    b = (base & (rng.random((units, runs)) > 0.01)).astype(float)
    return a, b


# ------------------------------------------------------------------------------------- power on the test's own scale
def test_a_significant_difference_lies_beyond_its_tests_critical_difference():
    rng = np.random.default_rng(0)
    for level in (0.05, 0.01, 0.05 / 15):
        for seed in range(8):
            a, b = _arms(np.random.default_rng(seed), effect=rng.uniform(0.0, 0.05))
            for interval in defensible_tests(a, b, paired_runs=True, n_boot=1000, seed=seed).values():
                critical = critical_difference(interval, level)
                if interval.p < level:
                    assert abs(interval.diff) >= critical, (interval.method, level)
                elif interval.null_deviations is None:             # a t-test: exactly its threshold
                    assert abs(interval.diff) <= critical + 1e-9
                assert detectable(interval, level) > critical      # 80% power needs more than the threshold


def test_power_is_computed_with_the_intervals_own_degrees_of_freedom():
    rng = np.random.default_rng(1)
    a, b = _arms(rng)
    t = runs_difference(a, b, paired_runs=True)
    assert t.df > t.run_df                          # Satterthwaite credits the questions' part
    assert power_of(t, detectable(t, 0.01), 0.01) == pytest.approx(0.80, abs=0.01)
    boot = hierarchical_bootstrap(a, b, paired_runs=True, n_boot=2000, seed=0)
    assert power_of(boot, detectable(boot, 0.01), 0.01) == pytest.approx(0.80, abs=0.01)
    floor = hierarchical_bootstrap(a, b, paired_runs=True, n_boot=10, seed=0)
    assert critical_difference(floor, 0.01) == float("inf")     # p can never fall below 1/11


def test_the_papers_effect_is_carried_as_the_same_relative_error_reduction():
    assert translated_effect(1.6, 44.3, 77.8) == pytest.approx(1.6 * 22.2 / 55.7)
    assert translated_effect(1.6, 44.3, 44.3) == pytest.approx(1.6)
    with pytest.raises(ValueError, match="no errors to reduce"):
        translated_effect(1.0, 100.0, 50.0)


@pytest.mark.parametrize("profile", PROFILES)
def test_committed_rows_agree_with_their_own_tests(profile):
    from ecqg.report.claim import claim_rows
    from ecqg.report.evidence import claim_inputs

    rows = claim_rows(claim_inputs(ROOT / "results" / profile))
    for row in rows:
        if row["verdict"] in ("holds", "reversed", "overshoots"):
            assert abs(row["diff"]) >= row["significant_from"], row["claim"]
        if row["claim"].startswith("Table 3"):
            assert row["paper_translated"] is not None and row["power_at_translated"] is not None, row["claim"]
            assert abs(row["paper_translated"]) < abs(row["paper"])    # these runs' levels are above the paper's


# ------------------------------------------------------------------------------------------------ fragile verdicts
def test_a_verdict_that_the_correction_decides_is_marked_fragile():
    from ecqg.report.claim import with_verdicts

    rng = np.random.default_rng(2)
    rows = []
    for effect in (0.0, 0.0, 0.0, 0.025):
        a, b = _arms(rng, effect=effect)
        tests = defensible_tests(a, b, paired_runs=True, n_boot=2000, seed=0)
        rows.append({"claim": f"row {effect}", "paper": 1.0, "unit": "points", "direction": 1.0, "runs":
                     printed_rule(tests), "tests": tests})
    for row in with_verdicts(rows):
        assert set(row["verdicts_by_test"]) == set(TESTS)
        verdicts = {v for text in row["verdicts_by_test"].values() for v in text.replace("alone: ", "").split(" / ")}
        assert row["fragile"] == (len(verdicts | {row["verdict"]}) > 1)
    fixed = {"claim": "x", "paper": 1.0, "unit": "points", "direction": 1.0}
    t = rows[-1]["tests"][TESTS[0]]
    split = {TESTS[0]: t, TESTS[1]: t, TESTS[2]: t.__class__(**{**t.as_dict(), "runs": t.runs, "p": 0.9})}
    (row,) = with_verdicts([{**fixed, "runs": t, "tests": split}])
    assert row["verdicts_by_test"][TESTS[2]].startswith("not shown") and (row["fragile"] or row["verdict"] ==
                                                                          "not shown" and t.p >= 0.05)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_page_names_fragile_rows(profile):
    from ecqg.report.claim import claim_rows
    from ecqg.report.evidence import claim_inputs

    page = (ROOT / "results" / profile / "README.md").read_text(encoding="utf-8")
    for row in claim_rows(claim_inputs(ROOT / "results" / profile)):
        if row.get("fragile"):
            assert "*Fragile* verdicts" in page and f"- {row['claim']}: " in page


# -------------------------------------------------------------------------------------------- one family per comparison
def test_a_comparison_printed_twice_is_one_row():
    from ecqg.report.claim import claim_rows
    from ecqg.report.evidence import claim_inputs
    from ecqg.report.related import COMPARISONS_FAMILY, question_rows

    inputs = claim_inputs(ROOT / "results" / "replicates")
    claims = claim_rows(inputs)
    by_pair = {(r["pair"], r["k"]): r for r in claims if r.get("pair")}
    rows = question_rows(inputs["table3"], claims=claims, ev=inputs["evidence"])
    shared = [r for r in rows if r["family"] != COMPARISONS_FAMILY]
    assert shared, "Mixed-DPR - DPR at Top-1 / Top-5 is a claims row"
    for row in shared:
        claim = by_pair[(("dpr_mixed", "dpr_baseline"), row["k"])]
        assert row["p_holm"] == claim["p_holm"] and row["runs"] is claim["runs"]
    page = (ROOT / "results" / "replicates" / "README.md").read_text(encoding="utf-8")
    assert "carry its p (Holm over the claims table)" in page


def test_p_values_outside_a_family_say_they_are_exploratory():
    from ecqg.report.markdown import EXPLORATORY

    page = (ROOT / "results" / "replicates" / "README.md").read_text(encoding="utf-8")
    sections = [s for s in page.split("\n## ") if ", p " in s and "p (Holm)" not in s and "Holm-corrected" not in s]
    assert sections
    for section in sections:
        assert EXPLORATORY in section or "exploratory" in section, section.splitlines()[0]


# ------------------------------------------------------------------------------------------------------- the scope
@pytest.mark.parametrize("profile", ("mini", *PROFILES))
def test_every_verdict_has_its_scope_beside_it(profile):
    page = (ROOT / "results" / profile / "README.md").read_text(encoding="utf-8")
    scope = page.split("## What these runs can speak to\n")[1].split("\n## ")[0]
    for part in ("**Base**", "**Training, per run**", "**Corpus**", "**Attention analysed**"):
        assert part in scope, part
    assert "already learned retrieval" in scope          # every committed profile ran on MiniLM
    if profile in PROFILES:
        assert "**Power**" in scope and "**So**" in scope
        block = (ROOT / "README.md").read_text(encoding="utf-8").split(f"<!-- claim:{profile}:start -->")[1]
        assert "What these runs can speak to" in block.split(f"<!-- claim:{profile}:end -->")[0]


def test_the_scope_is_read_from_the_runs_files(tmp_path):
    from ecqg.report.scope import facts, render_scope

    (tmp_path / "table3.json").write_text(json.dumps({"setting": {"base_model": "bundled:naive",
                                                                  "corpus_passages": 18690},
                                                      "accuracy": {"bm25": {"nq": {"all": {"top1": 40.0}}}}}))
    text = render_scope(facts(tmp_path, []))
    assert "had not learned retrieval" in text and "18,690 passages" in text and "BM25 40.0" in text
    assert "**So**" not in text                          # nothing to read into: no verdicts


# ------------------------------------------------------------------------------------------- DVC shows the README's
def test_the_headline_is_the_readmes_rows():
    from ecqg.report.headline import headline

    replicates = headline(ROOT / "results" / "replicates")
    assert set(replicates) == {"top1.dpr", "top1.uncon", "top1.mixed", "top1.uncon-dpr", "top1.mixed-uncon",
                               "top1.mixed-dpr", "verdict.uncon-dpr", "verdict.mixed-uncon", "verdict.mixed-dpr"}
    assert replicates["verdict.mixed-uncon"] == "not shown"
    committed = json.loads((ROOT / "results" / "replicates" / "headline.json").read_text())
    assert committed == replicates
    mini = headline(ROOT / "results" / "mini")
    assert not [k for k in mini if k.startswith("verdict.")]      # one run per arm: no verdict


# ------------------------------------------------------------------------------------ question checks that can fail
LABELLED = [("To carry airborne forces such as what?", True), ("Located on what place and the Red Sea coast?", True),
            ("Released in 1998, by whom for Spears's debut album of the same name (1999?", True),
            ("When did Denmark join the EU?", False), ("What may mitigate many restrictions?", False),
            ("Who wrote \"Song of Solomon\"?", False), ("Who wrote \"Song of Solomon?", True)]


def test_fragments_on_labelled_questions():
    from ecqg.qg import wellformed
    from ecqg.runtime.models import load_spacy

    nlp = load_spacy()
    for question, fragment in LABELLED:
        assert wellformed.is_fragment(question, nlp(question)) == fragment, question


def test_wh_type_agreement_on_labelled_pairs():
    from ecqg.qg import wellformed
    from ecqg.runtime.models import load_spacy

    nlp = load_spacy()
    cases = [("In what year did it open?", "1997", True), ("Who designed it?", "Carl Woese", True),
             ("How many people live there?", "Paris", False), ("What place is the capital?", "Paris", True),
             ("What is it called?", "a hotel", None)]
    for question, answer, agrees in cases:
        assert wellformed.wh_type_agrees(question, nlp(answer)) == agrees, question
    got = wellformed.measures([q for q, _, _ in cases], [a for _, a, _ in cases], nlp)
    assert got["wh_typed"] == 4 and got["wh_type_agrees"] == 0.75 and got["fragment"] == 0.0


def test_measures_that_hold_by_construction_are_marked():
    from ecqg.qg.generators import by_construction, describe

    assert {"answer_in_passage", "about_entity"} <= by_construction("cloze")
    assert not by_construction("prefix_lm")
    assert "identity-mapping" in describe("cloze")
    page = (ROOT / "results" / "replicates" / "README.md").read_text(encoding="utf-8")
    section = page.split("## The synthetic questions the verdicts rest on")[1].split("\n## ")[0]
    assert "hold **by construction**" in section and "| 100% ‡ |" in section
    real = next(line for line in section.splitlines() if line.startswith("| real questions |"))
    assert "‡" not in real and "| fragment |" in section.replace("fragment | wh-type", "fragment |")


# --------------------------------------------------------------------------------------------------- agreement
def test_agreement_refuses_two_designs_and_says_so_when_asked():
    import subprocess
    import sys

    env_cwd = {"cwd": ROOT, "capture_output": True, "text": True}
    refused = subprocess.run([sys.executable, "-m", "ecqg.report.agreement", "results/reruns/mini-xeon-amx",
                              "results/reruns/mini-3seeds-xeon-amx"], **env_cwd)
    assert refused.returncode == 2 and "two designs" in refused.stderr and "dpr.seeds" in refused.stderr
    forced = subprocess.run([sys.executable, "-m", "ecqg.report.agreement", "results/reruns/mini-xeon-amx",
                             "results/reruns/mini-3seeds-xeon-amx", "--different-designs"], **env_cwd)
    assert forced.returncode == 0 and forced.stdout.startswith("**Not one design**")


def test_one_design_is_recognised_across_a_lock_and_a_commit(tmp_path):
    from ecqg.report import agreement

    lock = (ROOT / "results" / "replicates" / "dvc.lock").read_text(encoding="utf-8")
    same, why = agreement.same_design({"lock": lock}, {"lock": lock})
    assert same is True and "code files" in why
    assert agreement.same_design(None, {"lock": lock})[0] is None
    assert verdict(None, None, 1.0) == "one run"
