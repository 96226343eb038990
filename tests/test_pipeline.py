"""The DVC pipeline: dvc.yaml agrees with ecqg/core/paths.py and params, and the smoke profile's DAG runs end to end."""

import ast
import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dag_runs
import nbformat
import pytest
import yaml

from ecqg.core import config, paths
from ecqg.tooling import dvc_stages
from ecqg.core.config import RULES

REPO = Path(__file__).resolve().parents[1]
DVC_YAML = yaml.safe_load((REPO / "dvc.yaml").read_text())
STAGES = DVC_YAML["stages"]


PARAMS = yaml.safe_load((REPO / "params.yaml").read_text())


def _expanded_stages(params: dict | None = None):
    """(name, stage) as DVC expands them, from params.yaml (or ``params``)."""
    return dvc_stages.expanded_stages(DVC_YAML, PARAMS if params is None else params)


_declared_paths = dvc_stages.declared_paths


def test_every_output_path_is_one_of_ecqg_paths():
    known = {str(v) for v in vars(paths).values() if isinstance(v, Path) and v != paths.OUTPUTS}
    plots = str(paths.plot_data(PARAMS["profile"], "x").parent)
    for name, stage in _expanded_stages():
        for entry in stage.get("outs", []):
            out = next(iter(entry)) if isinstance(entry, dict) else entry
            if out.startswith(plots + "/"):   # plot data: committed like the metrics, never in the DVC cache
                assert isinstance(entry, dict) and entry[out] == {"cache": False}, f"{name}: {out} must be cache: false"
                continue
            assert any(out == k or out.startswith(k + "/") for k in known), f"{name}: {out} not in ecqg/core/paths.py"
        for metric in _declared_paths(stage, "metrics"):
            # one folder per profile, so another profile's run never overwrites these committed files
            assert metric.startswith(f"{paths.RESULTS}/{PARAMS['profile']}/"), f"{name}: {metric} outside results/"


@pytest.mark.parametrize("profile", config.PROFILES)
def test_every_input_file_params_names_is_a_dependency(profile):
    """An input outside data/ (the paper profile's downloads/) must be a DVC dependency too: editing it must make
    `dvc status` say what reruns."""
    params = config.preset(profile, REPO / "params")
    deps = {d for _, stage in _expanded_stages(params) for d in stage.get("deps", [])}
    inputs = [params["data"][key.split(".", 1)[1]] for key in config.INPUT_KEYS]
    inputs += list(params["data"]["test_sets"].values())
    assert not set(inputs) - deps, f"{profile}: inputs that no stage depends on: {sorted(set(inputs) - deps)}"


def test_metrics_are_committed_not_cached():
    for name, stage in _expanded_stages():
        for entry in stage.get("metrics", []):
            assert isinstance(entry, dict) and next(iter(entry.values())) == {"cache": False}, name


def test_stage_params_exist():
    keys = set(RULES) | {k.rsplit(".", 1)[0] for k in RULES}
    for name, stage in _expanded_stages():
        for key in stage.get("params", []):
            assert key in keys, f"{name}: params key {key} is not a known parameter"


def test_stage_commands_name_real_modules():
    for name, stage in _expanded_stages():
        assert "${" not in yaml.safe_dump(stage), f"{name}: unexpanded variable"
        module = stage["cmd"].split()[2]
        base = REPO / module.replace(".", "/")
        assert base.with_suffix(".py").is_file() or (base / "__main__.py").is_file(), f"{name}: {module} not found"
        if module == "ecqg.tooling.notebook":
            notebook = stage["cmd"].split()[3]
            assert (REPO / "notebooks" / f"{notebook}.ipynb").is_file()
            assert f"notebooks/{notebook}.ipynb" in stage["deps"], f"{name}: notebook is not a dependency"


def test_notebooks_are_clean_and_parametrised():
    for nb_path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells), nb_path
        assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{nb_path} has outputs"


def _bound_names(tree: ast.AST, imports_only: bool) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif not imports_only and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def test_no_notebook_import_rebinds_a_parameter():
    """An import named like a papermill parameter silently replaces the value DVC passed (it broke stage 06 once)."""
    for nb_path in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = [c for c in nbformat.read(nb_path, as_version=4).cells if c.cell_type == "code"]
        parameters = set().union(*(_bound_names(ast.parse(c.source), imports_only=False)
                                   for c in cells if "parameters" in c.metadata.get("tags", [])))
        for index, cell in enumerate(cells):
            if "parameters" not in cell.metadata.get("tags", []):
                clash = parameters & _bound_names(ast.parse(cell.source), imports_only=True)
                assert not clash, f"{nb_path.name} code cell {index + 1} imports a name that is a parameter: {clash}"


_repo_copy, _use_profile, _dvc = dag_runs.repo_copy, dag_runs.use_profile, dag_runs.dvc


@pytest.fixture(scope="module")
def smoke_repo(request):
    """A copy of the tree with the smoke profile's DAG run once (the smoke test reads it, then the kill test
    retrains one of its stages), on a tiny random BERT instead of the bundled MiniLM (``paper_tiny.smoke_tiny_params``:
    every stage, variant and seed; the real model runs in mini). Started in the background at collection
    (``tests/dag_runs.py``)."""
    repo = dag_runs.run("smoke", request.config).result()
    failed = request.session.testsfailed
    yield repo
    if request.session.testsfailed == failed:          # kept for inspection only when a test on it failed
        shutil.rmtree(repo.parent, ignore_errors=True)


@pytest.mark.slow
def test_smoke_dag_end_to_end(smoke_repo, tmp_path):
    repo = smoke_repo

    table = json.loads((repo / "results/smoke/table3.json").read_text())
    assert table["setting"]["profile"] == "smoke"
    for system in ("bm25", "tfidf", "minilm_untrained", "dpr_baseline", "dpr_uncon", "dpr_mixed"):
        nq = table["accuracy"][system]["nq"]["all"]
        assert nq["n"] == 40
        assert 0 <= nq["top1"] <= nq["top5"] <= nq["top20"] <= nq["top100"] <= 100
        assert nq["top1_ci_low"] <= nq["top1"] <= nq["top1_ci_high"]
        # smoke trains the paper's dense variants with two seeds: their rows are seed-means with a spread
        assert nq.get("seeds") == (2 if system.startswith("dpr_") else None), system
        if system.startswith("dpr_"):
            assert nq["top100_seed_min"] <= nq["top100"] <= nq["top100_seed_max"] and nq["top1_seed_sd"] >= 0
    # Every gold passage of the smoke questions is in the smoke corpus, so BM25 finds some of them.
    assert table["accuracy"]["bm25"]["nq"]["all"]["top100"] > 0
    # 06 and 07 commit every run's evidence; the claims table is recomputed from it alone, paired by seed
    from ecqg.report import recompute

    for name in ("ranks", "passages", "mechanism", "slices"):
        assert (repo / f"results/smoke/evidence/{name}.parquet").is_file(), name
    rows = {r["row"]: r for r in recompute.rows(repo / "results/smoke")}
    uncon = rows["Table 3, NQ Top-1: UnCon-DPR - DPR > 0"]
    assert uncon["source"] == "per-run files" and uncon["test"].startswith("paired by seed")
    assert uncon["runs"] == "2 v 2" and uncon["low"] <= uncon["diff"] <= uncon["high"]
    assert any(r["row"].startswith("attention entropy") and r["source"] == "per-run files" for r in rows.values())

    executed = nbformat.read(repo / "outputs/notebooks/06_results_and_attention_entropy.ipynb", as_version=4)
    shown = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert any("text/html" in o.get("data", {}) for o in shown), "the executed notebook shows no table"
    assert any("image/png" in o.get("data", {}) for o in shown), "the executed notebook shows no figure"
    seeded = [f"{stage}{variant}-{seed}" for seed in (2022, 2023) for variant in ("baseline", "uncon", "mixed")
              for stage in ("05_dpr_training.", "retrieve_dense_")]
    seeded += [f"{stage}{variant}-2022" for variant in ("rsm", "poly_rsm_tempqg")
               for stage in ("05_dpr_training.", "retrieve_dense_")]
    # dpr.variants: smoke trains five of the table's nine; the others have no stage and no row
    for absent in ("etm", "tempqg", "poly_baseline", "poly_mixed"):
        assert f"dpr_{absent}" not in table["accuracy"] and not (repo / f"outputs/models/dpr_{absent}_s2022").exists()
    for stage in ["prepare", "index_bm25", "index_tfidf", "retrieve_bm25", "retrieve_tfidf", "training_data",
                  "retrieve_dense_untrained", "01_attention_bias", "02_question_generation", "03_filtering",
                  "04_mixing"] + seeded:
        record = json.loads((repo / f"results/smoke/stage_{stage}.json").read_text())
        assert record["wall_time_s"] >= 0 and record["host"]["cpu"] and record["host"]["cores"] >= 1
        assert isinstance(record["host"]["cpu_native_bf16"], bool)   # a resumed run says on which CPU kind each ran
    assert json.loads((repo / "outputs/train/nq_dev_distant.json").read_text())
    assert len(json.loads((repo / "outputs/train/gold_dpr.json").read_text())) == 200
    training = json.loads((repo / "results/smoke/dpr_baseline_s2022_training.json").read_text())
    # smoke fine-tunes to convergence in miniature: 32 records, 4 steps an epoch, at most 2 epochs, patience 1,
    # corpus validation at step 2 and each epoch end; the first seed keeps every snapshot's test runs (the curve)
    assert training["steps"] == 8 and training["train_examples"] == 32 and training["epochs_trained"] == 2
    assert training["selected_step"] in (4, 8) and {"val_top1", "val_top20"} <= set(training)
    assert training["seed"] == 2022
    curve = json.loads((repo / "results/smoke/finetune_curve.json").read_text())
    assert "baseline" in curve["variants"] and {r["step"] for r in curve["accuracy"]} == {2, 4, 8}
    assert {r["variant"] for r in curve["paired"]} >= {"mixed", "uncon"}
    mechanism_curve = json.loads((repo / "results/smoke/mechanism_curve.json").read_text())
    assert mechanism_curve["variants"] == curve["variants"]
    moved = mechanism_curve["moved_sentence"]               # 07's moved-sentence probe at each snapshot, vs DPR
    assert {r["step"] for r in moved if r["kind"] == "system"} == {2, 4, 8}
    assert any(r["kind"] == "paired" and r["variant"] == "mixed" for r in moved)
    assert not (repo / "outputs/models/dpr_baseline_s2023/curve").exists()      # the curve is the first seed's
    for seed in (2022, 2023):
        assert (repo / f"outputs/models/dpr_baseline_s{seed}/query_encoder/model.safetensors").is_file()
    seed_weights = [(repo / f"outputs/models/dpr_baseline_s{seed}/query_encoder/model.safetensors").read_bytes()
                    for seed in (2022, 2023)]
    assert seed_weights[0] != seed_weights[1], "two seeds trained the same model"
    bias = json.loads((repo / "results/smoke/attention_bias.json").read_text())
    studied = yaml.safe_load((repo / "params.yaml").read_text())["attention"]["sample_passages"]
    assert bias["sampling"]["sampled"] == studied and bias["sampling"]["excluded_test_gold"] > 0
    for encoder in ("dpr_baseline", "untrained"):
        assert 0 < bias["encoders"][encoder]["mean_entropy"] < 6
    entities = [json.loads(line) for line in (repo / "outputs/attention/low_attention_entities.jsonl").open()]
    assert all(len(r["entities"]) == 3 for r in entities)
    attention_nb = nbformat.read(repo / "outputs/notebooks/01_attention_bias.ipynb", as_version=4)
    assert any("image/png" in o.get("data", {}) for c in attention_nb.cells for o in c.get("outputs", []))
    assert all("highest" in r for r in entities)

    qg = json.loads((repo / "results/smoke/question_generation.json").read_text())
    assert set(qg["quality"]) == {"uncon", "con"}
    assert all(qg["generation"][f"{g} s{seed}"]["generated"] > 0 for g in ("uncon", "con") for seed in (2022, 2023))
    filtering = json.loads((repo / "results/smoke/filtering.json").read_text())
    assert filtering["stage1_rule"] == "roundtrip" and filtering["mrc"]["trained"]
    for generator, counts in filtering["funnel"].items():
        assert counts["generated"] >= counts["after_stage1"] >= counts["after_stage2"] > 0, generator
    mixing = json.loads((repo / "results/smoke/mixing.json").read_text())
    assert mixing["sizes"]["mixed"] == mixing["sizes"]["uncon"] > 0
    synthetic = json.loads((repo / "outputs/synthetic/mixed.json").read_text())
    assert {r["generator"] for r in synthetic} == {"uncon", "con"}
    # every replicate sampled, filtered and mixed its own sets; the first's are also the sets' own files
    own = {seed: (repo / f"outputs/synthetic/s{seed}/uncon.json").read_bytes() for seed in (2022, 2023)}
    assert own[2022] == (repo / "outputs/synthetic/uncon.json").read_bytes() and own[2022] != own[2023]
    assert {r["replicate"] for r in map(json.loads, (repo / "outputs/filtering/s2023/kept_con.jsonl").open())} == {2023}
    for variant in ("uncon", "mixed", "rsm"):     # every replicate fine-tuned from its own pre-training
        seed = 2023 if variant in ("uncon", "mixed") else 2022          # RSM: dpr.related_seeds
        pre = json.loads((repo / f"results/smoke/dpr_{variant}_pre_s{seed}_training.json").read_text())
        assert pre["phase"] == "pretrain" and pre["steps"] > 0 and pre["seed"] == seed
        trained = json.loads((repo / f"results/smoke/dpr_{variant}_s{seed}_training.json").read_text())
        assert trained["steps"] == 8 and trained["pretrained_from"].endswith(f"dpr_{variant}_pre_s{seed}")
        assert json.loads((repo / f"results/smoke/stage_05_dpr_training.{variant}-pre-{seed}.json").read_text())[
            "wall_time_s"] > 0
    pre_weights = [(repo / f"outputs/models/dpr_mixed_pre_s{seed}/query_encoder/model.safetensors").read_bytes()
                   for seed in (2022, 2023)]
    assert pre_weights[0] != pre_weights[1], "two replicates shared one pre-training"
    # ETM / RSM: UnCon's passages, entry for entry, so the same size; no question generator, no answers
    pseudo = json.loads((repo / "results/smoke/stage_pseudo_queries.json").read_text())
    uncon_set = json.loads((repo / "outputs/synthetic/uncon.json").read_text())
    for kind in ("etm", "rsm"):
        built = json.loads((repo / f"outputs/pseudo/{kind}.json").read_text())
        assert pseudo["sizes"][kind] == len(built) == len(uncon_set) == mixing["sizes"]["uncon"], kind
        assert [r["positive_ctxs"][0]["passage_id"] for r in built] == [
            r["positive_ctxs"][0]["passage_id"] for r in uncon_set], kind
        assert all(r["answers"] == [] and r["generator"] == kind for r in built), kind
        assert 0 <= pseudo["sweep"][f"{kind}_m8"]["positive_bm25_top1"] <= 1
        assert 0 < pseudo["sweep"][f"{kind}_m8"]["positives_in_index"] <= pseudo["sweep"][f"{kind}_m8"]["queries"]
    assert table["accuracy"]["dpr_rsm"]["nq"]["all"].get("seeds") is None     # dpr.related_seeds: one
    assert table["accuracy"]["dpr_rsm_pre"]["nq"]["all"]["n"] == 40
    assert "dpr_mixed_minus_dpr_rsm" in table["paired"] and "dpr_uncon_minus_dpr_rsm" in table["paired"]
    comparison = json.loads((repo / "results/smoke/encoder_comparison.json").read_text())
    assert set(comparison["attention"]["encoders"]) == {"dpr_baseline", "dpr_uncon", "dpr_mixed", "dpr_rsm"}
    # the Table 1 probe also scores Poly-DPR, with its inference score (best code)
    assert set(comparison["table1_probe"]) == set(comparison["attention"]["encoders"]) | {"dpr_poly_rsm_tempqg"}
    assert "dpr_mixed_minus_dpr_baseline" in comparison["attention"]["paired"]
    # every training seed's DPR / UnCon / Mixed measured on the same passages and probes (06, across seeds); the
    # first seed's entry is the comparison above
    seeds = comparison["seeds"]
    assert (seeds["n_seeds"], seeds["seeds"]) == (2, "2022, 2023")
    first = comparison["attention"]["paired"]["dpr_mixed_minus_dpr_baseline"]
    per_seed = seeds["attention_paired"]["dpr_mixed_minus_dpr_baseline"]
    assert set(per_seed) == {"s2022", "s2023", "across"}
    assert per_seed["s2022"]["later_sentence_share_diff"] == first["later_sentence_share_diff"]
    assert set(seeds["table1_probe"]) == {"dpr_baseline", "dpr_uncon", "dpr_mixed"}
    assert (repo / "outputs/figures/06/seed_differences.png").is_file()
    # Checkpoints only serve a killed run: once a model is saved they are gone (gigabytes otherwise).
    assert (repo / "outputs/checkpoints/qg").is_dir()
    assert not [p for p in (repo / "outputs/checkpoints").rglob("*") if p.is_file()]
    mechanism = json.loads((repo / "results/smoke/mechanism.json").read_text())
    assert mechanism["position"]["counts"]["ok"] > 0 and mechanism["moved_sentence"]["counts"]["probed"] > 0
    assert set(mechanism["moved_sentence"]["systems"]) == {"minilm_untrained", "dpr_uncon_pre", "dpr_mixed_pre",
                                                           "dpr_rsm_pre", "dpr_baseline", "dpr_uncon", "dpr_mixed",
                                                           "dpr_rsm", "dpr_poly_rsm_tempqg", "dpr_poly_rsm_tempqg_pre",
                                                           "dpr_uncon_d12_pre", "dpr_mixed_d12_pre"}
    assert mechanism["moved_sentence"]["systems"]["dpr_baseline"]["seeds"] == 2
    # the slices cover the same dense systems as the moved-sentence probe (one list: mechanism.dense_systems)
    assert set(mechanism["moved_sentence"]["systems"]) <= set(mechanism["position"]["accuracy"])
    assert "dpr_rsm_minus_dpr_baseline" in mechanism["position"]["paired"]
    for system in ("bm25", "dpr_mixed", "dpr_mixed_pre"):
        psi = mechanism["position"]["psi"][system]["top5"]
        assert psi is None or 0 <= psi <= 1, (system, psi)
    assert table["accuracy"]["dpr_uncon_pre"]["nq"]["all"]["n"] == 40     # pre-training only: every replicate's
    assert table["accuracy"]["dpr_uncon_pre"]["nq"]["all"]["seeds"] == 2   # a seed stack, as the fine-tuned rows
    # the dose curve (mixing.doses: [12]): UnCon / Mixed pre-trained on their sets cut to 12, every seed
    for base in ("uncon", "mixed"):
        for seed in (2022, 2023):
            assert len(json.loads((repo / f"outputs/synthetic/s{seed}/doses/{base}_d12.json").read_text())) == 12
        assert table["accuracy"][f"dpr_{base}_d12_pre"]["nq"]["all"]["seeds"] == 2
    assert "dpr_mixed_d12_pre_minus_dpr_uncon_d12_pre" in table["paired"]
    headline = json.loads((repo / "results/smoke/headline.json").read_text())
    # the README's rows: NQ Top-1 of the three systems, their differences and (two seeds) the verdicts over runs
    assert {"top1.mixed", "top1.mixed-dpr", "verdict.mixed-dpr", "verdict.mixed-uncon"} <= set(headline)
    assert headline["verdict.mixed-dpr"].split(" (")[0] in ("holds", "reversed", "not shown")
    assert "p5.mixed-dpr" not in headline and len(headline) < 20
    # BM25 + dense hybrids: both fusions, each related seed (one here), in Table 3, its paired differences and 07
    for system in ("hybrid_sum_baseline", "hybrid_rrf_baseline", "hybrid_sum_mixed", "hybrid_rrf_mixed"):
        assert table["accuracy"][system]["nq"]["all"].get("seeds") is None, system
        psi = mechanism["position"]["psi"][system]["top5"]
        assert psi is None or 0 <= psi <= 1, (system, psi)
    assert "hybrid_sum_mixed_minus_hybrid_sum_baseline" in table["paired"]
    # Poly-DPR beside DPR (the 2 x 2): K vectors per passage in the index, best code per passage in the run
    for system in ("dpr_poly_rsm_tempqg", "hybrid_sum_poly_rsm_tempqg"):
        assert table["accuracy"][system]["nq"]["all"].get("seeds") is None, system
    assert "dpr_poly_rsm_tempqg_minus_dpr_baseline" in table["paired"]
    # TempQG: templates, a selector measured on held-out pairs, a set over UnCon's passages; TempQG-DPR and Luo et
    # al.'s recipe (Poly-DPR pre-trained on RSM, then on TempQG) as Table 3 rows with paired differences
    tempqg = json.loads((repo / "results/smoke/tempqg.json").read_text())
    assert tempqg["templates"]["questions"] == 32 and tempqg["templates"]["candidates"] >= 2
    assert tempqg["selector"]["n"] > 0 and 0 <= tempqg["selector"]["top1"] <= tempqg["selector"]["top5"] <= 1
    assert {"tempqg", "uncon"} <= set(tempqg["quality"]) and "template_follows_template" in tempqg["quality"]["tempqg"]
    assert 0 < tempqg["set"]["size"] <= tempqg["set"]["uncon_entries"]
    assert table["accuracy"]["dpr_poly_rsm_tempqg_pre"]["nq"]["all"]["n"] == 40
    luo = [json.loads(line) for line in (repo / "outputs/models/dpr_poly_rsm_tempqg_pre_s2022/history.jsonl")
           .read_text().splitlines()]
    sets = [h["set"] for h in luo if "loss" in h]                  # two phases: RSM's steps, then TempQG's
    assert sets == sorted(sets, key=["rsm", "tempqg"].index) and set(sets) == {"rsm", "tempqg"}
    assert "TempQG" in (repo / "results/smoke/README.md").read_text()
    poly_search = json.loads((repo / "results/smoke/stage_retrieve_dense_poly_rsm_tempqg-2022.json").read_text())
    assert poly_search["index_rows"] == 6 * poly_search["passages"]
    assert (repo / "outputs/models/dpr_poly_rsm_tempqg_pre_s2022/poly_codes.safetensors").is_file()
    assert json.loads((repo / "results/smoke/stage_hybrid_mixed-2022.json").read_text())["nq_questions"] == 40
    # dpr.related_seeds [2022]: the related system's retrievers and the hybrids have no second seed
    assert not [p.name for p in (repo / "outputs/models").glob("*_s2023")
                if not p.name.startswith(("dpr_baseline_", "dpr_uncon_", "dpr_mixed_"))]
    assert not (repo / "results/smoke/stage_hybrid_mixed-2023.json").exists()
    smoke = (repo / "results/smoke/README.md").read_text()
    assert smoke.startswith("# Results of the `smoke` profile")
    assert "UnCon-DPR" in smoke and "Where the method acts" in smoke
    # the fine-tuning section renders the real curve files: every snapshot, the first seed's kept step marked
    for heading in ("Training runs: epochs and the kept step", "Table 3 against fine-tuning length",
                    "The mechanism against fine-tuning length"):
        assert f"\n## {heading}\n" in smoke, heading
    assert f"| {training['selected_step']} (kept: DPR" in smoke
    # the committed mini results, their page and the README are untouched by a smoke run
    assert (repo / "README.md").read_bytes() == (REPO / "README.md").read_bytes()
    for path in [*(REPO / "results/mini").glob("*.json"), REPO / "results/mini/README.md"]:
        assert (repo / "results/mini" / path.name).read_bytes() == path.read_bytes(), path.name

    second = _dvc(["repro"], repo)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "Running stage" not in second.stdout, second.stdout
    status = _dvc(["status"], repo)
    assert "up to date" in status.stdout, status.stdout

    # The headline metrics fit a screen; `dvc plots show` renders the declared plots.
    shown = _dvc(["metrics", "show", "results/smoke/headline.json"], repo)
    assert shown.returncode == 0 and "top1.mixed" in shown.stdout, shown.stdout + shown.stderr
    # readable keys (the README's rows) over short ones: a 200-column screen
    assert max(len(line) for line in shown.stdout.splitlines()) <= 200, shown.stdout
    plots = _dvc(["plots", "show", "-o", str(tmp_path / "plots")], repo)
    assert plots.returncode == 0, plots.stdout + plots.stderr
    assert "No plots were loaded" not in plots.stdout + plots.stderr
    html = (tmp_path / "plots" / "index.html").read_text()
    for name in ("training", "validation", "topk", "position_top5"):
        assert name in html, name

    # A notebook opened in Jupyter runs with notebooks/ as its working directory: it must still find params.yaml.
    import papermill
    papermill.execute_notebook(str(repo / "notebooks/04_mixing.ipynb"), str(tmp_path / "04_from_notebooks.ipynb"),
                               kernel_name="python3", cwd=str(repo / "notebooks"), progress_bar=False)
    assert "working directory set to the repository root" in (tmp_path / "04_from_notebooks.ipynb").read_text()

    # A variant as a DVC experiment: only the stages the parameter reaches rerun.
    git = ["git", "-c", "user.name=ecqg-test", "-c", "user.email=test@ecqg"]
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "smoke run"], cwd=repo, check=True)
    exp = _dvc(["exp", "run", "-S", "evaluation.mechanism.moved_sentence_passages=3"], repo)
    assert exp.returncode == 0, exp.stdout[-3000:] + exp.stderr[-3000:]
    assert "Running stage 'mechanism'" in exp.stdout and "Running stage 'prepare'" not in exp.stdout
    varied = json.loads((repo / "results/smoke/mechanism.json").read_text())
    assert varied["setting"]["moved_sentence_passages"] == 3       # (smoke has fewer eligible passages than that)
    assert varied["moved_sentence"]["counts"]["probed"] == min(3, varied["moved_sentence"]["counts"]["eligible"])


def _checkpoints(repo: Path) -> list[Path]:
    return sorted(repo.glob("outputs/checkpoints/dpr_baseline_s2022/*/checkpoints/checkpoint-*/state.json"))


@pytest.mark.slow
def test_killed_training_resumes_from_its_last_checkpoint(smoke_repo):
    """Kill `dvc repro` in the middle of DPR training (SIGKILL to the whole process group), run it again. (On the
    smoke DAG's repository, its data stages already run: the fine-tuning is forced to train again.)"""
    import signal
    import time

    repo = smoke_repo
    assert not _checkpoints(repo), "a finished training left checkpoints"
    (repo / "results/smoke/dpr_baseline_s2022_training.json").unlink()

    proc = subprocess.Popen([sys.executable, "-m", "dvc", "repro", "--force", "--single-item",
                             "finetune_baseline@2022"], cwd=repo, env=dag_runs.dvc_env(repo),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while not _checkpoints(repo) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)                 # a tiny model trains the steps after its first checkpoint in seconds
    # papermill's kernel runs in a session of its own (jupyter_client starts it so), out of reach of killpg: it
    # would train on until it noticed its parent gone (~1 s), long enough for a tiny model to finish and clear
    # its checkpoints (seen once in CI). A killed machine kills it too: so does this test.
    import psutil

    try:
        tree = [proc.pid, *(child.pid for child in psutil.Process(proc.pid).children(recursive=True))]
    except psutil.NoSuchProcess:             # dvc already exited: the assertions below say how
        tree = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    saved = _checkpoints(repo)
    assert saved, "training finished or failed before writing a checkpoint"
    last = saved[-1].parent.name
    assert int(last.split("-")[1]) < 8, "the run was not killed midway"
    assert not (repo / "results/smoke/dpr_baseline_s2022_training.json").exists()

    again = _dvc(["repro", "finetune_baseline@2022"], repo)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    executed = (repo / "outputs/notebooks/05_dpr_training.baseline-2022.ipynb").read_text()
    assert "resumed an interrupted run from" in executed and last in executed
    history = [json.loads(line) for line in
               (repo / "outputs/models/dpr_baseline_s2022/history.jsonl").read_text().splitlines()]
    assert [h["step"] for h in history] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_capped_analyses_take_a_seeded_random_subset_in_order():
    from ecqg.stages.common import subset

    items = [f"p{i}" for i in range(100)]
    chosen = subset(items, 10, seed=2022, purpose="analysis")
    assert len(chosen) == 10 and chosen == sorted(chosen, key=items.index)          # original order kept
    assert chosen == subset(items, 10, seed=2022, purpose="analysis")               # seeded
    assert chosen != items[:10] and chosen != subset(items, 10, seed=2022, purpose="probe")
    assert subset(items, None, 0, "analysis") == items and subset(items, 500, 0, "analysis") == items
