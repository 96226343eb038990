"""Table 3 helpers: top-k curves of one run and of a seed stack; which rows a profile scores."""

from pathlib import Path

import numpy as np

from ecqg.pipeline import results

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
    """``pseudo.variants`` decides which ETM / RSM rows 06 / 07 score (the study trains neither); nothing else goes."""
    from ecqg import config
    from ecqg.pipeline import dense, hybrid

    params = config.preset("mini", REPO / "params")
    rows = ["bm25", "dpr_baseline", "dpr_uncon_pre", "dpr_etm_pre", "dpr_rsm", "dpr_poly_mixed",
            "hybrid_sum_baseline", "hybrid_rrf_etm", "hybrid_sum_poly_mixed"]
    assert dense.in_profile(rows, params) == rows
    params["pseudo"]["variants"] = ["rsm"]
    assert dense.in_profile(rows, params) == [r for r in rows if r not in ("dpr_etm_pre", "hybrid_rrf_etm")]
    study = config.preset("study", REPO / "params")
    kept = dense.in_profile(rows + hybrid.systems(study), study)
    assert not any(("etm" in r or "rsm" in r) and "rsm_tempqg" not in r for r in kept)
    assert {"dpr_baseline", "dpr_poly_mixed", "hybrid_sum_poly_mixed", "hybrid_rrf_poly_mixed"} <= set(kept)


def test_a_missing_pretrained_model_names_the_stage_that_makes_it():
    from ecqg.pipeline import dense

    assert dense.pretraining_stage("mixed") == "dpr_pretraining@mixed"
    assert dense.pretraining_stage("rsm") == "dpr_pretraining_pseudo@rsm"
    assert dense.pretraining_stage("poly_mixed") == "dpr_pretraining_poly@mixed"
