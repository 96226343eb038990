"""ecqg.tooling.hub_models: a profile's hub models are found in the local cache before a run with the hub off, pinned
to the revision first used, and a moved cache is refused, each problem named by params file, key and hub id (issue 66:
the paper profile named hub ids with no revision and a node without internet failed hours into dvc repro)."""

from __future__ import annotations

import pytest
import yaml

from ecqg.core import config, settings
from ecqg.tooling import hub_models


def fake_cache(root, ref: str, revision: str):
    """The layout huggingface_hub reads offline: refs/main names a snapshot folder holding the files."""
    repo = root / ("models--" + ref.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    (repo / "snapshots" / revision).mkdir(parents=True, exist_ok=True)
    (repo / "snapshots" / revision / "config.json").write_text("{}")


def paper_params() -> dict:
    return yaml.safe_load(config.render_profile("paper", config.PRESETS_DIR))


def models_of(params) -> dict[str, str]:
    """The hub models of a params tree (what ``main`` checks and fetches)."""
    tree = settings.of(params)
    return hub_models.hub_models(tree.dpr, tree.qg, tree.mrc)


def paper_models() -> dict[str, str]:
    return models_of(paper_params())


def test_the_paper_profile_names_three_hub_models_and_mini_none():
    assert models_of(paper_params()) == {"dpr.base_model": "bert-base-uncased",
                                                     "qg.model": "facebook/bart-large",
                                                     "mrc.model": "deepset/roberta-base-squad2"}
    assert models_of(config.load("params.yaml")) == {}


def test_offline_a_missing_model_is_named_and_nothing_is_pinned(tmp_path):
    pins = tmp_path / "HUB_REVISIONS"
    fake_cache(tmp_path / "cache", "bert-base-uncased", hub_models.read_pins(hub_models.PRESET_PINS)["bert-base-uncased"])
    with pytest.raises(RuntimeError) as err:
        hub_models.check(paper_models(), pins, str(tmp_path / "cache"), "params/paper.yaml", hub_off=True)
    text = str(err.value)
    assert "params/paper.yaml: qg.model = facebook/bart-large: not in the Hugging Face cache" in text
    assert "mrc.model = deepset/roberta-base-squad2" in text and "dpr.base_model" not in text
    assert not pins.exists()


def test_the_first_revision_is_pinned_and_a_moved_cache_refused(tmp_path):
    pins, cache = tmp_path / "HUB_REVISIONS", tmp_path / "cache"
    for ref in ("bert-base-uncased", "facebook/bart-large", "deepset/roberta-base-squad2"):
        fake_cache(cache, ref, "a" * 40)
    unpinned = tmp_path / "no_preset_pins"                         # hub ids the presets do not pin
    lines = hub_models.check(paper_models(), pins, str(cache), hub_off=True, preset_pins=unpinned)
    assert all("first use: pinned" in line for line in lines)
    assert hub_models.read_pins(pins)["facebook/bart-large"] == "a" * 40
    assert all("(pinned)" in line
               for line in hub_models.check(paper_models(), pins, str(cache), hub_off=True, preset_pins=unpinned))
    fake_cache(cache, "facebook/bart-large", "b" * 40)             # main moved to another snapshot
    with pytest.raises(RuntimeError, match=r"qg.model = facebook/bart-large: the cache's main is b+, .* pins a+"):
        hub_models.check(paper_models(), pins, str(cache), hub_off=True, preset_pins=unpinned)


def test_the_presets_hub_models_are_pinned_in_the_repository_and_fetch_points_main_at_the_pin(tmp_path):
    fixed = hub_models.read_pins(hub_models.PRESET_PINS)
    assert set(fixed) == set(paper_models().values())
    assert all(len(rev) == 40 and int(rev, 16) >= 0 for rev in fixed.values())
    pins, cache = tmp_path / "HUB_REVISIONS", tmp_path / "cache"
    for ref, rev in fixed.items():
        fake_cache(cache, ref, rev)
    fake_cache(cache, "bert-base-uncased", "c" * 40)               # a newer main than the pin
    with pytest.raises(RuntimeError, match=r"dpr.base_model = bert-base-uncased: the cache's main is c+, "
                                           r"params/hub_revisions.txt pins 86b5e09"):
        hub_models.check(paper_models(), pins, str(cache), hub_off=True)
    hub_models.point_main("bert-base-uncased", fixed["bert-base-uncased"], str(cache))   # what fetch does
    assert all("(pinned)" in line for line in hub_models.check(paper_models(), pins, str(cache), hub_off=True))
    assert not pins.exists()                                      # nothing to record: every model was pinned


def test_fetch_takes_one_copy_of_the_weights():
    assert hub_models.weight_patterns(["config.json", "model.safetensors", "pytorch_model.bin"])[-1] == "*.safetensors"
    assert hub_models.weight_patterns(["config.json", "pytorch_model.bin"])[-1] == "pytorch_model.bin"


def test_fetch_downloads_each_pin_and_records_only_what_no_file_pins(tmp_path, monkeypatch):
    """The hub stood in for by the cache layout (no network here): which revision each model is asked at, where
    ``main`` then points, and whether the local pins file is written."""
    import huggingface_hub

    asked = {}

    def snapshot_download(ref, revision=None, cache_dir=None, allow_patterns=None):
        revision = revision or "d" * 40                              # the hub's main when nothing pins it
        asked[ref] = revision
        fake_cache(tmp_path / "cache", ref, revision)
        return str(tmp_path / "cache" / ("models--" + ref.replace("/", "--")) / "snapshots" / revision)

    monkeypatch.setattr(huggingface_hub, "list_repo_files", lambda ref, revision=None: ["model.safetensors"])
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    pins, cache = tmp_path / "HUB_REVISIONS", str(tmp_path / "cache")
    fixed = hub_models.read_pins(hub_models.PRESET_PINS)
    hub_models.fetch(paper_models(), pins, cache)
    assert asked == fixed and not pins.exists()                      # every preset model at its pin, nothing recorded
    assert all("(pinned)" in line for line in hub_models.check(paper_models(), pins, cache, hub_off=True))
    params = paper_params()
    params["qg"]["model"] = "someone/new-generator"
    hub_models.fetch(models_of(params), pins, cache)
    assert asked["someone/new-generator"] == "d" * 40
    assert hub_models.read_pins(pins) == {"someone/new-generator": "d" * 40}


def test_a_malformed_pins_file_is_named_with_its_line(tmp_path):
    pins = tmp_path / "HUB_REVISIONS"
    pins.write_text("# header\nbert-base-uncased\n")
    with pytest.raises(ValueError, match=r"HUB_REVISIONS, line 2: expected '<hub id> <revision>'"):
        hub_models.read_pins(pins)
