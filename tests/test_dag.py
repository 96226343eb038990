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

PARAMS = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
SEEDS = PARAMS["dpr"]["seeds"]           # matrix stage names
SEED = SEEDS[0]                          # the first seed's baseline feeds the attention study and the filter
RELATED = PARAMS["dpr"]["related_seeds"]  # the related system's retrievers and the hybrids
SYNTHETIC = {f"{stage}@{variant}-{seed}" for seed in SEEDS for stage in ("dpr_synthetic", "retrieve_dense")
             for variant in ("uncon", "mixed")}            # every seed's UnCon-DPR / Mixed-DPR and their retrieval
# pre-trained once per variant (every seed fine-tunes from it), and searched with as it is
SYNTHETIC |= {f"dpr_pretraining@{v}" for v in ("uncon", "mixed")} | {"dpr_pretraining_poly@mixed"}
SYNTHETIC |= {f"retrieve_pretrained@{v}_pre" for v in ("uncon", "mixed")}
SYNTHETIC |= {f"{stage}-{seed}" for seed in RELATED
              for stage in ("dpr_poly_synthetic@mixed", "retrieve_dense_related@poly_mixed")}   # ... Mixed Poly-DPR
PSEUDO = {"pseudo_queries"} | {f"{stage}@{variant}-{seed}" for seed in RELATED for variant in ("etm", "rsm")
                               for stage in ("dpr_pseudo", "retrieve_dense_pseudo")}   # ETM / RSM: UnCon's passages
PSEUDO |= {f"{stage}@{v}" for v in ("etm", "rsm") for stage in ("dpr_pretraining_pseudo", "retrieve_pretrained_pseudo")}
SYNTHETIC |= PSEUDO
# TempQG: its stage over UnCon's passages, TempQG-DPR, and Luo et al.'s recipe (Poly-DPR, RSM then TempQG)
LUO = {"dpr_pretraining_poly_rsm_tempqg"} | {f"{stage}{seed}" for seed in RELATED for stage in (
    "dpr_poly_rsm_tempqg@", "retrieve_dense_related@poly_rsm_tempqg-")}
TEMPQG = {"tempqg", "dpr_pretraining_tempqg", "retrieve_pretrained@tempqg_pre", *LUO} | {
    f"{stage}{seed}" for seed in RELATED for stage in ("dpr_tempqg@", "retrieve_dense_related@tempqg-")}
SYNTHETIC |= TEMPQG
SYNTHETIC |= {f"hybrid@{variant}-{seed}" for seed in RELATED for variant in PARAMS["hybrid"]["variants"]
              if variant in ("uncon", "mixed", "poly_mixed")}   # ... and their BM25 hybrids
HYBRIDS = {f"hybrid@{variant}-{seed}" for seed in RELATED for variant in PARAMS["hybrid"]["variants"]}
UPSTREAM = {"prepare", "index_bm25", "index_tfidf", "retrieve@bm25", "retrieve@tfidf", "training_data",
            "retrieve_untrained", "attention_bias"} | {f"{stage}@baseline-{seed}" for seed in SEEDS
                                                       for stage in ("dpr_training", "retrieve_dense")}
POLY = {f"{stage}-{seed}" for seed in RELATED
        for stage in ("dpr_poly_training@poly_baseline", "dpr_poly_synthetic@mixed",
                      "retrieve_dense_related@poly_baseline", "retrieve_dense_related@poly_mixed")}
POLY |= {f"hybrid@{variant}-{seed}" for seed in RELATED for variant in PARAMS["hybrid"]["variants"]
         if variant.startswith("poly_")} | {"dpr_pretraining_poly@mixed"}
SPEC = {
    "qg.generate.top_k": {"question_generation", "filtering", "mixing", *SYNTHETIC, "results", "mechanism", "report"},
    "mixing.total": {"mixing", *SYNTHETIC, "results", "mechanism", "report"},
    # more seeds add matrix stages; of the existing ones only the aggregation reruns (not 01 / 03, not seed 1's models)
    "dpr.seeds": {"results", "mechanism", "report"},
    "dpr.related_seeds": {"results", "mechanism", "report"},
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


def test_more_seeds_add_one_training_and_one_retrieval_per_variant_and_seed(tmp_path):
    """dvc.yaml with ``dpr.seeds: [1, 2]`` and ``dpr.related_seeds: [1]``: the paper's variants get a training and a
    retrieval stage per seed, the related system's (Poly-DPR, ETM / RSM, TempQG) and the hybrids per related seed;
    all feed the results stage."""
    import shutil
    import subprocess

    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["dpr"]["seeds"], params["dpr"]["related_seeds"] = [1, 2], [1]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    with dvc_repo.Repo.init(str(tmp_path)) as repo:
        graph = repo.index.graph
        names = {s.name: s for s in graph.nodes}   # addressing would be relative to the cwd
        seeded = {f"{stage}@{variant}-{seed}" for seed in (1, 2)
                  for stage, variants in (("dpr_training", ["baseline"]), ("dpr_synthetic", ["uncon", "mixed"]),
                                          ("retrieve_dense", ["baseline", "uncon", "mixed"]))
                  for variant in variants}
        related = {f"{stage}@{variant}-1"
                   for stage, variants in (("dpr_pseudo", ["etm", "rsm"]), ("retrieve_dense_pseudo", ["etm", "rsm"]),
                                           ("dpr_poly_training", ["poly_baseline"]), ("dpr_poly_synthetic", ["mixed"]),
                                           ("retrieve_dense_related", ["tempqg", "poly_baseline", "poly_mixed",
                                                                       "poly_rsm_tempqg"]),
                                           ("hybrid", params["hybrid"]["variants"]))
                   for variant in variants} | {"dpr_tempqg@1", "dpr_poly_rsm_tempqg@1"}
        assert seeded | related <= set(names) and not any(n.endswith(f"-{SEED}") for n in names)
        assert not {n for n in names if n.endswith("-2") or n.endswith("@2")} - seeded   # seed 2: the paper's only
        for variant in ("uncon", "mixed"):        # one pre-training per variant, feeding the fine-tuning of each seed
            assert f"dpr_pretraining@{variant}" in names and f"retrieve_pretrained@{variant}_pre" in names
            for seed in (1, 2):
                fine_tuning = names[f"dpr_synthetic@{variant}-{seed}"]
                assert names[f"dpr_pretraining@{variant}"] in nx.descendants(graph, fine_tuning)
        results_needs = {s.name for s in nx.descendants(graph, names["results"])}
        assert {n for n in seeded | related if n.startswith(("retrieve_dense", "hybrid"))} <= results_needs
        assert {f"retrieve_pretrained@{v}_pre" for v in ("uncon", "mixed")} <= results_needs
        assert {f"retrieve_pretrained_pseudo@{v}" for v in ("etm", "rsm")} <= results_needs
        assert not any(n.startswith("dpr_pretraining") and n[-1].isdigit() for n in names)   # not one per seed
        mechanism_needs = {s.name for s in nx.descendants(graph, names["mechanism"])}
        assert {n for n in seeded if n.startswith("dpr_")} <= mechanism_needs
        # the first seed's baseline feeds the attention study and the filter; the second seed's does not
        study_needs = {s.name for s in nx.descendants(graph, names["attention_bias"])}
        assert "dpr_training@baseline-1" in study_needs and "dpr_training@baseline-2" not in study_needs
        assert "retrieve_dense@baseline-1" in {s.name for s in nx.descendants(graph, names["filtering"])}


def test_the_study_profile_trains_no_etm_rsm_and_fuses_the_two_by_two(tmp_path):
    """dvc.yaml with ``make profile P=study``'s params: ``pseudo.variants: []`` leaves no ETM / RSM training or
    retrieval stage; DPR, UnCon-DPR and Mixed-DPR train with three seeds, the related system's retrievers with the
    first, and the 2 x 2 (DPR, Mixed-DPR, Poly-DPR, Mixed Poly-DPR) is fused with BM25 at that seed."""
    import shutil
    import subprocess

    from ecqg import config

    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "params.yaml").write_text(config.render_profile("study", REPO / "params"), encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    with dvc_repo.Repo.init(str(tmp_path)) as repo:
        names = {s.name for s in repo.index.graph.nodes}
    # no ETM / RSM-DPR; Luo et al.'s recipe pre-trains on the RSM set (built by pseudo_queries) and stays
    assert not {n for n in names if ("etm" in n or "rsm" in n) and "rsm_tempqg" not in n}
    assert {"tempqg", "dpr_pretraining_poly_rsm_tempqg", "dpr_pretraining_tempqg"} <= names
    assert "pseudo_queries" in names              # the pseudo-queries are still built and shown (cheap)
    dpr = config.preset("study", REPO / "params")["dpr"]
    seeds, related = dpr["seeds"], dpr["related_seeds"]
    assert len(seeds) == 3 and related == seeds[:1]
    assert {f"hybrid@{v}-{s}" for v in ("baseline", "mixed", "poly_baseline", "poly_mixed") for s in related} <= names
    assert {f"retrieve_dense@{v}-{s}" for v in ("baseline", "uncon", "mixed") for s in seeds} <= names
    assert {f"retrieve_dense_related@{v}-{s}" for v in ("tempqg", "poly_baseline", "poly_mixed", "poly_rsm_tempqg")
            for s in related} <= names
    assert not {n for n in names if n.endswith(tuple(f"-{s}" for s in seeds[1:]))
                and n.split("@")[0] not in ("dpr_training", "dpr_synthetic", "retrieve_dense")}
