"""Each profile's results page and the README's claims table are rendered from metrics files and checked for
staleness."""

import json

import pytest

from ecqg import report

TABLE3 = {
    "setting": {"profile": "mini", "corpus_passages": 18690, "note": "mini benchmark"},
    "accuracy": {
        "dpr_mixed": {"nq": {"all": {"n": 10, "top1": 50.0, "top1_ci_low": 40.0, "top1_ci_high": 60.0,
                                     "top5": 70.0, "top5_ci_low": 60.0, "top5_ci_high": 80.0}}},
        "bm25": {"nq": {"all": {"n": 10, "top1": 30.0, "top1_ci_low": 20.0, "top1_ci_high": 40.0,
                                "top5": 60.0, "top5_ci_low": 50.0, "top5_ci_high": 70.0},
                        "no_answer_overlap": {"n": 4, "top1": 25.0, "top1_ci_low": 0.0, "top1_ci_high": 50.0}},
                 "wq": {"all": {"n": 3, "top1": 33.33, "top1_ci_low": 0.0, "top1_ci_high": 66.67}}},
    },
    "paired": {"dpr_mixed_minus_bm25": {"nq": {"all": {"n": 10, "top1_diff": 20.0, "top1_ci_low": 5.0,
                                                       "top1_ci_high": 35.0, "top1_p": 0.0004}}}},
}


@pytest.fixture
def metrics(tmp_path):
    d = tmp_path / "results" / "mini"
    d.mkdir(parents=True)
    (d / "table3.json").write_text(json.dumps(TABLE3))
    (d / "mixing.json").write_text(json.dumps({"uncon": {"questions": 800}, "mixed": {"con": 400, "uncon": 400},
                                               "seed": 2022, "ratio": 0.5}))
    for stage, seconds in (("results", 30.0), ("prepare", 1.5), ("zzz_new", 60.0)):
        (d / f"stage_{stage}.json").write_text(json.dumps({"stage": stage, "wall_time_s": seconds}))
    return d


def test_render_results(metrics):
    text = report.render_results(metrics)
    nq = text.split("**NQ full** (n=10)")[1].split("**")[0]
    # Table-3 order (BM25 before Mixed-DPR) whatever the json order, CIs, the paper's numbers beside ours.
    assert nq.index("BM25") < nq.index("Mixed-DPR (ours)")
    assert "| BM25 | 30.0 [20.0, 40.0] | 60.0 [50.0, 70.0] | 22.7 | 44.6 |" in nq
    assert "| Mixed-DPR (ours) | 50.0 [40.0, 60.0] | 70.0 [60.0, 80.0] | 45.9 | 69.0 |" in nq
    assert "**NQ no-answer-overlap** (n=4)" in text and "**WebQuestions full** (n=3)" in text
    assert "+20.0 [+5.0, +35.0], p < .001" in text
    # generic rendering of a synthetic-data metrics file; missing ones are said, not hidden
    assert "| `mixed.con` | 400 |" in text and "| `ratio` | 0.5 |" in text
    assert "question_generation stage has not run yet" in text and "filtering stage has not run yet" in text
    assert "attention_bias stage has not run yet" in text
    # wall times: pipeline order first, unknown stages after, and the total
    assert text.index("`prepare`") < text.index("`zzz_new`")
    assert "| **total** | **91.5** | **1.5** |" in text
    assert report.render_results(metrics) == text  # deterministic


def test_seed_means_show_their_spread_and_seeded_stages_keep_pipeline_order(tmp_path):
    d = tmp_path / "metrics"
    d.mkdir()
    seeded = {"setting": {"profile": "mini", "corpus_passages": 100},
              "accuracy": {"dpr_baseline": {"nq": {"all": {"n": 10, "seeds": 3, "top1": 50.0, "top1_ci_low": 40.0,
                                                           "top1_ci_high": 60.0, "top1_seed_sd": 1.25}}},
                           "bm25": {"nq": {"all": {"n": 10, "top1": 30.0, "top1_ci_low": 20.0,
                                                   "top1_ci_high": 40.0}}}}}
    (d / "table3.json").write_text(json.dumps(seeded))
    for stage in ("results_x", "05_dpr_training.baseline-2023", "prepare", "05_dpr_training.baseline-2022"):
        (d / f"stage_{stage}.json").write_text(json.dumps({"wall_time_s": 1.0}))
    text = report.render_results(d)
    assert "| DPR (ours) | 50.0 ± 1.2 [40.0, 60.0] |" in text and "| BM25 | 30.0 [20.0, 40.0] |" in text
    assert "Dense rows trained with 3 seeds: mean ± sd over seeds." in text
    order = [text.index(f"`{s}`") for s in ("prepare", "05_dpr_training.baseline-2022",
                                            "05_dpr_training.baseline-2023", "results_x")]
    assert order == sorted(order)
    # the study: the related system's rows trained with one seed (dpr.related_seeds) beside rows of three
    seeded["accuracy"]["dpr_poly_baseline"] = {"nq": {"all": {"n": 10, "top1": 45.0, "top1_ci_low": 35.0,
                                                              "top1_ci_high": 55.0}}}
    (d / "table3.json").write_text(json.dumps(seeded))
    text = report.render_results(d)
    assert ("Rows with ± were trained with 3 seeds (mean ± sd over seeds), the other trained rows with 1 "
            "(`dpr.related_seeds`)." in text) and "Dense rows trained with" not in text


def test_render_attention_files(metrics):
    (metrics / "attention_bias.json").write_text(json.dumps({
        "sampling": {"pool": 1000, "excluded_test_gold": 10, "sampled": 100},
        "paper": {"highest_first_half": 0.65, "lowest_second_half": 0.6},
        "encoders": {"dpr_baseline": {"passages": 100, "passages_with_enough_entities": 40, "mean_entropy": 4.0,
                                      "mean_first_sentence_share": 0.4, "highest_first_half": 0.6,
                                      "highest_first_half_ci": [0.5, 0.7], "lowest_second_half": 0.5,
                                      "lowest_second_half_ci": [0.4, 0.6]}}}))
    (metrics / "encoder_comparison.json").write_text(json.dumps({
        "setting": {"passages": 100, "n_boot": 500},
        "attention": {"encoders": {"dpr_mixed": {"entropy": 4.1, "entropy_ci_low": 4.0, "entropy_ci_high": 4.2,
                                                 "entropy_n": 100, "later_sentence_share": 60.0,
                                                 "later_sentence_share_ci_low": 58.0,
                                                 "later_sentence_share_ci_high": 62.0}},
                      "paired": {"dpr_mixed_minus_dpr_baseline": {
                          "entropy_diff": 0.05, "entropy_ci_low": 0.01, "entropy_ci_high": 0.09, "entropy_p": 0.02,
                          "later_sentence_share_diff": 1.5, "later_sentence_share_ci_low": 0.5,
                          "later_sentence_share_ci_high": 2.5, "later_sentence_share_p": 0.004,
                          "later_sentence_share_n": 99}}},
        "table1_probe": {"dpr_baseline": {"n_passages": 40, "highest": 20.0, "highest_ci_low": 19.0,
                                          "highest_ci_high": 21.0, "lowest": 19.0, "lowest_ci_low": 18.0,
                                          "lowest_ci_high": 20.0, "difference": 1.0, "difference_ci_low": 0.2,
                                          "difference_ci_high": 1.8, "difference_p": 0.01, "highest_wins": 60.0,
                                          "highest_wins_ci_low": 45.0, "highest_wins_ci_high": 75.0}}}))
    text = report.render_results(metrics)
    assert "| DPR | 100 | 40 | 4.00 | 40.0 | 60.0 [50.0, 70.0] | 50.0 [40.0, 60.0] |" in text
    assert "| Mixed-DPR | 100 | 4.10 [4.00, 4.20] | 4.10 | 60.0 [58.0, 62.0] |" in text
    assert "| Mixed-DPR - DPR | 99 | +0.050 [+0.010, +0.090], p 0.020 | +1.50 [+0.50, +2.50], p 0.004 | +1.8 |" in text
    assert "| DPR | 40 | 20.00 [19.00, 21.00] | 19.00 [18.00, 20.00] | +1.00 [+0.20, +1.80], p 0.010 " \
           "| 60.0 [45.0, 75.0] | 73.7 vs 72.1 |" in text


README = ("# Title\n\nIntro.\n\n## What we found\n\n<!-- claim:mini:start -->\nold numbers\n"
          "<!-- claim:mini:end -->\n\n## After\n")
PAIRED = {"dpr_uncon_minus_dpr_baseline": {"nq": {"all": {"n": 10, "top1_diff": 2.0, "top1_ci_low": 1.0,
                                                          "top1_ci_high": 3.0, "top1_p": 0.01}}}}


def test_each_profile_gets_its_page_and_the_readme_its_claims_table(metrics, tmp_path, capsys):
    table = json.loads((metrics / "table3.json").read_text())
    table["paired"].update(PAIRED)
    (metrics / "table3.json").write_text(json.dumps(table))
    readme, page = tmp_path / "README.md", metrics / "README.md"
    readme.write_text(README)
    args = ["--readme", str(readme), "--metrics-dir", str(metrics)]
    assert report.main(args + ["--check"]) == 1
    assert readme.read_text() == README and not page.exists()  # --check writes nothing
    assert report.update_files(readme, metrics) == [page, readme]
    text = page.read_text()
    assert text.startswith("# Results of the `mini` profile\n\n_Generated by `python -m ecqg.report`")
    assert "\n## Table 3" in text and "\n####" not in text and "\n## The paper's claims, checked" in text
    block = readme.read_text().split("<!-- claim:mini:start -->")[1].split("<!-- claim:mini:end -->")[0]
    assert "old numbers" not in block and "| Table 3, NQ Top-1: UnCon-DPR - DPR > 0 | +1.5 | 10 |" in block
    assert f"[{metrics.as_posix()}/README.md]({metrics.as_posix()}/README.md)" in block
    assert readme.read_text().endswith("<!-- claim:mini:end -->\n\n## After\n")
    assert report.main(args + ["--check"]) == 0
    assert report.update_files(readme, metrics) == []  # idempotent
    (metrics / "stage_prepare.json").write_text(json.dumps({"wall_time_s": 2.5}))
    assert report.main(args + ["--check"]) == 1
    assert "README.md: stale against" in capsys.readouterr().err
    assert report.main(args) == 0 and report.main(args + ["--check"]) == 0
    # a profile without claim markers in the README gets its page only; the README is left alone
    study = metrics.parent / "study"
    study.mkdir()
    (study / "table3.json").write_text(json.dumps({**TABLE3, "setting": {"profile": "study",
                                                                        "corpus_passages": 500}}))
    before = readme.read_text()
    assert report.update_files(readme, study) == [study / "README.md"] and readme.read_text() == before
    assert "500 corpus passages" in (study / "README.md").read_text()


def test_broken_claim_markers_are_an_error(metrics, tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- claim:mini:end -->\n<!-- claim:mini:start -->\n")
    with pytest.raises(ValueError, match="comes before"):
        report.update_files(readme, metrics)
    readme.write_text("<!-- claim:mini:start -->\n<!-- claim:mini:start -->\n<!-- claim:mini:end -->\n")
    with pytest.raises(ValueError, match="exactly one"):
        report.update_files(readme, metrics)
    assert report.main(["--readme", str(readme), "--metrics-dir", str(metrics), "--check"]) == 2
    assert "exactly one" in capsys.readouterr().err
    readme.write_text("<!-- claim:mini:start -->\n<!-- claim:mini:end -->\n")   # nothing to check the claims on
    with pytest.raises(ValueError, match="no metrics to check the paper's claims against"):
        report.update_files(readme, metrics)


@pytest.mark.parametrize("profile", ["mini", "study"])
def test_committed_results_pages_and_the_readme_are_current(profile, monkeypatch):
    """What the repository shows is what its metrics say: each committed profile's page and the README's table
    (from the repository root, as the report stage runs)."""
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    assert report.main(["--profile", profile, "--check"]) == 0, f"run `python -m ecqg.report --profile {profile}`"


def test_settings_date_and_base_encoder_note(metrics):
    (metrics / "stage_prepare.json").write_text(json.dumps({"wall_time_s": 1.5, "finished": "2026-11-20"}))
    (metrics / "stage_results.json").write_text(json.dumps({"wall_time_s": 30.0, "finished": "2026-11-21"}))
    table3 = {**TABLE3, "setting": {**TABLE3["setting"], "base_model": "bundled:minilm", "dpr_seeds": "1 2 3"}}
    (metrics / "table3.json").write_text(json.dumps(table3))
    (metrics / "dpr_baseline_s1_training.json").write_text(json.dumps({"train_examples": 300, "steps": 9}))
    text = report.render_results(metrics)
    assert "| run finished (UTC) | 2026-11-21 |" in text and "| gold fine-tuning (records / steps) | 300 / 9 |" in text
    assert "| dense training seeds | 1 2 3 |" in text
    assert "What the base encoder already knows" in text and "64M" in text and "PAQ" in text
    table3["setting"]["base_model"] = "bert-base-uncased"
    (metrics / "table3.json").write_text(json.dumps(table3))
    assert "What the base encoder already knows" not in report.render_results(metrics)


MECHANISM = {
    "setting": {"questions": 10, "n_boot": 100, "min_entities": 3},
    "position": {
        "counts": {"ok": 9, "no_answer_in_gold": 1, "sentence 1": 5, "sentence 2": 4},
        "accuracy": {"dpr_mixed": {"sentence 1": {"n": 5, "top1": 80.0, "top1_ci_low": 60.0, "top1_ci_high": 100.0},
                                   "sentence 2": {"n": 4, "top1": 50.0, "top1_ci_low": 25.0, "top1_ci_high": 75.0}}},
        "psi": {"dpr_mixed": {"top1": 0.375, "top1_ci_low": 0.1, "top1_ci_high": 0.6},
                "dpr_mixed_minus_dpr_baseline": {"top1": -0.1, "top1_ci_low": -0.2, "top1_ci_high": 0.0,
                                                 "top1_p": 0.04}},
        "paired": {"dpr_mixed_minus_dpr_baseline": {"sentence 2": {"n": 4, "top1_diff": 25.0, "top1_ci_low": 0.0,
                                                                   "top1_ci_high": 50.0, "top1_p": 0.2}}}},
    "entity_attention": {"counts": {"ok": 3, "answer_not_an_entity": 6, "most attended": 2, "least attended": 1},
                         "accuracy": {"bm25": {"most attended": {"n": 2, "top1": 50.0},
                                               "least attended": {"n": 1, "top1": 0.0}}}, "paired": {}},
    "moved_sentence": {"counts": {"probed": 4, "eligible": 4, "answer_in_sentence_1": 5, "truncated_by_encoder": 0},
                       "systems": {"dpr_baseline": {"n": 4, "gap": 0.5, "ci_low": 0.2, "ci_high": 0.8, "p": 0.01,
                                                    "seeds": 3, "seed_sd": 0.1, "front_higher_pct": 75.0}},
                       "paired": {"dpr_mixed_minus_dpr_baseline": {"n": 4, "gap": -0.2, "ci_low": -0.4,
                                                                   "ci_high": 0.0, "p": 0.05}}},
}


def test_render_mechanism(metrics):
    (metrics / "mechanism.json").write_text(json.dumps(MECHANISM))
    text = report.render_results(metrics)
    section = text.split("#### Where the method acts (notebook 07)")[1].split("#### ")[0]
    assert "| system | sentence 1 (n=5) | sentence 2 (n=4) | PSI |" in section
    assert "| Mixed-DPR (ours) | 80.0 [60.0, 100.0] | 50.0 [25.0, 75.0] | 0.375 [0.100, 0.600] |" in section
    assert "| Mixed-DPR (ours) - DPR (ours) | -0.100 [-0.200, +0.000], p 0.040 |" in section
    assert "| Mixed-DPR (ours) - DPR (ours) | sentence 2 | 4 | +25.0 [+0.0, +50.0], p 0.200 |" in section
    assert "no answer in gold 1" in section and "answer not an entity 6" in section
    assert "| BM25 | 50.0 | 0.0 |" in section
    assert "| DPR (ours) | 4 | 3 | +0.500 ± 0.100 [+0.200, +0.800] | 75.0 |" in section
    assert "| Mixed-DPR (ours) - DPR (ours) | 4 | -0.200 [-0.400, +0.000], p 0.050 |" in section
    head = report.headline(metrics)
    assert head == {"top5.bm25": 60.0, "top5.mixed": 70.0, "gap.dpr": 0.5}   # no PSI at Top-5 in the fixture
    full = report.headline(metrics, full=True)
    assert full["top1.bm25"] == 30.0 and full["top1.mixed-bm25"] == 20.0 and full["gap.dpr"] == 0.5


def test_compare_two_profiles(metrics, capsys):
    other = metrics.parent / "study"
    other.mkdir()
    table3 = json.loads(json.dumps(TABLE3))
    table3["accuracy"]["bm25"]["nq"]["all"]["top1"] = 35.5
    (other / "table3.json").write_text(json.dumps(table3))
    assert report.main(["--compare", str(metrics), str(other)]) == 0
    out = capsys.readouterr().out
    assert "| `top1.bm25` | 30.000 | 35.500 | +5.500 |" in out
    assert report.main(["--compare", str(metrics), str(metrics.parent / "absent")]) == 2


def test_bad_metrics_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no metrics directory"):
        report.render_results(tmp_path / "absent")
    (tmp_path / "stage_x.json").write_text(json.dumps({"stage": "x"}))
    with pytest.raises(ValueError, match="stage_x.json: no 'wall_time_s'"):
        report.render_results(tmp_path)
    (tmp_path / "stage_x.json").write_text("{not json")
    with pytest.raises(ValueError, match="stage_x.json"):
        report.render_results(tmp_path)


def test_wall_times_list_only_the_stages_the_current_pipeline_declares(metrics):
    """A stage file left by an earlier run (a seed no longer trained) is not added to this run's total."""
    declared = {(metrics / "stage_prepare.json").as_posix(), (metrics / "stage_results.json").as_posix()}
    text = report.render_results(metrics, declared)
    assert "`zzz_new`" not in text and "| **total** | **31.5** | **0.5** |" in text
    assert "1 stage file(s) of earlier runs that the current pipeline no longer declares are left out" in text


def test_declared_metric_files_follow_params(tmp_path):
    from ecqg import config, dvc_stages

    repo = report.Path(__file__).resolve().parents[1]
    params = config.preset("mini", repo / "params")
    params["dpr"]["seeds"] = [2022, 2023, 2024]
    files = dvc_stages.metric_files(repo / "dvc.yaml", params)
    assert "results/mini/stage_05_dpr_training.baseline-2024.json" in files
    params["dpr"]["seeds"] = [2022]
    files = dvc_stages.metric_files(repo / "dvc.yaml", params)
    assert "results/mini/stage_05_dpr_training.baseline-2024.json" not in files
    assert "results/mini/stage_retrieve_dense_uncon_pre-2022.json" in files


def test_related_system_sections_render_codes_and_pseudo_sets(metrics):
    (metrics / "poly_codes.json").write_text(json.dumps({
        "codes_k": 2, "passages": 5, "probe_questions": 4,
        "systems": {"dpr_poly_baseline": {"similarity": {"codes": 0.12, "pooled": 0.97},
                                          "codes": {"0": {"entropy": 3.1, "later_sentence_share": 0.4, "wins": 3},
                                                    "1": {"entropy": 2.9, "later_sentence_share": 0.6, "wins": 1},
                                                    "mean": {"entropy": 3.0, "later_sentence_share": 0.5,
                                                             "wins": None}}}}}))
    (metrics / "stage_pseudo_queries.json").write_text(json.dumps({
        "stage": "pseudo_queries", "wall_time_s": 4.0, "pool_set": "uncon", "m": 8, "sizes": {"etm": 7, "rsm": 7},
        "etm": {"passages": 6, "repeated_passage": 1, "short_queries": 0, "mean_words": 9.5,
                "negatives_same_title_skipped": 3, "negatives_fewer_hard_negatives": 0},
        "rsm": {"passages": 6, "repeated_passage": 1, "short_queries": 2, "mean_words": 7.25},
        "sweep": {"uncon": {"positive_bm25_top1": 0.25},
                  "etm_m8": {"positive_bm25_top1": 0.9, "mean_words": 9.5, "positives_in_index": 1200,
                             "queries": 5000}}}))
    text = report.render_results(metrics)
    codes = text.split("#### Poly-DPR's codes")[1].split("####")[0]
    assert "Poly-DPR (ours)" in codes and "pooled 0.970" in codes
    assert "| 1 | 2.900 | 60.0 | 1 |" in codes and "| mean | 3.000 | 50.0 | – |" in codes
    sets = text.split("#### Generator-free pre-training sets (ETM / RSM)")[1].split("####")[0]
    assert "| ETM | 7 | 6 | 1 | 0 | 9.5 | 3 | 0 |" in sets and "| RSM | 7 | 6 | 1 | 2 | 7.2 | – | – |" in sets
    assert "| etm_m8 | 90.0 | 1,200 of 5,000 | 9.5 |" in sets and "| uncon | 25.0 | – | – |" in sets


def test_the_two_by_two_is_answered_with_p_values(metrics):
    def node(diff, p):
        return {"n": 10, "top5_diff": diff, "top5_ci_low": diff - 1, "top5_ci_high": diff + 1, "top5_p": p}
    table = json.loads((metrics / "table3.json").read_text())
    table["paired"].update({"dpr_poly_baseline_minus_dpr_baseline": {"nq": {"all": node(2.0, 0.01)}},
                            "dpr_mixed_minus_dpr_baseline": {"nq": {"all": node(-0.5, 0.4)}},
                            "dpr_uncon_minus_dpr_etm": {"nq": {"all": node(-3.0, 0.0004)}}})
    (metrics / "table3.json").write_text(json.dumps(table))
    text = report.render_results(metrics)
    answers = text.split("#### The questions the comparisons answer")[1].split("####")[0]
    arch = answers.split("**Architecture or data?")[1].split("**Does")[0]
    assert "| architecture: Poly-DPR - DPR | 10 | – | +2.0 [+1.0, +3.0], p 0.010: A better | – |" in arch
    assert "| data: Mixed-DPR - DPR | 10 | – | -0.5 [-1.5, +0.5], p 0.400: no difference shown | – |" in arch
    assert "given Mixed data" not in arch                     # a pair the metrics lack is left out, not invented
    assert "| UnCon-DPR - ETM-DPR | 10 | – | -3.0 [-4.0, -2.0], p < .001: B better | – |" in answers


def test_the_papers_claims_are_checked_with_direction_and_p_values(metrics):
    from ecqg.report.claim import verdict

    table = json.loads((metrics / "table3.json").read_text())
    table["paired"].update({
        "dpr_uncon_minus_dpr_baseline": {"nq": {"all": {"n": 10, "top1_diff": 2.0, "top1_ci_low": 1.0,
                                                        "top1_ci_high": 3.0, "top1_p": 0.01}}},
        "dpr_mixed_minus_dpr_uncon": {"nq": {"all": {"n": 10, "top1_diff": -2.0, "top1_ci_low": -3.0,
                                                     "top1_ci_high": -1.0, "top1_p": 0.002}}}})
    (metrics / "table3.json").write_text(json.dumps(table))
    (metrics / "encoder_comparison.json").write_text(json.dumps({"attention": {"paired": {
        "dpr_uncon_minus_dpr_baseline": {"entropy_diff": 0.05, "entropy_ci_low": -0.01, "entropy_ci_high": 0.1,
                                         "entropy_p": 0.2, "entropy_n": 30}}}}))
    (metrics / "attention_bias.json").write_text(json.dumps({"encoders": {"dpr_baseline": {
        "n_passages": 40, "highest_first_half": 0.3, "highest_first_half_ci": [0.2, 0.4]}}}))
    (metrics / "mechanism.json").write_text(json.dumps({"moved_sentence": {
        "systems": {"dpr_baseline": {"gap": -0.2}, "dpr_mixed": {"gap": -0.15}},
        "paired": {"dpr_mixed_minus_dpr_baseline": {"n": 50, "gap": 0.05, "ci_low": 0.02, "ci_high": 0.08,
                                                    "p": 0.001}}}}))
    text = report.render_results(metrics)
    claims = text.split("#### The paper's claims, checked")[1].split("####")[0]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in claims.splitlines() if line.startswith("| ")}
    assert "| +1.5 | 10 | +2.0 [+1.0, +3.0] points | 0.010 | holds |" in rows["Table 3, NQ Top-1: UnCon-DPR - DPR > 0"]
    assert rows["Table 3, NQ Top-1: Mixed-DPR - UnCon-DPR > 0"].endswith("| 0.002 | reversed |")
    assert rows["attention entropy: UnCon-DPR - DPR < 0"].endswith("| 0.200 | not shown |")
    # 30% of passages put the highest-attended entity first: 20 points below the 50% of no bias, CI clear of 0
    assert "-20.0 [-30.0, -10.0] points | CI | reversed |" in rows[
        "position bias, DPR: highest-attended entity in the first half, % of passages - 50 > 0"]
    # DPR's gap is -0.2, Mixed's -0.15: nearer 0, the prediction's direction; both gaps are in the row
    moved = next(v for k, v in rows.items() if k.startswith("mechanism: moved-sentence gap"))
    assert "(gaps: -0.200 -> -0.150)" in moved and "+0.050 [+0.020, +0.080] score | 0.001 | holds |" in moved
    assert not any(k.startswith("Table 3, NQ Top-5") for k in rows)          # absent metrics: no row, not a guess
    assert all(line.count(" | ") == 5 for line in rows.values())            # no cell breaks the table
    assert "2 hold, 2 reversed, 1 not shown" in claims
    assert verdict(1.0, -0.5, 2.0, None, 1.0) == "not shown" and verdict(None, None, None, None, 1.0) == "–"
    # -0.2 -> +0.3: the right direction, but a larger gap on the other side of 0
    assert verdict(0.5, 0.4, 0.6, 0.001, 1.0, overshoot=True) == "overshoots"


def test_claim_rows_say_how_many_training_seeds_agree_where_06_measured_several():
    from ecqg.report.claim import claim_rows

    first = {"later_sentence_share_diff": 2.0, "later_sentence_share_ci_low": 1.0,
             "later_sentence_share_ci_high": 3.0, "later_sentence_share_p": 0.001, "later_sentence_share_n": 40}
    comparison = {"attention": {"paired": {"dpr_mixed_minus_dpr_baseline": first}}}
    row = next(r for r in claim_rows({"comparison": comparison}) if r["claim"].startswith("later-sentence share: M"))
    assert row["claim"] == "later-sentence share: Mixed-DPR - DPR > 0" and row["verdict"] == "holds"
    comparison["seeds"] = {"n_seeds": 3, "alpha": 0.05, "attention_paired": {"dpr_mixed_minus_dpr_baseline": {
        "across": {"later_sentence_share_mean": 1.5, "later_sentence_share_same_sign": 2,
                   "later_sentence_share_significant_same_sign": 1}}}}
    row = next(r for r in claim_rows({"comparison": comparison}) if r["claim"].startswith("later-sentence share: M"))
    assert row["claim"].endswith("(first training seed; over 3 seeds: mean +1.50, 2 of 3 with its sign, "
                                 "1 of them p < 0.05)")
    assert row["verdict"] == "holds"                       # the verdict stays the first seed's; the text qualifies it


def test_the_readme_verdict_is_what_the_study_metrics_say():
    """The README's hand-written verdict sentence is checked against the claims the study's metrics give: the
    retrieval gain reversed or absent, the entropy shift over UnCon-DPR with one sign at every training seed, the
    later-sentence shift over DPR with different signs across seeds."""
    from pathlib import Path

    from ecqg.report.claim import claim_rows
    from ecqg.report.format import load_metrics

    root = Path(__file__).resolve().parents[1]
    study = root / "results" / "study"
    metrics = {name: load_metrics(study, f"{file}.json") for name, file in (
        ("table3", "table3"), ("comparison", "encoder_comparison"), ("bias", "attention_bias"),
        ("mechanism", "mechanism"))}
    rows = {r["claim"].removesuffix(r.get("detail", "")): r for r in claim_rows(metrics)}
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    assert ("**Neither the retrieval gain nor a steady attention shift reproduces.** On NQ Top-1 Mixed-DPR is 1.8 "
            "points below DPR and level with UnCon-DPR") in readme
    assert rows["Table 3, NQ Top-1: Mixed-DPR - DPR > 0"]["verdict"] == "reversed"
    assert round(rows["Table 3, NQ Top-1: Mixed-DPR - DPR > 0"]["diff"], 1) == -1.8
    assert rows["Table 3, NQ Top-1: Mixed-DPR - UnCon-DPR > 0"]["verdict"] == "not shown"
    per_seed = metrics["comparison"]["seeds"]["attention_paired"]     # s<seed> per training seed, and "across"

    def each_seed(pair: str, measure: str) -> list[float]:
        return [v[f"{measure}_diff"] for k, v in per_seed[pair].items() if k[0] == "s" and k[1:].isdigit()]

    entropy_over_uncon = each_seed("dpr_mixed_minus_dpr_uncon", "entropy")
    share_over_dpr = each_seed("dpr_mixed_minus_dpr_baseline", "later_sentence_share")
    assert len(entropy_over_uncon) == 3 and all(d > 0 for d in entropy_over_uncon)
    assert min(share_over_dpr) < 0 < max(share_over_dpr)
