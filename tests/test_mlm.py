"""The retrieval-naive base's build (``python -m ecqg.mlm.build``) on a tiny corpus: the masked-LM loss falls, a build
killed mid-way resumes from its last complete checkpoint, another recipe in the same work folder is refused, and the
result loads as a BERT wherever a base model is accepted."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--limit", "80", "--layers", "2", "--hidden", "64", "--vocab-size", "600", "--max-positions", "128",
        "--batch-size", "16", "--lr", "3e-3", "--warmup-ratio", "0.1", "--checkpoint-every", "10", "--quiet",
        "--mixed-precision", "no"]


def _build(out: Path, work: Path, steps: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ecqg.mlm.build", "--out", str(out), "--work", str(work),
                             "--corpus", str(ROOT / "data" / "corpus.jsonl.gz"), "--steps", str(steps), *TINY, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A build of 60 steps, killed once after its first checkpoint and run again to the end."""
    root = tmp_path_factory.mktemp("mlm")
    out, work = root / "base", root / "work"
    first = _build(out, work, 60)
    deadline = time.time() + 300
    while not (work / "checkpoints" / "checkpoint-20" / "trainer_state.json").is_file():
        assert first.poll() is None, first.communicate()[0][-3000:]
        assert time.time() < deadline, "no checkpoint within 5 minutes"
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert not out.exists()                       # nothing half-written where the base goes
    second = _build(out, work, 60)
    log = second.communicate(timeout=600)[0]
    assert second.returncode == 0, log[-3000:]
    return out, work, json.loads((out / "build.json").read_text())


def test_the_loss_falls_and_the_build_resumes(built):
    out, _, record = built
    assert record["steps"] == 60
    assert record["this_session"]["resumed_from"] is not None
    assert int(record["this_session"]["resumed_from"].rsplit("-", 1)[1]) >= 20
    held = [e["eval_loss"] for e in record["history"] if "eval_loss" in e]
    assert len(held) >= 2 and held[-1] < held[0] - 0.1 and min(held) < held[0] - 0.1, held
    assert record["text"]["passages"] == 80 and record["text"]["held_out"] == 2
    assert len(record["text_digest"]) == 64
    for name in ("config.json", "model.safetensors", "tokenizer.json", "build.json", "loss_curve.png"):
        assert (out / name).is_file(), name


def test_another_recipe_in_the_same_work_folder_is_refused(built, tmp_path):
    _, work, _ = built
    run = _build(tmp_path / "other", work, 60, "--lr", "1e-3")
    log = run.communicate(timeout=300)[0]
    assert run.returncode != 0 and "holds a build with other settings (recipe.lr)" in log


def test_the_base_loads_as_a_bert_and_as_a_retriever(built, monkeypatch):
    import torch
    from transformers import AutoModel, AutoTokenizer, BertForMaskedLM

    out, _, record = built
    encoder = AutoModel.from_pretrained(str(out))
    assert encoder.dtype == torch.float32 and encoder.config.num_hidden_layers == 2
    assert BertForMaskedLM.from_pretrained(str(out)).num_parameters() == record["parameters"]
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    assert len(tokenizer) == record["vocabulary"] and tokenizer.mask_token == "[MASK]"
    from ecqg.retrieval.retriever import build_retriever

    retriever = build_retriever("biencoder", str(out), query_max_length=32, passage_max_length=64)
    batch = tokenizer(["who wrote it?", "where is it?"], return_tensors="pt", padding=True)
    with torch.no_grad():
        vectors = retriever.encode_queries(dict(batch))
    assert tuple(vectors.shape) == (2, 64) and retriever.config.pooling == "cls"


def test_bundled_naive_names_the_committed_base(monkeypatch, tmp_path):
    from ecqg.runtime import models

    monkeypatch.setattr(models, "NAIVE_BASE_DIR", tmp_path / "missing")
    with pytest.raises(RuntimeError, match="python -m ecqg.mlm.build"):
        models.resolve_model("bundled:naive")
    (tmp_path / "missing").mkdir()
    (tmp_path / "missing" / "config.json").write_text("{}")
    assert models.resolve_model("bundled:naive") == str(tmp_path / "missing")
