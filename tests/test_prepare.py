"""Stage `prepare` on the paper profile's input formats (psgs_w100.tsv, DPR qas tsv, DPR retriever json)."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from ecqg.core import config
from ecqg.data.records import read_corpus
from ecqg.core.io import read_jsonl
from ecqg.stages import prepare

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "data"


def test_sample_indices_are_seeded_sorted_and_complete_without_a_limit():
    assert prepare.sample_indices(5, None, "s") == [0, 1, 2, 3, 4]
    a, b = prepare.sample_indices(100, 10, "s"), prepare.sample_indices(100, 10, "s")
    assert a == b == sorted(a) and len(set(a)) == 10
    assert prepare.sample_indices(100, 10, "other") != a


def test_corpus_sample_always_keeps_the_required_passages():
    ids = [f"p{i}" for i in range(50)]
    keep = prepare.corpus_sample(ids, {"p3", "p40"}, 10, "s")
    assert {"p3", "p40"} <= keep and len(keep) == 10
    assert prepare.corpus_sample(ids, {"p3"}, None, "s") is None


@pytest.fixture
def paper_like(tmp_path, monkeypatch):
    """A working directory whose params point at files in the published formats."""
    inputs = tmp_path / "downloads"
    inputs.mkdir()
    shutil.copy(FIXTURES / "psgs_w100.sample.tsv", inputs / "psgs_w100.tsv")
    shutil.copy(FIXTURES / "raw" / "wiki-passages" / "haystack.dpr_sample.json", inputs / "nq-train.json")
    (inputs / "nq-test.csv").write_text("who sings does he love me with reba\t['Linda Davis']\n"
                                        "what is the capital of france\t['Paris']\n", encoding="utf-8")
    (inputs / "nq-dev.csv").write_text("who wrote hamlet\t['William Shakespeare']\n", encoding="utf-8")
    params = config.preset("paper", REPO / "params")
    params["data"].update(corpus=str(inputs / "psgs_w100.tsv"), test_sets={"nq": str(inputs / "nq-test.csv")},
                          train_gold=str(inputs / "nq-train.json"), nq_dev=str(inputs / "nq-dev.csv"))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_prepare_reads_the_published_formats(paper_like):
    assert prepare.main() == 0
    out = paper_like / "outputs" / "data"
    corpus = [r for _, r in read_jsonl(out / "corpus.jsonl")]
    assert corpus and {p["source"] for p in corpus} == {"psgs_w100"}
    assert corpus[0]["id"] == "11828866" and corpus[0]["title"] == "Does He Love You"
    questions = [q for _, q in read_jsonl(out / "questions" / "nq.jsonl")]
    assert [q["id"] for q in questions] == ["nq-00000", "nq-00001"]
    assert questions[0]["answers"] == ["Linda Davis"] and questions[0]["answer_type"] == "text"
    # DPR's own training file is passed through (it carries positives and BM25 hard negatives already).
    dpr = json.loads((out / "train_gold_dpr.json").read_text())
    given = json.loads((FIXTURES / "raw" / "wiki-passages" / "haystack.dpr_sample.json").read_text())
    assert [r["question"] for r in dpr] == [r["question"] for r in given]
    assert dpr[0]["positive_ctxs"] and dpr[0]["hard_negative_ctxs"]
    assert (out / "train_gold.jsonl").read_text() == ""
    stage = json.loads((paper_like / "results" / "paper" / "stage_prepare.json").read_text())
    assert stage["train_format"] == "dpr-retriever-json" and stage["nq_dev_questions"] == 1


@pytest.mark.parametrize("pool", ["corpus", "all"])
def test_the_synthetic_pool_adds_the_passages_the_corpus_cut_left_out(paper_like, pool):
    from ecqg.stages.common import passages_by_id, pool_passages

    params = yaml.safe_load((paper_like / "params.yaml").read_text())
    every = [p["id"] for p in read_corpus(params["data"]["corpus"])]
    params["data"].update(max_corpus_passages=3, synthetic_pool=pool)
    (paper_like / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    assert prepare.main() == 0
    out = paper_like / "outputs" / "data"
    corpus = [r["id"] for _, r in read_jsonl(out / "corpus.jsonl")]
    extra = [r["id"] for _, r in read_jsonl(out / "pool_extra.jsonl")]
    assert len(corpus) == 3 and not set(corpus) & set(extra)
    assert extra == ([pid for pid in every if pid not in corpus] if pool == "all" else [])
    assert [p["id"] for p in pool_passages()] == corpus + extra
    assert set(passages_by_id()) == set(corpus + extra)
    stage = json.loads((paper_like / "results" / "paper" / "stage_prepare.json").read_text())
    assert stage["synthetic_pool"] == pool and stage["pool_extra_passages"] == len(extra)
