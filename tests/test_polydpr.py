"""Poly-DPR: K code vectors per passage, softmax-mixed for training, the best one for retrieval; FAISS over K x N
rows equals the brute-force max over K; save / load keeps the codes."""

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from ecqg.runtime.models import resolve_model
from ecqg.retrieval import dense, faiss_index
from ecqg.retrieval.polydpr import PolyConfig, PolyDPR
from ecqg.retrieval.retriever import build_retriever, load_retriever

TOKENIZER = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
PASSAGES = [{"id": f"p{i}", "title": t, "text": f"{t} is a place with a river, a bridge and {i} old towers."}
            for i, t in enumerate(["Lyon", "Porto", "Graz", "Turku", "Split", "Ghent", "Cork"])]


def tiny(codes: int, seed: int = 0) -> PolyDPR:
    torch.manual_seed(seed)
    config = BertConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32,
                        vocab_size=TOKENIZER.vocab_size, max_position_embeddings=64)
    return PolyDPR(BertModel(config), BertModel(config), TOKENIZER,
                   PolyConfig("tiny", codes=codes, query_max_length=16, passage_max_length=48, code_seed=seed))


def test_training_score_is_never_above_the_retrieval_score():
    rng = torch.Generator().manual_seed(0)
    model = tiny(4)
    for _ in range(20):
        q, p = torch.randn(5, 16, generator=rng), torch.randn(7, 4, 16, generator=rng) * 3
        train, search = model.train_scores(q, p), model.scores(q, p)
        assert torch.all(train <= search + 1e-5)
        assert torch.allclose(search, torch.einsum("qd,pkd->qpk", q, p).amax(-1))


def test_one_code_is_the_single_vector_control():
    model = tiny(1)
    q, p = torch.randn(3, 16), torch.randn(4, 1, 16)
    assert torch.allclose(model.train_scores(q, p), model.scores(q, p), atol=1e-6)
    assert torch.allclose(model.scores(q, p), q @ p[:, 0].T, atol=1e-6)


def test_passage_vectors_are_code_attention_pools_over_real_tokens():
    model = tiny(3).eval()
    tok = model.tokenize_passages([p["title"] for p in PASSAGES[:2]], [PASSAGES[0]["text"], "Porto."])
    with torch.no_grad():
        vectors = model.encode_passages(tok)
        hidden = model.passage_encoder(**tok).last_hidden_state
        attention = model.code_attention(hidden, tok["attention_mask"])
    assert vectors.shape == (2, 3, 16)
    assert torch.allclose(attention.sum(-1), torch.ones(2, 3), atol=1e-5)
    assert torch.all(attention[1][:, tok["attention_mask"][1] == 0] == 0)          # padding gets no attention
    assert torch.allclose(vectors, torch.einsum("bkn,bnd->bkd", attention, hidden), atol=1e-5)
    assert not torch.allclose(vectors[:, 0], vectors[:, 1])                        # distinct codes, distinct vectors


def test_content_codes_never_attend_to_special_tokens_or_padding():
    model = tiny(3).eval()
    model.config = PolyConfig("tiny", codes=3, query_max_length=16, passage_max_length=48, attend="content")
    tok = model.tokenize_passages(["Lyon", ""], [PASSAGES[0]["text"], ""])
    with torch.no_grad():
        vectors = model.encode_passages(tok)
        hidden = model.passage_encoder(**tok).last_hidden_state
        attention = model.code_attention(hidden, model.attended_mask(tok))
    ids = tok["input_ids"]
    special = (ids == TOKENIZER.cls_token_id) | (ids == TOKENIZER.sep_token_id) | (tok["attention_mask"] == 0)
    assert torch.all(attention[0][:, special[0]] == 0) and attention[0][:, ~special[0]].sum() > 2.99
    assert torch.allclose(attention[1].sum(-1), torch.ones(3), atol=1e-5)   # nothing but specials: falls back to them
    assert torch.allclose(vectors, torch.einsum("bkn,bnd->bkd", attention, hidden), atol=1e-5)
    with pytest.raises(ValueError, match="attend must be one of"):
        PolyDPR(model.query_encoder, model.passage_encoder, TOKENIZER, PolyConfig("x", attend="words"))


def test_faiss_over_k_rows_equals_the_brute_force_max_over_k():
    rng = np.random.default_rng(0)
    ids = [f"p{i}" for i in range(50)]
    vectors = rng.standard_normal((50, 6, 8)).astype(np.float32)
    queries = rng.standard_normal((9, 8)).astype(np.float32)
    rows_ids, rows = faiss_index.index_rows(ids, vectors)
    run = faiss_index.search(faiss_index.build_index(rows, progress=False), rows_ids, queries, k=10, progress=False)
    best = np.einsum("qd,pkd->qpk", queries, vectors).max(-1)
    for qi in range(9):
        order = np.argsort(-best[qi])[:10]
        assert [pid for pid, _ in run[str(qi)]] == [ids[j] for j in order]
        assert np.allclose([s for _, s in run[str(qi)]], best[qi][order], atol=1e-5)


def test_one_code_model_encodes_and_searches_like_a_single_vector_retriever():
    """K = 1 (the issue's control) encodes to (N, d) rows like DPR; it once failed on the (B, 1, d) encoder output."""
    model = tiny(1)
    ids, vectors = dense.encode_passages(model, PASSAGES, batch_size=3, progress=False)
    assert ids == [p["id"] for p in PASSAGES] and vectors.shape == (len(PASSAGES), 16)
    batch = model.tokenize_passages([p["title"] for p in PASSAGES], [p["text"] for p in PASSAGES])
    with torch.no_grad():
        direct = model.eval().encode_passages(dict(batch))[:, 0].numpy()
    assert np.allclose(vectors, direct, atol=1e-5)


def test_save_load_keeps_encoders_and_codes(tmp_path):
    model = tiny(5, seed=3)
    with torch.no_grad():
        model.codes.add_(1.0)                                                      # trained codes differ from init
    model.save(tmp_path / "poly")
    again = load_retriever(tmp_path / "poly")
    assert isinstance(again, PolyDPR) and again.vectors_per_passage == 5
    assert torch.equal(again.codes, model.codes) and again.config == model.config
    ids, v1 = dense.encode_passages(model, PASSAGES, progress=False)
    _, v2 = dense.encode_passages(again, PASSAGES, progress=False)
    assert v1.shape == (len(PASSAGES), 5, 16) and np.allclose(v1, v2, atol=1e-6)
    assert (tmp_path / "poly" / "query_encoder" / "model.safetensors").is_file()   # ordinary transformers checkpoints


def test_built_from_params_like_any_retriever():
    model = build_retriever("polydpr", "bundled:minilm", codes=2, pooling="cls", query_max_length=16,
                            passage_max_length=32)
    assert isinstance(model, PolyDPR) and model.codes.shape == (2, model.dim)
    assert model.config.attend == "content"                                       # new models: content pieces only
    with pytest.raises(ValueError, match="at least one code"):
        PolyDPR(model.query_encoder, model.passage_encoder, TOKENIZER, PolyConfig("x", codes=0))


def test_the_saved_layout_is_todays_and_older_checkpoints_load(tmp_path):
    """The base class saves every retriever the same way as the two classes did on their own (the layout below is
    what every checkpoint in outputs/models holds), so models saved before it load unchanged; a bi-encoder saved
    before the registry (``bi_encoder.json``, no kind) loads too."""
    import json
    import shutil

    from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig

    poly = tiny(3, seed=4)
    poly.save(tmp_path / "poly")
    files = sorted(p.relative_to(tmp_path / "poly").as_posix() for p in (tmp_path / "poly").rglob("*") if p.is_file())
    assert [f for f in files if not f.startswith(("tokenizer", "special_tokens", "vocab"))] == [
        "passage_encoder/config.json", "passage_encoder/model.safetensors", "poly_codes.safetensors",
        "query_encoder/config.json", "query_encoder/model.safetensors", "retriever.json"]
    assert json.loads((tmp_path / "poly/retriever.json").read_text()) == {
        "kind": "polydpr", "base_model": "tiny", "codes": 3, "shared": False, "query_max_length": 16,
        "passage_max_length": 48, "code_seed": 4, "attend": "all"}
    again = load_retriever(tmp_path / "poly")
    assert isinstance(again, PolyDPR) and torch.equal(again.codes, poly.codes) and again.config == poly.config
    older = json.loads((tmp_path / "poly/retriever.json").read_text())
    del older["attend"]                                    # saved before `attend` existed: the codes saw every token
    (tmp_path / "poly/retriever.json").write_text(json.dumps(older))
    assert load_retriever(tmp_path / "poly").config.attend == "all"

    bi = BiEncoder(poly.query_encoder, poly.passage_encoder, TOKENIZER, BiEncoderConfig("tiny", pooling="mean"))
    bi.save(tmp_path / "bi")
    settings = json.loads((tmp_path / "bi/retriever.json").read_text())
    assert settings == {"kind": "biencoder", "base_model": "tiny", "shared": False, "pooling": "mean",
                        "query_max_length": 64, "passage_max_length": 256}
    shutil.move(tmp_path / "bi/retriever.json", tmp_path / "bi/bi_encoder.json")
    del settings["kind"]
    (tmp_path / "bi/bi_encoder.json").write_text(json.dumps(settings))
    legacy = load_retriever(tmp_path / "bi")
    assert isinstance(legacy, BiEncoder) and legacy.config == bi.config
    assert torch.equal(legacy.passage_encoder.embeddings.word_embeddings.weight,
                       bi.passage_encoder.embeddings.word_embeddings.weight)
    # a new build gets Poly-DPR's current default, content-only attention; `pooling` (DPR's) is accepted, ignored
    assert PolyDPR.new_defaults == {"attend": "content"} and "pooling" in PolyDPR.ignored_settings
