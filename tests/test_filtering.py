"""MRC round-trip filter and DPR hardness filter: features, span decoding, SQuAD metrics, filters, record checks."""

import json
import types

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForQuestionAnswering, BertModel

from ecqg import filtering as F
from ecqg.filtering import reader
from ecqg.core.errors import DataFormatError
from ecqg.retrieval import dense, faiss_index
from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig

FILLER = " ".join(f"alpha{i} beta{i}" for i in range(60))
TAIL = " ".join(f"gamma{i}" for i in range(40))
LONG = f"{FILLER} The novel was written by Jane Austen in 1813. {TAIL}"


pytestmark = pytest.mark.usefixtures("one_thread")


def example(eid, question, context, answer=None):
    start = context.index(answer) if answer else None
    return {"id": eid, "question": question, "passage_id": "p", "context": context,
            "answers": [answer] if answer else [], "answer_starts": [start] if answer else []}


def gen(rid, question="who wrote the novel?", answer="Jane Austen", generator="uncon", passage_id="p1", **extra):
    rec = {"id": rid, "passage_id": passage_id, "entity": "Jane Austen" if generator == "con" else None,
           "entity_label": "PERSON" if generator == "con" else None, "question": question, "answer": answer,
           "generator": generator, "sample_score": -1.5, "sample": 0}
    rec.update(extra)
    return rec


# ---------------------------------------------------------------------------------------------------- features
def test_striding_maps_the_answer_into_every_window_that_holds_it(tokenizer):
    ex = example("q", "who wrote the novel?", LONG, "Jane Austen")
    features = F.train_features(tokenizer, [ex, example("u", "who painted it?", LONG)], max_length=64, stride=16)
    answerable = [f for f in features if tokenizer.decode(f["input_ids"][:5]).startswith("[CLS] who wrote")]
    assert len(answerable) > 5  # the long passage is cut into many overlapping windows
    labelled = [f for f in answerable if f["start_positions"] != 0]
    assert 1 <= len(labelled) <= 3  # only the windows that hold the whole answer point at it (overlap: maybe 2)
    for f in labelled:
        assert tokenizer.decode(f["input_ids"][f["start_positions"]:f["end_positions"] + 1]) == "jane austen"
    assert all(f["start_positions"] == f["end_positions"] == 0 for f in answerable if f not in labelled)
    unanswerable = [f for f in features if f not in answerable]
    assert unanswerable and all(f["start_positions"] == f["end_positions"] == 0 for f in unanswerable)
    assert all(len(f["input_ids"]) <= 64 for f in features)


def test_answer_windows_only_keeps_one_window_per_example(tokenizer):
    examples = [example("q", "who wrote the novel?", LONG, "Jane Austen"), example("u", "who painted it?", LONG)]
    all_windows = F.train_features(tokenizer, examples, max_length=64, stride=16)
    features = F.train_features(tokenizer, examples, max_length=64, stride=16, answer_windows_only=True)
    assert len(features) == 2 < len(all_windows)
    answered, unanswerable = features
    assert tokenizer.decode(answered["input_ids"][answered["start_positions"]:answered["end_positions"] + 1]) == \
        "jane austen"
    assert answered in all_windows and unanswerable == next(f for f in all_windows if f not in [
        g for g in all_windows if tokenizer.decode(g["input_ids"][:5]).startswith("[CLS] who wrote")])
    assert unanswerable["start_positions"] == unanswerable["end_positions"] == 0


def test_an_over_long_question_is_cut_so_the_windows_still_fit(tokenizer):
    question = "who " + "really " * 200 + "wrote it?"
    features = F.train_features(tokenizer, [example("q", question, LONG, "Jane Austen")], max_length=128, stride=16)
    assert features and all(len(f["input_ids"]) <= 128 for f in features)


class FakeReader(torch.nn.Module):
    """Start logit high on 'jane', end logit high on 'austen', [CLS] at 0: decoding can be checked exactly."""

    def __init__(self, tokenizer, start_word="jane", end_word="austen"):
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.s = tokenizer.convert_tokens_to_ids(start_word)
        self.e = tokenizer.convert_tokens_to_ids(end_word)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        start = (input_ids == self.s).float() * 8.0 - 1.0
        end = (input_ids == self.e).float() * 8.0 - 1.0
        start[:, 0] = end[:, 0] = 2.0  # the null score (4) beats any span without the words (-2)
        return types.SimpleNamespace(start_logits=start, end_logits=end)


def test_predict_returns_the_span_by_character_offsets_across_windows(tokenizer):
    reader = FakeReader(tokenizer)
    questions = [example("hit", "who wrote the novel?", LONG), example("miss", "who wrote it?", FILLER)]
    preds = F.predict(reader, tokenizer, questions, max_length=64, stride=16, batch_size=3, progress=False)
    hit = preds["hit"]
    assert hit["answer"] == "Jane Austen" and LONG[hit["start"]:hit["start"] + 11] == "Jane Austen"
    assert not hit["is_null"] and hit["score_diff"] < 0 and 0.5 < hit["confidence"] <= 1.0
    miss = preds["miss"]
    assert miss["is_null"] and miss["answer"] == "" and miss["start"] is None and miss["score_diff"] > 0
    assert miss["confidence"] < 0.05
    # the same through a passages mapping, and a max answer length of 1 token makes the span impossible
    by_pid = [{"id": "hit", "question": "who wrote the novel?", "passage_id": "p1"}]
    short = F.predict(reader, tokenizer, by_pid, {"p1": {"title": "", "text": LONG}}, max_length=64, stride=16,
                      max_answer_length=1, progress=False)
    assert short["hit"]["answer"] != "Jane Austen"


def test_predict_names_a_missing_passage_and_duplicate_ids(tokenizer):
    reader = FakeReader(tokenizer)
    with pytest.raises(DataFormatError, match=r"questions, record 1, field 'passage_id'.*'nope' is not in the corpus"):
        F.predict(reader, tokenizer, [{"id": "a", "question": "q?", "passage_id": "nope"}], {}, progress=False)
    with pytest.raises(DataFormatError, match="duplicate id 'a'"):
        F.predict(reader, tokenizer, [example("a", "q?", LONG)] * 2, progress=False)


def test_a_real_tiny_reader_trains_and_predicts(tokenizer, tmp_path):
    cfg = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    model = BertForQuestionAnswering(cfg)
    examples = [example(f"a{i}", "who wrote the novel?", LONG, "Jane Austen") for i in range(6)] + \
        [example(f"u{i}", "who painted it?", FILLER) for i in range(6)]
    settings = {"lr": 1e-3, "epochs": 1, "batch_size": 8, "warmup_ratio": 0.0, "weight_decay": 0.0, "max_steps": 3,
                "checkpoint_every": 2, "mixed_precision": "no"}
    result = F.train_mrc(model, tokenizer, examples, tmp_path / "ckpt", settings, seed=0, max_length=64, stride=16,
                         progress=False)
    assert result["steps"] == 3 and result["examples"] == 12 and result["answerable"] == 6
    F.save_mrc(model, tokenizer, tmp_path / "model")
    loaded, tok = F.build_mrc_model(str(tmp_path / "model"))
    preds = F.predict(loaded, tok, examples, max_length=64, stride=16, progress=False)
    assert set(preds) == {e["id"] for e in examples}
    metrics = F.evaluate_mrc(preds, examples)
    assert metrics["n"] == 12 and metrics["has_ans_n"] == 6 and metrics["no_ans_n"] == 6


def test_a_long_question_leaves_the_window_room_for_the_stride(tokenizer):
    """A question longer than the window minus the stride is cut further, not left to make the tokenizer panic
    (``stride must be strictly less than max_len``): RoBERTa's pairs cost 4 special tokens, byte-level BPE questions
    many pieces."""
    cfg = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    long_question = " ".join(["which"] * 70) + "?"
    preds = F.predict(BertForQuestionAnswering(cfg), tokenizer, [example("a", long_question, LONG)], max_length=96,
                      stride=32, progress=False)
    assert set(preds) == {"a"}
    with pytest.raises(ValueError, match=r"mrc.max_length \(20\) minus mrc.stride \(9\) leaves 7"):
        F.predict(BertForQuestionAnswering(cfg), tokenizer, [example("a", "q?", LONG)], max_length=20, stride=9,
                  progress=False)


# --------------------------------------------------------------------------------------------------- metrics
@pytest.mark.parametrize("pred, gold, em, f1", [
    ("The Jane Austen.", "jane austen", 1, 1.0),
    ("Jane", "Jane Austen", 0, 2 / 3),
    ("in 1813", "1813", 0, 2 / 3),
    ("an apple", "the apple", 1, 1.0),
    ("", "", 1, 1.0),
    ("Paris", "", 0, 0.0),
    ("", "Paris", 0, 0.0),
    ("the", "a", 1, 1.0),  # both normalise to nothing
])
def test_squad_em_and_f1(pred, gold, em, f1):
    assert F.exact_match(pred, gold) == em
    assert F.f1_score(pred, gold) == pytest.approx(f1)


def test_evaluate_splits_has_and_no_answer():
    examples = [{"id": "a", "answers": ["Jane Austen", "Austen"]}, {"id": "b", "answers": ["1813"]},
                {"id": "c", "answers": []}, {"id": "d", "answers": []}]
    preds = {"a": {"answer": "Austen"}, "b": {"answer": ""}, "c": {"answer": ""}, "d": {"answer": "Paris"}}
    m = F.evaluate_mrc(preds, examples)
    assert m["has_ans_exact"] == 50.0 and m["has_ans_f1"] == 50.0
    assert m["no_ans_exact"] == 50.0 and m["exact"] == 50.0 and m["no_answer_accuracy"] == 50.0
    with pytest.raises(DataFormatError, match="no prediction for example 'e'"):
        F.evaluate_mrc(preds, examples + [{"id": "e", "answers": []}])


def test_split_is_by_passage_and_seeded():
    examples = [{"id": f"q{i}", "passage_id": f"p{i % 10}"} for i in range(50)]
    train, held = F.split_by_passage(examples, 0.3, seed=1)
    assert len(held) == 15 and not {e["passage_id"] for e in train} & {e["passage_id"] for e in held}
    assert F.split_by_passage(examples, 0.3, seed=1) == (train, held)
    assert len(F.split_by_passage(examples, 0.3, seed=1, max_train=7)[0]) == 7


def test_mrc_examples_check_offsets_and_mark_unanswerables():
    passages = {"p1": {"title": "T", "text": "Pride and Prejudice is by Jane Austen."}}
    triple = {"id": "t", "question": "who?", "answer": "Jane Austen", "answer_start": 26, "passage_id": "p1"}
    unans = {"id": "u", "question": "when?", "passage_id": "p1", "plausible_answers": []}
    out = F.mrc_examples([triple], [unans], passages)
    assert out[0]["answers"] == ["Jane Austen"] and out[1]["answers"] == [] and out[1]["context"].endswith("Austen.")
    with pytest.raises(DataFormatError, match=r"gold triples\), record 1, field 'answer_start'"):
        F.mrc_examples([{**triple, "answer_start": 3}], [], passages)


# ------------------------------------------------------------------------------------------------ round trip
def test_roundtrip_reasons_in_order():
    records = [gen("ok"), gen("null"), gen("low"), gen("mismatch"), gen("partial", answer="the novelist Jane Austen")]
    preds = {"ok": {"answer": "Jane Austen", "confidence": 0.9, "score_diff": -3.0, "is_null": False},
             "null": {"answer": "", "confidence": 0.9, "score_diff": 2.0, "is_null": True},
             "low": {"answer": "Jane Austen", "confidence": 0.2, "score_diff": -1.0, "is_null": False},
             "mismatch": {"answer": "1813", "confidence": 0.95, "score_diff": -4.0, "is_null": False},
             "partial": {"answer": "Austen", "confidence": 0.8, "score_diff": -2.0, "is_null": False}}
    kept, rejected, stats = F.roundtrip_filter(records, preds, threshold=0.5)
    assert [r["id"] for r in kept] == ["ok", "partial"]
    assert {r["id"]: r["reason"] for r in rejected} == {"null": "no_answer", "low": "low_confidence",
                                                         "mismatch": "answer_mismatch"}
    assert kept[1]["mrc_answer"] == "Austen" and 0 < kept[1]["mrc_answer_f1"] < 1
    assert stats["rejected"] == {"no_answer": 1, "low_confidence": 1, "answer_mismatch": 1}
    assert stats["in"] == 5 and stats["kept"] == 2 and stats["uncon_kept"] == 2
    kept2, _, _ = F.roundtrip_filter(records, preds, threshold=0.5, require_overlap=False)
    assert [r["id"] for r in kept2] == ["ok", "mismatch", "partial"]
    assert kept2[1]["answer"] == "1813" and kept2[1]["generated_answer"] == "Jane Austen"
    assert "generated_answer" not in kept[0]
    with pytest.raises(DataFormatError, match="no MRC prediction for question 'ok'"):
        F.roundtrip_filter(records, {}, threshold=0.5)


def test_answer_in_passage_fallback():
    passages = {"p1": {"title": "PP", "text": "Pride and Prejudice is a novel by Jane Austen."}}
    records = [gen("in"), gen("out", answer="Charlotte Bronte"), gen("case", answer="jane  AUSTEN")]
    kept, rejected, stats = F.answer_in_passage_filter(records, passages)
    assert [r["id"] for r in kept] == ["in", "case"] and rejected[0]["reason"] == "answer_not_in_passage"
    assert stats["rejected"] == {"answer_not_in_passage": 1} and "fallback" in stats["method"]


# -------------------------------------------------------------------------------------------------- hardness
def test_hardness_lowest_score_keeps_the_same_share_of_each_generator():
    records = [gen(f"u{i}") for i in range(4)] + [gen(f"c{i}", generator="con") for i in range(2)]
    scores = {"u0": {"score": 5.0, "rank": 1}, "u1": {"score": 1.0, "rank": 3}, "u2": {"score": 3.0, "rank": None},
              "u3": {"score": 2.0, "rank": 1}, "c0": {"score": 9.0, "rank": 2}, "c1": {"score": 8.0, "rank": 1}}
    kept, rejected, stats = F.hardness_filter(records, scores, mode="lowest_score", keep_fraction=0.5)
    assert [r["id"] for r in kept] == ["u1", "u3", "c1"]  # input order; the lower half of each generator
    assert {r["reason"] for r in rejected} == {"easy_score"} and kept[0]["dpr_score"] == 1.0
    assert stats["uncon_kept"] == 2 and stats["con_kept"] == 1 and stats["own_passage_at_rank_1"] == 3
    kept, rejected, _ = F.hardness_filter(records, scores, mode="rank", max_rank=1)
    assert [r["id"] for r in kept] == ["u1", "u2", "c0"] and {r["reason"] for r in rejected} == {"easy_rank"}
    assert [r["id"] for r in F.hardness_filter(records, scores, mode="rank", max_rank=2)[0]] == ["u1", "u2"]
    with pytest.raises(ValueError, match="hardness mode"):
        F.hardness_filter(records, scores, mode="median")
    with pytest.raises(DataFormatError, match="no DPR hardness score for question 'u0'"):
        F.hardness_filter(records, {}, mode="rank")


def test_hardness_keeps_each_replicates_own_share():
    """Where every replicate has its own set, each keeps the hardest half of its own questions: a replicate whose
    questions all score high must not lose them all to another's."""
    records = [{**gen(f"a{i}"), "replicate": 1} for i in range(4)] + [{**gen(f"b{i}"), "replicate": 2}
                                                                     for i in range(4)]
    scores = {**{f"a{i}": {"score": float(i), "rank": 1} for i in range(4)},
              **{f"b{i}": {"score": 10.0 + i, "rank": 1} for i in range(4)}}
    kept, _, _ = F.hardness_filter(records, scores, mode="lowest_score", keep_fraction=0.5)
    assert [r["id"] for r in kept] == ["a0", "a1", "b0", "b1"]


def test_dpr_hardness_scores_own_passage_and_ranks_it(tokenizer):
    config = BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                        vocab_size=tokenizer.vocab_size, max_position_embeddings=128)
    torch.manual_seed(0)
    model = BiEncoder(BertModel(config), BertModel(config), tokenizer,
                      BiEncoderConfig("tiny-random", passage_max_length=48, query_max_length=16))
    words = "river city king war music league film island church school".split()
    passages = {f"p{i}": {"title": words[i], "text": " ".join(words[i:] + words[:i])} for i in range(10)}
    ids, vectors = dense.encode_passages(model, [{"id": k, **v} for k, v in passages.items()], progress=False)
    index = faiss_index.build_index(vectors, progress=False)
    records = [gen(f"q{i}", question=f"where is the {words[i]}", passage_id=f"p{i}") for i in range(10)]
    out = F.dpr_hardness(model, records, passages, index, ids, depth=3, progress=False)
    q = dense.encode_queries(model, [r["question"] for r in records], progress=False)
    for i, rec in enumerate(records):
        assert out[rec["id"]]["score"] == pytest.approx(float(q[i] @ vectors[i]), abs=1e-3)
        run = faiss_index.search(index, ids, q[i:i + 1], k=3, progress=False)["0"]
        ranked = [pid for pid, _ in run]
        expected = ranked.index(f"p{i}") + 1 if f"p{i}" in ranked else None
        assert out[rec["id"]]["rank"] == expected
    assert any(v["rank"] is None for v in out.values()) or all(v["rank"] <= 3 for v in out.values())


# ------------------------------------------------------------------------------------------ generated records
def test_malformed_generated_records_are_named(tmp_path):
    path = tmp_path / "generated.jsonl"
    good = gen("g1")
    bad = [{**good, "id": "g2", "generator": "conditioned"}, {**good, "id": "g3", "question": ""},
           {k: v for k, v in good.items() if k != "answer"} | {"id": "g4"},
           {**good, "id": "g5", "generator": "con", "entity": None}, {**good, "id": "g6", "sample_score": "high"}]
    messages = [r"line 2, field 'generator': must be one of", r"line 2, field 'question': empty string",
                r"line 2, field 'answer': missing field", r"line 2, field 'entity': an entity-conditioned",
                r"line 2, field 'sample_score': expected int or float"]
    for rec, message in zip(bad, messages):
        path.write_text(json.dumps(good) + "\n" + json.dumps(rec) + "\n", encoding="utf-8")
        with pytest.raises(DataFormatError, match=f"{path.name}, {message}"):
            list(F.read_generated(path))
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 2, field 'id': duplicate id 'g1'"):
        list(F.read_generated(path))
    with pytest.raises(DataFormatError, match=r"generated questions, record 2, field 'id': duplicate"):
        F.check_generated([good, good])
    assert F.check_generated([{**good, "extra": 1}])[0]["extra"] == 1  # extra keys survive validation


def test_best_span_respects_order_and_length():
    start = np.array([0.0, 1.0, 5.0, 0.0, 0.0])
    end = np.array([0.0, 6.0, 0.0, 0.0, 4.0])  # best end (token 1) lies before the best start (token 2)
    score, i, j, conf = reader._best_span(start, end, 1, 4, max_answer_length=5)
    assert (i, j) == (2, 4) and score == 9.0 and 0 < conf < 1
    assert reader._best_span(start, end, 1, 4, max_answer_length=1)[1:3] == (1, 1)
