"""Hybrid fusion equals pyserini's normalise-and-sum and its reciprocal-rank fusion on the same runs."""

import random

import pytest

import ecqg  # noqa: F401  (sets OPENAI_API_KEY before pyserini is imported)
from ecqg.retrieval import fusion
from ecqg.retrieval.run_files import write_trec_run
from pyserini.fusion import reciprocal_rank_fusion as pyserini_rrf
from pyserini.trectools import AggregationMethod, RescoreMethod, TrecRun


def _random_run(seed: int, questions: int = 6, passages: int = 30, depth: int = 12) -> dict:
    rng = random.Random(seed)
    run = {}
    for q in range(questions):
        pids = rng.sample([f"d{i:02d}" for i in range(passages)], depth)
        scores = sorted((round(rng.uniform(-5, 30), 3) for _ in pids), reverse=True)
        run[f"q{q}"] = list(zip(pids, scores))
    run["q0"][1] = (run["q0"][1][0], run["q0"][0][1])       # a tie inside a ranking
    run["q5"] = [(pid, 2.0) for pid, _ in run["q5"]]          # all equal: pyserini scores them 1
    return run


def _as_dict(trec: TrecRun) -> dict:
    out = {}
    for topic, _, docid, _, score, _ in trec.to_numpy():
        out.setdefault(str(topic), []).append((str(docid), float(score)))
    return out


def _trec(run: dict, path) -> TrecRun:
    write_trec_run(path, run, tag="t")
    return TrecRun(str(path))


@pytest.mark.parametrize("depth", [None, 5])
def test_normalized_sum_equals_pyserini_normalize_then_sum(tmp_path, depth):
    sparse, dense = _random_run(1), _random_run(2)
    ours = fusion.normalized_sum([sparse, dense], depth=depth)
    runs = [_trec({q: r[:depth] if depth else r for q, r in run.items()}, tmp_path / f"{i}.trec")
            for i, run in enumerate((sparse, dense))]
    theirs = _as_dict(TrecRun.merge([r.rescore(RescoreMethod.NORMALIZE) for r in runs], AggregationMethod.SUM))
    assert set(ours) == set(theirs)
    for qid in ours:
        assert [pid for pid, _ in ours[qid]] == [pid for pid, _ in theirs[qid]], qid
        assert [round(s, 9) for _, s in ours[qid]] == [round(s, 9) for _, s in theirs[qid]], qid


def test_reciprocal_rank_fusion_equals_pyserini(tmp_path):
    runs = [_random_run(3), _random_run(4), _random_run(5)]
    ours = fusion.reciprocal_rank_fusion(runs, rrf_k=60, k=10)
    theirs = _as_dict(pyserini_rrf([_trec(r, tmp_path / f"{i}.trec") for i, r in enumerate(runs)], rrf_k=60, k=10))
    for qid in ours:
        assert [pid for pid, _ in ours[qid]] == [pid for pid, _ in theirs[qid]], qid
        assert [round(s, 12) for _, s in ours[qid]] == [round(s, 12) for _, s in theirs[qid]], qid


def test_a_passage_missing_from_one_run_scores_zero_there():
    fused = fusion.normalized_sum([{"q": [("a", 10.0), ("b", 0.0)]}, {"q": [("b", 3.0), ("c", 1.0)]}])
    assert fused["q"] == [("a", 1.0), ("b", 1.0), ("c", 0.0)]          # b: 0 + 1; ties by passage id
    weighted = fusion.normalized_sum([{"q": [("a", 10.0), ("b", 0.0)]}, {"q": [("b", 3.0), ("c", 1.0)]}],
                                     weights=[0.5, 1.0])
    assert weighted["q"][0] == ("b", 1.0)
    with pytest.raises(ValueError, match="two runs"):
        fusion.reciprocal_rank_fusion([{"q": []}])


def test_hybrid_stage_fuses_bm25_with_each_seed_and_names_its_runs(tmp_path, monkeypatch):
    """The pipeline's hybrid: both fusions of BM25 with one trained dense run, every test set, cut to the run depth."""
    from pathlib import Path

    from ecqg.core import config, paths, settings
    from ecqg.stages import hybrid
    from ecqg.retrieval.run_files import read_run, write_run

    monkeypatch.setattr(paths, "RUNS", tmp_path / "runs")
    mini = config.preset("mini", Path(__file__).resolve().parents[1] / "params")
    params = {**mini, "data": {**mini["data"], "test_sets": {"nq": "x", "wq": "y"}}, "retrieval": {"depth": 8},
              "dpr": {**mini["dpr"], "seeds": [7, 8, 9], "related_seeds": [7, 8]},
              "hybrid": {"variants": ["baseline", "mixed"], "depth": 10, "rrf_k": 60}}
    s = settings.of(params)
    for name, shift in (("nq", 0), ("wq", 10)):
        write_run(paths.run_file("bm25", name), _random_run(1 + shift))
        write_run(paths.run_file("dpr_mixed_s8", name), _random_run(2 + shift))
    figures = hybrid.fuse_with_bm25("mixed", 8, s.hybrid, s.data.test_sets, s.retrieval.depth)
    for name, shift in (("nq", 0), ("wq", 10)):
        runs = [_random_run(1 + shift), _random_run(2 + shift)]
        summed = read_run(paths.run_file("hybrid_sum_mixed_s8", name))
        rrf = read_run(paths.run_file("hybrid_rrf_mixed_s8", name))
        expected = fusion.normalized_sum(runs, depth=10, k=8)
        assert [p for p, _ in summed["q1"]] == [p for p, _ in expected["q1"]] and len(summed["q1"]) == 8
        assert [p for p, _ in rrf["q2"]] == [p for p, _ in fusion.reciprocal_rank_fusion(runs, 60, 10, 8)["q2"]]
        assert 0 <= figures[f"{name}_shared_top10"] <= 1 and figures[f"{name}_questions"] == 6
    # a hybrid's seeds are the related system's (dpr.related_seeds), not every seed of the paper's models
    assert hybrid.seed_runs(s.hybrid, s.dpr)["hybrid_sum_mixed"] == ["hybrid_sum_mixed_s7", "hybrid_sum_mixed_s8"]
    assert hybrid.systems(s.hybrid) == ["hybrid_sum_baseline", "hybrid_rrf_baseline", "hybrid_sum_mixed",
                                        "hybrid_rrf_mixed"]
    assert ("hybrid_sum_mixed", "hybrid_sum_baseline") in hybrid.pairs(s.hybrid)
