"""Each profile's results page and the README's claims table are rendered from metrics files and checked for
staleness."""

import json

import pytest
from metrics_records import write_record

from ecqg.core import metrics_files
from ecqg.stages import report

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
    write_record(d, metrics_files.Mixing, sizes={"uncon": 800, "mixed": 800})
    for stage, seconds in (("results", 30.0), ("prepare", 1.5), ("zzz_new", 60.0)):
        (d / f"stage_{stage}.json").write_text(json.dumps({"stage": stage, "wall_time_s": seconds}))
    (d / "stage_prepare.json").write_text(json.dumps({"stage": "prepare", "wall_time_s": 1.5, "finished": "2026-12-02",
                                                      "host": {"cpu": "AMD EPYC", "cores": 2, "cpu_native_bf16": True,
                                                               "gpus": []}}))
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
    assert "| `sizes.mixed` | 800 |" in text and "| `sizes.uncon` | 800 |" in text
    assert "question_generation stage has not run yet" in text and "filtering stage has not run yet" in text
    assert "attention_bias stage has not run yet" in text
    # wall times: pipeline order first, unknown stages after, and the total
    assert text.index("`prepare`") < text.index("`zzz_new`")
    assert "| **total** | **91.5** | **1.5** |" in text
    # where each stage ran (a resumed run may span hosts); stages recorded before hosts were: '-'
    assert "| `prepare` | 1.5 | 0.0 | 2026-12-02 | AMD EPYC, 2 cores, native bf16 |" in text
    assert "| `results` | 30.0 | 0.5 | - | - |" in text and "kinds of host" not in text
    assert report.render_results(metrics) == text  # deterministic
    (metrics / "stage_zzz_new.json").write_text(json.dumps({"wall_time_s": 60.0, "host": {
        "cpu": "Xeon", "cores": 16, "cpu_native_bf16": True, "gpus": ["NVIDIA H200"]}}))
    text = report.render_results(metrics)
    assert "| Xeon, 16 cores, native bf16, 1 x NVIDIA H200 |" in text and "ran on 2 kinds of host" in text


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
    write_record(metrics, metrics_files.AttentionBias, **{
        "sampling": {"pool": 1000, "excluded_test_gold": 10, "sampled": 100},
        "paper": {"highest_first_half": 0.65, "lowest_second_half": 0.6},
        "encoders": {"dpr_baseline": {"passages": 100, "passages_with_enough_entities": 40, "mean_entropy": 4.0,
                                      "mean_first_sentence_share": 0.4, "highest_first_half": 0.6,
                                      "highest_first_half_ci": [0.5, 0.7], "lowest_second_half": 0.5,
                                      "lowest_second_half_ci": [0.4, 0.6]}}})
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
    assert text.startswith("# Results of the `mini` profile\n\n_Generated by `python -m ecqg.stages.report`")
    assert "\n## Table 3" in text and "\n####" not in text and "\n## The paper's claims, checked" in text
    block = readme.read_text().split("<!-- claim:mini:start -->")[1].split("<!-- claim:mini:end -->")[0]
    assert "old numbers" not in block and "| Table 3, NQ Top-1: UnCon-DPR - DPR | +1.5 | 1 v 1 | – |" in block
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


@pytest.mark.parametrize("profile", ["mini", "study", "replicates"])
def test_committed_results_pages_and_the_readme_are_current(profile, monkeypatch):
    """What the repository shows is what its metrics say: each committed profile's page and the README's table
    (from the repository root, as the report stage runs)."""
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    assert report.main(["--profile", profile, "--check"]) == 0, f"run `python -m ecqg.stages.report --profile {profile}`"


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
    assert head == {"top1.mixed": 50.0}          # the README's rows: only Mixed-DPR's NQ Top-1 is in the fixture
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


@pytest.mark.parametrize("args", [["--profile", "nosuch"], ["--profile", "nosuch", "--check"],
                                  ["--compare", "mini", "nosuch"]])
def test_an_unknown_profile_is_said_and_the_profiles_listed(args, capsys, tmp_path, monkeypatch):
    from ecqg.core import config

    monkeypatch.chdir(tmp_path)      # nothing to find here either way: the name alone is wrong
    with pytest.raises(SystemExit) as exit_:
        report.main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unknown profile 'nosuch'" in err and "dvc repro" not in err
    assert all(name in err for name in config.PROFILES) and "mini, naive, paper" in err


def test_a_known_profile_without_results_is_told_to_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert report.main(["--profile", "smoke", "--print"]) == 2
    assert "results/smoke: no metrics directory (run `dvc repro` first)" in capsys.readouterr().err


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
    from ecqg.core import config
    from ecqg.tooling import dvc_stages

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
    write_record(metrics, metrics_files.PolyCodes, **{
        "codes_k": 2, "passages": 5, "probe_questions": 4,
        "systems": {"dpr_poly_baseline": {"similarity": {"codes": 0.12, "pooled": 0.97},
                                          "codes": {"0": {"entropy": 3.1, "later_sentence_share": 0.4, "wins": 3},
                                                    "1": {"entropy": 2.9, "later_sentence_share": 0.6, "wins": 1},
                                                    "mean": {"entropy": 3.0, "later_sentence_share": 0.5,
                                                             "wins": None}}}}})
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


def _three_runs(top: float, sd: float, k: int = 5, n: int = 10) -> dict:
    """An accuracy node of a system trained three times."""
    return {"n": n, "seeds": 3, f"top{k}": top, f"top{k}_ci_low": top - 5, f"top{k}_ci_high": top + 5,
            f"top{k}_seed_sd": sd}


def test_the_two_by_two_is_answered_over_training_runs(metrics):
    def node(diff, p):
        return {"n": 10, "top5_diff": diff, "top5_ci_low": diff - 1, "top5_ci_high": diff + 1, "top5_p": p}
    table = json.loads((metrics / "table3.json").read_text())
    table["paired"].update({"dpr_poly_baseline_minus_dpr_baseline": {"nq": {"all": node(2.0, 0.01)}},
                            "dpr_mixed_minus_dpr_baseline": {"nq": {"all": node(-0.5, 0.4)}},
                            "dpr_uncon_minus_dpr_etm": {"nq": {"all": node(-6.0, 0.0004)}}})
    table["accuracy"].update({"dpr_poly_baseline": {"nq": {"all": _three_runs(72.0, 0.3)}},
                              "dpr_baseline": {"nq": {"all": _three_runs(70.0, 0.2)}},
                              "dpr_mixed": {"nq": {"all": _three_runs(69.5, 2.0)}}})
    (metrics / "table3.json").write_text(json.dumps(table))
    text = report.render_results(metrics)
    answers = text.split("#### The questions the comparisons answer")[1].split("####")[0]
    arch = answers.split("**Architecture or data?")[1].split("**Does")[0]
    # three runs each, runs that agree: a verdict over runs, Holm over the 2 tested cells
    assert "| architecture: Poly-DPR - DPR | 3 v 3 | 10 | – | +2.0 [+0.9, +3.1], p < .001: A better | – |" in arch
    # Mixed's runs scatter (sd 2): nothing shown though the question-level CI was as narrow
    # ...and Mixed-DPR - DPR is a claims row: its p and verdict are the claims table's (one comparison, one p-value)
    assert ("| data: Mixed-DPR - DPR | 3 v 3 | 10 | – | -0.5 [-4.6, +3.6], p 0.720 (claims row): no difference "
            "shown | – |") in arch
    assert "given Mixed data" not in arch                     # a pair the metrics lack is left out, not invented
    # ETM trained once: the question-level interval, and no verdict about trained models
    assert "| UnCon-DPR - ETM-DPR | 1 v 1 | 10 | – | -6.0 [-7.0, -5.0] over questions, one run | – |" in answers
    assert "Holm-corrected over the 1 tested cell of these tables outside the claims table" in answers


def _claim_metrics(metrics):
    table = json.loads((metrics / "table3.json").read_text())
    table["accuracy"].update({s: {"nq": {"all": _three_runs(top, sd, k=1, n=100)}} for s, top, sd in (
        ("dpr_baseline", 60.0, 0.3), ("dpr_uncon", 70.0, 0.4), ("dpr_mixed", 59.0, 1.5))})
    table["paired"].update({
        "dpr_uncon_minus_dpr_baseline": {"nq": {"all": {"n": 100, "top1_diff": 10.0, "top1_ci_low": 9.0,
                                                        "top1_ci_high": 11.0, "top1_p": 0.0005}}},
        "dpr_mixed_minus_dpr_uncon": {"nq": {"all": {"n": 100, "top1_diff": -11.0, "top1_ci_low": -12.0,
                                                     "top1_ci_high": -10.0, "top1_p": 0.0005}}},
        "dpr_mixed_minus_dpr_baseline": {"nq": {"all": {"n": 100, "top1_diff": -1.0, "top1_ci_low": -1.5,
                                                        "top1_ci_high": -0.5, "top1_p": 0.0005}}}})
    (metrics / "table3.json").write_text(json.dumps(table))
    (metrics / "encoder_comparison.json").write_text(json.dumps({
        "attention": {"paired": {"dpr_uncon_minus_dpr_baseline": {
            "entropy_diff": 0.05, "entropy_ci_low": 0.04, "entropy_ci_high": 0.06, "entropy_p": 0.0005,
            "entropy_n": 30}}},
        "seeds": {"n_seeds": 3, "attention_paired": {"dpr_uncon_minus_dpr_baseline": {
            f"s{seed}": {"entropy_diff": d, "entropy_ci_low": d - 0.01, "entropy_ci_high": d + 0.01}
            for seed, d in ((1, 0.05), (2, -0.04), (3, 0.02))}}}}))
    write_record(metrics, metrics_files.AttentionBias, **{"encoders": {"dpr_baseline": {
        "n_passages": 40, "highest_first_half": 0.3, "highest_first_half_ci": [0.2, 0.4]}}})
    (metrics / "mechanism.json").write_text(json.dumps({
        "moved_sentence": {
            "systems": {"dpr_baseline": {"gap": -0.2, "seeds": 3, "seed_sd": 0.01},
                        "dpr_mixed": {"gap": -0.15, "seeds": 3, "seed_sd": 0.01}},
            "paired": {"dpr_mixed_minus_dpr_baseline": {"n": 50, "gap": 0.05, "ci_low": 0.04, "ci_high": 0.06,
                                                        "p": 0.001}}},
        "entity_attention": {"accuracy": {"dpr_baseline": {
            "least attended": {"n": 50, "seeds": 3, "top5": 80.0, "top5_ci_low": 70.0, "top5_ci_high": 90.0,
                               "top5_s1": 79.0, "top5_s2": 80.0, "top5_s3": 81.0},
            "most attended": {"n": 60, "seeds": 3, "top5": 85.0, "top5_ci_low": 76.0, "top5_ci_high": 94.0,
                              "top5_s1": 84.0, "top5_s2": 86.0, "top5_s3": 85.0}}}}}))


def test_the_papers_claims_are_checked_over_training_runs(metrics):
    from ecqg.report.claim import claim_rows

    _claim_metrics(metrics)
    text = report.render_results(metrics)
    claims = text.split("#### The paper's claims, checked")[1].split("####")[0]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in claims.splitlines() if line.startswith("| ")}
    cells = {k: [c.strip() for c in v.strip("|").split(" | ")] for k, v in rows.items()}
    # UnCon over DPR by 10 points, three runs of sd 0.3-0.4: holds over runs, Holm-corrected
    uncon = cells["Table 3, NQ Top-1: UnCon-DPR - DPR > 0"]
    assert uncon[2:7] == ["3 v 3", "unpaired (summaries)", "100", "+10.0 [+8.8, +11.2] points", "< .001"]
    assert uncon[-1] == "holds"
    assert cells["Table 3, NQ Top-1: Mixed-DPR - UnCon-DPR > 0"][5:7] == ["-11.0 [-13.9, -8.1] points", "0.002"]
    assert cells["Table 3, NQ Top-1: Mixed-DPR - UnCon-DPR > 0"][-1] == "reversed"
    # Mixed's runs scatter (sd 1.5): -1.0 was "p < .001" over questions, and is nothing over runs; its own test (t
    # with Satterthwaite's df, at the Holm level the row faces) calls 5.2 points significant and finds 6.2 with 80%
    # power (3.6 to 33 as the runs' sd is uncertain), so the paper's +1.6 had an 8% chance, its +0.9 translated 5%
    mixed = cells["Table 3, NQ Top-1: Mixed-DPR - DPR > 0"]
    assert mixed[5:10] == ["-1.0 [-4.3, +2.3] points", "1.000", "5.2", "6.2 [3.6, 33.2]", "8% / 5%"]
    assert mixed[-1] == "not shown" and mixed[-2] == "-1.0 [-1.5, -0.5]"
    # attention: the three runs' differences disagree in sign, so a first-run p < .001 no longer decides
    entropy = next(v for k, v in cells.items() if k.startswith("attention entropy: UnCon-DPR - DPR"))
    assert entropy[0].endswith("(runs: +0.050, -0.040, +0.020)") and entropy[-1] == "not shown"
    assert entropy[-2] == "+0.050 [+0.040, +0.060] (run 1)"
    # the position bias is measured on one DPR: no interval over runs, no verdict
    bias = cells["premise, position bias, DPR: highest-attended entity in the first half, % of passages - 50 > 0"]
    assert bias[5] == "–" and bias[-2] == "-20.0 [-30.0, -10.0] (run 1)" and bias[-1] == "one run"
    # the retrieval premise from each run's slice accuracies: least - most = -5, -6, -4
    premise = next(v for k, v in cells.items() if k.startswith("premise, DPR Top-5"))
    assert premise[0].endswith("(80.0 vs 85.0)") and premise[2:6] == ["3", "same runs (summaries)", "50 v 60",
                                                                "-5.0 [-18.5, +8.5] points"]
    # premise rows come first; absent metrics give no row, not a guess; no cell breaks the table
    order = list(rows)[2:]                                   # after the header and its rule
    assert all(k.startswith("premise") for k in order[:2]) and not any(k.startswith("premise") for k in order[2:])
    assert not any(k.startswith("Table 3, NQ Top-5") for k in rows)
    assert all(line.count(" | ") == 11 for line in rows.values())      # 12 columns
    assert "2 hold, 1 reversed, 3 not shown, 1 measured on one run only" in claims
    assert "Holm-corrected over the 6 rows of the claims table that have such an interval" in claims
    # Holm over the rows with an interval over runs
    tested = [r for r in claim_rows({"table3": json.loads((metrics / "table3.json").read_text())})]
    assert all(r["p_holm"] >= r["p"] for r in tested)


def test_one_run_per_arm_gives_no_verdict_about_trained_models(metrics):
    """mini trains each system once: every Table 3 row shows the question-level interval and "one run"."""
    from ecqg.report.claim import claim_rows

    table = json.loads((metrics / "table3.json").read_text())
    table["paired"]["dpr_mixed_minus_dpr_baseline"] = {"nq": {"all": {
        "n": 10, "top1_diff": 5.0, "top1_ci_low": 4.0, "top1_ci_high": 6.0, "top1_p": 0.0005}}}
    (row,) = claim_rows({"table3": table})
    assert row["verdict"] == "one run" and row["runs"] is None and row["p_holm"] is None
    assert (row["diff"], row["low"], row["high"]) == (5.0, 4.0, 6.0)        # shown, named for what it is


def _committed_claims(profile: str) -> tuple[dict, dict, str]:
    """A committed profile's claims rows by claim text, its metrics, and the README's answer in full
    (docs/findings.md) as one line of words."""
    from pathlib import Path

    from ecqg.report.claim import claim_rows
    from ecqg.report.evidence import claim_inputs

    root = Path(__file__).resolve().parents[1]
    metrics = claim_inputs(root / "results" / profile)     # with the per-run files, as the page computes them
    rows = {r["claim"].removesuffix(r.get("detail", "")): r for r in claim_rows(metrics)}
    return rows, metrics, " ".join((root / "docs" / "findings.md").read_text(encoding="utf-8").split())


def test_the_readme_verdict_is_what_the_study_metrics_say():
    """The README's hand-written answer is checked against the claims the study's metrics give over training runs:
    nothing about trained models shown either way, the figures it quotes (interval, detectable effect, power at the
    paper's size, the premise rows) those of the generated table."""
    rows, _, readme = _committed_claims("study")

    def interval(row) -> str:
        d = 3 if row["unit"] == "nats" else 2 if row["unit"] == "score" else 1
        return f"{row['diff']:+.{d}f} [{row['low']:+.{d}f}, {row['high']:+.{d}f}]"

    assert ("**With training runs as the unit, no difference between DPR, UnCon-DPR and Mixed-DPR is shown, in "
            "either direction.**") in readme
    for k in (1, 5):
        for pair in ("UnCon-DPR - DPR", "Mixed-DPR - UnCon-DPR", "Mixed-DPR - DPR"):
            assert rows[f"Table 3, NQ Top-{k}: {pair} > 0"]["verdict"] == "not shown"
    mixed = rows["Table 3, NQ Top-1: Mixed-DPR - DPR > 0"]
    assert f"Mixed-DPR - DPR is {mixed['diff']:.1f} points, 95% interval over the runs [{mixed['low']:+.1f}, " \
           f"{mixed['high']:+.1f}]" in readme
    assert f"a difference of {mixed['detectable']:.1f} points 4 times in 5" in readme
    assert f"an effect of the paper's +1.6 had a power of {100 * mixed['power_at_paper']:.0f}% to show" in readme
    entropy = rows["attention entropy: Mixed-DPR - UnCon-DPR > 0"]
    assert entropy["verdict"] == "not shown" and entropy["power_at_paper"] > 0.5
    assert f"the paper's +0.30 had a power of {100 * entropy['power_at_paper']:.0f}%" in readme
    assert f"entropy is {entropy['diff']:+.3f} nats [{entropy['low']:+.3f}, {entropy['high']:+.3f}]" in readme
    probe = rows["premise, Table 1 probe, DPR: highest- minus lowest-attended entity's questions > 0"]
    assert probe["verdict"] == "holds" and f"higher: {interval(probe)}, the Table 1 probe" in readme
    premise = rows["premise, DPR Top-5: questions on its least- minus most-attended answer entity < 0"]
    assert premise["verdict"] == "not shown" and premise["diff"] > 0 and f"Top-5 {interval(premise)}" in readme
    assert not any(r["verdict"] in ("holds", "reversed") for r in rows.values() if not r["premise"])


def test_the_readme_answer_of_the_replicates_run_is_what_its_metrics_say():
    """The hand-written answer on the five-run profile (README items 2-3, docs/findings.md) quotes the generated
    claims table: each figure and verdict it states is the table's, so a rerun that moves them fails here."""
    from pathlib import Path

    rows, _, findings = _committed_claims("replicates")
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())

    def ci(row, d: int = 1) -> str:
        return f"[{row['low']:+.{d}f}, {row['high']:+.{d}f}]"

    mixed_uncon = rows["Table 3, NQ Top-1: Mixed-DPR - UnCon-DPR > 0"]
    uncon_dpr = rows["Table 3, NQ Top-1: UnCon-DPR - DPR > 0"]
    mixed_dpr = rows["Table 3, NQ Top-1: Mixed-DPR - DPR > 0"]
    assert mixed_uncon["verdict"] == "not shown" and {uncon_dpr["verdict"], mixed_dpr["verdict"]} == {"reversed"}
    for text in (readme, findings):
        assert f"Mixed-DPR - UnCon-DPR is {mixed_uncon['diff']:.1f} NQ Top-1" in text and ci(mixed_uncon) in text
    assert f"its test would have found {mixed_uncon['detectable']:.1f} points 4 times in 5" in findings
    assert f"under DPR ({uncon_dpr['diff']:.1f}, {mixed_dpr['diff']:.1f}), reversed" in readme
    top5 = rows["Table 3, NQ Top-5: Mixed-DPR - DPR > 0"]
    assert top5["verdict"] == "not shown" and top5["fragile"] and f"{top5['diff']:.1f} {ci(top5)}, is *fragile*" in findings
    table3 = [r for name, r in rows.items() if name.startswith("Table 3")]
    low, high = (round(100 * f(r["power_at_translated"] for r in table3)) for f in (min, max))
    assert f"Every Table 3 row had {low}-{high}% power at the paper's gains carried" in findings
    assert f"UnCon-DPR - DPR {uncon_dpr['diff']:.1f} {ci(uncon_dpr)}" in findings
    assert f"Mixed-DPR - DPR {mixed_dpr['diff']:.1f} {ci(mixed_dpr)} are reversed" in findings
    entropy = rows["attention entropy: Mixed-DPR - DPR > 0"]
    assert entropy["verdict"] == "holds" and f"entropy +{entropy['diff']:.3f} over DPR" in readme
    assert f"{entropy['diff']:+.3f} nats {ci(entropy, 3)} above DPR's" in findings
    same = rows["attention entropy: Mixed-DPR - UnCon-DPR > 0"]
    assert same["verdict"] == "not shown" and f"Mixed - UnCon {same['diff']:+.3f} {ci(same, 3)}, not shown" in findings
    uncon = rows["attention entropy: UnCon-DPR - DPR < 0"]
    assert uncon["verdict"] == "reversed" and f"({uncon['diff']:+.3f} over DPR" in findings
    share = rows["later-sentence share: Mixed-DPR - DPR > 0"]
    assert share["verdict"] == "holds" and f"later-sentence share {share['diff']:+.2f} points {ci(share, 2)}" in findings
    least = rows["mechanism: Mixed-DPR - DPR, Top-5 on the least-attended answer entity's questions > 0"]
    assert least["verdict"] == "not shown" and f"{least['diff']:.1f} Top-5 {ci(least)}, not shown" in findings
    assert "no worse" not in findings and "not conditioning" not in findings    # sentences the numbers do not carry
