"""Table 3 helpers: top-k curves of one run and of a seed stack."""

import numpy as np

from ecqg.pipeline import results


def test_curve_of_a_seed_stack_is_the_mean_of_its_seeds_curves():
    rng = np.random.default_rng(0)
    stack = rng.random((50, 3, 10)) < 0.1                               # questions x seeds x ranks
    questions = [{"id": str(i), "subsets": ["s"] if i < 20 else []} for i in range(50)]
    curve = results._curve(stack, questions, "dpr_x", "nq")
    per_seed = [results._curve(stack[:, s], questions, "dpr_x", "nq") for s in range(3)]
    assert list(curve.k[curve.subset == "all"]) == list(range(1, 11))
    assert np.allclose(curve.accuracy, np.mean([c.accuracy for c in per_seed], axis=0))
    assert (np.diff(curve.accuracy[curve.subset == "all"]) >= 0).all()
