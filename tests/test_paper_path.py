"""The paper profile's code paths end to end: ``dvc repro`` on params/paper.yaml (its three systems, as
params/paper_three.yaml) with DPR's file formats, a BART generator, a reader used as shipped, a BERT DPR and an
IVF-PQ index, all tiny (``tests/paper_tiny.py``)."""

import json
import shutil

import pytest

import dag_runs


@pytest.fixture(scope="module")
def paper_repo(request):
    """A copy of the tree with the paper profile's DAG run at test size (``tests/dag_runs.py``: DPR's file formats
    from the bundle, ``tests/paper_tiny.py``'s models and sizes), started in the background at collection."""
    repo = dag_runs.run("paper", request.config).result()
    failed = request.session.testsfailed
    yield repo
    if request.session.testsfailed == failed:          # kept for inspection only when a test on it failed
        shutil.rmtree(repo.parent, ignore_errors=True)


@pytest.mark.slow
def test_paper_profile_dag_end_to_end(paper_repo):
    repo = paper_repo
    results = repo / "results" / "paper"
    prepared = json.loads((results / "stage_prepare.json").read_text())
    assert prepared["train_format"] == "dpr-retriever-json" and prepared["corpus_by_source"] == {"psgs_w100": 400}
    table = json.loads((results / "table3.json").read_text())
    for system in ("bm25", "dpr_baseline", "dpr_uncon", "dpr_mixed"):
        for test_set in ("nq", "wq", "tqa"):
            row = table["accuracy"][system][test_set]["all"]
            assert row["n"] == 40 and 0 <= row["top1"] <= row["top20"] <= 100, (system, test_set)
    index = json.loads((repo / "outputs/indexes/dense/baseline_s2022/index.json").read_text())
    assert index["kind"] == "ivfpq" and index["ntotal"] == 400
    qg = json.loads((results / "question_generation.json").read_text())
    assert qg["generation"]["con"]["generated"] > 0 and qg["generation"]["uncon"]["generated"] > 0
    filtering = json.loads((results / "filtering.json").read_text())
    assert filtering["mrc"]["trained"] is False
    bias = json.loads((results / "attention_bias.json").read_text())
    assert bias["conditioning"]["reused_study"] is False and bias["sampling"]["excluded_test_gold"] == 0
    # DPR's csv names no gold passages: 07 takes BM25's first answer-bearing passage, and says so
    mechanism = json.loads((results / "mechanism.json").read_text())
    gold = mechanism["setting"]["gold_passages"]
    assert gold.get("bm25_first_answer", 0) > 0 and "annotated" not in gold
    assert mechanism["position"]["counts"].get("ok", 0) > 0
    assert "the first passage of BM25's ranking that contains an answer" in (results / "README.md").read_text()
    # three systems: no other variant's stage, no pseudo-query or TempQG set
    assert not [p.name for p in (repo / "outputs/models").iterdir() if not p.name.startswith(("dpr_baseline_",
                                                                                             "dpr_uncon_", "dpr_mixed_"))]
    assert not (repo / "outputs/pseudo").exists() and not (repo / "outputs/tempqg").exists()
