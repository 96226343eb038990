"""ecqg.tooling.cost: a stage's GPU-hours are a rate times a count, N GPUs divide the wall time of the work that splits, the
paper's three systems are a subset of the DAG, a missing rate file is named, and docs/paper_profile.md's table is
what ``python -m ecqg.tooling.cost --profile paper --gpus 1 8`` prints (so it cannot go stale). No model is loaded."""

import json
import shutil

import pytest

from ecqg.core import variants
from ecqg.tooling import cost, cost_model


@pytest.fixture(scope="module")
def model():
    return cost_model.build("paper")


def _result(name: str) -> dict:
    return json.loads((cost_model.RESULTS / name).read_text(encoding="utf-8"))


def test_a_stage_costs_rate_times_count(model):
    """By hand: fine-tuning = epochs x (58,880 NQ train records - held out) over the two runs' measured rates, scaled
    by the benchmark's passage tokens over psgs_w100's 142.5."""
    ft = model.settings.dpr.finetune
    measured = [e["examples_per_s"] for name in model.rates["finetune"].files for e in _result(name)["finetune"]
                if e["grad_cache_chunk_size"] is None]
    encoding_file = model.rates["encoding"].files[0]
    scale = _result(encoding_file)["encoding"]["mean_tokens"] / 142.5
    examples = ft.epochs * (58_880 - ft.heldout)
    hand = (examples / (max(measured) * scale) / 3600, examples / (min(measured) * scale) / 3600)
    assert model.stage_hours(variants.stage_name("finetune", "baseline", 2022)) == pytest.approx(hand)

    encoding = _result(encoding_file)["encoding"]["steady_passages_per_s"] * scale
    (work,) = [w for w in model.works["retrieve_untrained"] if w.row == cost_model.ENC]
    assert model.hours(work) == pytest.approx((21_015_324 / encoding / 3600,) * 2)


def test_rates_come_from_the_newest_device_measurement(model, tmp_path, monkeypatch):
    """A newer device check reprices what it measured and nothing else; a superseded file is never read."""
    for path in cost_model.RESULTS.glob("*.json"):
        shutil.copy(path, tmp_path)
    newer = _result(model.rates["finetune"].files[0])
    newer["date"] = "2099-01-01"
    newer["finetune"] = [{**newer["finetune"][0], "examples_per_s": 1000.0}]
    for key in ("pretrain", "sampling", "reader", "encoding"):
        newer["sections"] = {**newer.get("sections", {}), key: {"status": "skipped: not in --sections"}}
    (tmp_path / "gpu_check_h200_2099-01-01.json").write_text(json.dumps(newer), encoding="utf-8")
    monkeypatch.setattr(cost_model, "RESULTS", tmp_path)
    again = cost_model.build("paper")
    assert again.rates["finetune"].files == ("gpu_check_h200_2099-01-01.json",)
    assert again.rates["finetune"].low == again.rates["finetune"].high == 1000.0
    for key in ("pretrain", "sampling", "reader", "encoding"):
        assert again.rates[key] == model.rates[key], key
    assert not set(cost_model.SUPERSEDED) & {f for r in model.rates.values() for f in r.files}


def test_sampling_is_priced_at_the_profiles_new_tokens(model):
    measured = {_result(n)["sampling"]["max_new_tokens"] for n in model.rates["sampling"].files}
    assert model.rates["sampling"].factor == pytest.approx(
        max(measured) / model.settings.qg.generate.max_new_tokens)


def test_unmeasured_gpu_work_is_estimated_from_flops_and_the_host_side_is_in_the_wall(model):
    """01's forwards, 02's generator trainings and FAISS's IVF assignment are priced from their FLOPs at the stated
    share of the peak, marked *estimated*; the CPU stages' projected hours add to every wall column, not to the
    GPU-hours."""
    attention = model.rates["attention"]
    assert attention.low == pytest.approx(cost_model.ESTIMATE_MFU * 989e12 / (2 * cost_model.BERT_BASE_PARAMS * 142.5))
    assert {w.row for w in model.works["attention_bias"]} == {cost_model.ATTN}
    assert {w.label for w in model.works["question_generation"] if w.row == cost_model.GEN} == {"UnCon", "Con"}
    assert any(w.row == cost_model.FAISS for w in model.works["retrieve_untrained"])
    assert 1.0 < model.host_hours < 20.0
    text = cost.table(model, list(model.dag), [1, 8])
    assert "| *estimated*: FAISS index (retrieve_*) |" in text and "| CPU stages (host side, 16 cores) |" in text
    total = text.strip().splitlines()[-1]
    works = [w for ws in model.works.values() for w in ws]
    gpu_hours = cost_model._sum(model.hours(w) for w in works)
    assert f"**{cost._span(*gpu_hours)}**" in total
    wall8 = cost_model._sum(model.wall(w, 8) for w in works)
    assert f"**{cost._span(wall8[0] + model.host_hours, wall8[1] + model.host_hours)}**" in total


def test_pretraining_corrections_and_one_pass_per_set(model):
    """The hard negative the benchmark left out (/ 1.7) and the passage length; two sets, two passes."""
    pre = model.settings.dpr.pretrain
    measured = [_result(name)["pretrain"]["examples_per_s"] for name in model.rates["pretrain"].files]
    rate = max(measured) * _result(model.rates["encoding"].files[0])["encoding"]["mean_tokens"] / 142.5 / 1.7
    examples = pre.epochs * (model.settings.mixing.total - pre.heldout)
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
    three = cost_model.three_systems(model)
    assert three.profile == "paper_three" and three.sizes == model.sizes
    assert set(three.dag) < set(model.dag)
    needed = {variants.stage_name(phase, v, s) for v in ("baseline", "uncon", "mixed")
              for s in variants.seeds(v, model.settings.dpr) for phase in ("finetune", "retrieve")}
    needed |= {"pretrain_uncon@2022", "pretrain_mixed@2022", "attention_bias", "question_generation", "filtering",
               "mixing", "results"}
    assert needed <= set(three.dag)
    assert not {"tempqg", "pseudo_queries", "pretrain_poly_mixed@2022"} & set(three.dag)
    whole = cost_model._sum(model.stage_hours(n) for n in model.dag)
    assert cost_model._sum(three.stage_hours(n) for n in three.dag)[1] < whole[0]
    assert "make profile P=paper_three" in cost.render(model, [1, 8])
    assert cost_model.three_systems(cost_model.build("paper_three")) is None


def test_the_training_goal_what_if_reprices_training_only(model):
    """At 25% MFU a bert-base example of the profile's tokens costs 6 x 85.1M (the non-embedding parameters) x
    tokens FLOPs; the other rows keep their rates; the sentence names a DAG above its goal only when its hours are;
    the 40% what-if is printed too."""
    assert cost_model.BERT_BASE_PARAMS == 85_054_464          # 12 layers x 7,087,872 (bert-base's 110M less embeddings)
    what = cost_model.at_training_goal(model)
    tokens = cost_model.example_tokens(model, "pretrain")
    assert what.rates["pretrain"].corrected == pytest.approx((0.25 * 989e12 / (6 * 85_054_464 * tokens),) * 2)
    at40 = cost_model.at_training_goal(model, 0.40)
    assert at40.rates["pretrain"].low == pytest.approx(what.rates["pretrain"].low * 0.40 / 0.25)
    assert "**Training at 40% MFU**" in cost.render(model, [1, 8])
    assert what.rates["encoding"] == model.rates["encoding"] and what.rates["sampling"] == model.rates["sampling"]
    faster = what.stage_hours("pretrain_uncon@2022")[1]
    assert faster < model.stage_hours("pretrain_uncon@2022")[0]
    hours = cost_model._sum(what.hours(w) for n in what.dag for w in what.works[n])
    assert ("Still above the GPU-hour goal: `paper`" in cost.goal_check(model)) == (hours[1] > 60)


def test_a_missing_rate_file_is_named(model, tmp_path, monkeypatch, capsys):
    shutil.copy(cost_model.RESULTS / model.rates["encoding"].files[0], tmp_path)
    monkeypatch.setattr(cost_model, "RESULTS", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no device measurement of `finetune`.*gpu_check_\*\.json"):
        cost_model.build("paper")
    assert cost.main(["--profile", "paper"]) == 2
    assert "bench/gpu_check.py --out bench/results/gpu_check_" in capsys.readouterr().err


def test_an_uncosted_stage_is_an_error(model):
    with pytest.raises(ValueError, match="no cost rule"):
        cost_model.stage_work("new_gpu_stage", {"cmd": "python -m ecqg.stages.new"}, model.settings, model.sizes)


def test_the_doc_table_is_generated(model):
    assert cost.doc_block() == cost.render(model, [1, 8]), (
        "docs/paper_profile.md's cost table is stale: run python -m ecqg.tooling.cost --profile paper --gpus 1 8 --write-doc")


def test_write_doc_replaces_only_the_block(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{cost.START}\nold\n{cost.END}\nafter\n", encoding="utf-8")
    cost.write_doc("new\n", doc)
    assert doc.read_text(encoding="utf-8") == f"before\n{cost.START}\nnew\n{cost.END}\nafter\n"
    assert cost.doc_block(doc) == "new\n"


def test_a_rate_says_whether_the_code_it_timed_is_today_s(tmp_path):
    """bench/gpu_check.py records a digest of the code each rate timed; the cost model calls a rate current only when
    every file it is read from recorded today's digest (issue 66: the rates of 27 Nov timed an older trainer)."""
    from ecqg.tooling.rate_code import CHANGED, CURRENT, NOT_RECORDED, code_digests, code_status

    for folder in ("ecqg/retrieval", "ecqg/runtime"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "loop.py").write_text("x = 1\n")
    today = code_digests(tmp_path)
    assert code_status("finetune", [{"code": today}, {"code": today}], tmp_path) == CURRENT
    assert code_status("finetune", [{"code": today}, {}], tmp_path) == NOT_RECORDED
    (tmp_path / "ecqg/retrieval/loop.py").write_text("x = 2\n")
    assert code_digests(tmp_path)["finetune"] != today["finetune"]
    assert code_status("finetune", [{"code": today}], tmp_path) == CHANGED
    block = cost.doc_block()
    assert "**Code of the rates**" in block and "code not recorded" in block      # the committed files of 27 Nov
