"""The corpus tokenised once (Arrow, ``datasets``) and read by the dense encoder: the same vectors as from the
text, refused by a model it was not made for."""

import copy
import json

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from ecqg.runtime.models import resolve_model
from ecqg.retrieval import dense
from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig
from ecqg.retrieval.tokenized_corpus import CARD, TokenizedCorpus, tokenize_corpus

WORDS = "river city king war music league film island church school army party bridge station novel".split()


def tiny(tokenizer, passage_max_length=48):
    config = BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                        vocab_size=tokenizer.vocab_size, max_position_embeddings=128)
    torch.manual_seed(0)
    return BiEncoder(BertModel(config), BertModel(config), tokenizer,
                     BiEncoderConfig("tiny-random", passage_max_length=passage_max_length, query_max_length=16))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tokenized")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
    rng = np.random.default_rng(0)
    corpus = tmp / "corpus.jsonl"
    rows = [{"id": f"p{i}", "title": f"{WORDS[i % len(WORDS)]} {i}", "source": "test",
             "text": " ".join(rng.choice(WORDS, size=int(rng.integers(2, 80))))} for i in range(41)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    figures = tokenize_corpus(corpus, tokenizer, 48, tmp / "tokenized", num_proc=1, progress=False)
    return tmp, tokenizer, corpus, figures


def test_the_tokenised_corpus_holds_the_retrievers_features(setup):
    tmp, tokenizer, corpus, figures = setup
    model = tiny(tokenizer)
    stored = TokenizedCorpus(tmp / "tokenized", model)
    assert len(stored) == figures["passages"] == 41
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    expected = model.passage_features([r["title"] for r in rows], [r["text"] for r in rows])
    got_ids, got = [], []
    for ids, features in stored.chunks(0, 41, 9):
        got_ids += ids
        got += features
    assert got_ids == [r["id"] for r in rows]
    assert figures["tokens"] == sum(len(f["input_ids"]) for f in expected)
    assert max(len(f["input_ids"]) for f in expected) == 48                     # truncation happened
    for a, b in zip(got, expected, strict=True):
        assert a.keys() == b.keys() and all(list(map(int, a[k])) == b[k] for k in b)
    assert not any(p.name.startswith(".") for p in tmp.iterdir())            # no temporary left behind


@pytest.mark.parametrize("prefetch", [False, True])
def test_encoding_from_tokens_equals_encoding_from_text(setup, prefetch):
    tmp, tokenizer, corpus, _ = setup
    model = tiny(tokenizer)
    kwargs = dict(batch_size=4, chunk_size=7, progress=False, prefetch=prefetch)
    text_ids, text = dense.encode_corpus(model, corpus, tmp / f"text{prefetch}", 41, **kwargs)
    tok_ids, tok = dense.encode_corpus(model, corpus, tmp / f"tok{prefetch}", 41, tokenized=tmp / "tokenized",
                                       **kwargs)
    assert tok_ids == text_ids and np.array_equal(np.asarray(tok), np.asarray(text))
    rows_ids, rows = zip(*dense.iter_passage_embeddings(model, TokenizedCorpus(tmp / "tokenized", model),
                                                        batch_size=4, chunk_size=7, rows=(10, 30), progress=False))
    assert sum(rows_ids, []) == text_ids[10:30]
    # other chunks, so other batches: equal up to float summation order
    np.testing.assert_allclose(np.concatenate(rows), np.asarray(text)[10:30], atol=1e-5, rtol=1e-4)


def test_a_model_it_was_not_made_for_is_refused_by_field(setup):
    tmp, tokenizer, corpus, _ = setup
    with pytest.raises(ValueError, match=f"{CARD}: field 'max_length' is 48.*passage_max_length is 64"):
        TokenizedCorpus(tmp / "tokenized", tiny(tokenizer, passage_max_length=64))
    grown = copy.deepcopy(tokenizer)
    grown.add_tokens(["zzqx"])
    with pytest.raises(ValueError, match=f"{CARD}: field 'tokenizer'"):
        TokenizedCorpus(tmp / "tokenized", tiny(grown))
    with pytest.raises(dense.ShardError, match="41 tokenised passages, the corpus .* has 40"):
        dense.encode_corpus(tiny(tokenizer), corpus, tmp / "short", 40, tokenized=tmp / "tokenized", progress=False)
    with pytest.raises(FileNotFoundError, match="stage tokenize_corpus writes it"):
        TokenizedCorpus(tmp / "nothing", tiny(tokenizer))
