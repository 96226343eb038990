"""The mechanism evaluations: answer location, position buckets and PSI, entity-attention ranks, moved sentences."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from ecqg.retrieval import probes
from ecqg.analysis import mechanism, tables
from ecqg.stages import mechanism as mp
from ecqg.core.errors import DataFormatError
from ecqg.runtime.models import resolve_model
from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig
from ecqg.retrieval.dense import encode_passages, encode_queries
from ecqg.data.text import Analysis, Entity, has_answer


# ============================================================================================== answer location
@pytest.mark.parametrize("text, answers", [
    ("The first prize went to Wilhelm Conrad Röntgen in 1901.", ["Wilhelm Conrad Röntgen"]),
    ("Café Müller opened; later CAFÉ müller closed.", ["café muller"]),   # NFD + case: DPR matches both
    ("It cost $5,000 in 1990 (roughly).", ["5,000", "1990"]),
    ("Paris is big. Parisian food.", ["Paris"]),
    ("New York-based band", ["York"]),
    ("no answer here", ["Lyon", ""]),
])
def test_answer_span_exists_exactly_when_dpr_has_answer_matches(text, answers):
    span = probes.answer_span(text, answers)
    assert (span is not None) == has_answer(text, answers)
    if span is not None:
        found = text[span[0]:span[1]]
        assert has_answer(found, answers), found


def test_answer_span_is_the_earliest_occurrence_of_any_answer():
    text = "In 1990 Berlin was reunited; Berlin is the capital since 1990."
    assert probes.answer_span(text, ["Berlin", "1990"]) == (3, 7)
    assert probes.answer_span(text, ["capital"]) == (text.index("capital"), text.index("capital") + 7)


def test_gold_passages_take_the_first_gold_passage_with_an_answer():
    text_of = {"a": "Nothing useful.", "b": "The answer is Lyon. Lyon again.", "c": "Lyon first."}
    questions = [{"id": "q1", "answers": ["Lyon"], "gold_ids": ["a", "b", "c"]},
                 {"id": "q2", "answers": ["Lyon"], "gold_ids": ["a"]},
                 {"id": "q3", "answers": ["Lyon"], "gold_ids": ["zzz"]},
                 {"id": "q4", "answers": ["Lyon"], "gold_ids": []}]
    gold = probes.gold_passages(questions, text_of)
    assert list(gold.status) == ["ok", "no_answer_in_gold", "gold_not_in_corpus", "no_gold_ids"]
    assert gold.passage_id[0] == "b" and gold.start_char[0] == text_of["b"].index("Lyon")
    with pytest.raises(DataFormatError, match="record 1, field 'gold_ids'"):
        probes.gold_passages([{"id": "x", "answers": ["a"]}], text_of)


def test_locate_answers_buckets_by_sentence():
    text = "Alpha is first. Beta is second. Gamma is third. Delta is fourth."
    sents = ((0, 15), (16, 31), (32, 47), (48, 64))
    analyses = {"p": Analysis((), sents)}
    questions = [{"id": f"q{i}", "answers": [a], "gold_ids": ["p"]}
                 for i, a in enumerate(["Alpha", "Beta", "Gamma", "Delta", "Omega"])]
    gold = probes.gold_passages(questions, {"p": text})
    located = probes.locate_answers(gold, {"p": text}, analyses)
    assert list(located.answer_sentence) == [0, 1, 2, 3, -1]
    assert list(located.bucket[:4]) == ["sentence 1", "sentence 2", "sentence 3+", "sentence 3+"]
    assert pd.isna(located.bucket[4])
    assert located.relative_position[0] == 0 and math.isnan(located.relative_position[4])
    masks = mechanism.bucket_masks(located)
    assert list(masks) == list(probes.BUCKETS)
    assert masks["sentence 3+"].tolist() == [False, False, True, True, False]


# ========================================================================================================= PSI
def test_psi_definition():
    assert mechanism.psi(np.array([0.8, 0.4, 0.6])) == pytest.approx(0.5)
    assert mechanism.psi(np.array([0.5, 0.5])) == 0
    assert math.isnan(mechanism.psi(np.array([0.0, 0.0])))


def test_position_sensitivity_point_estimate_ci_and_pairs():
    rng = np.random.default_rng(0)
    buckets = np.repeat([0, 1, 2], 200)
    masks = {b: buckets == i for i, b in enumerate(probes.BUCKETS)}
    biased = (rng.random(600) < np.where(buckets == 0, 0.9, 0.45)).astype(float)
    flat = (rng.random(600) < 0.7).astype(float)
    table = mechanism.position_sensitivity({"biased": biased, "flat": flat, "same": biased}, masks,
                                           [("flat", "biased"), ("same", "biased")], n_boot=500, seed=1)
    sys_rows = table[table.kind == "system"].set_index("system")
    accs = [biased[m].mean() for m in masks.values()]
    assert sys_rows.psi["biased"] == pytest.approx(1 - min(accs) / max(accs))
    for s in ("biased", "flat"):
        assert sys_rows.ci_low[s] <= sys_rows.psi[s] <= sys_rows.ci_high[s]
    assert sys_rows.psi["biased"] > sys_rows.ci_high["flat"]
    paired = table[table.kind == "paired"].set_index("system")
    assert paired.psi["flat"] < 0 and paired.ci_high["flat"] < 0 and paired.p_value["flat"] < 0.01
    assert paired.psi["same"] == 0 and paired.ci_low["same"] == 0 == paired.ci_high["same"]
    assert paired.p_value["same"] == 1
    again = mechanism.position_sensitivity({"biased": biased}, masks, n_boot=500, seed=1)
    assert again.ci_low[0] == sys_rows.ci_low["biased"]            # seeded
    with pytest.raises(ValueError, match="two non-empty buckets"):
        mechanism.position_sensitivity({"a": biased}, {"sentence 1": buckets >= 0})


def test_accuracy_and_paired_tables_take_custom_slices():
    hits = np.zeros((4, 3), dtype=bool)
    hits[0, 0] = hits[2, 1] = True
    questions = [{"id": str(i), "answers": ["x"]} for i in range(4)]
    masks = {"early": np.array([1, 1, 0, 0], bool), "late": np.array([0, 0, 1, 1], bool)}
    table = tables.accuracy_table(hits, questions, [1, 2], n_boot=50, masks=masks).set_index(["subset", "k"])
    assert table.accuracy[("early", 1)] == 0.5 and table.accuracy[("late", 1)] == 0
    assert table.accuracy[("late", 2)] == 0.5 and table.n[("late", 2)] == 2
    paired = tables.paired_table(hits, np.zeros_like(hits), questions, [1], n_boot=50, masks=masks)
    assert list(paired.subset) == ["early", "late"] and list(paired.difference) == [0.5, 0.0]
    with pytest.raises(ValueError, match="mask 'early' has shape"):
        tables.accuracy_table(hits, questions, [1], masks={"early": np.ones(3, bool)})


# ============================================================================================ entity attention
def _entity(text, start):
    return Entity(text, "GPE", start, start + len(text), ((start, start + len(text)),))


def test_answer_entity_matches_dpr_tokens_and_prefers_the_earliest():
    analysis = Analysis((_entity("United States", 30), _entity("France", 0), _entity("the U.S.", 50)), ())
    assert mechanism.answer_entity(analysis, ["france"]) == 1
    assert mechanism.answer_entity(analysis, ["United States", "France"]) == 1
    assert mechanism.answer_entity(analysis, ["Germany", ""]) is None


def test_attention_thirds_and_ranks():
    assert [mechanism.attention_third(r, 3) for r in range(3)] == list(mechanism.THIRDS)
    most, middle, least = mechanism.THIRDS
    assert [mechanism.attention_third(r, 7) for r in range(7)] == [most] * 2 + [middle] * 3 + [least] * 2
    assert [mechanism.attention_third(r, 4) for r in range(4)] == [most, middle, middle, least]
    scores = [{"attention": a, "start_char": i, "eligible": e}
              for i, (a, e) in enumerate([(0.3, True), (0.1, True), (0.5, True), (0.2, False), (0.05, True)])]
    ranks = mechanism.entity_attention_ranks([scores, scores, scores, scores, scores[:2]], [2, 4, None, 3, 0],
                                             min_entities=3)
    assert list(ranks.status) == ["ok", "ok", "answer_not_an_entity", "answer_entity_truncated",
                                  "too_few_entities"]
    assert list(ranks["rank"][:2]) == [0, 3] and list(ranks.n_entities[:2]) == [4, 4]
    assert list(ranks.third[:2]) == ["most attended", "least attended"]


# ========================================================================================= moved-sentence probe
def _moved_inputs():
    text = "Alpha is first. Beta is second. Gamma is third."
    sents = ((0, 15), (16, 31), (32, 47))
    passages = {"p": {"id": "p", "title": "T", "text": text}, "r": {"id": "r", "title": "R", "text": text}}
    analyses = {"p": Analysis((), sents), "r": Analysis((), sents)}
    questions = [{"id": "q0", "question": "first?", "answers": ["Alpha"], "gold_ids": ["p"]},
                 {"id": "q1", "question": "second?", "answers": ["Beta"], "gold_ids": ["p"]},
                 {"id": "q2", "question": "third?", "answers": ["Gamma"], "gold_ids": ["p"]},
                 {"id": "q3", "question": "third again?", "answers": ["Gamma"], "gold_ids": ["r"]}]
    texts = {k: v["text"] for k, v in passages.items()}
    located = probes.locate_answers(probes.gold_passages(questions, texts), texts, analyses)
    return questions, located, passages, analyses


def test_moved_sentence_pairs_move_the_answer_sentence_and_count_what_is_left_out():
    questions, located, passages, analyses = _moved_inputs()
    pairs, counts = probes.moved_sentence_pairs(questions, located, passages, analyses)
    assert [p["question_id"] for p in pairs] == ["q1", "q3"]
    assert pairs[0]["front"] == "Beta is second. Alpha is first. Gamma is third."
    assert pairs[0]["end"] == "Alpha is first. Gamma is third. Beta is second."
    assert pairs[1]["front"].startswith("Gamma") and pairs[1]["end"] == passages["r"]["text"]
    assert counts == {"located": 4, "answer_in_sentence_1": 1, "passage_already_used": 1,
                      "truncated_by_encoder": 0, "eligible": 2, "probed": 2}
    some, counts = probes.moved_sentence_pairs(questions, located, passages, analyses, max_pairs=1, seed=3)
    assert len(some) == 1 and counts["probed"] == 1
    assert some == probes.moved_sentence_pairs(questions, located, passages, analyses, max_pairs=1, seed=3)[0]
    none, counts = probes.moved_sentence_pairs(questions, located, passages, analyses,
                                                  fits=lambda title, text: title == "R")
    assert [p["question_id"] for p in none] == ["q3"] and counts["truncated_by_encoder"] == 1


def test_moved_sentence_scores_are_the_encoders_dot_products():
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
    config = BertConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32,
                        vocab_size=tokenizer.vocab_size, max_position_embeddings=64)
    torch.manual_seed(0)
    model = BiEncoder(BertModel(config), BertModel(config), tokenizer,
                      BiEncoderConfig("tiny", query_max_length=16, passage_max_length=48))
    questions, located, passages, analyses = _moved_inputs()
    pairs, _ = probes.moved_sentence_pairs(questions, located, passages, analyses)
    front, end = probes.moved_sentence_scores(model, pairs, batch_size=1)
    q = encode_queries(model, [p["question"] for p in pairs], progress=False)
    _, v = encode_passages(model, [{"id": "x", "title": p["title"], "text": p["front"]} for p in pairs],
                           progress=False)
    assert np.allclose(front, (q * v).sum(axis=1), atol=1e-5)
    assert not np.allclose(front, end)
    assert [len(x) for x in probes.moved_sentence_scores(model, [])] == [0, 0]


def test_summarise_gaps_averages_seeds_and_pairs_passages():
    gaps = {"a": np.array([[1.0, 2.0, 3.0, 2.0], [3.0, 2.0, 1.0, 2.0]]), "b": np.array([0.5, 0.5, 0.5, 0.5])}
    table = mechanism.summarise_gaps(gaps, [("a", "b"), ("a", "absent")], n_boot=200, seed=0)
    rows = table.set_index(["kind", "system"])
    assert rows.gap[("system", "a")] == 2 and rows.seeds[("system", "a")] == 2
    assert rows.seed_sd[("system", "a")] == 0 and rows.share_front_higher[("system", "b")] == 100
    assert rows.gap[("paired", "a")] == 1.5 and len(table) == 3
    assert math.isnan(rows.seed_sd[("system", "b")])


def test_mechanism_metrics_tree_has_scalar_leaves():
    questions = [{"id": str(i), "answers": ["x"]} for i in range(4)]
    masks = {"sentence 1": np.array([1, 1, 0, 0], bool), "sentence 2": np.array([0, 0, 1, 1], bool)}
    hits = {"bm25": np.eye(4, 5, dtype=bool), "dpr_mixed": np.ones((4, 2, 5), bool),
            "dpr_baseline": np.zeros((4, 2, 5), bool)}
    table, paired = mp.slice_tables(hits, questions, masks, [1, 5], [("dpr_mixed", "dpr_baseline")], 50, 0, 0.95)
    psi = mp.psi_table(hits, masks, [1], [("dpr_mixed", "dpr_baseline")], 50, 0, 0.95)
    moved = mechanism.summarise_gaps({"dpr_mixed": np.ones((2, 3))}, n_boot=50)
    tree = mp.metrics_tree({"profile": "x"}, {"counts": {"ok": 4}, "table": table, "paired": paired, "psi": psi},
                           {"counts": {}, "table": table, "paired": pd.DataFrame()},
                           {"counts": {"probed": 3}, "summary": moved})
    assert tree["position"]["accuracy"]["dpr_mixed"]["sentence 2"]["top1"] == 100
    assert tree["position"]["accuracy"]["dpr_mixed"]["sentence 2"]["seeds"] == 2
    assert tree["position"]["paired"]["dpr_mixed_minus_dpr_baseline"]["sentence 1"]["top5_diff"] == 100
    assert "top1_p" in tree["position"]["psi"]["dpr_mixed_minus_dpr_baseline"]
    assert tree["moved_sentence"]["systems"]["dpr_mixed"]["gap"] == 1

    def leaves(node):
        for v in node.values():
            yield from (leaves(v) if isinstance(v, dict) else [v])
    assert all(v is None or isinstance(v, (int, float, str)) for v in leaves(tree))
