"""Model references: bundled offline weights, local directories and hub ids."""

import pytest

from ecqg.runtime.models import BUNDLED_ENCODER, bundled_encoder_path, resolve_model
from ecqg.retrieval.biencoder import BiEncoder


def test_bundled_encoder_resolves_to_its_package_directory():
    assert resolve_model(BUNDLED_ENCODER) == str(bundled_encoder_path())
    assert (bundled_encoder_path() / "model.safetensors").is_file()


def test_a_local_directory_and_a_hub_id_pass_through(tmp_path):
    assert resolve_model(str(tmp_path)) == str(tmp_path.resolve())
    assert resolve_model("bert-base-uncased") == "bert-base-uncased"
    with pytest.raises(ValueError, match="unknown bundled model"):
        resolve_model("bundled:bart")


def test_an_unavailable_hub_id_fails_with_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match=r"cannot load model 'no-such-org/no-such-model'.*HF_HUB_OFFLINE=0"):
        BiEncoder.from_base("no-such-org/no-such-model")


def test_a_saved_biencoder_loads_back_as_plain_transformers_models(tmp_path):
    from transformers import AutoModel

    model = BiEncoder.from_base(BUNDLED_ENCODER, passage_max_length=32)
    model.save(tmp_path / "be")
    # Each encoder is an ordinary transformers checkpoint: no ecqg needed to load it.
    assert AutoModel.from_pretrained(tmp_path / "be" / "passage_encoder").config.hidden_size == 384
    again = BiEncoder.load(tmp_path / "be")
    assert again.config == model.config
