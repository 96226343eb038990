"""params.yaml loading, profile overlays and validation errors."""

import shutil
from pathlib import Path

import pytest
import yaml

from ecqg import config
from ecqg.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def presets(tmp_path):
    target = tmp_path / "params"
    shutil.copytree(REPO / "params", target)
    return target


def test_every_preset_is_valid():
    for profile in config.PROFILES:
        params = config.preset(profile, REPO / "params")
        assert params["profile"] == profile


def test_committed_params_yaml_is_valid():
    assert config.load(REPO / "params.yaml")["profile"] in config.PROFILES


def test_overlay_changes_only_what_the_preset_lists():
    mini, smoke = config.preset("mini", REPO / "params"), config.preset("smoke", REPO / "params")
    paper = config.preset("paper", REPO / "params")
    assert smoke["data"]["max_questions_per_set"] == 40 and mini["data"]["max_questions_per_set"] == 3000
    assert paper["data"]["max_questions_per_set"] is None and paper["data"]["max_corpus_passages"] is None
    assert smoke["bm25"] == mini["bm25"]


def test_use_writes_params_and_round_trips_to_base(tmp_path, presets):
    target = tmp_path / "params.yaml"
    config.write_profile("smoke", target, presets)
    assert config.load(target)["data"]["max_corpus_passages"] == 400
    config.write_profile("mini", target, presets)
    written = target.read_text().splitlines()
    assert written[1:] == (presets / "mini.yaml").read_text().splitlines()  # comments and formatting kept


def _with(params, dotted, value):
    node = params
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node[key]
    node[leaf] = value
    return params


@pytest.mark.parametrize("dotted, value, message", [
    ("bm25.b", 1.5, "'bm25.b' is 1.5"),
    ("bm25.threads", "two", "'bm25.threads' is 'two'"),
    ("evaluation.ks", [5, 1], "'evaluation.ks'"),
    ("profile", "huge", "'profile' is 'huge'"),
    ("data.max_nq_dev", True, "'data.max_nq_dev' is True"),
    ("dpr.seeds", [], "'dpr.seeds' is []"),
    ("dpr.seeds", [2022, 2022], "'dpr.seeds' is [2022, 2022]"),
    ("dpr.seeds", 2022, "'dpr.seeds' is 2022"),
])
def test_bad_values_are_named(dotted, value, message):
    params = _with(config.preset("mini", REPO / "params"), dotted, value)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        config.validate(params, "params.yaml")


def test_unknown_key_suggests_the_right_one():
    params = config.preset("mini", REPO / "params")
    params["bm25"]["k_1"] = 1.2
    with pytest.raises(ConfigError, match=r"unknown key 'bm25.k_1' \(did you mean 'bm25.k1'\?\)"):
        config.validate(params, "params.yaml")


def test_missing_key_is_named(tmp_path):
    params = config.preset("mini", REPO / "params")
    del params["distant"]["depth"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=f"{path}: missing key 'distant.depth'"):
        config.load(path)


def test_preset_with_a_typo_is_refused(presets):
    (presets / "smoke.yaml").write_text("profile: smoke\nbm25:\n  k01: 2\n")
    with pytest.raises(ConfigError, match="'bm25.k01', which the base profile does not define"):
        config.preset("smoke", presets)


def test_invalid_yaml_names_the_file(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("seed: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config.load(path)
