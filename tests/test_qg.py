"""Question generation: entity selection, source/target format, generation with a tiny random BERT2BERT, metrics."""

import math
from pathlib import Path

import pytest

from ecqg import qg
from ecqg.runtime.models import BUNDLED_ENCODER

SUPER_BOWL = ("Super Bowl 50 was an American football game to determine the champion of the National Football "
              "League (NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos "
              "defeated the National Football Conference (NFC) champion Carolina Panthers 24-10.")
NORMANS = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in "
           "France. They were descended from Norse raiders and pirates from Denmark, Iceland and Norway.")
PASSAGES = {"sb": {"title": "Super Bowl 50", "text": SUPER_BOWL}, "no": {"title": "Normans", "text": NORMANS}}


def _triple(i, question, pid, answer="x"):
    return {"id": f"t{i}", "question": question, "answer": answer, "answer_start": 0, "passage_id": pid,
            "source": "test"}


# ------------------------------------------------------------------------------------------------ entity selection
def test_entities_prefer_objects_and_never_the_wh_phrase():
    triples = [
        _triple(0, "Which NFL team won Super Bowl 50?", "sb"),           # wh-subject: take the object
        _triple(1, "In what country is Normandy located?", "no"),         # subject that is not the wh-word
        _triple(2, "Who defeated the Carolina Panthers?", "sb"),          # object
        _triple(3, "What is it?", "no"),                                   # only wh-word and pronoun
        _triple(4, "Which bridge did the engineers repair?", "no"),       # chunks, none in the passage
    ]
    found, counts = qg.select_entities(triples, PASSAGES, progress=False)
    # en_core_web_sm parses "Super Bowl" + "50" as separate chunks; either way the object, not "NFL team"
    assert found[0]["entity"].startswith("Super Bowl") and SUPER_BOWL[found[0]["entity_start"]:].startswith("Super")
    assert found[1]["entity"] == "Normandy" and NORMANS[found[1]["entity_start"]:].startswith("Normandy")
    assert found[2]["entity"] == "Carolina Panthers"
    assert found[3] is None and found[4] is None
    assert counts == {"found": 3, "only_wh_or_pronoun": 1, "not_in_passage": 1}
    assert set(counts) - {"found"} <= set(qg.NO_ENTITY_REASONS)


def test_con_examples_skip_triples_without_entity_and_uncon_keeps_all():
    triples = [_triple(0, "Which NFL team won Super Bowl 50?", "sb", "Denver Broncos"), _triple(1, "What is it?", "no")]
    con, counts = qg.build_examples(triples, PASSAGES, "con", marking="markers", progress=False)
    assert [e["id"] for e in con] == ["t0"] and counts["only_wh_or_pronoun"] == 1
    assert con[0]["target"] == "Denver Broncos <sep> Which NFL team won Super Bowl 50?"
    uncon, _ = qg.build_examples(triples, PASSAGES, "uncon", progress=False)
    assert [e["id"] for e in uncon] == ["t0", "t1"] and "<hl>" not in uncon[0]["source"]
    with pytest.raises(KeyError, match="passage_id 'zz'"):
        qg.build_examples([_triple(2, "Who?", "zz")], PASSAGES, "uncon", progress=False)



def test_a_toy_conditioning_scheme_is_one_registration(monkeypatch):
    """A scheme conditioned on an entity but not marking it: one ``Scheme``; the input builder and the record
    checks read its entry, nothing compares names."""
    from ecqg.core import schemes
    from ecqg.core.errors import DataFormatError
    from ecqg.filtering.generated import validate_generated

    monkeypatch.setattr(schemes, "SCHEMES", dict(schemes.SCHEMES))
    toy = schemes.register(schemes.Scheme("toy", "entity-conditioned, unmarked", condition="entity", marked=False))
    assert "toy" in schemes.of_stage() and schemes.get("toy") is toy
    triples = [_triple(0, "Which NFL team won Super Bowl 50?", "sb", "Denver Broncos")]
    examples, _ = qg.build_examples(triples, PASSAGES, "toy", marking="markers", progress=False)
    assert examples[0]["entity"] and "<hl>" not in examples[0]["source"]          # conditioned, not marked
    record = {"id": "q", "generator": "toy", "passage_id": "sb", "question": "Who won?", "answer": "Denver"}
    with pytest.raises(DataFormatError, match="needs its entity"):
        validate_generated(record, "<toy>", 0)
    assert validate_generated({**record, "entity": "Super Bowl 50"}, "<toy>", 0)["entity"] == "Super Bowl 50"
    with pytest.raises(ValueError, match="registered twice"):
        schemes.register(toy)
    with pytest.raises(ValueError, match="unknown conditioning scheme 'nope'"):
        schemes.get("nope")


def test_placeholder_replaces_the_entity_in_con_targets_only():
    triples = [_triple(0, "Who defeated the Carolina Panthers?", "sb", "Denver Broncos")]
    con, _ = qg.build_examples(triples, PASSAGES, "con", marking="markers", placeholder="[ENT]", progress=False)
    assert con[0]["target"] == "Denver Broncos <sep> Who defeated the [ENT]?"
    assert "<hl> Carolina Panthers <hl>" in con[0]["source"]          # the source still shows the entity
    uncon, _ = qg.build_examples(triples, PASSAGES, "uncon", placeholder="[ENT]", progress=False)
    assert "[ENT]" not in uncon[0]["target"]
    assert qg.delexicalise("Where is normandy today?", "Normandy", "[E]") == "Where is [E] today?"
    with pytest.raises(ValueError, match="triple 't9'.*'Paris' does not occur"):
        qg.delexicalise("Where is Normandy?", "Paris", "[E]", where="gold triple 't9'")
    assert qg.relexicalise("who beat [ENT]?", "Carolina Panthers", "[ENT]") == ("who beat Carolina Panthers?", True)
    assert qg.relexicalise("is[ENT]'s x", "Oslo", "[ENT]") == ("is Oslo's x", True)
    assert qg.relexicalise("who won?", "Carolina Panthers", "[ENT]") == ("who won?", False)


# ------------------------------------------------------------------------------------------------ source / target
def test_source_marks_the_entity_occurrence():
    start = NORMANS.index("Normandy")
    src = qg.format_source("Normans", NORMANS, "Normandy", start, "markers")
    assert src.startswith("Normans <sep> The Normans")
    assert "their name to <hl> Normandy <hl>, a region" in src
    # no start given (or a stale one): found case-insensitively, original casing kept
    assert qg.format_source("Normans", NORMANS, "normandy", None, "markers") == src.replace("Normandy <hl>",
                                                                                           "Normandy <hl>")
    assert qg.format_source("Normans", NORMANS, "Normandy", 3, "markers") == src
    assert qg.format_source("Normans", NORMANS, "Normandy", start, "segment") == f"Normandy <sep> Normans <sep> {NORMANS}"
    assert qg.format_source("Normans", NORMANS) == f"Normans <sep> {NORMANS}"
    with pytest.raises(ValueError, match="'Paris' does not occur"):
        qg.format_source("Normans", NORMANS, "Paris", None, "markers")
    with pytest.raises(ValueError, match="unknown entity marking"):
        qg.format_source("Normans", NORMANS, "Normandy", None, "bold")


def test_window_keeps_the_entity_and_the_focus():
    words = " ".join(f"w{i}" for i in range(300))
    text = words + " Normandy " + words
    start = text.index("Normandy")
    src = qg.format_source("T", text, "Normandy", start, "markers", window_words=30)
    body = src.split(" <sep> ", 1)[1]
    assert "<hl> Normandy <hl>" in body and len(body.split()) == 32  # 30 words + 2 markers
    # focus far from the entity: the window moves back to keep the entity
    assert "<hl> Normandy <hl>" in qg.format_source("T", text, "Normandy", start, "markers", window_words=30, focus=0)
    assert qg.format_source("T", text, window_words=5) == "T <sep> w0 w1 w2 w3 w4"
    assert qg.crop_passage("a b c", 2, 10) == ("a b c", 0)


@pytest.mark.parametrize("text, expected", [
    ("France <sep> In what country is Normandy located?", ("France", "In what country is Normandy located?")),
    ("france < sep > in what  country is normandy located?", ("france", "in what country is normandy located?")),
    ("France In what country is Normandy located?", "no_separator"),
    ("France <sep> Where? <sep> Why is it?", "extra_separator"),
    (" <sep> In what country is Normandy located?", "empty_answer"),
    ("France <sep> ?", "empty_question"),
    ("France <sep>", "empty_question"),
    ("France <sep> In what country is Normandy located", "no_question_mark"),
    ("France <sep> Where?", "question_too_short"),
    ("", "no_separator"),
])
def test_parse_target_edge_cases(text, expected):
    parsed, reason = qg.parse_target(text)
    if isinstance(expected, tuple):
        assert reason is None and (parsed["answer"], parsed["question"]) == expected
    else:
        assert parsed is None and reason == expected and reason in qg.DROP_REASONS


# ------------------------------------------------------------------------------------------------ tiny model
@pytest.fixture(scope="module")
def tiny():
    import torch
    from transformers import AutoTokenizer, BertConfig, EncoderDecoderConfig, EncoderDecoderModel

    from ecqg.runtime.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(BUNDLED_ENCODER))
    small = dict(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=128)
    config = EncoderDecoderConfig.from_encoder_decoder_configs(
        BertConfig(**small), BertConfig(**small, is_decoder=True, add_cross_attention=True))
    torch.manual_seed(0)
    model = EncoderDecoderModel(config=config)
    qg.configure_bert2bert(model, tokenizer)
    return model, tokenizer


def test_bert2bert_ids_and_labels(tiny):
    model, tokenizer = tiny
    assert model.generation_config.decoder_start_token_id == tokenizer.cls_token_id
    assert model.generation_config.eos_token_id == tokenizer.sep_token_id
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id
    examples = [{"source": "Normans <sep> " + NORMANS, "target": "France <sep> Where is Normandy?"},
                {"source": "short", "target": "x <sep> Why?"}]
    data = qg.QGDataset(examples, tokenizer, model, source_max_length=16, target_max_length=8)
    assert data.truncated_sources == 1 and len(data[0]["input_ids"]) == 16
    labels = data[0]["labels"]
    assert labels[0] != tokenizer.cls_token_id and labels[-1] == tokenizer.sep_token_id and len(labels) == 8
    batch = qg.make_collator(tokenizer, model)([data[0], data[1]])
    assert batch["decoder_input_ids"][0, 0].item() == tokenizer.cls_token_id
    assert (batch["labels"][1] == -100).any()
    loss = model(**{k: v for k, v in batch.items() if k != "token_type_ids"}).loss
    assert math.isfinite(loss.item())


def sampling_settings(generate: dict, **qg_settings):
    """The mini profile's ``qg`` block (typed) with ``qg_settings`` and ``generate`` (``qg.generate``'s) changed."""
    from ecqg.core import config, settings

    qg_block = settings.of(config.preset("mini", Path(__file__).resolve().parents[1] / "params")).qg
    return qg_block.replace(**qg_settings, generate=qg_block.generate.replace(**generate))


def _inputs():
    return [{"passage_id": "no", "title": "Normans", "text": NORMANS, "entity": "Normandy",
             "entity_start": NORMANS.index("Normandy"), "entity_label": "GPE"},
            {"passage_id": "sb", "title": "Super Bowl 50", "text": SUPER_BOWL, "entity": "Carolina Panthers",
             "entity_start": None, "entity_label": "ORG"},
            {"passage_id": "sb", "title": "Super Bowl 50", "text": SUPER_BOWL, "entity": "Denver Broncos",
             "entity_start": None, "entity_label": "ORG"}]


def test_generation_schema_determinism_and_drops(tiny, monkeypatch):
    model, tokenizer = tiny
    real_decode = tokenizer.batch_decode
    # A random model emits noise: map each real sample to a target that parses, except every third (malformed).
    seen = []

    def decode(sequences, **kwargs):
        texts = real_decode(sequences, **kwargs)
        seen.extend(texts)
        return [f"ans {len(t)} <sep> what is {t[:12]}?" if (len(seen) - len(texts) + i) % 3 else "no separator here"
                for i, t in enumerate(texts)]

    monkeypatch.setattr(tokenizer, "batch_decode", decode)
    kwargs = dict(marking="markers", top_k=10, top_p=0.9, samples=2, batch_size=2, max_new_tokens=6, seed=7,
                  progress=False)
    records, drops = qg.generate_questions(model, tokenizer, _inputs(), **kwargs)
    first = list(seen)
    assert drops["generated"] == 6 and drops["no_separator"] == 2 and len(records) == 4
    keys = {"id", "passage_id", "entity", "entity_label", "question", "answer", "generator", "sample_score", "sample"}
    for rec in records:
        assert set(rec) == keys and rec["generator"] == "con" and rec["sample"] in (0, 1)
        assert rec["question"].endswith("?") and rec["sample_score"] <= 0 and math.isfinite(rec["sample_score"])
    assert len({r["id"] for r in records}) == len(records)
    seen.clear()
    again, drops_again = qg.generate_questions(model, tokenizer, _inputs(), **kwargs)
    assert seen == first and again == records and drops_again == drops
    seen.clear()
    qg.generate_questions(model, tokenizer, _inputs(), **{**kwargs, "seed": 8})
    assert seen != first
    # the fake questions never mention their entity: require_entity drops them all, with a reason
    none, strict = qg.generate_questions(model, tokenizer, _inputs(), **kwargs, require_entity=True)
    assert none == [] and strict["entity_not_mentioned"] == 4
    # uncon: no marking, no entity needed; con without an entity is an error naming the input
    plain, _ = qg.generate_questions(model, tokenizer, [{**_inputs()[0], "entity": None}],
                                     **{**kwargs, "marking": None})
    assert all(r["generator"] == "uncon" for r in plain)
    with pytest.raises(ValueError, match="input 0 .*'no'.* no entity"):
        qg.generate_questions(model, tokenizer, [{**_inputs()[0], "entity": None}], **kwargs)


def test_a_cut_sampling_run_resumes_from_its_journal_with_the_uncut_records(tiny, tmp_path, monkeypatch):
    """A killed run leaves whole batches and a half-written line in its journal; the rerun takes the whole batches,
    samples only the rest, and returns what the uncut run returned (records, order, drop counts)."""
    from ecqg.core.errors import DataFormatError
    from ecqg.qg.sampling import read_journal

    model, tokenizer = tiny
    real_decode, decoded = tokenizer.batch_decode, []

    def decode(sequences, **kwargs):                   # noise -> parsable targets, every third sample malformed
        texts = real_decode(sequences, **kwargs)
        decoded.append(len(texts))
        return [f"ans {len(t)} <sep> what is {t[:12]}?" if (len(t) + i) % 3 else "no separator" for i, t in
                enumerate(texts)]

    monkeypatch.setattr(tokenizer, "batch_decode", decode)
    kwargs = dict(marking="markers", samples=2, batch_size=1, max_new_tokens=6, seed=7, progress=False)
    uncut, uncut_drops = qg.generate_questions(model, tokenizer, _inputs(), **kwargs, journal=tmp_path / "uncut")
    assert qg.generate_questions(model, tokenizer, _inputs(), **kwargs) == (uncut, uncut_drops)  # journal or not
    lines = (tmp_path / "uncut" / "rank-00000.jsonl").read_text().splitlines(keepends=True)
    assert len(lines) == 3 and len(read_journal(tmp_path / "uncut")) == 3             # one line a batch

    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "rank-00000.jsonl").write_text(lines[0] + lines[1][: len(lines[1]) // 2])  # killed while writing batch 2
    decoded.clear()
    resumed, resumed_drops = qg.generate_questions(model, tokenizer, _inputs(), **kwargs, journal=cut)
    assert decoded == [2, 2]                                                            # batches 2 and 3 sampled
    assert resumed == uncut and resumed_drops == uncut_drops
    assert (cut / "rank-00000.jsonl").read_text().splitlines() == [line.rstrip("\n") for line in lines]
    decoded.clear()
    assert qg.generate_questions(model, tokenizer, _inputs(), **kwargs, journal=cut)[0] == uncut
    assert decoded == []                                                                # all three from the journal

    (cut / "rank-00000.jsonl").write_text(lines[0] + "{not json\n" + lines[2])
    with pytest.raises(DataFormatError, match=r"rank-00000.jsonl, line 2: not JSON"):
        qg.generate_questions(model, tokenizer, _inputs(), **kwargs, journal=cut)


def test_the_stage_journal_is_named_by_the_weights_and_dropped_with_the_checkpoints(tiny, tmp_path, monkeypatch):
    import torch

    from ecqg.core import paths
    from ecqg.stages import question_generation

    model, tokenizer = tiny
    monkeypatch.chdir(tmp_path)
    settings = sampling_settings(entity_marking="markers", entity_placeholder=None, source_max_length=64,
                                 window_words=None, generate=dict(top_k=10, top_p=0.9, samples=1, batch_size=2,
                                                                  max_new_tokens=4, autocast=None))
    question_generation.generate(model, tokenizer, "con", _inputs(), settings, 5, "con", progress=False)
    assert not paths.QG_CHECKPOINTS.exists()                                            # not asked: no journal
    question_generation.generate(model, tokenizer, "con", _inputs(), settings, 5, "con", progress=False,
                                 resumable=True)
    [journal] = (paths.QG_CHECKPOINTS / "sampling").iterdir()
    assert journal.name.startswith("con-") and len((journal / "rank-00000.jsonl").read_text().splitlines()) == 2
    before = question_generation.weights_digest(model)
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)
    assert question_generation.weights_digest(model) != before                       # another model, another job
    question_generation.generate(model, tokenizer, "con", _inputs(), settings, 5, "con", progress=False,
                                 resumable=True)
    assert len(list((paths.QG_CHECKPOINTS / "sampling").iterdir())) == 2
    question_generation.drop_checkpoints()
    assert not any(paths.QG_CHECKPOINTS.iterdir())


def tiny_bart(tokenizer, width: int = 16):
    """A random one-layer BART over a BERT WordPiece tokenizer ([CLS] starts, [SEP] ends), ``width`` wide."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    config = BartConfig(vocab_size=tokenizer.vocab_size, d_model=width, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=2 * width,
                        decoder_ffn_dim=2 * width, max_position_embeddings=256, pad_token_id=tokenizer.pad_token_id,
                        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                        decoder_start_token_id=tokenizer.sep_token_id, forced_bos_token_id=tokenizer.cls_token_id)
    torch.manual_seed(0)
    return BartForConditionalGeneration(config)


def test_a_bart_with_its_shipped_generation_config_samples(monkeypatch):
    """The paper's generator family: a tiny random BART carrying facebook/bart-large's generation settings (beam
    search, no-repeat n-grams) samples with top-k / top-p, one sequence per sample, reproducibly."""
    from transformers import AutoTokenizer

    from ecqg.runtime.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(BUNDLED_ENCODER))
    model = tiny_bart(tokenizer)
    model.generation_config.update(num_beams=4, no_repeat_ngram_size=3, early_stopping=True, length_penalty=2.0)
    monkeypatch.setattr(tokenizer, "batch_decode", lambda seqs, **_: [f"a{len(s)} <sep> what is it?" for s in seqs])
    kwargs = dict(marking="markers", samples=2, batch_size=2, max_new_tokens=5, seed=3, progress=False)
    records, drops = qg.generate_questions(model, tokenizer, _inputs(), **kwargs)
    assert drops["generated"] == 6 and len(records) == 6
    assert qg.generate_questions(model, tokenizer, _inputs(), **kwargs)[0] == records


def test_placeholder_token_is_learnable_and_put_back(tiny, tmp_path, monkeypatch):
    import copy

    model, tokenizer = copy.deepcopy(tiny[0]), copy.deepcopy(tiny[1])
    qg.add_placeholder_token(model, tokenizer, "[ENT]")
    ids = tokenizer("who beat [ENT]?", add_special_tokens=False)["input_ids"]
    assert len(ids) == 4 and tokenizer.decode(ids) == "who beat [ENT]?"            # one token, kept when decoding
    for part in (model.encoder, model.decoder):
        assert part.get_input_embeddings().num_embeddings == len(tokenizer)
    data = qg.QGDataset([{"source": "x <hl> y <hl>", "target": "z <sep> who beat [ENT]?"}], tokenizer, model)
    batch = qg.make_collator(tokenizer, model)([data[0]])
    assert math.isfinite(model(**{k: v for k, v in batch.items() if k != "token_type_ids"}).loss.item())
    qg.save_generator(model, tokenizer, tmp_path / "gen")
    again, tok = qg.load_generator(tmp_path / "gen")
    assert len(tok) == len(tokenizer) and again.decoder.get_output_embeddings().out_features == len(tokenizer)
    # generation puts the entity back and says so in the record
    monkeypatch.setattr(tokenizer, "batch_decode", lambda seqs, **kw: ["ans <sep> who beat [ENT] twice?"] * len(seqs))
    records, _ = qg.generate_questions(model, tokenizer, _inputs()[1:2], marking="markers", placeholder="[ENT]",
                                       max_new_tokens=3, progress=False, require_entity=True)
    assert [r["question"] for r in records] == ["who beat Carolina Panthers twice?"]
    assert records[0]["entity_via_placeholder"] is True
    assert qg.evaluate_generator(records, {qg.reference_key("sb", "Carolina Panthers"): "Who lost?"},
                                 PASSAGES)["placeholder_rate"] == 1.0


def test_saved_generator_loads_back(tiny, tmp_path):
    model, tokenizer = tiny
    qg.save_generator(model, tokenizer, tmp_path / "gen")
    again, tok = qg.load_generator(tmp_path / "gen")
    assert type(again).__name__ == "EncoderDecoderModel" and tok.vocab_size == tokenizer.vocab_size
    assert again.generation_config.decoder_start_token_id == tokenizer.cls_token_id


def test_bad_model_reference_fails_clearly(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match=r"cannot load model 'no-such-org/no-such-qg'.*HF_HUB_OFFLINE=0"):
        qg.build_generator("no-such-org/no-such-qg")


# ------------------------------------------------------------------------------------------------ metrics
def test_bleu_and_rouge_on_a_hand_made_case():
    same = qg.question_scores(["what is the capital of france?"], ["What is the capital of France?"])
    assert same == {"bleu4": 100.0, "rougeL_f": 100.0}
    other = qg.question_scores(["zebra zebra zebra zebra zebra"], ["what is the capital of france?"])
    assert other["bleu4"] < 1 and other["rougeL_f"] == 0.0
    # ROUGE-L: LCS "the capital of france" (4 words) of 5 vs 6 words -> F = 2*0.8*0.667/(1.467) = 72.727
    half = qg.question_scores(["name the capital of france"], ["what is the capital of france"])
    assert half["rougeL_f"] == pytest.approx(72.727, abs=1e-3)
    # several references: the best one counts
    multi = qg.question_scores(["who won the game?"], [["where is it?", "who won the game?"]])
    assert multi["rougeL_f"] == 100.0 and multi["bleu4"] == 100.0


def test_evaluate_generator_rates():
    recs = [{"id": "a", "passage_id": "no", "entity": "Normandy", "question": "Where is normandy?", "answer": "France"},
            {"id": "b", "passage_id": "no", "entity": "Normandy", "question": "Where is Normandy ?", "answer": "Mars"},
            {"id": "c", "passage_id": "sb", "entity": None, "question": "Who won the game?", "answer": "Denver Broncos"}]
    refs = {qg.reference_key("no", "normandy"): ["Where is Normandy?"], "sb": ["Who won Super Bowl 50?"]}
    out = qg.evaluate_generator(recs, refs, PASSAGES, generated=4)
    assert out["entity_mention_rate"] == 1.0 and out["answer_in_passage_rate"] == pytest.approx(2 / 3, abs=1e-4)
    assert out["duplicate_rate"] == pytest.approx(1 / 3, abs=1e-4) and out["kept_rate"] == 0.75
    assert out["inputs"] == 2
    # content words in the passage: a/b have none left (stop words, the entity); c: "game" yes, "won" no
    assert out["passage_word_rate"] == 0.5 and out["reference_passage_word_rate"] == 0.75   # super, bowl, 50 / won
    # Without conditioned records the mention rate does not apply: JSON null, never NaN (invalid JSON).
    assert qg.evaluate_generator(recs[2:], refs, PASSAGES)["entity_mention_rate"] is None
    with pytest.raises(KeyError, match="no reference question"):
        qg.evaluate_generator([{**recs[2], "passage_id": "zz"}], refs, PASSAGES)
    table = qg.side_by_side(recs[2:], recs[:1], PASSAGES)
    assert list(table.columns)[:2] == ["title", "entity"] and len(table) == 0


def test_passage_word_rate():
    assert qg.passage_word_rate("Who defeated the Carolina Panthers?", SUPER_BOWL) == 1.0
    assert qg.passage_word_rate("Who painted the Mona Lisa?", SUPER_BOWL) == 0.0
    # the entity's own words do not count (conditioned questions contain them by construction)
    assert qg.passage_word_rate("Which team beat the Carolina Panthers?", SUPER_BOWL, "Carolina Panthers") == 0.0
    assert qg.passage_word_rate("What is it?", SUPER_BOWL) is None


def test_heldout_split_keeps_passages_apart():
    triples = [_triple(i, "Who?", f"p{i // 3}") for i in range(30)]
    train, held = qg.split_heldout(triples, 7, seed=0)
    assert len(held) == 9 and len(train) == 21
    assert not {t["passage_id"] for t in train} & {t["passage_id"] for t in held}
    assert qg.split_heldout(triples, 7, seed=0) == (train, held)


# ------------------------------------------------------------------------------------------------ stage 02, cut runs
def test_a_finished_generator_survives_the_removal_of_the_stage_outputs(tmp_path, monkeypatch):
    """DVC deletes stage 02's outputs before rerunning a cut run: a generator the cut run had finished must come back
    from the checkpoint folder as it was, without a training step, until the stage has written everything."""
    import shutil

    import torch

    from ecqg.core import config, paths, settings
    from ecqg.stages import question_generation

    params = config.load(config.write_profile("smoke", tmp_path / "params.yaml", Path("params").resolve()))
    params["qg"]["train"].update(max_steps=3, checkpoint_every=2, batch_size=2)
    params["qg"]["architecture"] = "prefix_lm"           # a generator with weights to train (smoke's is rule-based)
    s = settings.of(params)
    monkeypatch.chdir(tmp_path)
    train = [_triple(0, "Who won Super Bowl 50?", "sb", "Denver Broncos"),
             _triple(1, "Where is Normandy?", "no", "France"),
             _triple(2, "Who defeated the Carolina Panthers?", "sb", "Denver Broncos")]
    model, _, first = question_generation.train_generator("uncon", train, [None] * 3, PASSAGES, s.qg, s.seed,
                                                          progress=False)
    assert first["steps"] == 3 and first["resumed_from"] is None
    run = next(paths.QG_CHECKPOINTS.glob("uncon/*"))
    assert sorted(p.name for p in run.iterdir()) == [question_generation.FINISHED]   # optimizer states dropped

    shutil.rmtree(paths.QG)                                                          # what `dvc repro` does first
    monkeypatch.setattr(qg, "train_generator", lambda *a, **k: pytest.fail("a finished generator was retrained"))
    again, _, second = question_generation.train_generator("uncon", train, [None] * 3, PASSAGES, s.qg, s.seed,
                                                           progress=False)
    assert second["resumed_from"] == str(run / question_generation.FINISHED)
    assert {k: v for k, v in second.items() if k != "resumed_from"} == {k: v for k, v in first.items()
                                                                        if k != "resumed_from"}
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    assert (paths.generator_dir("uncon") / "config.json").is_file()

    question_generation.drop_checkpoints()                                           # the stage's last step
    assert paths.QG_CHECKPOINTS.is_dir() and not any(paths.QG_CHECKPOINTS.iterdir())
