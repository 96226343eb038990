"""Mixing: dedupe + test exclusion, equal halves, BM25 hard negatives, DPR json round trip, statistics."""

import json
import re
from pathlib import Path

import pytest

from ecqg.filtering import mixing as M
from ecqg.data.dpr import read_dpr_retriever_json
from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_jsonl, write_jsonl
from ecqg.retrieval.bm25 import BM25Searcher, build_bm25_index
from ecqg.data.text import has_answer

FIXTURES = Path(__file__).parent / "fixtures" / "retrieval"
PASSAGES = [r for _, r in read_jsonl(FIXTURES / "passages.jsonl")]
BY_ID = {p["id"]: p for p in PASSAGES}


def gen(rid, question, answer, passage_id, generator="uncon", entity=None, label=None):
    return {"id": rid, "passage_id": passage_id, "entity": entity, "entity_label": label, "question": question,
            "answer": answer, "generator": generator, "sample_score": -1.0, "sample": 0}


def pool(generator, n):
    return [gen(f"{generator}{i}", f"question {generator} {i}?", "x", "wiki-paris-1", generator,
                "Paris" if generator == "con" else None, "GPE" if generator == "con" else None) for i in range(n)]


# ------------------------------------------------------------------------------------------------------ dedupe
def test_dedupe_drops_repeats_and_test_questions(tmp_path):
    test_file = tmp_path / "nq.jsonl"
    write_jsonl(test_file, [{"id": "t1", "question": "Who wrote Pride and Prejudice?", "answers": ["Jane Austen"],
                             "gold_ids": [], "subsets": [], "answer_type": "text"}])
    keys = M.question_keys_of([test_file])
    records = [gen("a", "who wrote pride and prejudice", "Jane Austen", "wiki-pp-novel"),  # a test question
               gen("b", "What is the capital of France?", "Paris", "wiki-paris-1"),
               gen("c", "what is the capital of  france ?", "Paris", "wiki-paris-1", "con", "France", "GPE"),
               gen("d", "?!", "Paris", "wiki-paris-1"),
               gen("e", "How high is Mount Everest?", "8,848.86 m", "wiki-everest-1")]
    kept, stats = M.dedupe(records, keys)
    assert [r["id"] for r in kept] == ["b", "e"]
    assert stats["dropped"] == {"test_question": 1, "duplicate": 1, "empty_key": 1}
    assert stats["in"] == 5 and stats["kept"] == 2 and stats["uncon_kept"] == 2 and stats["con_kept"] == 0


# -------------------------------------------------------------------------------------------------------- sets
def test_sets_have_equal_halves_and_equal_totals():
    uncon, con = pool("uncon", 50), pool("con", 30)
    mixed, uncon_set, stats = M.build_sets(uncon, con, total=40, seed=7)
    assert len(mixed) == len(uncon_set) == 40 and not stats["shrunk"]
    assert sum(r["generator"] == "con" for r in mixed) == 20 == sum(r["generator"] == "uncon" for r in mixed)
    assert all(r["generator"] == "uncon" for r in uncon_set)
    assert len({r["id"] for r in uncon_set}) == 40
    assert {r["id"] for r in mixed if r["generator"] == "uncon"} <= {r["id"] for r in uncon_set}
    assert M.build_sets(uncon, con, total=40, seed=7) == (mixed, uncon_set, stats)  # seeded
    assert M.build_sets(uncon, con, total=40, seed=8)[0] != mixed


@pytest.mark.parametrize("n_uncon, n_con, total, expected", [(50, 8, 40, 16), (30, 30, 40, 30), (50, 30, 41, 40)])
def test_a_short_pool_shrinks_both_sets_alike(n_uncon, n_con, total, expected):
    mixed, uncon_set, stats = M.build_sets(pool("uncon", n_uncon), pool("con", n_con), total=total, seed=0)
    assert len(mixed) == len(uncon_set) == stats["total"] == expected and stats["shrunk"]
    assert sum(r["generator"] == "con" for r in mixed) == expected // 2


@pytest.mark.parametrize("n_uncon, n_con, short", [(50, 8, "Mixed needs 20 conditioned questions, stage 03 kept 8"),
                                                     (30, 30, "UnCon needs 40 unconditioned questions, stage 03 kept "
                                                              "30")])
def test_a_short_pool_is_refused_when_the_profile_requires_the_total(n_uncon, n_con, short):
    """Issue 58 item 6: with ``mixing.require_total`` (the paper profile) the stage refuses pools that come out short
    instead of shrinking both sets silently, naming the setting to raise and the switch that allows shrinking."""
    with pytest.raises(ValueError) as err:
        M.build_sets(pool("uncon", n_uncon), pool("con", n_con), total=40, seed=0, require_total=True)
    message = str(err.value)
    assert short in message and "'mixing.require_total' is true" in message
    assert ("'attention.condition_passages'" if n_con < 20 else "'qg.generate.uncon_passages'") in message
    assert "'yields.margin'" in message and "'mixing.require_total: false'" in message
    mixed, uncon_set, stats = M.build_sets(pool("uncon", 50), pool("con", 30), total=40, seed=7, require_total=True)
    assert (mixed, uncon_set, stats) == M.build_sets(pool("uncon", 50), pool("con", 30), total=40, seed=7)


def test_the_mixing_stage_passes_require_total():
    """Notebook 04 (the mixing stage) builds every replicate's sets (``mix_replicate``) with the profile's
    ``mixing.require_total``."""
    import inspect
    import json

    from ecqg.stages import mixing

    notebook = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "04_mixing.ipynb").read_text())
    code = "".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    assert "sp.mix_replicate(seed, s.mixing, s.seed, test_keys)" in code
    assert re.search(r"mix\.build_sets\([^)]*require_total=mixing\.require_total",
                     inspect.getsource(mixing.mix_replicate))


def test_pools_must_hold_their_own_generator():
    with pytest.raises(DataFormatError, match=r"con pool, record 1, field 'generator'"):
        M.build_sets(pool("uncon", 4), pool("uncon", 4), total=4, seed=0)


# -------------------------------------------------------------------------------------------- hard negatives
@pytest.fixture(scope="module")
def searcher(tmp_path_factory):
    path = tmp_path_factory.mktemp("bm25m") / "index"
    build_bm25_index(PASSAGES, path, threads=1)
    return BM25Searcher(path)


RECORDS = [
    gen("g1", "who wrote pride and prejudice", "Jane Austen", "wiki-pp-novel", "con", "Jane Austen", "PERSON"),
    gen("g2", "who directed the film pride and prejudice", "Joe Wright", "wiki-pp-film"),
    gen("g3", "what is the capital of france", "Paris", "wiki-paris-1"),  # the louvre passage mentions Paris
    gen("g4", "zebra quokka", "nothing", "wiki-water-1"),  # no BM25 hit at all
]


def test_hard_negative_is_never_the_positive_nor_answer_bearing(searcher, tmp_path):
    examples, stats = M.dpr_examples(RECORDS, searcher, BY_ID, depth=10, threads=1, progress=False)
    assert set(examples) == {"g1", "g2", "g3", "g4"}
    for rec in RECORDS:
        ex = examples[rec["id"]]
        assert ex["positive_ctxs"][0]["passage_id"] == rec["passage_id"] and ex["answers"] == [rec["answer"]]
        for neg in ex["hard_negative_ctxs"]:
            assert neg["passage_id"] != rec["passage_id"]
            assert not has_answer(BY_ID[neg["passage_id"]]["text"], [rec["answer"]])
    assert [c["passage_id"] for c in examples["g1"]["hard_negative_ctxs"]] == ["wiki-pp-film"]
    assert examples["g3"]["hard_negative_ctxs"][0]["passage_id"] not in ("wiki-paris-1", "wiki-louvre-1")
    assert examples["g4"]["hard_negative_ctxs"] == [] and examples["g4"]["positive_ctxs"][0]["score"] is None
    assert examples["g1"]["positive_ctxs"][0]["score"] > 0 and examples["g1"]["dataset"] == "ecqg_con"
    assert stats["without_hard_negative"] == 1 and stats["questions"] == 4

    # DPR retriever json round trip: what DPR / Tevatron read
    path = tmp_path / "mixed.json"
    assert M.write_set(path, RECORDS[:3], examples) == 3
    back = list(read_dpr_retriever_json(path))
    assert [b["question"] for b in back] == [r["question"] for r in RECORDS[:3]]
    assert back[0]["positive_ctxs"][0] == {"title": "Pride and Prejudice", "text": BY_ID["wiki-pp-novel"]["text"],
                                           "passage_id": "wiki-pp-novel",
                                           "score": examples["g1"]["positive_ctxs"][0]["score"]}
    assert back[0]["negative_ctxs"] == [] and back[0]["hard_negative_ctxs"][0]["passage_id"] == "wiki-pp-film"
    assert isinstance(json.loads(path.read_text(encoding="utf-8")), list)
    with pytest.raises(DataFormatError, match="no DPR example .* 'zz'"):
        M.write_set(path, [gen("zz", "q", "a", "wiki-paris-1")], examples)


def test_unknown_passage_is_named(searcher):
    with pytest.raises(DataFormatError, match=r"record 1, field 'passage_id'.*'nope'"):
        M.dpr_examples([gen("x", "q", "a", "nope")], searcher, BY_ID, progress=False)


# ---------------------------------------------------------------------------------------------------- statistics
def test_relative_position():
    assert M.relative_position("abcdefghij", "f") == 0.5
    assert M.relative_position("Hello World", "world") == pytest.approx(6 / 11)
    assert M.relative_position("Hello", "xyz") is None


def test_statistics_distributions_and_positions():
    uncon = [gen("u1", "when was it published", "1813", "wiki-pp-novel"),
             gen("u2", "what is it", "a polar inorganic compound", "wiki-water-1")]
    con = [gen("c1", "who stars in it", "Keira Knightley", "wiki-pp-film", "con", "Keira Knightley", "PERSON"),
           gen("c2", "who wrote it", "Jane Austen", "wiki-pp-novel", "con", "Jane Austen", "PERSON"),
           gen("c3", "where is it", "Paris", "wiki-louvre-1", "con", "Atlantis", "LOC")]
    stats = M.mixing_statistics(uncon, con, BY_ID)
    assert stats["entity_types"] == {"PERSON": 2, "LOC": 1}
    assert stats["answer_types_uncon"].get("DATE") == 1 and sum(stats["answer_types_uncon"].values()) == 2
    assert sum(stats["answer_types_con"].values()) == 3
    assert stats["con_entity_position"]["n"] == 2 and stats["con_entity_position"]["not_found"] == 1
    assert stats["con_entity_positions"][2] is None and stats["con_entity_positions"][0] > 0.5
    assert stats["uncon_answer_position"]["n"] == 2
