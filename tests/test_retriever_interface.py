"""A new retriever is one class and a registry entry: a toy retriever with two vectors per passage, defined here,
goes through the pipeline's own training loop, encoding, FAISS search (rows mapped back to passages), probes and
save / load without any other code knowing about it."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from ecqg.core import config
from ecqg.core.settings import params as typed_params
from ecqg.core.settings import retrievers
from ecqg.core.settings.schema import Block, setting
from ecqg.retrieval import dense, faiss_index
from ecqg.runtime.models import resolve_model
from ecqg.stages import dpr_training
from ecqg.retrieval.retriever import (CONFIG_FILE, REGISTRY, Retriever, build_retriever, load_retriever, register,
                                      retriever_class)
from ecqg.retrieval.train import TrainConfig, train_biencoder

TOKENIZER = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))


@dataclass(frozen=True)
class _Settings:
    base_model: str
    shared: bool = True
    query_max_length: int = 16
    passage_max_length: int = 32


@register
class TwoVectorRetriever(Retriever):
    """Query: [CLS]. Passage: its [CLS] vector and the mean of its tokens (two vectors). Trains on the max score.
    Saving and loading are the base class's: this class only builds a random encoder and encodes."""

    kind = "test_two_vector"
    config_class = _Settings

    @property
    def vectors_per_passage(self) -> int:
        return 2

    @classmethod
    def from_base(cls, ref: str, seed: int = 0, **_) -> "TwoVectorRetriever":
        torch.manual_seed(seed)
        encoder = BertModel(BertConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2,
                                       intermediate_size=32, vocab_size=TOKENIZER.vocab_size,
                                       max_position_embeddings=64))
        return cls(encoder, encoder, TOKENIZER, _Settings(ref))

    def encode_queries(self, batch) -> torch.Tensor:
        return self.query_encoder(**batch).last_hidden_state[:, 0]

    def encode_passages(self, batch) -> torch.Tensor:
        hidden = self.passage_encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return torch.stack([hidden[:, 0], (hidden * mask).sum(1) / mask.sum(1)], dim=1)


WORDS = "river mountain castle tiger violin comet copper harbor meadow glacier lantern orchard".split()
PASSAGES = [{"id": f"p{i}", "title": WORDS[i], "text": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(9))}
            for i in range(len(WORDS))]


def test_the_registry_builds_and_loads_it(tmp_path):
    assert retriever_class("test_two_vector") is TwoVectorRetriever
    model = build_retriever("test_two_vector", "tiny", seed=1)
    model.save(tmp_path / "m")
    again = load_retriever(tmp_path / "m")
    assert isinstance(again, TwoVectorRetriever)
    for a, b in zip(model.parameters(), again.parameters()):
        assert torch.equal(a, b)
    assert json.loads((tmp_path / "m" / CONFIG_FILE).read_text()) == {
        "kind": "test_two_vector", "base_model": "tiny", "shared": True, "query_max_length": 16,
        "passage_max_length": 32}
    assert sorted(p.name for p in (tmp_path / "m").iterdir() if p.is_dir()) == ["query_encoder"]   # shared
    with pytest.raises(ValueError, match="a saved 'test_two_vector' retriever, not a 'biencoder' one"):
        retriever_class("biencoder").load(tmp_path / "m")
    with pytest.raises(ValueError, match="unknown retriever 'nope'"):
        retriever_class("nope")
    assert REGISTRY["test_two_vector"] is TwoVectorRetriever


def test_search_over_k_rows_per_passage_equals_the_brute_force_best_vector():
    model = build_retriever("test_two_vector", "tiny", seed=2)
    ids, vectors = dense.encode_passages(model, PASSAGES, batch_size=5, progress=False)
    assert vectors.shape == (len(PASSAGES), 2, model.dim)
    queries = dense.encode_queries(model, [p["title"] for p in PASSAGES], progress=False)
    rows_ids, rows = faiss_index.index_rows(ids, vectors)
    assert len(rows_ids) == 2 * len(ids) and rows_ids[:2] == ["p0", "p0"]
    run = faiss_index.search(faiss_index.build_index(rows, progress=False), rows_ids, queries, k=5, progress=False)
    best = np.einsum("qd,pkd->qpk", queries, vectors).max(axis=2)          # brute force: max over K
    expected = model.scores(torch.from_numpy(queries), torch.from_numpy(vectors)).numpy()
    assert np.allclose(best, expected, atol=1e-5)
    row_of = {pid: j for j, pid in enumerate(ids)}
    for qi, ranking in run.items():
        top = np.sort(best[int(qi)])[::-1][:5]
        assert np.allclose([s for _, s in ranking], top, atol=1e-4)        # the 5 best passages, best first...
        assert np.allclose([best[int(qi)][row_of[pid]] for pid, _ in ranking], top, atol=1e-4)  # ...at their best
        assert len({pid for pid, _ in ranking}) == len(ranking)            # each passage once
    pairs = model.pair_scores(queries, vectors)
    assert np.allclose(pairs, np.diag(best), atol=1e-5)


def test_the_training_loop_trains_it(tmp_path):
    model = build_retriever("test_two_vector", "tiny", seed=3)
    records = [{"question": p["title"], "answers": ["x"], "positive_ctxs": [p],
                "hard_negative_ctxs": [PASSAGES[(i + 3) % len(PASSAGES)]]} for i, p in enumerate(PASSAGES)]
    config = TrainConfig(lr=1e-3, epochs=2, batch_size=4, hard_negatives=1, max_steps=3, checkpoint_every=None,
                         seed=0, warmup_steps=0)
    before = [p.detach().clone() for p in model.parameters()]
    history = train_biencoder(model, records[:8], records[8:], config, tmp_path / "run", resume=False,
                              progress=False)
    assert [h["step"] for h in history] == [1, 2, 3] and "val_top1" in history[-1]
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert isinstance(load_retriever(tmp_path / "run" / "model"), TwoVectorRetriever)


# A kind with settings of its own touches three places: its module (the two classes below), one entry in
# ecqg.core.settings.retrievers.KINDS naming its settings block, and the block's values in params/mini.yaml.
@dataclass(frozen=True)
class ScaledSettings(Block):
    scale: float = setting((float,), lambda v: v > 0, "a number > 0 (the query vectors' scale)")


@register
class ScaledRetriever(TwoVectorRetriever):
    """The two-vector toy with a setting of its own: its queries scaled by ``scale``."""

    kind = "test_scaled"

    @classmethod
    def from_base(cls, ref: str, scale: float, **_) -> "ScaledRetriever":
        model = super().from_base(ref)
        model.scale = scale
        return model

    def encode_queries(self, batch) -> torch.Tensor:
        return self.scale * super().encode_queries(batch)


def test_a_kind_with_settings_of_its_own_is_its_module_one_entry_and_its_values(monkeypatch):
    kinds = {**retrievers.KINDS, "test_scaled": retrievers.RetrieverKind(__name__, ScaledSettings, one_vector=False)}
    monkeypatch.setattr(retrievers, "KINDS", kinds)                       # the one entry
    tree_class = typed_params.params_class(kinds)                         # what Params is with it declared
    values = {**config.preset("mini"), "test_scaled": {"scale": 2.0}}      # its values
    tree = tree_class.of(values)
    types, check, expected = tree_class.rules()["test_scaled.scale"]      # validated like every setting
    assert not check(-1.0) and expected.startswith("a number > 0")
    # the pipeline hands the block to the constructor, asking the kind's traits, never its name
    assert dpr_training.kind_block(tree, "test_scaled") == ScaledSettings(2.0)
    model = dpr_training.base_retriever(tree.dpr, "test_scaled", dpr_training.kind_block(tree, "test_scaled"))
    assert isinstance(model, ScaledRetriever) and model.scale == 2.0
    assert not retrievers.traits("test_scaled").one_vector and retrievers.settings_block("test_scaled") == "test_scaled"
