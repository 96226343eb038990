"""The prefix-LM generator: its attention mask, cached sampling against teacher forcing, saving and loading."""

import math

import pytest
import torch

from ecqg.qg import prefix_lm as P
from ecqg import qg
from ecqg.runtime.models import BUNDLED_ENCODER

NORMANS = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in "
           "France.")


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoTokenizer, BertConfig

    from ecqg.runtime.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(BUNDLED_ENCODER))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    model = P.BertPrefixLM(config).eval()
    return model, tokenizer


def test_mask_source_bidirectional_target_causal_padding_hidden():
    types = torch.tensor([[0, 0, 0, 1, 1, 0]])        # 3 source tokens, 2 target tokens, 1 padding
    valid = torch.tensor([[1, 1, 1, 1, 1, 0]])
    allowed = P.prefix_lm_mask(types, valid, torch.float32)[0, 0] == 0
    expected = torch.tensor([[1, 1, 1, 0, 0, 0],          # source rows: the source only, both directions
                             [1, 1, 1, 0, 0, 0],
                             [1, 1, 1, 0, 0, 0],
                             [1, 1, 1, 1, 0, 0],          # target rows: the source and the target so far
                             [1, 1, 1, 1, 1, 0],
                             [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(allowed, expected)


def test_example_layout():
    f = P.example_features([101, 7, 8, 102], [20, 21], start_id=101, stop_id=102)
    assert f["input_ids"] == [101, 7, 8, 102, 101, 20, 21]
    assert f["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]
    assert f["labels"] == [-100, -100, -100, -100, 20, 21, 102]
    assert f["attention_mask"] == [1] * 7


def test_cached_sampling_equals_teacher_forcing(tiny):
    """Each sampled token's log-probability from the incremental (cached) loop equals the one a full forward of the
    finished sequence gives: the cache, positions, token types and mask of both paths agree, padded rows too."""
    model, tokenizer = tiny
    sources = [NORMANS, "Super Bowl 50 was a game."]          # different lengths: the second row is padded
    enc = tokenizer(sources, padding=True, return_tensors="pt")
    g = torch.Generator().manual_seed(3)
    tokens, log_probs = P.sample(model, enc["input_ids"], enc["attention_mask"], start_id=tokenizer.cls_token_id,
                                 stop_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id, samples=2,
                                 top_k=0, top_p=1.0, max_new_tokens=7, generator=g)
    assert tokens.shape[0] == 4 and log_probs.shape == tokens.shape
    plain = tokenizer(sources)["input_ids"]
    for row in range(4):
        generated = tokens[row].tolist()
        n = generated.index(tokenizer.sep_token_id) + 1 if tokenizer.sep_token_id in generated else len(generated)
        features = P.example_features(plain[row // 2], generated[: n - 1], tokenizer.cls_token_id, generated[n - 1])
        batch = {k: torch.tensor([v]) for k, v in features.items()}
        with torch.no_grad():
            logits = model(**batch).logits
        expected = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(generated[:n])[:, None]).squeeze(1)
        assert torch.allclose(log_probs[row, :n], expected, atol=1e-4), row
        assert torch.isinf(log_probs[row, n:]).all() and (tokens[row, n:] == tokenizer.pad_token_id).all()



@pytest.mark.parametrize("top_k,top_p", [(10, 0.9), (10, 1.0), (3, 0.5), (50, 0.99), (1, 0.9)])
def test_top_k_top_p_over_the_k_best_equals_the_transformers_warpers(top_k, top_p):
    from transformers import TopKLogitsWarper, TopPLogitsWarper

    torch.manual_seed(0)
    logits = torch.randn(6, 300) * 3           # no ties (transformers' top-k keeps every token tied with the k-th)
    warped = TopKLogitsWarper(top_k)(None, logits.clone())
    if top_p < 1:
        warped = TopPLogitsWarper(top_p)(None, warped)
    expected = torch.softmax(warped, -1)
    probs, ids = P.top_k_top_p_probs(logits, top_k, top_p)
    got = torch.zeros_like(expected).scatter(1, ids, probs)
    assert torch.allclose(got, expected, atol=1e-6)

def test_sampling_is_seeded(tiny):
    model, tokenizer = tiny
    enc = tokenizer([NORMANS], return_tensors="pt")

    def draw(seed):
        return P.sample(model, enc["input_ids"], enc["attention_mask"], start_id=tokenizer.cls_token_id,
                        stop_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id, samples=3, max_new_tokens=6,
                        generator=torch.Generator().manual_seed(seed))[0]

    assert torch.equal(draw(1), draw(1)) and not torch.equal(draw(1), draw(2))


def test_qg_trains_generates_saves_and_loads_a_prefix_lm(tiny, tmp_path):
    import copy

    model, tokenizer = copy.deepcopy(tiny[0]), copy.deepcopy(tiny[1])
    qg.add_placeholder_token(model, tokenizer, "[ENT]")
    assert model.get_output_embeddings().out_features == len(tokenizer)        # the tied LM head grew too
    data = qg.QGDataset([{"source": "Normans <sep> " + NORMANS, "target": "France <sep> where is [ENT]?"},
                         {"source": "short", "target": "x <sep> why?"}], tokenizer, model,
                        source_max_length=16, target_max_length=8)
    assert data.truncated_sources == 1 and len(data[0]["input_ids"]) == 16 + 8
    batch = qg.make_collator(tokenizer, model)([data[0], data[1]])
    assert batch["labels"].shape == batch["input_ids"].shape and (batch["labels"][1] == -100).sum() > 0
    model.train()
    loss = model(**batch).loss
    loss.backward()
    assert math.isfinite(loss.item())
    model.eval()
    inputs = [{"passage_id": "no", "title": "Normans", "text": NORMANS, "entity": "Normandy", "entity_start": None,
               "entity_label": "GPE"}]
    kwargs = dict(marking="markers", samples=2, max_new_tokens=5, seed=4, progress=False)
    _, drops = qg.generate_questions(model, tokenizer, inputs, **kwargs)
    assert drops["generated"] == 2                                             # a random model: any drops, no crash
    qg.save_generator(model, tokenizer, tmp_path / "gen")
    again, tok = qg.load_generator(tmp_path / "gen")
    assert isinstance(again, P.BertPrefixLM) and len(tok) == len(tokenizer)
    with torch.no_grad():
        assert torch.allclose(again.eval()(**batch).logits, model(**batch).logits, atol=1e-5)


def test_build_from_the_bundled_encoder_and_refuse_other_families(tmp_path):
    from transformers import RobertaConfig

    model, tokenizer = qg.build_generator(BUNDLED_ENCODER, placeholder="[ENT]", architecture="prefix_lm")
    assert isinstance(model, P.BertPrefixLM) and model.config.architectures == [P.ARCHITECTURE]
    embeddings = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight.data_ptr() == embeddings.data_ptr()   # tied LM head
    RobertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=32).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="BERT-family encoder, got model_type 'roberta'"):
        P.from_encoder(str(tmp_path))
    with pytest.raises(ValueError, match="unknown generator architecture 'gpt'"):
        qg.build_generator(BUNDLED_ENCODER, architecture="gpt")


def test_dropout_setting_reaches_every_layer_and_the_config(tiny):
    import copy

    model = copy.deepcopy(tiny[0])
    qg.set_dropout(model, 0.0)
    assert model.config.hidden_dropout_prob == 0.0 and model.config.attention_probs_dropout_prob == 0.0
    assert all(m.p == 0.0 for m in model.modules() if isinstance(m, torch.nn.Dropout))
    model.train()
    batch = {k: torch.tensor([v]) for k, v in P.example_features([101, 7, 8, 102], [20], 101, 102).items()}
    assert torch.equal(model(**batch).logits, model(**batch).logits)          # deterministic in train mode
    with pytest.raises(ValueError, match="in \\[0, 1\\)"):
        qg.set_dropout(model, 1.5)
    from transformers import BartConfig, BartForConditionalGeneration

    bart = BartForConditionalGeneration(BartConfig(vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1,
                                                   encoder_attention_heads=2, decoder_attention_heads=2,
                                                   encoder_ffn_dim=32, decoder_ffn_dim=32))
    with pytest.raises(ValueError, match="not to 'bart': set it to null"):
        qg.set_dropout(bart, 0.0)


def test_a_seeded_build_draws_the_same_new_weights():
    """The bundled encoder has no LM head: its transform is drawn at build time, from the seed when one is given
    (torch's own seed differs in every process, so an unseeded build would make each run's generator differ)."""
    def head(seed):
        torch.manual_seed(seed + 1000)                     # whatever ran before in the process
        model, _ = qg.build_generator(BUNDLED_ENCODER, placeholder="[ENT]", seed=7)
        return model.cls.predictions.transform.dense.weight, model.get_input_embeddings().weight[-1]

    (w1, e1), (w2, e2) = head(1), head(2)
    assert torch.equal(w1, w2) and torch.equal(e1, e2)
