"""Table 3 helpers: top-k curves of one run and of a seed stack; which rows a profile scores."""

from pathlib import Path

import numpy as np

from ecqg.core import settings, variants
from ecqg.stages import results

REPO = Path(__file__).resolve().parents[1]


def test_curve_of_a_seed_stack_is_the_mean_of_its_seeds_curves():
    rng = np.random.default_rng(0)
    stack = rng.random((50, 3, 10)) < 0.1                               # questions x seeds x ranks
    questions = [{"id": str(i), "subsets": ["s"] if i < 20 else []} for i in range(50)]
    curve = results._curve(stack, questions, "dpr_x", "nq")
    per_seed = [results._curve(stack[:, s], questions, "dpr_x", "nq") for s in range(3)]
    assert list(curve.k[curve.subset == "all"]) == list(range(1, 11))
    assert np.allclose(curve.accuracy, np.mean([c.accuracy for c in per_seed], axis=0))
    assert (np.diff(curve.accuracy[curve.subset == "all"]) >= 0).all()


def test_a_profile_without_etm_rsm_drops_only_their_rows():
    """``dpr.variants`` decides which rows 06 / 07 score (the study trains no ETM / RSM); nothing else goes."""
    from ecqg.core import config

    def blocks(params):
        typed = settings.of(params)
        return typed.dpr, typed.mixing, typed.hybrid

    params = config.preset("mini", REPO / "params")
    rows = results.table3_systems(*blocks(params))
    assert {"dpr_etm", "dpr_etm_pre", "dpr_rsm", "dpr_rsm_pre"} <= set(rows)
    params["dpr"]["variants"] = [v.name for v in variants.TABLE if v.name != "etm"]
    assert results.table3_systems(*blocks(params)) == [r for r in rows if r not in ("dpr_etm", "dpr_etm_pre")]
    assert not any("etm" in a or "etm" in b for a, b in results.comparison_pairs(*blocks(params)))
    study = config.preset("study", REPO / "params")          # the paper's three systems only (issue 47's rerun)
    kept = results.table3_systems(*blocks(study))
    assert not any(k in r for r in kept for k in ("etm", "rsm", "poly", "tempqg"))
    assert {"dpr_baseline", "dpr_uncon", "dpr_mixed", "hybrid_sum_mixed", "hybrid_rrf_mixed"} <= set(kept)


def test_a_missing_pretrained_model_names_the_stage_that_makes_it():
    from ecqg.core import variants

    assert variants.pretrain_stage("mixed", 2022) == "pretrain_mixed@2022"
    assert variants.pretrain_stage("rsm", 2023) == "pretrain_pseudo@rsm-2023"
    assert variants.pretrain_stage("poly_mixed", 2022) == "pretrain_poly_mixed@2022"
    assert variants.pretrain_stage("uncon_d10000", 2024) == "pretrain_dose@uncon-10000-2024"
    assert variants.stage_name("retrieve", "tempqg", 2022) == "retrieve_dense_related@tempqg-2022"
    assert variants.stage_name("retrieve_pre", "mixed", 2022) == "retrieve_pretrained@mixed-2022"


def test_the_papers_systems_train_with_every_seed_and_the_related_ones_with_related_seeds():
    """``dpr.related_seeds``: Table 3's runs per row follow each variant's seeds, and a training run's checkpoint
    identity leaves both seed lists out (adding a seed must not orphan another run's checkpoints). The first
    study's lists: three seeds, one for the related system's retrievers."""
    from ecqg.core import config
    from ecqg.stages import dpr_training as dense, hybrid

    study = config.preset("study", REPO / "params")
    study["dpr"].update(seeds=[2022, 2023, 2024], variants="all")
    typed = settings.of(study)
    runs = dense.seed_runs(typed.dpr, typed.mixing)
    assert runs["dpr_mixed"] == ["dpr_mixed_s2022", "dpr_mixed_s2023", "dpr_mixed_s2024"]
    assert runs["dpr_poly_mixed"] == ["dpr_poly_mixed_s2022"] and runs["dpr_tempqg"] == ["dpr_tempqg_s2022"]
    # every replicate pre-trains on its own: the row right after pre-training has a run per seed too
    assert runs["dpr_mixed_pre"] == ["dpr_mixed_pre_s2022", "dpr_mixed_pre_s2023", "dpr_mixed_pre_s2024"]
    assert hybrid.seed_runs(typed.hybrid, typed.dpr)["hybrid_sum_baseline"] == ["hybrid_sum_baseline_s2022"]
    identity = dense._settings_identity("baseline", typed.dpr)
    study["dpr"]["seeds"], study["dpr"]["related_seeds"] = [1, 2], [1]
    assert dense._settings_identity("baseline", settings.of(study).dpr) == identity
    # 06's per-seed analysis measures exactly the systems that have every seed: the paper's three, in its order
    assert results.seed_systems(settings.of(study).dpr) == ["dpr_baseline", "dpr_uncon", "dpr_mixed"]


def test_07_scores_table3s_rows_and_probes_its_dense_ones_with_every_seed():
    """07's systems are Table 3's (no list of its own); the moved-sentence probe loads each dense row's seed runs."""
    from ecqg.core import config
    from ecqg.stages import hybrid
    from ecqg.stages import mechanism as mp

    study = config.preset("study", REPO / "params")
    study["dpr"].update(seeds=[2022, 2023, 2024], variants="all")     # the first study's seeds, every variant
    typed = settings.of(study)
    rows = (typed.dpr, typed.mixing, typed.hybrid)
    assert mp.systems(*rows) == results.table3_systems(*rows)
    dense = mp.dense_systems(*rows)
    assert dense[0] == results.UNTRAINED_SYSTEM and not set(dense) & {*results.SPARSE_SYSTEMS,
                                                                      *hybrid.systems(settings.of(study).hybrid)}
    models = mp.dense_models(*rows)
    assert list(models) == dense
    assert models["dpr_mixed"] == [("mixed", 2022), ("mixed", 2023), ("mixed", 2024)]
    assert models["dpr_poly_rsm_tempqg"] == [("poly_rsm_tempqg", 2022)]
    assert models["dpr_uncon_pre"] == [("uncon_pre", s) for s in (2022, 2023, 2024)]   # a pre-training each
