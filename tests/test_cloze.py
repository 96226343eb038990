"""The rule-based cloze generator (``qg.architecture: cloze``): answerable by construction, conditioned questions
keep their entity, seeded, and it goes through the pipeline's build / save / load / sample like any generator."""

import random

import pytest

from ecqg import qg
from ecqg.qg import cloze
from ecqg.qg.quality import has_repeated_word

PASSAGE = ("Marie Curie was a Polish and naturalised-French physicist and chemist. She was born in Warsaw in 1867. "
           "In 1903 she shared the Nobel Prize in Physics with Pierre Curie and Henri Becquerel. The University of "
           "Paris appointed her professor in 1906.")
ENTITY = "Warsaw"


@pytest.fixture(scope="module")
def model():
    return cloze.Cloze.build()


def _inputs(entity=None):
    start = PASSAGE.index(entity) if entity else None
    return [{"passage_id": "p1", "title": "Marie Curie", "text": PASSAGE, "entity": entity, "entity_start": start,
             "entity_label": "GPE" if entity else None}]


def test_every_answer_is_a_span_of_its_passage_and_every_question_asks(model):
    records, drops = cloze.Cloze.sample_records(model, _inputs(), seed=1, samples=6, conditioned=False,
                                                progress=False)
    assert records and drops["generated"] == 6 and drops["generated"] - drops["no_answer_candidate"] == len(records)
    for r in records:
        assert PASSAGE[r["answer_start"]:].startswith(r["answer"]), r
        assert r["question"].endswith("?") and r["question"][0].isupper()
        assert r["answer"] not in r["question"], r            # the answer was replaced, not asked with
        assert not has_repeated_word(r["question"])
    assert len({r["question"] for r in records}) == len(records)


def test_a_conditioned_question_keeps_its_entity_and_asks_for_another_span_of_its_sentence(model):
    records, _ = cloze.Cloze.sample_records(model, _inputs(ENTITY), seed=1, samples=4, conditioned=True,
                                            progress=False)
    assert records
    sentence = "She was born in Warsaw in 1867."
    for r in records:
        assert qg.mentions(r["question"], ENTITY), r
        assert r["answer"] != ENTITY and r["answer"] in sentence, r
    assert any(r["question"].startswith("She was born in Warsaw in what year") or "when" in r["question"].lower()
               for r in records), [r["question"] for r in records]


def test_wh_phrases_follow_the_answer_type():
    assert cloze._wh_phrase("PERSON", "Pierre Curie", fronted=True) == "who"
    assert cloze._wh_phrase("PERSON", "Pierre Curie", fronted=False) == "whom"
    assert cloze._wh_phrase("DATE", "1867", fronted=False) == "what year"
    assert cloze._wh_phrase("DATE", "1867", fronted=True) == "when"
    assert cloze._wh_phrase("GPE", "Warsaw", fronted=False) == "what place"
    assert cloze._wh_phrase(None, "the prize", fronted=False) == "what"


def test_sampling_is_seeded_per_input(model):
    many = [{**_inputs()[0], "passage_id": f"p{i}"} for i in range(3)]
    a, _ = cloze.Cloze.sample_records(model, many, seed=5, samples=2, conditioned=False, progress=False)
    b, _ = cloze.Cloze.sample_records(model, many[1:2], seed=5, samples=2, conditioned=False, progress=False)
    c, _ = cloze.Cloze.sample_records(model, many, seed=6, samples=2, conditioned=False, progress=False)
    same_input = [r for r in a if r["passage_id"] == "p1"]
    assert [r["question"] for r in same_input] == [r["question"] for r in b]  # its batch-mates do not matter
    assert [r["question"] for r in a] != [r["question"] for r in c] or len(a) <= 2


def test_a_passage_cut_mid_sentence_gives_no_question_from_its_fragments(model):
    text = "was elected in 1990 by the council. The council met in Geneva in 1991 to vote. It later moved to Bern in"
    doc = model.nlp()(text)
    found = cloze.questions_for(doc, None, None, random.Random(0), 10, model.rules)
    assert found and all(q["question"].startswith("The council met in") for q in found), found


def test_it_builds_saves_and_loads_through_the_registry(tmp_path):
    assert "cloze" in qg.ARCHITECTURES and qg.is_rule_based("cloze") and not qg.is_rule_based("prefix_lm")
    model, tokenizer = qg.build_generator("bundled:minilm", architecture="cloze")
    assert tokenizer is None and qg.generator_for(model) is cloze.Cloze
    qg.save_generator(model, tokenizer, tmp_path / "g")
    again, none = qg.load_generator(tmp_path / "g")
    assert none is None and again == model
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / cloze.CONFIG_FILE).write_text("{}")
    with pytest.raises(ValueError, match=r"bad/cloze.json: not a cloze generator's settings"):
        qg.load_generator(tmp_path / "bad")


def test_the_pipeline_samples_it_without_training(tmp_path, monkeypatch):
    from ecqg.stages import question_generation as stage

    monkeypatch.chdir(tmp_path)
    from ecqg.core import settings

    params = _mini_params()
    params["qg"]["architecture"] = "cloze"
    s = settings.of(params)
    model, tokenizer, figures = stage.train_generator("uncon", [], [], {}, s.qg, s.seed, progress=False)
    assert figures["steps"] == 0 and figures["initialised_from"] == "rules (cloze)"
    records, drops = stage.generate(model, tokenizer, "con", _inputs(ENTITY), s.qg, s.seed, "test", progress=False)
    assert records and all(r["generator"] == "con" and qg.mentions(r["question"], ENTITY) for r in records)
    assert drops["generated"] == params["qg"]["generate"]["samples"]


def _mini_params():
    from pathlib import Path

    from ecqg.core import config

    return config.preset("mini", Path(__file__).resolve().parents[1] / "params")
