"""Typed settings (ecqg.core.settings): the blocks declare the rules params validation applies (one schema), every
preset round-trips through the typed tree unchanged, and a typed block gives the trainer the config the params
describe."""

from __future__ import annotations

import copy
import re
import dataclasses
import json
from pathlib import Path

import pytest

from ecqg.core import config, settings
from ecqg.core.errors import ConfigError
from ecqg.core.train_config import RULE, TrainConfig

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("profile", config.PROFILES)
def test_every_preset_round_trips_through_the_typed_tree(profile):
    params = config.preset(profile, REPO / "params")
    typed = settings.of(params)
    assert typed.profile == profile and typed.as_dict() == params
    assert json.dumps(typed.as_dict()) == json.dumps(params)              # in the file's order too: records print it
    assert set(settings.Params.rules()) == set(config._flatten(params))   # a rule per key, a key per rule
    assert settings.of(typed) is typed


def test_the_rules_validation_applies_are_the_blocks_fields():
    """A rule lives on its field: params validation reads it from there (the same tuple, not a copy)."""
    finetune = {f.name: f for f in dataclasses.fields(settings.DprFinetune)}
    assert config.RULES["dpr.finetune.lr"] is finetune["lr"].metadata[RULE]
    assert config.RULES["dpr.finetune.patience"] == next(f.metadata[RULE] for f in dataclasses.fields(TrainConfig)
                                                         if f.name == "patience")
    attention = {f.name: f for f in dataclasses.fields(settings.Attention)}
    assert config.RULES["attention.min_entities"] is attention["min_entities"].metadata[RULE]


@pytest.mark.parametrize("key, value, message", [
    (("dpr", "finetune", "lr"), -1.0, "'dpr.finetune.lr' is -1.0, out of range; expected a number > 0"),
    (("qg", "train", "mixed_precision"), "fp8", "'qg.train.mixed_precision' is 'fp8', out of range"),
    (("mixing", "doses"), [3], "'mixing.doses' is [3], out of range; expected a list of even sizes"),
    (("tempqg", "selector", "train", "epochs"), 0, "'tempqg.selector.train.epochs' is 0, out of range"),
    (("evaluation", "mechanism", "min_entities"), "3", "'evaluation.mechanism.min_entities' is the string '3'"),
])
def test_a_value_a_field_rule_refuses_is_refused_naming_its_key(key, value, message):
    params = copy.deepcopy(config.preset("mini", REPO / "params"))
    node = params
    for part in key[:-1]:
        node = node[part]
    node[key[-1]] = value
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.validate(params, "params.yaml")


def test_a_typed_block_gives_the_trainer_its_config():
    params = config.preset("mini", REPO / "params")
    dpr = settings.of(params).dpr
    by_hand = {k: v for k, v in params["dpr"]["finetune"].items()
               if k in {f.name for f in dataclasses.fields(TrainConfig)}}
    assert dpr.finetune.train_config(7, 60) == TrainConfig.from_dict({**by_hand, "seed": 7, "dist_timeout_minutes": 60})
    assert dpr.pretrain.train_config(7, 60).patience is None            # pre-training has no convergence keys


def test_blocks_are_frozen_and_a_missing_key_is_named():
    typed = settings.of(config.preset("mini", REPO / "params"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        typed.dpr.seeds = [1]                                            # type: ignore[misc]
    assert typed.filtering.replace(stage1="none").stage1 == "none" and typed.filtering.stage1 == "roundtrip"
    with pytest.raises(KeyError, match="Bm25: the params block has no 'b'"):
        settings.Bm25.of({"k1": 0.9, "threads": 2})
