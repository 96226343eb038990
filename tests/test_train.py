"""DPR bi-encoder training on a tiny random BERT: loss, GradCache, kill-and-resume, checkpoints, validation."""

import copy
import json
import math

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer, BertConfig

from ecqg.core.errors import DataFormatError
from ecqg.runtime.models import resolve_model
from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig
from ecqg.retrieval.contrastive import ContrastiveStep, contrastive_loss
from ecqg.retrieval.tokens import TrainingTokens, tokenize_in_threads, tokenizer_fingerprint
from ecqg.retrieval.train_data import (Batch, check_records, epoch_batches, make_batch, sample_hard_negatives,
                                       split_records)
from ecqg.retrieval.validation import evaluate_biencoder, ranking_metrics, validation_pool
from ecqg.retrieval.train import (
    TrainConfig, make_accelerator, latest_checkpoint, train_biencoder,
)

WORDS = ("apple banana cherry river mountain ocean guitar piano violin tiger lion eagle castle bridge tower "
         "winter summer autumn copper silver golden doctor farmer sailor rocket planet comet pencil paper marble "
         "forest desert island garden kitchen window").split()


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_biencoder(tokenizer, seed=0, dropout=0.1, shared=False, pooling="cls"):
    """A 2-layer, 32-wide random BERT pair: fast enough to train a few dozen steps in a test."""
    cfg = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=dropout,
                     attention_probs_dropout_prob=dropout)
    torch.manual_seed(seed)
    query = AutoModel.from_config(cfg, attn_implementation="eager")
    passage = query if shared else AutoModel.from_config(cfg, attn_implementation="eager")
    return BiEncoder(query, passage, tokenizer, BiEncoderConfig("tiny-random", shared, pooling, 32, 32))


def records(n=24, hard=2):
    """Question i names word i; its positive is about word i; hard negatives are about other words.

    Hard negatives come from words no question asks about, so no passage is both a positive and a negative.
    """
    out = []
    for i in range(n):
        w = WORDS[i % len(WORDS)]
        others = [WORDS[-1 - (i + j) % 12] for j in range(hard)]
        negs = [{"title": o, "text": f"a {o} was there", "passage_id": f"n{o}"} for o in others]
        out.append({"question": f"where is the {w}", "answers": [w],
                    "positive_ctxs": [{"title": w, "text": f"the {w} is here", "passage_id": f"p{i}"}],
                    "negative_ctxs": [], "hard_negative_ctxs": negs})
    return out


def config(**kw):
    base = dict(lr=3e-3, epochs=50, batch_size=8, hard_negatives=1, warmup_steps=2, max_grad_norm=1.0, seed=3,
                checkpoint_every=None, eval_every=None, eval_batch_size=16, max_steps=8)
    base.update(kw)
    return TrainConfig(**base)


def grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


# ----------------------------------------------------------------------------------------------------------------


def test_loss_decreases_on_an_easy_task(tokenizer, tmp_path):
    # Mean pooling: a random 2-layer BERT's [CLS] needs far more steps to learn to look at the tokens.
    model = tiny_biencoder(tokenizer, dropout=0.0, pooling="mean")
    history = train_biencoder(model, records(), records(8), config(max_steps=30, lr=1e-2, warmup_steps=3), tmp_path,
                              progress=False)
    losses = [h["loss"] for h in history]
    assert len(losses) == 30 and all(h["examples_per_s"] > 0 for h in history)
    assert math.isclose(losses[0], math.log(16), rel_tol=0.2)  # 8 questions x (8 positives + 8 hard negatives)
    assert sum(losses[-5:]) / 5 < 0.25 * sum(losses[:5]) / 5
    assert {"val_avg_rank", "val_top1", "val_top5", "val_top20", "val_nll"} <= set(history[-1])
    assert history[-1]["stopped_by"] == "max_steps"           # the cap that ended it, kept for the report
    assert BiEncoder.load(tmp_path / "model").config.query_max_length == 32
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert [json.loads(line)["loss"] for line in lines] == losses


@pytest.mark.parametrize("shared", [False, True])
def test_grad_cache_gradients_equal_plain_full_batch_gradients(tokenizer, shared):
    accelerator = make_accelerator(config())
    batch = make_batch(records(), list(range(7)), 1, seed=0, epoch=0)
    # Dropout off: plain = one graph over the whole batch (padded once, not per chunk). float64, so that only a real
    # difference, not float32 summation order, could break the tight tolerance.
    model = tiny_biencoder(tokenizer, shared=shared).double().eval()
    loss_plain = ContrastiveStep(model, accelerator, chunk_size=None).backward(batch)
    plain = grads(model)
    model.zero_grad(set_to_none=True)
    loss_cached = ContrastiveStep(model, accelerator, chunk_size=3).backward(batch)
    cached = grads(model)
    assert loss_plain == pytest.approx(loss_cached, abs=1e-12)
    assert plain.keys() == cached.keys() and len(plain) > 10
    for name in plain:
        torch.testing.assert_close(cached[name], plain[name], rtol=1e-9, atol=1e-12, msg=name)


def test_length_buckets_give_the_full_batch_loss_and_gradients(tokenizer):
    """Passages forwarded in length-sorted buckets (each padded to its own longest) == one padded batch."""
    accelerator = make_accelerator(config())
    batch = make_batch(records(), list(range(7)), 1, seed=0, epoch=0)
    batch.texts = [text + " and more" * (i * 5 % 7) for i, text in enumerate(batch.texts)]   # lengths differ
    model = tiny_biencoder(tokenizer).double().eval()
    loss_plain = ContrastiveStep(model, accelerator).backward(batch)
    plain = grads(model)
    model.zero_grad(set_to_none=True)
    loss_buckets = ContrastiveStep(model, accelerator, length_bucket_size=3).backward(batch)
    buckets = grads(model)
    assert loss_plain == pytest.approx(loss_buckets, abs=1e-12)
    assert plain.keys() == buckets.keys() and len(plain) > 10
    for name in plain:
        torch.testing.assert_close(buckets[name], plain[name], rtol=1e-9, atol=1e-12, msg=name)


@pytest.mark.parametrize("chunk,bucket", [(None, None), (3, None), (None, 3)])
def test_tokenised_once_gives_the_tokenizers_tensors_and_the_same_step(tokenizer, chunk, bucket):
    """The trainer's path (the set tokenised once, features gathered and padded per batch) feeds the encoders the
    very tensors the per-batch tokenizer gave, so a step's loss and gradients are bit for bit the same (float32,
    dropout on: the same RNG draws too)."""
    recs = records()
    for i, r in enumerate(recs):                                       # lengths differ, and a passage repeats
        r["positive_ctxs"][0]["text"] += " and more" * (i * 5 % 7)
    tokens = TrainingTokens(tiny_biencoder(tokenizer), recs, threads=2)
    assert len(tokens.passages) == len({(c["title"], c["text"]) for r in recs
                                        for c in r["positive_ctxs"][:1] + r["hard_negative_ctxs"]}) < 3 * len(recs)
    indices = [5, 0, 17, 9, 3, 22, 11]
    plain, ready = make_batch(recs, indices, 2, 4, 1), make_batch(recs, indices, 2, 4, 1, tokens)
    assert ready.query_features is not None and (ready.questions, ready.texts) == (plain.questions, plain.texts)
    accelerator = make_accelerator(config())
    model = tiny_biencoder(tokenizer, dropout=0.2).train()
    step = ContrastiveStep(model, accelerator, chunk_size=chunk, length_bucket_size=bucket)
    for side in ("query", "passage"):
        for a, b in zip(step._tokenized(side, plain, chunk), step._tokenized(side, ready, chunk), strict=True):
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    results = []
    for batch in (plain, ready):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(5)
        results.append((step.backward(batch), grads(model)))
    (loss_a, grads_a), (loss_b, grads_b) = results
    assert loss_a == loss_b and grads_a.keys() == grads_b.keys()
    assert all(torch.equal(grads_a[n], grads_b[n]) for n in grads_a)


def test_slices_tokenised_in_threads_pack_into_the_one_store(tokenizer):
    model = tiny_biencoder(tokenizer)
    texts = [r["positive_ctxs"][0]["text"] + " more" * (i % 5) for i, r in enumerate(records(23))]
    titles = [f"t{i}" for i in range(23)]
    whole = tokenize_in_threads(model.passage_features, [titles, texts], threads=1, slice_size=100)
    sliced = tokenize_in_threads(model.passage_features, [titles, texts], threads=2, slice_size=5)
    expected = model.passage_features(titles, texts)
    for store in (whole, sliced):
        assert len(store) == 23 and store.flat["token_type_ids"].dtype == np.int8
        got = store.features(range(23))
        assert all(list(map(int, g[k])) == e[k] for g, e in zip(got, expected, strict=True) for k in e)


def test_tokenizer_fingerprint_sees_the_vocabulary_not_the_call_state(tokenizer):
    before = tokenizer_fingerprint(tokenizer)
    tokenizer(["a b"], ["c d e f g"], truncation="only_second", max_length=7, padding="max_length")
    assert tokenizer_fingerprint(tokenizer) == before
    grown = copy.deepcopy(tokenizer)                                   # the fixture is shared by the module
    grown.add_tokens(["zzqx"])
    assert tokenizer_fingerprint(grown) != before


def _varied_records(n=24, hard=2):
    recs = records(n, hard)
    for i, r in enumerate(recs):                                       # lengths differ, a record has no negative
        r["positive_ctxs"][0]["text"] += " and more" * (i * 5 % 7)
    recs[5]["hard_negative_ctxs"] = []
    return recs


@pytest.mark.parametrize("side", ["right", "left"])
def test_store_rows_pad_to_the_tensors_of_pad_features(tokenizer, side):
    from ecqg.retrieval.retriever import pad_features

    tokens = TrainingTokens(tiny_biencoder(tokenizer), _varied_records(), threads=1)
    rows = [7, 0, 3, 3, 11]
    want = pad_features(tokens.passages.features(rows), 0, side)
    got = tokens.passages.padded(rows, 0, side)
    assert list(got) == list(want) and all(torch.equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("chunk,bucket", [(None, None), (3, None), (None, 4)])
@pytest.mark.parametrize("world,rank", [(1, 0), (2, 1)])
def test_the_loader_builds_the_tensors_the_step_built(tokenizer, chunk, bucket, world, rank):
    """Issue 58 item 2: a loader worker's inputs (store rows gathered and padded in numpy, the shares of every rank
    known without a collective) are the very tensors the step made from the batch of the same indices."""
    from ecqg.retrieval.loader import StepPlan

    recs = _varied_records()
    model = tiny_biencoder(tokenizer)
    tokens = TrainingTokens(model, recs, threads=1)
    plan = StepPlan(tokens, batch_size=10, seed=4, drop_last=True, hard_negatives=2, rank=rank, world=world,
                    chunk_size=chunk, bucket_size=bucket, pad_id=tokenizer.pad_token_id, side="right")
    step = ContrastiveStep(model, make_accelerator(config()), chunk_size=chunk, length_bucket_size=bucket)
    for epoch in (0, 3):
        indices = plan.batches(epoch)[1]
        assert indices.tolist() == epoch_batches(len(recs), 10, 4, epoch)[1].tolist()
        ready = plan.inputs(epoch, indices)
        shares = np.array_split(indices, world)
        batches = [make_batch(recs, share.tolist(), 2, 4, epoch, tokens) for share in shares]
        expected = step.inputs(batches[rank])
        assert ready.query_sizes == [len(b.questions) for b in batches]
        assert ready.passage_sizes == [len(b.texts) for b in batches]
        assert ready.missing_hard_negatives == sum(b.missing_hard_negatives for b in batches)
        assert ready.examples == 10
        for mine, theirs in ((ready.queries, expected.queries), (ready.passages, expected.passages)):
            assert len(mine) == len(theirs)
            for a, b in zip(mine, theirs):
                assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
        assert (ready.passage_order is None) == (expected.passage_order is None)
        if ready.passage_order is not None:
            assert torch.equal(ready.passage_order, expected.passage_order)


def test_workers_and_the_token_cache_train_the_run_of_the_loop(tokenizer, tmp_path):
    """Steps built by two DataLoader workers from the Arrow token cache train exactly the run of steps built in the
    training process from tokens in memory (CPU: same losses, gradient norms and weights, bit for bit); a second run
    on the same records reads the cache instead of tokenising again."""
    recs = _varied_records(40, 3)
    cfg = dict(max_steps=10, length_bucket_size=4, hard_negatives=2, eval_every=5)
    runs = {}
    for name, kw, cache in (("loop", dict(loader_workers=0), None),
                            ("workers", dict(loader_workers=2), tmp_path / "tokens"),
                            ("again", dict(loader_workers=1), tmp_path / "tokens")):
        model = tiny_biencoder(tokenizer, dropout=0.1)
        history = train_biencoder(model, recs, records(8), config(**cfg, **kw), tmp_path / name, progress=False,
                                  tokens_cache=cache)
        runs[name] = ([{k: v for k, v in h.items() if k not in ("examples_per_s", "step_seconds")} for h in history],
                      model.state_dict())
        if name == "workers":
            [written] = (tmp_path / "tokens").iterdir()
            stamp = (written / "passages.arrow").stat().st_mtime_ns
    assert all(isinstance(h["loss"], float) and isinstance(h["grad_norm"], float) for h in runs["loop"][0])
    for name in ("workers", "again"):
        assert runs[name][0] == runs["loop"][0], name
        assert all(torch.equal(runs[name][1][k], v) for k, v in runs["loop"][1].items()), name
    assert (written / "passages.arrow").stat().st_mtime_ns == stamp and len(list((tmp_path / "tokens").iterdir())) == 1


def test_a_step_reads_the_device_only_at_log_steps(tokenizer, tmp_path, monkeypatch):
    """Issue 58 item 2: no per-step host sync in the project's code; the losses and gradient norms are read back in
    one go at each log step (and where a checkpoint, a validation or a callback reads them). (torch's CPU AdamW
    reads its step counters with ``.item()``: CPU tensors, no device; a GPU runs the fused kernel, which does not.)"""
    import os
    import sys
    from pathlib import Path

    import ecqg

    package = str(Path(ecqg.__file__).resolve().parent) + os.sep
    calls = {"item": 0, "tolist": 0}
    item, tolist = torch.Tensor.item, torch.Tensor.tolist

    def counted(name, fn):
        def wrapper(self, *args, **kwargs):
            if str(Path(sys._getframe(1).f_code.co_filename).resolve()).startswith(package):
                calls[name] += 1
            return fn(self, *args, **kwargs)
        return wrapper

    model = tiny_biencoder(tokenizer)
    monkeypatch.setattr(torch.Tensor, "item", counted("item", item))
    monkeypatch.setattr(torch.Tensor, "tolist", counted("tolist", tolist))
    history = train_biencoder(model, records(), None, config(max_steps=8, log_every=4), tmp_path, progress=False)
    assert calls == {"item": 0, "tolist": 4}            # steps 4 and 8: one read of the losses, one of the norms
    assert [h["step"] for h in history] == list(range(1, 9)) and all(isinstance(h["loss"], float) for h in history)


class _Encoder(torch.nn.Module):
    def __init__(self, layers, hidden, heads, parameters):
        super().__init__()
        from types import SimpleNamespace

        self.config = SimpleNamespace(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads)
        self.weight = torch.nn.Parameter(torch.empty(parameters, dtype=torch.int8), requires_grad=False)
        self.count = parameters


class _BertBase(torch.nn.Module):
    """The shapes of a bert-base bi-encoder (2 x 109.5M parameters) without its weights."""

    def __init__(self):
        super().__init__()
        self.query_encoder = _Encoder(12, 768, 12, 0)
        self.passage_encoder = _Encoder(12, 768, 12, 0)

    def parameters(self, recurse=True):
        from types import SimpleNamespace

        return iter([SimpleNamespace(numel=lambda: 219_000_000, requires_grad=True)])


def test_grad_cache_auto_by_the_memory_estimate():
    """``grad_cache_chunk_size: auto``: the paper's 128 questions per device (8 GPUs) fit an 80 GB card at the longest
    passages without GradCache; 1024 on one GPU get the largest power-of-two chunk that fits; a CPU never chunks. The
    estimate is on the safe side of the committed H100 measurement (32.7 GB whole, 11.5 GB at chunk 64)."""
    from ecqg.retrieval import train_memory as tm

    model, h100 = _BertBase(), 85_029_158_912              # torch's total_memory of an H100 80GB
    eight = tm.Shape(queries=128, passages=256, query_length=64, passage_length=256)
    assert tm.resolve_chunk(model, eight, h100)[0] is None
    one = tm.Shape(queries=1024, passages=2048, query_length=64, passage_length=256)
    chunk, why = tm.resolve_chunk(model, one, h100)
    assert chunk == 256 and "GradCache in chunks of 256" in why
    assert tm.step_bytes(model, one, chunk) <= tm.FILL * h100 < tm.step_bytes(model, one, 2 * chunk)
    assert tm.resolve_chunk(model, tm.Shape(128, 256, 64, 256), 42_000_000_000)[0] == 128    # an A100 40GB
    assert tm.resolve_chunk(model, one, None)[0] is None
    measured = tm.Shape(queries=128, passages=256, query_length=32, passage_length=160)
    assert 32.7e9 <= tm.step_bytes(model, measured) <= 1.25 * 32.7e9
    assert 11.5e9 <= tm.step_bytes(model, measured, 64) <= 1.25 * 11.5e9


def test_grad_cache_chunk_size_auto_trains_on_a_cpu(tokenizer, tmp_path):
    history = train_biencoder(tiny_biencoder(tokenizer), records(), None, config(max_steps=2,
                              grad_cache_chunk_size="auto"), tmp_path, progress=False)
    assert len(history) == 2
    with pytest.raises(ValueError, match="grad_cache_chunk_size"):
        TrainConfig(grad_cache_chunk_size="sometimes")


def test_grad_cache_restores_dropout_masks(tokenizer):
    """Dropout on: GradCache == one graph over the same chunks, because step 3 replays step 1's RNG states."""
    accelerator = make_accelerator(config())
    batch = make_batch(records(), list(range(7)), 1, seed=0, epoch=0)
    model = tiny_biencoder(tokenizer, dropout=0.3).double().train()
    step = ContrastiveStep(model, accelerator, chunk_size=3)
    torch.manual_seed(11)
    q = torch.cat([model.encode_queries(t) for t in step._tokenized("query", batch, 3)])
    p = torch.cat([model.encode_passages(t) for t in step._tokenized("passage", batch, 3)])
    reference_loss = contrastive_loss(q, p, [len(q)], [len(p)])
    reference_loss.backward()
    reference = grads(model)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(11)
    assert step.backward(batch) == pytest.approx(reference_loss.item(), abs=1e-12)
    cached = grads(model)
    for name in reference:
        torch.testing.assert_close(cached[name], reference[name], rtol=1e-9, atol=1e-12, msg=name)


def test_killed_run_resumes_to_the_same_weights_and_history(tokenizer, tmp_path):
    cfg = config(max_steps=9, checkpoint_every=2, keep_checkpoints=2, eval_every=4, grad_cache_chunk_size=4)
    data, held = records(), records(8)
    straight = tiny_biencoder(tokenizer)
    expected = train_biencoder(straight, data, held, cfg, tmp_path / "a", progress=False)

    def kill_after_step_5(entry):
        if entry["step"] == 5:
            raise KeyboardInterrupt("simulated kill")

    with pytest.raises(KeyboardInterrupt):
        train_biencoder(tiny_biencoder(tokenizer), data, held, cfg, tmp_path / "b", progress=False,
                        callback=kill_after_step_5)
    checkpoints = tmp_path / "b" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["checkpoint-00000002", "checkpoint-00000004"]
    resumed_model = tiny_biencoder(tokenizer, seed=99)  # different init: the checkpoint must overwrite it
    resumed = train_biencoder(resumed_model, data, held, cfg, tmp_path / "b", progress=False)
    assert [h["step"] for h in resumed] == list(range(1, 10))
    assert [h["loss"] for h in resumed] == pytest.approx([h["loss"] for h in expected], rel=1e-5)
    assert resumed[7]["val_avg_rank"] == pytest.approx(expected[7]["val_avg_rank"])
    for (name, a), (_, b) in zip(straight.named_parameters(), resumed_model.named_parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)


def test_resume_refuses_a_changed_config(tokenizer, tmp_path):
    data = records()
    train_biencoder(tiny_biencoder(tokenizer), data, None, config(max_steps=2, checkpoint_every=2), tmp_path,
                    progress=False)
    with pytest.raises(ValueError, match="lr"):
        train_biencoder(tiny_biencoder(tokenizer), data, None, config(max_steps=2, checkpoint_every=2, lr=1e-4),
                        tmp_path, progress=False)


def test_only_complete_checkpoints_are_picked_up(tokenizer, tmp_path):
    train_biencoder(tiny_biencoder(tokenizer), records(), None, config(max_steps=4, checkpoint_every=2), tmp_path,
                    progress=True)  # the tqdm path runs too
    directory = tmp_path / "checkpoints"
    good = directory / "checkpoint-00000004"
    assert latest_checkpoint(directory) == good
    assert {p.name for p in good.iterdir()} == {"model", "optimizer.pt", "scheduler.pt", "rng-0.pt", "state.json"}
    partial = directory / ".checkpoint-00000006.tmp"          # a save killed before its rename
    partial.mkdir()
    (partial / "state.json").write_text("{}")
    (directory / "checkpoint-00000008").mkdir()                # no state.json: never complete
    assert latest_checkpoint(directory) == good
    history = train_biencoder(tiny_biencoder(tokenizer), records(), None, config(max_steps=4, checkpoint_every=2),
                              tmp_path, progress=False)
    assert [h["step"] for h in history] == [1, 2, 3, 4]          # resumed at 4: nothing left to train
    assert latest_checkpoint(tmp_path / "nowhere") is None


def test_ranking_metrics_on_a_hand_made_case():
    scores = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 1.0], [1.0, 2.0, 3.0]])
    positives = torch.tensor([2, 1, 0])
    m = ranking_metrics(scores, positives)
    assert m["val_avg_rank"] == pytest.approx((2 + 1 + 3) / 3)
    assert m["val_top1"] == pytest.approx(1 / 3) and m["val_top5"] == 1.0 and m["val_top20"] == 1.0
    nll = -torch.log_softmax(scores, 1)[torch.arange(3), positives].mean().item()
    assert m["val_nll"] == pytest.approx(nll)
    assert (m["val_questions"], m["val_pool"]) == (3, 3)


def test_validation_pool_deduplicates_and_points_at_positives(tokenizer):
    data = records(4, hard=2)  # positives p0..p3; hard negatives (window, kitchen), (kitchen, garden), ...
    data[3]["hard_negative_ctxs"].append(dict(data[0]["positive_ctxs"][0]))  # a positive elsewhere is a negative
    questions, pool, positives = validation_pool(data)
    assert [c["passage_id"] for c in pool] == ["p0", "p1", "p2", "p3", "nwindow", "nkitchen", "ngarden", "nisland",
                                               "ndesert"]
    assert positives == [0, 1, 2, 3] and questions[2] == "where is the cherry"
    metrics = evaluate_biencoder(tiny_biencoder(tokenizer), data, batch_size=3)
    assert metrics["val_pool"] == 9 and 1 <= metrics["val_avg_rank"] <= 9


def test_record_without_positive_is_named(tokenizer, tmp_path):
    data = records(10)
    data[3]["positive_ctxs"] = []
    with pytest.raises(DataFormatError, match=r"record 4 \(question 'where is the river'\).*positive_ctxs"):
        train_biencoder(tiny_biencoder(tokenizer), data, None, config(), tmp_path, progress=False)
    with pytest.raises(DataFormatError, match="validation records, record 1"):
        check_records([{"question": "q", "positive_ctxs": [{"title": "t"}]}], "validation records")


def test_hard_negative_sampling_is_seeded_and_falls_back_to_fewer():
    rec = records(1, hard=6)[0]
    draws = {tuple(c["passage_id"] for c in sample_hard_negatives(rec, 2, seed=1, epoch=e, index=0)) for e in range(8)}
    assert len(draws) > 1                                                     # changes with the epoch ...
    assert sample_hard_negatives(rec, 2, 1, 3, 0) == sample_hard_negatives(rec, 2, 1, 3, 0)  # ... but is seeded
    assert len(sample_hard_negatives(rec, 10, 1, 0, 0)) == 6
    short = records(3, hard=1)
    short[1]["hard_negative_ctxs"] = []
    batch = make_batch(short, [0, 1, 2], 2, seed=0, epoch=0)  # wants 2 each; has 1, 0, 1
    assert isinstance(batch, Batch) and len(batch.texts) == 3 + 1 + 0 + 1 and batch.missing_hard_negatives == 4
    assert batch.texts[:3] == [r["positive_ctxs"][0]["text"] for r in short]


def test_data_order_and_split_are_deterministic():
    a, b = epoch_batches(20, 6, seed=4, epoch=1), epoch_batches(20, 6, seed=4, epoch=1)
    assert [x.tolist() for x in a] == [x.tolist() for x in b] and len(a) == 3
    assert [x.tolist() for x in a] != [x.tolist() for x in epoch_batches(20, 6, seed=4, epoch=2)]
    assert len(epoch_batches(20, 6, 4, 1, drop_last=False)[-1]) == 2
    data = records(30)
    train, held = split_records(data, 0.2, seed=5)
    assert (len(train), len(held)) == (24, 6) and split_records(data, 0.2, seed=5) == (train, held)
    assert {r["question"] for r in train}.isdisjoint(r["question"] for r in held)
    assert [data.index(r) for r in held] == sorted(data.index(r) for r in held)


def test_config_is_validated():
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(batch_size=0)
    with pytest.raises(ValueError, match="unknown TrainConfig keys"):
        TrainConfig.from_dict({"learning_rate": 1e-5})


# ----------------------------------------------------------------------------------------------------------------
# two processes (gloo on CPU): the test file doubles as the torchrun worker


def _distributed_worker(out_dir):
    """Per rank: float64 gradients of its share of a global batch (GradCache, then summed), and a short training run."""
    import os
    from pathlib import Path

    from ecqg.retrieval.contrastive import GradientReducer, all_reduce_gradients

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
    accelerator = make_accelerator(config())
    assert accelerator.num_processes == 2, accelerator.state
    model = tiny_biencoder(tokenizer, dropout=0.0).double()
    share = [[0, 1, 2, 3], [4, 5, 6]][accelerator.process_index]          # uneven on purpose
    loss = ContrastiveStep(model, accelerator, chunk_size=2).backward(make_batch(records(), share, 2, 0, 0))
    all_reduce_gradients([p for p in model.parameters()], accelerator)
    if accelerator.is_main_process:
        torch.save({"loss": loss, "grads": grads(model)}, Path(out_dir) / "grads.pt")
    # the reducer that overlaps the sum with the last backward pass gives the same sums, in every step layout
    for chunk, bucket in ((2, None), (None, None), (None, 3)):
        reference = tiny_biencoder(tokenizer, dropout=0.0).double()
        batch = make_batch(records(), share, 2, 0, 0)
        ContrastiveStep(reference, accelerator, chunk_size=chunk, length_bucket_size=bucket).backward(batch)
        all_reduce_gradients(list(reference.parameters()), accelerator)
        overlapped = tiny_biencoder(tokenizer, dropout=0.0).double()
        reducer = GradientReducer(list(overlapped.parameters()), accelerator, bucket_bytes=20_000)
        assert len(reducer.buckets) > 3
        ContrastiveStep(overlapped, accelerator, chunk_size=chunk, length_bucket_size=bucket,
                        reducer=reducer).backward(batch)
        reducer.finish()
        reducer.close()
        assert grads(overlapped).keys() == grads(reference).keys()
        assert all(torch.equal(grads(overlapped)[n], g) for n, g in grads(reference).items()), (chunk, bucket)
    # BERT's pooler never gets a gradient: kept (as retrievers did before), the first bucket never completes and
    # nothing is launched while the backward pass runs; dropped (as a Retriever now does), every bucket is
    from transformers.models.bert.modeling_bert import BertPooler

    during = {}
    for pooler in (True, False):
        model = tiny_biencoder(tokenizer, dropout=0.0).double()
        if pooler:
            for encoder in (model.query_encoder, model.passage_encoder):
                encoder.pooler = BertPooler(encoder.config).double()
        reducer = GradientReducer(list(model.parameters()), accelerator, bucket_bytes=20_000)
        ContrastiveStep(model, accelerator, chunk_size=None, reducer=reducer).backward(make_batch(records(), share,
                                                                                                  2, 0, 0))
        during[str(pooler)] = [len(reducer.launched), len(reducer.buckets)]
        reducer.finish()
        reducer.close()
    if accelerator.is_main_process:
        (Path(out_dir) / "buckets.json").write_text(json.dumps(during))
    cfg = config(max_steps=3, checkpoint_every=3, grad_cache_chunk_size=3, eval_every=3)
    train_biencoder(tiny_biencoder(tokenizer, dropout=0.0), records(), records(8), cfg, Path(out_dir) / "run",
                    progress=False, tokens_cache=Path(out_dir) / "tokens")
    assert os.environ["WORLD_SIZE"] == "2"


def test_two_processes_match_one(tokenizer, tmp_path):
    """Gathered negatives + summed gradients: two processes compute exactly the single-process global step."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, ACCELERATE_USE_CPU="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           __file__, "--worker", str(tmp_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]

    model = tiny_biencoder(tokenizer, dropout=0.0).double()
    accelerator = make_accelerator(config())
    loss = ContrastiveStep(model, accelerator, chunk_size=None).backward(make_batch(records(), range(7), 2, 0, 0))
    saved = torch.load(tmp_path / "grads.pt", weights_only=True)
    assert saved["loss"] == pytest.approx(loss, abs=1e-12)
    for name, grad in grads(model).items():
        torch.testing.assert_close(saved["grads"][name], grad, rtol=1e-9, atol=1e-12, msg=name)

    single = train_biencoder(tiny_biencoder(tokenizer, dropout=0.0), records(), records(8),
                             config(max_steps=3, grad_cache_chunk_size=3, eval_every=3), tmp_path / "single",
                             progress=False, tokens_cache=tmp_path / "single_tokens")
    run = tmp_path / "run"
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert [h["loss"] for h in history] == pytest.approx([h["loss"] for h in single], abs=1e-5)
    # validation: each process encodes a share, the metrics are one process's
    for key in ("val_top1", "val_top5", "val_avg_rank", "val_pool"):
        assert history[-1][key] == pytest.approx(single[-1][key], abs=1e-6), key
    checkpoint = run / "checkpoints" / "checkpoint-00000003"
    assert {p.name for p in checkpoint.glob("rng-*.pt")} == {"rng-0.pt", "rng-1.pt"}
    # every rank its own dropout stream
    states = [torch.load(checkpoint / f"rng-{r}.pt", weights_only=True)["torch"] for r in (0, 1)]
    assert not torch.equal(states[0], states[1])
    # the training tokens, tokenised a share per process and joined by rank 0, are the ids one process writes
    (two,), (one,) = [list(d.iterdir()) for d in (tmp_path / "tokens", tmp_path / "single_tokens")]
    for name in ("questions.arrow", "passages.arrow"):
        assert (two / name).read_bytes() == (one / name).read_bytes(), name
    assert not list((tmp_path / "tokens").glob(".*part*"))
    buckets = json.loads((tmp_path / "buckets.json").read_text())
    assert buckets["True"][0] == 0 and buckets["False"] == [buckets["False"][1]] * 2 and buckets["False"][1] > 3


if __name__ == "__main__" and "--worker" in __import__("sys").argv:
    import sys as _sys

    _distributed_worker(_sys.argv[_sys.argv.index("--worker") + 1])


def test_history_saved_with_a_model_has_no_timings():
    """Timings vary between identical runs; a model's history (a DVC-tracked output) must not, or a bitwise-identical
    retrain would rerun every stage downstream."""
    from ecqg.retrieval.train import TIMING_KEYS, without_timings

    history = [{"step": 1, "loss": 0.5, "examples_per_s": 9.1, "step_seconds": 3.5}, {"step": 2, "val_top1": 0.4}]
    assert without_timings(history) == [{"step": 1, "loss": 0.5}, {"step": 2, "val_top1": 0.4}]
    assert set(TIMING_KEYS) == {"examples_per_s", "step_seconds"}
