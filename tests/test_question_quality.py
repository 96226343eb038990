"""The method's bar for synthetic questions, measured on sets with known answers, and shown on the results pages."""

from __future__ import annotations

import pytest
from metrics_records import write_record

from ecqg.core import metrics_files
from ecqg.qg.quality import BAR, bar_misses, has_repeated_word, set_measures

TEXT = {"p1": "The Qing dynasty was founded in 1644 by the Manchu. Its capital was Beijing.",
        "p2": "Marie Curie won the Nobel Prize in Physics in 1903."}
GOOD = [{"question": "when was the qing dynasty founded?", "answer": "1644", "passage_id": "p1",
         "entity": "Qing dynasty"},
        {"question": "what was the capital of the qing dynasty?", "answer": "Beijing", "passage_id": "p1"},
        {"question": "who won the nobel prize in physics in 1903?", "answer": "Marie Curie", "passage_id": "p2",
         "entity": "Marie Curie"}]
BAD = [{"question": "when was the dynastiesic dynasty dynasty dynasty?", "answer": "1732", "passage_id": "p1",
        "entity": "Manchu"},
       {"question": "who is an american music music and writer?", "answer": "Bob Dylan", "passage_id": "p2"},
       {"question": "who is an american music music and writer?", "answer": "Marie Curie", "passage_id": "p2"}]


def test_repeated_words_are_found_back_to_back_only():
    assert has_repeated_word("what music music is this?") and has_repeated_word("Dynasty dynasty")
    assert not has_repeated_word("the music of the music hall") and has_repeated_word("who had had it?")


def test_measures_on_sets_with_known_answers():
    good, bad = set_measures(GOOD, TEXT), set_measures(BAD, TEXT)
    assert good["answer_in_passage"] == 1.0 and good["about_entity"] == 1.0 and good["repeated_word"] == 0.0
    assert good["duplicate"] == 0.0 and bar_misses(good) == []
    assert bad["answer_in_passage"] == pytest.approx(1 / 3, abs=1e-4) and bad["about_entity"] == 0.0
    assert bad["repeated_word"] == 1.0 and bad["duplicate"] == pytest.approx(1 / 3, abs=1e-4)
    assert set(bar_misses(bad)) == set(BAR)
    no_entities = set_measures([{**r, "entity": None} for r in GOOD], TEXT)
    assert no_entities["about_entity"] is None and "about_entity" not in bar_misses(no_entities)


def test_the_filter_chain_is_measured_set_by_set(monkeypatch):
    from ecqg.stages import mixing

    monkeypatch.setattr(mixing, "passages_by_id", lambda ids: {p: {"title": p, "text": TEXT[p]} for p in ids})
    decisions = ([{**r, "id": f"g{i}", "generator": "con", "decision": "kept"} for i, r in enumerate(GOOD)]
                 + [{**r, "id": f"b{i}", "generator": "uncon", "decision": "rejected", "stage": 1}
                    for i, r in enumerate(BAD)])
    quality = mixing.question_quality(decisions, {"Mixed set": GOOD}, GOOD, seed=0, samples=2)
    rows = {(r["set"], r["stage"]): r for r in quality["rows"]}
    assert rows[("uncon", "generated")]["questions"] == 3 and ("uncon", "after hardness (stage 2)") not in rows
    assert rows[("con", "after hardness (stage 2)")]["misses"] == []
    assert rows[("real questions", "reference (gold triples)")]["answer_in_passage"] == 1.0
    assert len(quality["samples"]["Mixed set"]) == 2 and quality["bar"]["repeated_word"] == ["<=", 0.02]


def test_every_results_page_shows_the_questions_beside_the_verdicts(tmp_path):
    from ecqg.report.questions import render_question_quality

    folder = tmp_path / "results" / "x"
    folder.mkdir(parents=True)
    assert render_question_quality(folder) == ""
    write_record(folder, metrics_files.Filtering, **{"stage1_rule": "none", "mrc": {"has_ans_f1": 0.0}})
    write_record(folder, metrics_files.QuestionQuality, **{
        "rows": [{"set": "UnCon set", "stage": "training set", "questions": 3, **set_measures(BAD, TEXT)}],
        "samples": {"UnCon set": BAD[:2]}})
    text = render_question_quality(folder)
    assert "**did not run**" in text and "| UnCon set | training set | 3 | 33% ✗ |" in text
    assert "2 random questions of UnCon set" in text and "dynastiesic dynasty" in text
    # which generator, which hardness model, and whether the rows pool replicates' own sets: said above the table
    write_record(folder, metrics_files.Filtering, **{"stage1_rule": "roundtrip", "mrc": {"has_ans_f1": 71.2},
                                                       "hardness": {"rule": "lowest_score", "model": "dpr_x"}})
    write_record(folder, metrics_files.QuestionGeneration, **{"architecture": "cloze", "generation": {
        "uncon s1": {}, "con s1": {}, "uncon s2": {}, "con s2": {}}})
    text = render_question_quality(folder)
    assert "Stage 1: `roundtrip`; the reader's has-answer F1 on held-out SQuAD 2.0 is 71.2" in text
    assert "scores with dpr_x" in text and "rule-based cloze translation" in text
    assert "hold **by construction**" in text
    assert "Each of the 2 replicates sampled, filtered and mixed its own sets" in text


def test_real_questions_whose_passage_the_corpus_lacks_are_left_out_of_the_reference(monkeypatch):
    from ecqg.stages import mixing

    monkeypatch.setattr(mixing, "passages_by_id", lambda ids: {p: {"title": p, "text": TEXT[p]} for p in ids
                                                                  if p in TEXT})
    outside = {"question": "who?", "answer": "x", "passage_id": "not-in-the-corpus"}
    quality = mixing.question_quality([], {}, GOOD + [outside], seed=0)
    (row,) = quality["rows"]
    assert row["set"] == "real questions" and row["questions"] == len(GOOD)


def test_the_claims_caption_says_what_varies_between_runs():
    from ecqg.report.questions import what_varies

    assert "its questions and the filters' decisions on them (2 sets, each sampled, filtered and mixed" in what_varies(
        {"replicates": {"s1": {}, "s2": {}}})
    assert "its synthetic questions do not (one set, sampled once, read by every run)" in what_varies({"sets": {}})
    assert what_varies(None) == ""
    shared = what_varies({"replicates": {"s1": {}, "s2": {}}},
                         {"bias": {"conditioning": {"passages": 800}},
                          "filtering": {"stage1_rule": "roundtrip", "hardness": {"model": "dpr_baseline_s2022 (x)"}}})
    assert "Shared by every run: the 800 conditioning passages" in shared
    assert "the reader of the round trip" in shared and "the hardness model (dpr_baseline_s2022)" in shared
