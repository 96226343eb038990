"""The heavy inference steps split over two torchrun processes (gloo on CPU) give what one process gives, bit for
bit: corpus encoding, question sampling and the reader (ecqg/runtime/parallel.py)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForQuestionAnswering, BertModel

from ecqg.runtime import parallel
from ecqg.retrieval import dense
from ecqg.retrieval.tokenized_corpus import tokenize_corpus
from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig

WORDS = ("river city king war music league film island church school army party bridge station novel "
         "election museum mountain company season").split()


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Job directories go to ./outputs/parallel: run where that is a scratch directory. One thread here as in each
    worker (torchrun's default): a CPU matmul splits its sums by thread count, 2e-9 apart otherwise."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tmp_path
    torch.set_num_threads(threads)


def _texts(n, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 50)))) for _ in range(n)]


@pytest.mark.parametrize("total,unit,world", [(0, 4, 2), (10, 4, 2), (37, 5, 3), (3, 8, 2), (100, 7, 8)])
def test_blocks_are_whole_units_that_cover_every_item_once(total, unit, world):
    blocks = [parallel.block(total, unit, rank, world) for rank in range(world)]
    assert blocks[0][0] == 0 and blocks[-1][1] == total
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
    assert all(lo % unit == 0 for lo, hi in blocks if hi > lo)        # every block starts at a unit boundary
    units = [-(-(hi - lo) // unit) for lo, hi in blocks]
    assert max(units) - min(units) <= 1
    with pytest.raises(ValueError, match="0 <= rank < world"):
        parallel.block(10, 2, 2, 2)


def test_two_processes_encode_the_corpus_as_one(tokenizer, workdir):
    config = BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                        vocab_size=tokenizer.vocab_size, max_position_embeddings=128)
    torch.manual_seed(0)
    model = BiEncoder(BertModel(config), BertModel(config), tokenizer,
                      BiEncoderConfig("tiny-random", passage_max_length=48, query_max_length=16))
    corpus = workdir / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"p{i}", "title": f"title {i}", "text": t, "source": "test"}) + "\n"
                              for i, t in enumerate(_texts(37))), encoding="utf-8")
    kwargs = dict(batch_size=4, chunk_size=5, progress=False)
    one_ids, one = dense.encode_corpus(model, corpus, workdir / "one", 37, **kwargs)
    two_ids, two = dense.encode_corpus(model, corpus, workdir / "two", 37, processes=2, **kwargs)
    assert two_ids == one_ids == [f"p{i}" for i in range(37)]
    assert two.shape == (37, 32) and np.array_equal(np.asarray(two), np.asarray(one))
    # the workers start at their rows of the tokenised corpus instead of reading the text up to them
    tokenize_corpus(corpus, tokenizer, 48, workdir / "tokenized", num_proc=1, progress=False)
    tok_ids, tok = dense.encode_corpus(model, corpus, workdir / "tok", 37, processes=2,
                                       tokenized=workdir / "tokenized", **kwargs)
    assert tok_ids == one_ids and np.array_equal(np.asarray(tok), np.asarray(one))
    assert not any((workdir / "outputs" / "parallel").iterdir())      # the job directory is gone


def _qg_inputs(n):
    texts = _texts(n, seed=1)
    return [{"passage_id": f"p{i}", "title": f"title {i}", "text": t, "entity": t.split()[0],
             "entity_start": 0, "entity_label": "X"} for i, t in enumerate(texts)]


def _trained_tiny_bart(tokenizer, tmp_path):
    """A tiny BART taught for a few steps to write ``answer <sep> question?``, so that most samples parse and the
    comparison covers real records, not only drop counts."""
    from ecqg import qg
    from tests.test_qg import tiny_bart

    model = tiny_bart(tokenizer, width=32)
    inputs = _qg_inputs(8)
    sources = [qg.format_source(i["title"], i["text"], i["entity"], 0, "markers") for i in inputs]
    targets = [f"{i['entity']} <sep> which {w} is the {i['entity']} of the city?" for i, w in zip(inputs, WORDS)]
    enc = tokenizer(sources, padding=True, truncation=True, max_length=64, return_tensors="pt")
    labels = tokenizer(targets, padding=True, return_tensors="pt")["input_ids"]
    labels[labels == tokenizer.pad_token_id] = -100
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        optimizer.zero_grad()
        model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels).loss.backward()
        optimizer.step()
    qg.save_generator(model, tokenizer, tmp_path / "bart")
    return qg.load_generator(tmp_path / "bart")


def test_two_processes_sample_the_questions_of_one(tokenizer, workdir):
    from ecqg.stages import question_generation
    from tests.test_qg import sampling_settings

    model, tok = _trained_tiny_bart(tokenizer, workdir)
    qg = sampling_settings(entity_marking="markers", entity_placeholder=None, source_max_length=64, window_words=None,
                           generate=dict(top_k=10, top_p=0.9, samples=2, batch_size=3, max_new_tokens=16,
                                         autocast=None))
    inputs = _qg_inputs(11)                                  # 4 batches of 3: ranks get 2 and 2, the last short
    one = question_generation.generate(model, tok, "con", inputs, qg, 5, "test", progress=False, processes=1)
    two = question_generation.generate(model, tok, "con", inputs, qg, 5, "test", progress=False, processes=2)
    assert one[1]["generated"] == 22 and len(one[0]) >= 5, one[1]   # most samples parse
    assert two == one
    # journalled by two processes (one file each), then taken whole by one: the same batches, whatever the split
    journalled = question_generation.generate(model, tok, "con", inputs, qg, 5, "test", progress=False,
                                              resumable=True, processes=2)
    [journal] = (workdir / "outputs" / "checkpoints" / "qg" / "sampling").iterdir()
    assert sorted(p.name for p in journal.iterdir()) == ["rank-00000.jsonl", "rank-00001.jsonl"]
    assert journalled == one
    model.generate = None                                            # a model that can no longer sample anything
    assert question_generation.generate(model, tok, "con", inputs, qg, 5, "test", progress=False,
                                        resumable=True, processes=1) == one


def test_two_processes_read_like_one(tokenizer, workdir):
    from ecqg.filtering.reader import predict_in_processes

    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    model = BertForQuestionAnswering(config)
    contexts = _texts(6, seed=2)
    passages = {f"p{i}": {"id": f"p{i}", "title": "", "text": " ".join([c] * 3)} for i, c in enumerate(contexts)}
    questions = [{"id": f"q{i}", "question": f"which {WORDS[i % len(WORDS)]}?", "passage_id": f"p{i % 6}"}
                 for i in range(19)]
    settings = dict(max_length=48, stride=16, batch_size=4, chunk_size=3)
    one = predict_in_processes(model, tokenizer, questions, passages, processes=1, progress=False, **settings)
    two = predict_in_processes(model, tokenizer, questions, passages, processes=2, progress=False, **settings)
    assert list(two) == list(one) == [q["id"] for q in questions]
    assert two == one
    assert len({p["span_text"] for p in one.values()}) > 3     # a random reader, but not a constant one


def test_a_failing_process_fails_the_step_with_its_output(workdir):
    with parallel.job_directory("read") as job_dir:
        with pytest.raises(RuntimeError, match=r"(?s)read: torchrun with 2 processes exited with code 1.*cannot load model"):
            parallel.run("read", {"questions": [{"id": "a", "question": "q?", "context": "c"}] * 4,
                                  "settings": {"chunk_size": 1}}, job_dir, 2)     # no saved reader in the job


def _dpr_records(n=24):
    """Question i asks about word i; its positive is about it, its hard negative about a word nobody asks about."""
    out = []
    for i in range(n):
        w, other = WORDS[i % 12], WORDS[12 + i % 8]
        out.append({"question": f"where is the {w}", "answers": [w], "negative_ctxs": [],
                    "positive_ctxs": [{"title": w, "text": f"the {w} is here", "passage_id": f"p{i}"}],
                    "hard_negative_ctxs": [{"title": other, "text": f"a {other} was there", "passage_id": f"n{i}"}]})
    return out


def test_two_processes_run_a_training_stage_as_one(tokenizer, workdir):
    """Stage 05's pre-training with ``processes: 2`` (two torchrun workers, gloo, each half of every global batch)
    trains what one process trains: the same losses step by step (to 2e-5 relative: float32 sums taken in another
    order drift by ~1e-5 over five steps on AVX-512 CPUs) and the same weights. The model is dropout-free: with dropout each process draws its own masks, so two
    processes train an equally good but not the same model. Weights: all but 1 in 10,000 elements to 1e-5, every one
    within one Adam step (lr)."""
    from ecqg.core import config, settings
    from ecqg.data.dpr import write_dpr_retriever_json
    from ecqg.stages import dpr_training as stage
    from ecqg.core.variants import set_path

    base = workdir / "tiny-bert"
    cfg = BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                     vocab_size=tokenizer.vocab_size, max_position_embeddings=64, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(base)
    tokenizer.save_pretrained(base)
    params = config.preset("mini", Path(__file__).resolve().parents[1] / "params")
    write_dpr_retriever_json(set_path("uncon", 7, params["qg"]["generate"]["per_replicate"]),
                             _dpr_records())   # replicate 7's own set
    params["dpr"].update(base_model=str(base), query_max_length=16, passage_max_length=32)
    params["dpr"]["pretrain"].update(lr=3e-3, batch_size=8, epochs=3, max_steps=5, heldout=4, mixed_precision="no",
                                     length_bucket_size=None, checkpoint_every=2, eval_every=None)
    runs = {}
    for n in (1, 2):
        result = stage.train_replicate("uncon", settings.of({**params, "processes": n}), 7, "pretrain",
                                       progress=False)
        model = stage.pretrained_dir("uncon", 7)
        runs[n] = ([h["loss"] for h in result["history"] if "loss" in h],
                   BiEncoder.load(model).query_encoder.state_dict())
        model.rename(workdir / f"model-{n}")
    assert len(runs[1][0]) == 5 and runs[2][0] == pytest.approx(runs[1][0], rel=2e-5, abs=0)
    diff = torch.cat([(runs[2][1][name] - weight).abs().flatten() for name, weight in runs[1][1].items()])
    # Adam divides by the root of the squared gradients: where a gradient is ~0, float32 sums taken in another order
    # can flip its sign and move that weight by up to one step of lr; everywhere else the weights agree to 1e-5
    assert float((diff > 1e-5).float().mean()) < 1e-4 and float(diff.max()) < 3e-3
    with pytest.raises(ValueError, match="does not split over processes: 3"):
        stage.train_replicate("uncon", settings.of({**params, "processes": 3}), 7, "pretrain")
