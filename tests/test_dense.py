"""Dense encoding (length-sorted, sharded) and FAISS search, on a tiny random BERT and random vectors."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from ecqg.runtime.models import resolve_model
from ecqg.retrieval import dense, faiss_index
from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig

REPO = Path(__file__).resolve().parents[1]
WORDS = ("river city king war music league film island church school army party bridge station novel "
         "election museum mountain company season").split()


@pytest.fixture(scope="module")
def model():
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
    config = BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                        vocab_size=tokenizer.vocab_size, max_position_embeddings=128)
    torch.manual_seed(0)
    query, passage = BertModel(config), BertModel(config)
    return BiEncoder(query, passage, tokenizer, BiEncoderConfig("tiny-random", passage_max_length=48,
                                                                query_max_length=16))


@pytest.fixture(scope="module")
def passages():
    rng = np.random.default_rng(0)
    return [{"id": f"p{i}", "title": f"{WORDS[i % len(WORDS)]} {i}", "source": "test",
             "text": " ".join(rng.choice(WORDS, size=int(rng.integers(2, 60))))} for i in range(37)]


def one_by_one(model, passages):
    with torch.no_grad():
        return np.concatenate([model.encode_passages(model.tokenize_passages([p["title"]], [p["text"]])).numpy()
                               for p in passages])


def test_length_sorted_encoding_matches_one_by_one_and_keeps_order(model, passages):
    model.train()
    ids, vectors = dense.encode_passages(model, passages, batch_size=8, progress=False)
    assert model.training  # the caller's mode is restored
    model.eval()
    assert ids == [p["id"] for p in passages]
    assert vectors.dtype == np.float32 and vectors.shape == (37, 32)
    np.testing.assert_allclose(vectors, one_by_one(model, passages), atol=1e-5, rtol=1e-4)
    # generator input and small chunks give the same rows
    ids2, vectors2 = dense.encode_passages(model, iter(passages), batch_size=5, chunk_size=11, progress=False)
    assert ids2 == ids
    np.testing.assert_allclose(vectors2, vectors, atol=1e-5, rtol=1e-4)


def test_queries_match_one_by_one(model):
    texts = ["who was the king", "river", "what season does the league of the city start in the mountain"] * 3
    out = dense.encode_queries(model, texts, batch_size=4, progress=False)
    with torch.no_grad():
        ref = np.concatenate([model.encode_queries(model.tokenize_queries([t])).numpy() for t in texts])
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-4)


def test_shard_bounds_cover_every_item_once():
    for total, n in [(0, 3), (10, 3), (37, 4), (5, 8)]:
        bounds = [dense.shard_bounds(total, (i, n)) for i in range(n)]
        assert bounds[0][0] == 0 and bounds[-1][1] == total
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    with pytest.raises(ValueError, match="0 <= i < n"):
        dense.shard_bounds(10, (3, 3))


def test_shards_concatenate_to_the_unsharded_encoding(model, passages, tmp_path):
    ids, vectors = dense.encode_passages(model, passages, batch_size=8, progress=False)
    for i in range(4):  # a stream per worker, as on a cluster; total from count
        out = dense.write_shard(model, iter(passages), tmp_path / "emb", shard=(i, 4), total=len(passages),
                                batch_size=6, progress=False)
        assert out.name == f"shard-{i:05d}-of-00004"
        assert sorted(p.name for p in out.iterdir()) == ["embeddings.npy", "ids.json", "meta.json"]
    meta = json.loads((tmp_path / "emb" / "shard-00003-of-00004" / "meta.json").read_text())
    assert (meta["start"], meta["end"], meta["count"], meta["dim"]) == (27, 37, 10, 32)
    merged_ids, merged = dense.load_shards(tmp_path / "emb")
    assert merged_ids == ids
    np.testing.assert_allclose(merged, vectors, atol=1e-5, rtol=1e-4)
    on_disk_ids, on_disk = dense.merge_shards(tmp_path / "emb", tmp_path / "merged")
    assert on_disk_ids == ids and np.array_equal(np.asarray(on_disk), merged)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary leftovers


def test_float16_shard(model, passages, tmp_path):
    out = dense.write_shard(model, passages, tmp_path, shard=(0, 1), dtype="float16", progress=False)
    assert np.load(out / "embeddings.npy").dtype == np.float16
    with pytest.raises(ValueError, match="dtype"):
        dense.write_shard(model, passages, tmp_path, dtype="int8", progress=False)


def test_missing_or_wrong_shards_are_named(model, passages, tmp_path):
    for i in (0, 2):
        dense.write_shard(model, passages, tmp_path, shard=(i, 3), progress=False)
    with pytest.raises(dense.ShardError, match=r"shard 1 of 3 is missing \(no shard-00001-of-00003/\)"):
        dense.list_shards(tmp_path)
    dense.write_shard(model, passages, tmp_path, shard=(1, 3), progress=False)
    assert len(dense.list_shards(tmp_path)) == 3
    dense.write_shard(model, passages, tmp_path, shard=(0, 2), progress=False)
    with pytest.raises(dense.ShardError, match="different splits"):
        dense.list_shards(tmp_path)
    with pytest.raises(dense.ShardError, match="no embedding shards"):
        dense.list_shards(tmp_path / "nothing")


def test_duplicate_ids_and_wrong_total_are_refused(model, passages, tmp_path):
    dup = passages[:4] + [dict(passages[0])]
    for i in range(2):
        dense.write_shard(model, dup, tmp_path, shard=(i, 2), progress=False)
    with pytest.raises(dense.ShardError, match="'p0' occurs more than once"):
        dense.load_shards(tmp_path)
    with pytest.raises(dense.ShardError, match="more than total=30"):
        dense.write_shard(model, iter(passages), tmp_path / "t", shard=(1, 2), total=30, progress=False)
    with pytest.raises(dense.ShardError, match="ended after 37 passages"):
        dense.write_shard(model, iter(passages), tmp_path / "t", shard=(1, 2), total=40, progress=False)
    assert not (tmp_path / "t").exists() or not list((tmp_path / "t").iterdir())
    with pytest.raises(ValueError, match="needs total="):
        dense.encode_passages(model, iter(passages), shard=(0, 2), progress=False)


# ------------------------------------------------------------------------------------------------------------ FAISS
def random_vectors(n, d, seed):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def brute_force(corpus, queries, k):
    scores = queries @ corpus.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return top, np.take_along_axis(scores, top, axis=1)


def test_flat_search_equals_numpy_brute_force():
    corpus, queries = random_vectors(500, 16, 1), random_vectors(40, 16, 2)
    ids = [f"d{i}" for i in range(500)]
    run = faiss_index.search(faiss_index.build_index(corpus, progress=False), ids, queries, k=10, batch_size=7,
                       qids=[f"q{i}" for i in range(40)], progress=False)
    top, scores = brute_force(corpus, queries, 10)
    assert list(run) == [f"q{i}" for i in range(40)]
    for i, qid in enumerate(run):
        assert [pid for pid, _ in run[qid]] == [ids[j] for j in top[i]]
        np.testing.assert_allclose([s for _, s in run[qid]], scores[i], rtol=1e-5, atol=1e-5)
        assert all(type(s) is float for _, s in run[qid])
        assert [s for _, s in run[qid]] == sorted((s for _, s in run[qid]), reverse=True)


def test_k_larger_than_corpus_gives_short_lists():
    run = faiss_index.search(faiss_index.build_index(random_vectors(3, 8, 0), progress=False), ["a", "b", "c"],
                       random_vectors(2, 8, 1), k=10, progress=False)
    assert list(run) == ["0", "1"] and all(len(r) == 3 for r in run.values())


def recall(run, exact, k):
    return np.mean([len({p for p, _ in run[q][:k]} & {p for p, _ in exact[q][:k]}) / k for q in exact])


def test_hnsw_recall_is_high():
    corpus, queries = random_vectors(2000, 32, 3), random_vectors(50, 32, 4)
    ids = [str(i) for i in range(2000)]
    exact = faiss_index.search(faiss_index.build_index(corpus, progress=False), ids, queries, k=10, progress=False)
    index = faiss_index.build_index(corpus, kind="hnsw", M=16, efSearch=128, efConstruction=100, progress=False)
    assert faiss_index.describe_index(index)["efSearch"] == 128
    assert recall(faiss_index.search(index, ids, queries, k=10, progress=False), exact, 10) >= 0.95


def test_ivfpq_trains_searches_and_refuses_too_few_vectors():
    corpus, queries = random_vectors(1000, 32, 5), random_vectors(30, 32, 6)
    ids = [str(i) for i in range(1000)]
    index = faiss_index.build_index(corpus, kind="ivfpq", nlist=8, m=8, nbits=6, nprobe=8, seed=1, progress=False)
    run = faiss_index.search(index, ids, queries, k=10, progress=False)
    exact = faiss_index.search(faiss_index.build_index(corpus, progress=False), ids, queries, k=10, progress=False)
    assert all(len(r) == 10 for r in run.values()) and recall(run, exact, 10) > 0.2
    again = faiss_index.search(faiss_index.build_index(corpus, kind="ivfpq", nlist=8, m=8, nbits=6, nprobe=8, seed=1,
                                           progress=False), ids, queries, k=10, progress=False)
    assert again == run  # seeded training: same index, same run
    with pytest.raises(ValueError, match=r"at least 256 training vectors .* got 100"):
        faiss_index.build_index(corpus[:100], kind="ivfpq", nlist=8, m=8, nbits=8)
    with pytest.raises(ValueError, match="must divide the dimension 32"):
        faiss_index.build_index(corpus, kind="ivfpq", nlist=8, m=5, nbits=6)
    with pytest.raises(ValueError, match="unknown parameter"):
        faiss_index.build_index(corpus, kind="hnsw", nlist=8)


@pytest.mark.parametrize("kind,params", [("flat", {}), ("hnsw", {"M": 8}),
                                         ("ivfpq", {"nlist": 4, "m": 4, "nbits": 4, "nprobe": 2})])
def test_save_load_round_trip(tmp_path, kind, params):
    corpus, queries = random_vectors(300, 16, 7), random_vectors(5, 16, 8)
    ids = [f"doc-{i}" for i in range(300)]
    index = faiss_index.build_index(corpus.astype(np.float16), kind=kind, progress=False, **params)
    faiss_index.save_index(index, ids, tmp_path / "index")
    loaded, loaded_ids = faiss_index.load_index(tmp_path / "index")
    assert loaded_ids == ids
    assert json.loads((tmp_path / "index" / "index.json").read_text())["kind"] == kind
    assert faiss_index.search(loaded, loaded_ids, queries, k=5, progress=False) == \
        faiss_index.search(index, ids, queries, k=5, progress=False)
    with pytest.raises(ValueError, match="300 vectors but 2 ids"):
        faiss_index.save_index(index, ids[:2], tmp_path / "bad")
    with pytest.raises(FileNotFoundError, match="not a saved index"):
        faiss_index.load_index(tmp_path / "bad")


def test_dense_retrieve_end_to_end(model, passages, tmp_path):
    questions = {"q-a": passages[3]["text"][:40], "q-b": "river city"}
    run = dense.dense_retrieve(model, passages, questions, k=5, batch_size=8, progress=False)
    assert list(run) == ["q-a", "q-b"] and all(len(r) == 5 for r in run.values())
    ids, vectors = dense.encode_passages(model, passages, batch_size=8, progress=False)
    faiss_index.save_index(faiss_index.build_index(vectors, progress=False), ids, tmp_path / "idx")
    dense.write_shard(model, passages, tmp_path / "shards", batch_size=8, progress=False)
    for source in (tmp_path / "idx", tmp_path / "shards"):
        other = dense.dense_retrieve(model, source, questions, k=5, progress=False)
        assert [[p for p, _ in r] for r in other.values()] == [[p for p, _ in r] for r in run.values()]
        np.testing.assert_allclose([[s for _, s in r] for r in other.values()],
                                   [[s for _, s in r] for r in run.values()], rtol=1e-5)


def test_encode_shard_cli_splits_a_corpus_file_over_workers(model, passages, tmp_path):
    """The paper-profile path: a saved model, a corpus file, one CLI call per shard, then the merged shards."""
    from ecqg.core.io import write_jsonl
    from ecqg.retrieval.encode_shard import main

    model.save(tmp_path / "model")
    write_jsonl(tmp_path / "corpus.jsonl.gz", passages)
    for i in (1, 0):  # workers finish in any order
        assert main(["--model", str(tmp_path / "model"), "--corpus", str(tmp_path / "corpus.jsonl.gz"),
                     "--shard", str(i), "2", "--out", str(tmp_path / "emb"), "--batch-size", "8",
                     "--autocast", "none"]) == 0
    ids, vectors = dense.load_shards(tmp_path / "emb")
    ref_ids, ref = dense.encode_passages(model, passages, batch_size=8, progress=False)
    assert ids == ref_ids
    np.testing.assert_allclose(vectors, ref, atol=1e-5, rtol=1e-4)
    with pytest.raises(SystemExit):
        main(["--model", str(tmp_path / "model"), "--corpus", "x", "--shard", "2", "2", "--out", "y"])
    # without --autocast the profile's dpr.encode.autocast applies (here float16, as the paper profile's)
    params = tmp_path / "params.yaml"
    params.write_text((REPO / "params.yaml").read_text().replace("autocast: auto", "autocast: float16"))
    main(["--model", str(tmp_path / "model"), "--corpus", str(tmp_path / "corpus.jsonl.gz"), "--shard", "0", "1",
          "--out", str(tmp_path / "fp16"), "--params", str(params), "--device", "cpu"])
    assert json.loads((tmp_path / "fp16" / "shard-00000-of-00001" / "meta.json").read_text())["autocast"] == "float16"
