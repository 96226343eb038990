"""ecqg.tooling.cost: a stage's GPU-hours are a rate times a count, N GPUs divide the wall time of the work that splits, the
paper's three systems are a subset of the DAG, a missing rate file is named, and docs/paper_profile.md's table is
what ``python -m ecqg.tooling.cost --profile paper --gpus 1 8`` prints (so it cannot go stale). No model is loaded."""

import json
import shutil

import pytest

from ecqg.core import variants
from ecqg.tooling import cost


@pytest.fixture(scope="module")
def model():
    return cost.build("paper")


def _result(name: str) -> dict:
    return json.loads((cost.RESULTS / name).read_text(encoding="utf-8"))


def test_a_stage_costs_rate_times_count(model):
    """By hand: fine-tuning = epochs x (58,880 NQ train records - held out) over the two runs' measured rates, scaled
    by the benchmark's passage tokens over psgs_w100's 142.5."""
    ft = model.params["dpr"]["finetune"]
    measured = [e["examples_per_s"] for name in cost.CHECK_FILES for e in _result(name)["finetune"]
                if e["grad_cache_chunk_size"] is None]
    scale = _result(cost.ENCODING_FILE)["encoding"]["mean_tokens"] / 142.5
    examples = ft["epochs"] * (58_880 - ft["heldout"])
    hand = (examples / (max(measured) * scale) / 3600, examples / (min(measured) * scale) / 3600)
    assert model.stage_hours(variants.stage_name("finetune", "baseline", 2022)) == pytest.approx(hand)

    encoding = _result(cost.ENCODING_FILE)["encoding"]["steady_passages_per_s"] * scale
    assert model.stage_hours("retrieve_untrained") == pytest.approx((21_015_324 / encoding / 3600,) * 2)


def test_pretraining_corrections_and_one_pass_per_set(model):
    """The hard negative the benchmark left out (/ 1.7) and the passage length; two sets, two passes."""
    pre = model.params["dpr"]["pretrain"]
    measured = [_result(name)["pretrain"]["examples_per_s"] for name in cost.CHECK_FILES]
    rate = max(measured) * _result(cost.ENCODING_FILE)["encoding"]["mean_tokens"] / 142.5 / 1.7
    examples = pre["epochs"] * (model.params["mixing"]["total"] - pre["heldout"])
    uncon = model.stage_hours("pretrain_uncon@2022")
    assert uncon[0] == pytest.approx(examples / rate / 3600)
    assert model.stage_hours("pretrain_poly_rsm_tempqg@2022") == pytest.approx(tuple(2 * h for h in uncon))


def test_gpus_divide_the_wall_time(model):
    works = [w for ws in model.works.values() for w in ws]
    assert any(not w.splits for w in works)          # 03's hardness encoding runs in one process
    for w in works:
        expected = tuple(h / 8 for h in model.hours(w)) if w.splits else model.hours(w)
        assert model.wall(w, 8) == pytest.approx(expected)
        assert model.wall(w, 1) == pytest.approx(model.hours(w))


def test_the_three_system_preset_is_priced_as_its_own_dag(model):
    three = cost.three_systems(model)
    assert three.profile == "paper_three" and three.sizes == model.sizes
    assert set(three.dag) < set(model.dag)
    needed = {variants.stage_name(phase, v, s) for v in ("baseline", "uncon", "mixed")
              for s in variants.seeds(v, model.params) for phase in ("finetune", "retrieve")}
    needed |= {"pretrain_uncon@2022", "pretrain_mixed@2022", "attention_bias", "question_generation", "filtering",
               "mixing", "results"}
    assert needed <= set(three.dag)
    assert not {"tempqg", "pseudo_queries", "pretrain_poly_mixed@2022"} & set(three.dag)
    whole = cost._sum(model.stage_hours(n) for n in model.dag)
    assert cost._sum(three.stage_hours(n) for n in three.dag)[1] < whole[0]
    assert "make profile P=paper_three" in cost.render(model, [1, 8])
    assert cost.three_systems(cost.build("paper_three")) is None


def test_the_training_goal_what_if_reprices_training_only(model):
    """At 25% MFU a bert-base example of the profile's tokens costs 6 x 110M x tokens FLOPs; the other rows keep
    their measured rates; the sentence names a DAG above its goal only when its hours are."""
    what = cost.at_training_goal(model)
    tokens = cost.example_tokens(model, "pretrain")
    assert what.rates["pretrain"].corrected == pytest.approx((0.25 * 989e12 / (6 * 110e6 * tokens),) * 2)
    assert what.rates["encoding"] == model.rates["encoding"] and what.rates["sampling"] == model.rates["sampling"]
    faster = what.stage_hours("pretrain_uncon@2022")[1]
    assert faster < model.stage_hours("pretrain_uncon@2022")[0]
    hours = cost._sum(what.hours(w) for n in what.dag for w in what.works[n])
    assert ("still above the GPU-hour goal: `paper`" in cost.goal_check(model)) == (hours[1] > 60)


def test_a_missing_rate_file_is_named(tmp_path, monkeypatch, capsys):
    shutil.copy(cost.RESULTS / cost.ENCODING_FILE, tmp_path)
    monkeypatch.setattr(cost, "RESULTS", tmp_path)
    with pytest.raises(FileNotFoundError, match=cost.CHECK_FILES[0]):
        cost.build("paper")
    assert cost.main(["--profile", "paper"]) == 2
    assert str(tmp_path / cost.CHECK_FILES[0]) in capsys.readouterr().err


def test_an_uncosted_stage_is_an_error(model):
    with pytest.raises(ValueError, match="no cost rule"):
        cost.stage_work("new_gpu_stage", {"cmd": "python -m ecqg.stages.new"}, model.params, model.sizes)


def test_the_doc_table_is_generated(model):
    assert cost.doc_block() == cost.render(model, [1, 8]), (
        "docs/paper_profile.md's cost table is stale: run python -m ecqg.tooling.cost --profile paper --gpus 1 8 --write-doc")


def test_write_doc_replaces_only_the_block(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{cost.START}\nold\n{cost.END}\nafter\n", encoding="utf-8")
    cost.write_doc("new\n", doc)
    assert doc.read_text(encoding="utf-8") == f"before\n{cost.START}\nnew\n{cost.END}\nafter\n"
    assert cost.doc_block(doc) == "new\n"
