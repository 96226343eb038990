"""TempQG's generator inputs and set assembly: the template rides in the source's first segment, the records are
relabelled and validated, adherence compares forms, and each UnCon entry gets its own question."""

import pytest

from ecqg.core.errors import DataFormatError
from ecqg.filtering import check_generated
from ecqg.stages.tempqg import one_per_entry, write_set
from ecqg.qg.format import SEPARATOR, format_source
from ecqg.tempqg.generation import as_tempqg, sampling_inputs, templated, training_examples
from ecqg.tempqg.templates import Templates, adherence, candidates

PASSAGES = {"p1": {"title": "Lyon", "text": "Lyon is a city in France. The Rhone flows through it."},
            "p2": {"title": "", "text": "Apple was founded in a garage in 1976."}}
TRIPLES = [{"id": "q1", "question": "Which river flows through Lyon?", "answer": "The Rhone", "answer_start": 26,
            "passage_id": "p1"},
           {"id": "q2", "question": "When was Apple founded?", "answer": "1976", "answer_start": 34,
            "passage_id": "p2"}]


def test_the_template_leads_the_source_and_the_target_is_the_unconditioned_ones():
    examples, counts = training_examples(TRIPLES, PASSAGES, ["Which river flows through _?", "When was _ founded?"],
                                         window_words=None)
    assert counts["examples"] == 2
    lyon = PASSAGES["p1"]["text"]
    assert examples[0]["source"] == f"Which river flows through _? {SEPARATOR} Lyon {SEPARATOR} {lyon}"
    assert examples[1]["source"] == f"When was _ founded? {SEPARATOR} {PASSAGES['p2']['text']}"   # no title
    assert examples[0]["target"] == f"The Rhone {SEPARATOR} Which river flows through Lyon?"
    assert [(e["passage_id"], e["template"]) for e in examples] == [("p1", "Which river flows through _?"),
                                                                     ("p2", "When was _ founded?")]
    # one passage with two questions of different templates: each example keeps its own template
    twice = training_examples([TRIPLES[0], {**TRIPLES[0], "id": "q3"}], PASSAGES, ["A _?", "B _?"], None)[0]
    assert [e["source"].split(f" {SEPARATOR} ")[0] for e in twice] == ["A _?", "B _?"]
    with pytest.raises(ValueError, match="2 triples but 1 templates"):
        training_examples(TRIPLES, PASSAGES, ["x"], None)


def test_sampling_inputs_format_like_training_sources_and_records_are_relabelled():
    inputs = sampling_inputs([("p1", PASSAGES["p1"])], ["Which river flows through _?"])
    source = format_source(inputs[0]["title"], inputs[0]["text"], inputs[0]["entity"], None, None)
    assert source == f"Which river flows through _? {SEPARATOR} Lyon {SEPARATOR} {PASSAGES['p1']['text']}"
    assert templated(PASSAGES["p2"], "T") == {"title": "T", "text": PASSAGES["p2"]["text"]}
    sampled = [{"id": "qg-uncon-abc-0", "passage_id": "p1", "entity": "Which river flows through _?",
                "entity_label": None, "question": "Which river flows through Lyon?", "answer": "The Rhone",
                "generator": "uncon", "sample_score": -0.5, "sample": 0}]
    (rec,) = check_generated(as_tempqg(sampled))
    assert (rec["id"], rec["generator"], rec["template"], rec["entity"]) == (
        "qg-tempqg-abc-0", "tempqg", "Which river flows through _?", None)
    with pytest.raises(DataFormatError, match="template"):
        check_generated([{**rec, "template": ""}])


def test_adherence_and_candidates():
    assert adherence(["When was _ founded?", "Who wrote _?"], ["When was _ founded?", "When was _ founded?"],
                     0.75) == {"n": 2, "mean_similarity": pytest.approx(0.6, abs=0.05), "follows_template": 0.5}
    templates = Templates(representatives=("a", "b", "c"), members=(("a",), ("b",), ("c",)),
                          of_question=(0, 1, 1, 2, 2, 2), raw=("a", "b", "b", "c", "c", "c"))
    assert candidates(templates, 2) == [2, 1] and candidates(templates, 1) == [2, 1, 0]


def test_each_uncon_entry_gets_its_own_question_best_first():
    kept = [{"id": "a", "passage_id": "p1", "sample_score": -1.0},
            {"id": "b", "passage_id": "p1", "sample_score": -0.2},
            {"id": "c", "passage_id": "p2", "sample_score": -0.5}]
    records, missing = one_per_entry(["p1", "p2", "p1", "p1", "p3"], kept)
    assert [r["id"] for r in records] == ["b", "c", "a"] and missing == 2


def test_a_set_too_small_to_pretrain_on_is_refused_before_any_search():
    """The count held out is pre-training's own split's (a fraction rounds as there), so the check and the training
    cannot disagree; nothing is searched or written."""
    from ecqg.core import config, settings

    mini = settings.of(config.preset("mini"))
    pretrain = mini.dpr.pretrain
    records = [{"id": f"t{i}", "question": f"q{i}?"} for i in range(6)]     # 0.25 * 6 rounds to 2 held out, 4 to train
    with pytest.raises(ValueError, match="6 questions: too few .* holds out 2 and trains in batches of 5"):
        write_set(pretrain.replace(heldout=0.25, batch_size=5), mini.bm25, 1, records, {})
    with pytest.raises(ValueError, match="holds out 3 and trains in batches of 4"):
        write_set(pretrain.replace(heldout=3, batch_size=4), mini.bm25, 1, records, {})


def test_a_pretraining_sequence_joins_its_phases_figures():
    """Luo et al.'s recipe pre-trains on RSM, then on TempQG: one history, steps counted on, each entry's set named."""
    from ecqg.core import variants
    from ecqg.stages import dpr_training as dense

    assert variants.get("poly_rsm_tempqg").pretrain == ("rsm", "tempqg") and variants.get("mixed").pretrain == ("mixed",)
    assert dense.is_pretrained_variant("poly_rsm_tempqg") and dense.is_pretrained_variant("tempqg")
    assert variants.pretrain_stage("poly_rsm_tempqg", 2022) == "pretrain_poly_rsm_tempqg@2022"
    assert variants.pretrain_stage("tempqg", 2022) == "pretrain_tempqg@2022"

    def phase(steps, examples, seconds, resumed=None):
        return {"history": [{"step": s, "loss": 1.0} for s in range(1, steps + 1)] + [{"val_top1": 0.5}],
                "train_examples": examples, "heldout_examples": 2, "train_seconds": seconds, "run_dir": "x",
                "resumed_from": resumed}

    joined = dense._joined_phases([("rsm", phase(3, 90, 10.0)), ("tempqg", phase(2, 60, 5.0, "ckpt"))])
    assert [(h.get("step"), h["set"]) for h in joined["history"]] == [
        (1, "rsm"), (2, "rsm"), (3, "rsm"), (None, "rsm"), (4, "tempqg"), (5, "tempqg"), (None, "tempqg")]
    assert (joined["sets"], joined["train_examples"], joined["train_seconds"], joined["resumed_from"]) == (
        ["rsm", "tempqg"], 150, 15.0, "ckpt")
    single = phase(2, 10, 1.0)
    assert dense._joined_phases([("mixed", single)]) is single


def test_the_hardness_cut_keeps_each_generators_own_share_tempqg_included():
    from ecqg.filtering import hardness_filter

    records = [{"id": f"{g}-{i}", "passage_id": "p1", "question": "q?", "answer": "a", "generator": g,
                "entity": None, **({"template": "t _?"} if g == "tempqg" else {})}
               for g in ("uncon", "tempqg") for i in range(4)]
    scores = {r["id"]: {"score": float(i), "rank": None} for i, r in enumerate(records)}
    kept, rejected, stats = hardness_filter(records, scores, "lowest_score", keep_fraction=0.5)
    assert sorted(r["id"] for r in kept) == ["tempqg-0", "tempqg-1", "uncon-0", "uncon-1"]
    assert (stats["tempqg_in"], stats["tempqg_kept"], stats["uncon_kept"], stats["con_in"]) == (4, 2, 2, 0)


def test_tempqg_filters_by_its_own_first_rule_where_a_profile_sets_one(monkeypatch):
    """``tempqg.stage1`` overrides stage 03's rule for TempQG's questions only (mini: answer in passage, as its
    prefix LM's questions rarely pass the reader); null keeps stage 03's. The reader is not run for a rule that does
    not read, and the funnel names the rule that ran."""
    from ecqg.core import config, settings
    from ecqg.stages import filtering as sp
    from ecqg.stages import mixing
    from ecqg.stages import tempqg as stage

    mini, smoke = settings.of(config.preset("mini")), settings.of(config.preset("smoke"))
    assert (stage.stage1_rule(mini.tempqg, mini.filtering), mini.filtering.stage1) == ("answer_in_passage",
                                                                                        "roundtrip")
    assert stage.stage1_rule(smoke.tempqg, smoke.filtering) == smoke.filtering.stage1 == "roundtrip"

    def no_reader(*args, **kwargs):
        raise AssertionError("the reader ran for a rule that does not read")

    monkeypatch.setattr(sp, "read", no_reader)
    monkeypatch.setattr(sp, "stage2", lambda kept, passages, filtering, dpr, progress=True: (kept, [], {}, {}))
    monkeypatch.setattr(mixing, "test_question_keys", lambda test_sets: set())
    records = [{"id": "t1", "passage_id": "p1", "question": "Which river flows through Lyon?", "answer": "The Rhone",
                "generator": "tempqg", "entity": None, "template": "which river flows through _?"},
               {"id": "t2", "passage_id": "p2", "question": "Who founded Apple?", "answer": "Steve Jobs",
                "generator": "tempqg", "entity": None, "template": "who founded _?"}]
    kept, funnel = stage.filter_questions(mini, records, PASSAGES, progress=False)
    assert [r["id"] for r in kept] == ["t1"]               # "Steve Jobs" is not in its passage
    assert funnel["stage1_rule"] == "answer_in_passage" and funnel["after_stage1"] == 1
