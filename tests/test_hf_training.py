"""The Trainer wrapper resumes from the latest complete checkpoint and discards half-written ones."""

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from ecqg.runtime.hf_training import complete_checkpoints, train_with_checkpoints, training_arguments

SETTINGS = dict(lr=1e-3, epochs=2, batch_size=8, warmup_ratio=0.1, weight_decay=0.0, max_steps=None,
                checkpoint_every=3, mixed_precision="no")


class _Toy(torch.utils.data.Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        ids = torch.randint(5, 90, (8,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "attention_mask": torch.ones(8, dtype=torch.long), "labels": torch.tensor(i % 2)}


def _model():
    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1,
                                                    num_attention_heads=2, intermediate_size=32))


def test_trains_checkpoints_and_resumes(tmp_path, caplog):
    caplog.set_level("INFO", logger="ecqg.runtime.hf_training")
    first = train_with_checkpoints(_model(), _Toy(), tmp_path, SETTINGS, seed=1, progress=False)
    assert any(r.getMessage().startswith("step 3/10: loss ") for r in caplog.records), "no step lines logged"
    assert first["steps"] == 10 and first["resumed_from"] is None
    assert [p.name for p in complete_checkpoints(tmp_path)] == ["checkpoint-9", "checkpoint-10"]
    assert any("loss" in row for row in first["history"])

    (tmp_path / "checkpoint-12").mkdir()  # a run killed while saving: no trainer_state.json
    again = train_with_checkpoints(_model(), _Toy(), tmp_path, SETTINGS, seed=1, progress=False)
    assert not (tmp_path / "checkpoint-12").exists()
    assert again["resumed_from"].endswith("checkpoint-10") and again["steps"] == 10


def test_missing_setting_is_named(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="checkpoint_every"):
        train_with_checkpoints(_model(), _Toy(), tmp_path, {k: v for k, v in SETTINGS.items()
                                                            if k != "checkpoint_every"}, seed=1)


def test_mixed_precision_setting(tmp_path):
    args = training_arguments(tmp_path, {**SETTINGS, "mixed_precision": "bf16"}, seed=1, progress=False)
    assert args.bf16 and not args.fp16
    assert not training_arguments(tmp_path, SETTINGS, seed=1, progress=False).bf16
    result = train_with_checkpoints(_model(), _Toy(), tmp_path, {**SETTINGS, "mixed_precision": "bf16",
                                                                 "max_steps": 2}, seed=1, progress=False)
    assert result["steps"] == 2 and all(torch.isfinite(torch.tensor(r["loss"])) for r in result["history"]
                                        if "loss" in r)
    with pytest.raises(ValueError, match="mixed_precision is 'half'"):
        train_with_checkpoints(_model(), _Toy(), tmp_path, {**SETTINGS, "mixed_precision": "half"}, seed=1)


def test_auto_precision_follows_the_hardware(monkeypatch, tmp_path):
    """``auto`` is bf16 only where bf16 is native: emulated bf16 is several times slower than float32 (inference
    autocast per device: tests/test_device_policy.py)."""
    from ecqg.runtime import hf_training

    for native, precision in ((True, "bf16"), (False, "no")):
        monkeypatch.setattr(hf_training, "native_bf16", lambda native=native: native)
        assert hf_training.resolve_mixed_precision("auto") == precision
        assert training_arguments(tmp_path, {**SETTINGS, "mixed_precision": "auto"}, seed=1,
                                  progress=False).bf16 is (precision == "bf16")
    assert hf_training.resolve_mixed_precision("fp16") == "fp16"
    with pytest.raises(ValueError, match="mixed_precision is 'bf17'"):
        hf_training.resolve_mixed_precision("bf17")

def test_several_gpus_in_one_process_train_on_one_never_dataparallel(tmp_path, caplog):
    """A stage started without a launcher on an 8-GPU node: HF's Trainer would wrap the model in DataParallel and
    train at 8 x the stated batch; the settings' batch on one device instead, said in the log."""
    from ecqg.runtime.hf_training import one_device, training_arguments

    settings = {"lr": 1e-4, "epochs": 1, "batch_size": 24, "warmup_ratio": 0.0, "weight_decay": 0.0,
                "max_steps": 2, "checkpoint_every": 1, "mixed_precision": "no"}
    args = training_arguments(tmp_path, settings, seed=0)
    assert args.parallel_mode.name == "NOT_PARALLEL" and one_device(args).n_gpu == args.n_gpu   # a CPU: unchanged
    args._n_gpu = 8                                       # what TrainingArguments finds on such a node
    assert args.parallel_mode.name == "NOT_DISTRIBUTED"
    with caplog.at_level("WARNING"):
        assert one_device(args).n_gpu == 1
    assert args.parallel_mode.name == "NOT_PARALLEL" and args.train_batch_size == 24
    assert "never DataParallel, which would make it 192" in caplog.text
