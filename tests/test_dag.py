"""What `dvc repro` rebuilds when one parameter changes, checked statically with DVC's own parser and graph.

Why static: the smoke run (test_pipeline.py) proves the DAG runs; it cannot afford to rerun it once per parameter.
DVC decides what to rerun from each stage's params and the deps -> outs edges of ``Repo.index.graph``, so asking that
graph which stages sit downstream of a parameter is asking DVC itself (foreach stages expanded, paths resolved).

The expected sets are the SPECIFICATION (docs/design.md, "Pipeline": "changing one parameter reruns only the stages
that read it"), written out by hand and not derived from dvc.yaml: if one of these tests fails after an edit of dvc.yaml, the
edit changed what a parameter rebuilds; fix dvc.yaml, or change the expectation here on purpose.
"""

from pathlib import Path

import networkx as nx
import pytest
import yaml

dvc_repo = pytest.importorskip("dvc.repo")
from dvc.dependency.param import ParamsDependency  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

from ecqg.core.variants import stage_name  # noqa: E402  (how stages are named; not which stages a param rebuilds)

PARAMS = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
SEEDS = PARAMS["dpr"]["seeds"]           # matrix stage names
SEED = SEEDS[0]                          # the first seed's baseline feeds the attention study and the filter
RELATED = PARAMS["dpr"]["related_seeds"]  # the related system's retrievers and the hybrids


def replicate(variant: str, seeds, pretrained: bool = True) -> set[str]:
    """Every stage of each replicate of ``variant``: its pre-training, fine-tuning and both searches."""
    phases = ("pretrain", "finetune", "retrieve", "retrieve_pre") if pretrained else ("finetune", "retrieve")
    return {stage_name(phase, variant, seed) for seed in seeds for phase in phases}


SYNTHETIC = replicate("uncon", SEEDS) | replicate("mixed", SEEDS) | replicate("poly_mixed", RELATED)
PSEUDO = {"pseudo_queries"} | replicate("etm", RELATED) | replicate("rsm", RELATED)   # ETM / RSM: UnCon's passages
SYNTHETIC |= PSEUDO
# TempQG: its stage over UnCon's passages, TempQG-DPR, and Luo et al.'s recipe (Poly-DPR, RSM then TempQG)
LUO = replicate("poly_rsm_tempqg", RELATED)
TEMPQG = {"tempqg"} | replicate("tempqg", RELATED) | LUO
SYNTHETIC |= TEMPQG
SYNTHETIC |= {f"hybrid@{variant}-{seed}" for seed in RELATED for variant in PARAMS["hybrid"]["variants"]
              if variant in ("uncon", "mixed", "poly_mixed")}   # ... and their BM25 hybrids
HYBRIDS = {f"hybrid@{variant}-{seed}" for seed in RELATED for variant in PARAMS["hybrid"]["variants"]}
UPSTREAM = {"prepare", "index_bm25", "index_tfidf", "retrieve@bm25", "retrieve@tfidf", "training_data",
            "retrieve_untrained", "attention_bias"} | replicate("baseline", SEEDS, pretrained=False)
POLY = replicate("poly_baseline", RELATED, pretrained=False) | replicate("poly_mixed", RELATED)
POLY |= {f"hybrid@{variant}-{seed}" for seed in RELATED for variant in PARAMS["hybrid"]["variants"]
         if variant.startswith("poly_")}
SPEC = {
    "qg.generate.top_k": {"question_generation", "filtering", "mixing", *SYNTHETIC, "results", "mechanism", "report"},
    "mixing.total": {"mixing", *SYNTHETIC, "results", "mechanism", "report"},
    "mixing.doses": {"mixing", *SYNTHETIC, "results", "mechanism", "report"},
    # more seeds add matrix stages and, with per-replicate sets (qg.generate.per_replicate), rerun 02-04 for the new
    # seed's sets; an existing seed's sets are drawn with its own seed and come out the same, and DVC skips a stage
    # whose dependencies' contents did not change, so its models are not retrained (not 01, not seed 1's baseline)
    "dpr.seeds": {"question_generation", "filtering", "mixing", *SYNTHETIC, "results", "mechanism", "report"},
    "dpr.related_seeds": {"results", "mechanism", "report"},
    # a variant more or fewer adds or drops its own stages (dvc.yaml is rewritten); of the rest, the aggregation
    "dpr.variants": {"results", "mechanism", "report"},
    "evaluation.mechanism.moved_sentence_passages": {"mechanism", "report"},
    "hybrid.rrf_k": {*HYBRIDS, "results", "mechanism", "report"},
    "polydpr.codes": {*POLY, *TEMPQG, "results", "mechanism", "report"},     # TempQG's selector is a Poly-DPR
    "pseudo.m": {*PSEUDO, *LUO, "results", "mechanism", "report"},
    "tempqg.threshold": {*TEMPQG, "results", "mechanism", "report"},
    # synthetic pre-training reruns its own stages and what fine-tunes from them; the baseline and Poly-DPR stay
    "dpr.pretrain.lr": {*(SYNTHETIC - {"pseudo_queries", "tempqg"}), "results", "mechanism", "report"},
}


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    """DVC's stage graph: an edge A -> B means A depends on an output of B."""
    with dvc_repo.Repo(str(REPO)) as repo:
        return repo.index.graph


def _params(stage) -> list[tuple[str, list[str]]]:
    """(params file, keys) per params dependency of a stage; an empty key list means the whole file."""
    return [(dep.def_path, list(dep.params or [])) for dep in stage.deps if isinstance(dep, ParamsDependency)]


def _uses(stage, key: str) -> bool:
    """A stage listing ``qg`` (or the whole params file) depends on ``qg.generate.top_k``."""
    return any(not keys or any(key == k or key.startswith(k + ".") for k in keys) for _, keys in _params(stage))


def _rebuilt_by(graph: nx.DiGraph, key: str) -> set[str]:
    direct = {s for s in graph.nodes if _uses(s, key)}
    downstream = set().union(*(nx.ancestors(graph, s) for s in direct)) if direct else set()
    return {s.addressing for s in direct | downstream}



def test_every_stage_can_enter_dvc_s_run_cache(graph):
    """DVC keeps a finished stage in its run cache (so switching back to an earlier experiment or profile restores its
    outputs instead of rerunning it) unless the stage always changes, lacks a command, deps or outs, or declares a
    ``persist`` output (``dvc.stage.cache._can_hash``); resumable training state is therefore not an output."""
    blocked = {s.addressing: [o.def_path for o in s.outs if o.persist] for s in graph.nodes
               if s.always_changed or not (s.cmd and s.deps and s.outs) or any(o.persist for o in s.outs)}
    assert not blocked, f"stages kept out of DVC's run cache: {blocked}"
    assert any(s.addressing.startswith("finetune_baseline") for s in graph.nodes)

@pytest.mark.parametrize("key", sorted(SPEC))
def test_a_param_rebuilds_exactly_its_stages(graph, key):
    rebuilt = _rebuilt_by(graph, key)
    expected = SPEC[key]
    assert rebuilt == expected, (
        f"changing {key} would rerun {sorted(rebuilt)}; the specification (tests/test_dag.py SPEC, not derived "
        f"from dvc.yaml) says {sorted(expected)}. Extra: {sorted(rebuilt - expected)}, "
        f"missing: {sorted(expected - rebuilt)}")
    assert not rebuilt & UPSTREAM, f"{key} must not rerun upstream stages {sorted(rebuilt & UPSTREAM)}"


def test_spec_names_real_stages(graph):
    names = {s.addressing for s in graph.nodes}
    for stage in UPSTREAM | set().union(*SPEC.values()):
        assert stage in names, f"stage {stage} of the specification is not in dvc.yaml (renamed?)"


def _has_key(tree, dotted: str) -> bool:
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_listed_param_exists_in_its_params_file(graph):
    missing = []
    for stage in graph.nodes:
        for path, keys in _params(stage):
            tree = yaml.safe_load((REPO / path).read_text(encoding="utf-8")) or {}
            missing += [f"{stage.addressing}: {k} ({path})" for k in keys if not _has_key(tree, k)]
    assert not missing, ("stages list params that their params file lacks (regenerate params.yaml with "
                         "`make profile P=...` after editing params/*.yaml?):\n" + "\n".join(missing))


def _graph_for(tmp_path, params: dict):
    import subprocess

    from ecqg.core import settings
    from ecqg.tooling import dag

    (tmp_path / "dvc.yaml").write_text(dag.render(settings.of(params)), encoding="utf-8")   # as `make repro` writes it
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    with dvc_repo.Repo.init(str(tmp_path)) as repo:
        graph = repo.index.graph
        return graph, {s.name: s for s in graph.nodes}   # addressing would be relative to the cwd


def test_more_seeds_add_one_replicate_per_variant_and_seed(tmp_path):
    """dvc.yaml with ``dpr.seeds: [1, 2]`` and ``dpr.related_seeds: [1]``: the paper's variants get a replicate per
    seed (a pre-training, a fine-tuning from it, both searches), the related system's (Poly-DPR, ETM / RSM, TempQG)
    and the hybrids one per related seed; all feed the results stage."""
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["dpr"]["seeds"], params["dpr"]["related_seeds"] = [1, 2], [1]
    graph, names = _graph_for(tmp_path, params)
    seeded = replicate("baseline", (1, 2), pretrained=False) | replicate("uncon", (1, 2)) | replicate("mixed", (1, 2))
    related = (replicate("etm", (1,)) | replicate("rsm", (1,)) | replicate("tempqg", (1,))
               | replicate("poly_baseline", (1,), pretrained=False) | replicate("poly_mixed", (1,))
               | replicate("poly_rsm_tempqg", (1,)) | {f"hybrid@{v}-1" for v in params["hybrid"]["variants"]})
    assert seeded | related <= set(names) and not any(n.endswith((f"-{SEED}", f"@{SEED}")) for n in names)
    assert not {n for n in names if n.endswith(("-2", "@2"))} - seeded   # seed 2: the paper's variants only
    for variant in ("uncon", "mixed"):        # each replicate fine-tunes from its own pre-training
        for seed in (1, 2):
            fine_tuning = names[stage_name("finetune", variant, seed)]
            own = names[stage_name("pretrain", variant, seed)]
            other = names[stage_name("pretrain", variant, 3 - seed)]
            assert own in nx.descendants(graph, fine_tuning) and other not in nx.descendants(graph, fine_tuning)
    results_needs = {s.name for s in nx.descendants(graph, names["results"])}
    assert {n for n in seeded | related if n.startswith(("retrieve_", "hybrid"))} <= results_needs
    mechanism_needs = {s.name for s in nx.descendants(graph, names["mechanism"])}
    assert {n for n in seeded if n.startswith(("pretrain", "finetune"))} <= mechanism_needs
    # the first seed's baseline feeds the attention study and the filter; the second seed's does not
    study_needs = {s.name for s in nx.descendants(graph, names["attention_bias"])}
    assert stage_name("finetune", "baseline", 1) in study_needs
    assert stage_name("finetune", "baseline", 2) not in study_needs
    assert stage_name("retrieve", "baseline", 1) in {s.name for s in nx.descendants(graph, names["filtering"])}


def test_the_dose_curve_pre_trains_every_seed_at_every_dose(tmp_path):
    """``mixing.doses: [4, 8]``: UnCon and Mixed pre-trained on each dose's set with every seed, and searched with;
    stage 04 makes the sets; 06 and 07 read the runs."""
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["dpr"]["seeds"], params["mixing"]["doses"] = [1, 2], [4, 8]
    graph, names = _graph_for(tmp_path, params)
    doses = {f"{stage}@{base}-{size}-{seed}" for stage in ("pretrain_dose", "retrieve_dose")
             for base in ("uncon", "mixed") for size in (4, 8) for seed in (1, 2)}
    assert doses <= set(names)
    assert names["mixing"] in nx.descendants(graph, names["pretrain_dose@mixed-8-2"])
    assert doses <= {s.name for s in nx.descendants(graph, names["results"])}


def test_dpr_variants_selects_the_trained_variants_and_nothing_else_changes(tmp_path):
    """``dpr.variants: [baseline, uncon, mixed]`` (the paper's three systems; ``make profile P=paper_three``): no
    stage trains or searches with any other variant, no hybrid fuses one, and neither the pseudo-queries nor TempQG
    are made (nothing pre-trains on them); every other stage is the full DAG's."""
    from ecqg.core import config, settings
    from ecqg.tooling import dag
    from ecqg.tooling.dvc_stages import expanded_stages

    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["dpr"]["variants"], params["hybrid"]["variants"] = ["baseline", "uncon", "mixed"], ["baseline", "mixed"]
    graph, names = _graph_for(tmp_path, params)
    with dvc_repo.Repo(str(REPO)) as repo:                   # dvc.yaml as committed: dpr.variants is all
        full = {s.name for s in repo.index.graph.nodes}

    def another_variants(name: str) -> bool:
        return (name.startswith(("pretrain_", "finetune_", "retrieve_dense", "retrieve_pretrained", "hybrid@"))
                and any(v in name for v in ("etm", "rsm", "tempqg", "poly_")))

    assert set(names) == {n for n in full if not another_variants(n)} - {"pseudo_queries", "tempqg"}
    three = config.preset("paper_three", REPO / "params")
    assert {n for n, _ in expanded_stages(yaml.safe_load(dag.render(settings.of(three))), three)} == set(names)
    assert replicate("uncon", SEEDS) | replicate("mixed", SEEDS) | replicate("baseline", SEEDS, False) <= set(names)
    wrong = dict(params, dpr=dict(params["dpr"], variants=["baseline", "mixed"]))
    with pytest.raises(config.ConfigError, match="'dpr.variants'.*baseline, uncon, mixed"):
        config.validate(wrong, "params.yaml")
    assert "# Variants: dpr.variants selects baseline, uncon, mixed" in dag.render(settings.of(params))


def test_the_study_profile_trains_five_replicates_of_the_paper_s_three_and_the_dose_curve(tmp_path):
    """dvc.yaml with ``make profile P=study``'s params (issue 47's design): DPR, UnCon-DPR and Mixed-DPR with five
    replicates each (a synthetic replicate pre-trains with its own seed), both sets pre-trained at every dose with
    every seed and searched right after, DPR and Mixed-DPR fused with BM25; none of Luo et al.'s systems, so no
    pseudo-query or TempQG set either."""
    from ecqg.core import config

    graph, names = _graph_for(tmp_path, yaml.safe_load(config.render_profile("study", REPO / "params")))
    names = set(names)
    study = config.preset("study", REPO / "params")
    seeds, related, doses = study["dpr"]["seeds"], study["dpr"]["related_seeds"], study["mixing"]["doses"]
    assert len(seeds) >= 5 and len(doses) >= 2 and study["mixing"]["total"] >= 4 * 5000
    trained = replicate("uncon", seeds) | replicate("mixed", seeds) | replicate("baseline", seeds, False)
    curve = {f"{phase}@{s}-{n}-{seed}" for phase in ("pretrain_dose", "retrieve_dose") for s in ("uncon", "mixed")
             for n in doses for seed in seeds}
    assert trained | curve | {f"hybrid@{v}-{s}" for v in ("baseline", "mixed") for s in related} <= names
    assert not {n for n in names if any(k in n for k in ("poly", "etm", "rsm", "tempqg", "pseudo"))}


def test_a_stray_file_in_a_code_folder_is_refused_and_what_git_ignores_is_not(tmp_path):
    """dvc.lock hashes a code folder with every file DVC sees there: a file the clean clone lacks would make every
    stage importing the folder stale in CI, so `make repro` refuses it; what .gitignore keeps out (.dvcignore
    mirrors it) is not hashed and passes."""
    import shutil
    import subprocess

    from ecqg.tooling.dag import untracked_code_files

    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "dvc.yaml").write_text("stages:\n  s:\n    cmd: true\n    deps: [pkg, 'out/${seed}']\n")
    shutil.copy(Path(__file__).resolve().parents[1] / ".dvcignore", root / ".dvcignore")
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["dvc", "init", "-q", "--no-scm"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    assert untracked_code_files(root) == []
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (root / "pkg" / "mod.py.tmp").write_text("")
    assert untracked_code_files(root) == []
    (root / "pkg" / "notes.txt").write_text("a stray file\n")
    assert untracked_code_files(root) == ["pkg/notes.txt"]


def test_a_hand_edited_dvc_yaml_is_refused_or_kept_as_a_backup(tmp_path):
    """`dag write` (make repro, make profile) never overwrites a hand edit silently, as params.yaml is not."""
    from ecqg.tooling import dag

    shutil = pytest.importorskip("shutil")
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    target = tmp_path / "dvc.yaml"
    assert dag.main(["write", "--file", str(target)]) == 0
    written = target.read_text(encoding="utf-8")
    assert not dag.hand_edited(written)
    edited = written.replace("cmd: python -m ecqg.stages.prepare", "cmd: python -m ecqg.stages.prepare --mine")
    target.write_text(edited, encoding="utf-8")
    assert dag.hand_edited(edited)
    assert dag.main(["write", "--file", str(target)]) == 2 and target.read_text(encoding="utf-8") == edited
    assert dag.main(["write", "--file", str(target), "--force"]) == 0
    assert target.read_text(encoding="utf-8") == written
    assert (tmp_path / "dvc.yaml.bak").read_text(encoding="utf-8") == edited


def test_dvc_metrics_and_exp_show_fit_a_terminal():
    """`dvc metrics show` prints the headline figures only (each stage's other JSON files are committed outputs),
    and the README's `dvc exp show` line fits 200 columns."""
    import subprocess

    text = (REPO / "dvc.yaml").read_text(encoding="utf-8")
    declared = [stage.get("metrics", []) for stage in yaml.safe_load(text)["stages"].values()
                for stage in ([stage["do"]] if "do" in stage else [stage])]
    assert [next(iter(m)) for ms in declared for m in ms] == ["results/${profile}/headline.json"]
    env = {"PATH": f"{Path(__import__('sys').executable).parent}:/usr/bin:/bin", "DVC_NO_ANALYTICS": "1",
           "HOME": str(REPO)}
    shown = subprocess.run(["dvc", "metrics", "show"], cwd=REPO, capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and max(map(len, shown.stdout.splitlines())) <= 200, shown.stdout[:500]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if x.startswith("dvc exp show"))
    command = __import__("shlex").split(line.split("#")[0])
    shown = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and max(map(len, shown.stdout.splitlines())) <= 200, shown.stdout[:500]


def test_docs_pipeline_shows_the_current_graph():
    """docs/pipeline.md's flowchart is the one dvc.yaml and params.yaml give (`python -m ecqg.tooling.dag_view`)."""
    from ecqg.tooling import dag_view

    doc = REPO / dag_view.DOC
    block = dag_view.view(REPO / "dvc.yaml", REPO / "params.yaml")
    assert dag_view.with_view(doc.read_text(), block, doc) == doc.read_text(), \
        "docs/pipeline.md is stale: python -m ecqg.tooling.dag_view --write"
    assert '"06 results"' in block and '"07 mechanism"' in block and "-->" in block


def test_the_flowchart_keeps_apart_the_items_of_a_stage_that_would_close_a_loop():
    """One node per declared stage, except where folding a stage's items would draw a loop (the baseline's search
    feeds the filter, which feeds the other variants' searches): those items stay separate nodes, and the graph
    is acyclic."""
    from ecqg.tooling.dag_view import mermaid, stage_groups

    dvc_yaml = {"stages": {
        "make": {"cmd": "a", "outs": ["data"]},
        "search": {"foreach": ["base", "syn"], "do": {"cmd": "s ${item}", "deps": ["data", "sets/${item}"],
                                                       "outs": ["runs/${item}"]}},
        "filter": {"cmd": "python -m ecqg.tooling.notebook 03_filtering", "deps": ["runs/base"], "outs": ["sets/syn"]},
        "basesets": {"cmd": "b", "outs": ["sets/base"]},
        "report": {"foreach": ["x", "y"], "do": {"cmd": "r", "deps": ["runs"], "outs": ["out/${item}"]}},
    }}
    graph, labels = stage_groups(dvc_yaml, {})
    assert set(graph.nodes) == {"make", "search@base", "search@syn", "filter", "basesets", "report"}
    assert labels["filter"] == "03 filter" and labels["report"] == "report x2"
    assert nx.is_directed_acyclic_graph(graph)
    assert ("search@base", "filter") in graph.edges and ("filter", "search@syn") in graph.edges
    chart = mermaid(graph, labels)
    assert chart.startswith("```mermaid\nflowchart TD") and "@" not in chart.split('"')[0]
