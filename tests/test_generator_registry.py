"""A new generator architecture is one class and a registry entry: a toy decoder-only generator (a tiny GPT-2 that
reads the source and continues with the target), defined here, goes through the pipeline's own training inputs,
Trainer run, sampling and save / load without any other code knowing about it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from ecqg import qg
from ecqg.core import config
from ecqg.qg.generators import BUILTIN, REGISTRY, Generator, encoder_architectures, register


@register
class CausalLMGenerator(Generator):
    """Source then ``target [SEP]`` in one causal sequence; the loss covers the target only."""

    kind = "test_causal_lm"

    @classmethod
    def recognises(cls, config) -> bool:
        return config.model_type == "gpt2"

    @classmethod
    def handles(cls, model) -> bool:
        return isinstance(model, GPT2LMHeadModel)

    @classmethod
    def load(cls, ref: str, config, **overrides: Any):
        return GPT2LMHeadModel.from_pretrained(ref, **overrides)

    @classmethod
    def training_items(cls, model, tokenizer, sources, targets, target_max_length):
        items = []
        for source, target in zip(sources["input_ids"],
                                  tokenizer(targets, add_special_tokens=False, max_length=target_max_length - 1,
                                            truncation=True)["input_ids"]):
            ids = source + target + [tokenizer.sep_token_id]
            items.append({"input_ids": ids, "attention_mask": [1] * len(ids),
                          "labels": [-100] * len(source) + target + [tokenizer.sep_token_id]})
        return items

    @classmethod
    def collator(cls, model, tokenizer):
        from transformers import DataCollatorForTokenClassification

        return DataCollatorForTokenClassification(tokenizer, label_pad_token_id=-100, padding=True)

    @classmethod
    def pad_id(cls, model, tokenizer) -> int:
        return tokenizer.pad_token_id

    @classmethod
    def sample(cls, model, tokenizer, enc, seed, *, top_k, top_p, samples, max_new_tokens):
        mask = enc["attention_mask"]                  # a decoder-only model continues from the right: pad on the left
        order = torch.argsort(mask, dim=1, stable=True)
        ids, mask = enc["input_ids"].gather(1, order), mask.gather(1, order)
        ids = ids.masked_fill(mask == 0, tokenizer.pad_token_id)
        torch.manual_seed(seed)
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, top_k=top_k, top_p=top_p,
                             num_return_sequences=samples, max_new_tokens=max_new_tokens, output_logits=True,
                             return_dict_in_generate=True, pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=tokenizer.sep_token_id)
        scores = model.compute_transition_scores(out.sequences, out.logits, normalize_logits=True)
        return out.sequences[:, ids.shape[1]:], scores


@pytest.fixture
def toy(tokenizer):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=32, n_layer=1, n_head=2,
                                       bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                                       pad_token_id=tokenizer.pad_token_id))
    return model, tokenizer


EXAMPLES = [{"source": f"{town} lies on the river {river}.", "target": f"{river} <sep> what river is {town} on?"}
            for town, river in (("Lyon", "Rhone"), ("Porto", "Douro"), ("Graz", "Mur"), ("Turku", "Aura"))]
INPUTS = [{"passage_id": f"p{i}", "title": "", "text": e["source"], "entity": None} for i, e in enumerate(EXAMPLES)]


def test_the_registry_finds_it_and_the_pipeline_trains_samples_saves_and_loads_it(toy, tmp_path, monkeypatch):
    model, tokenizer = toy
    assert qg.generator_for(model) is CausalLMGenerator and qg.generator_class("test_causal_lm") is CausalLMGenerator
    assert REGISTRY["prefix_lm"].kind == "prefix_lm" and set(BUILTIN) <= set(REGISTRY)
    assert "test_causal_lm" not in encoder_architectures()     # not built from an encoder checkpoint

    data = qg.QGDataset(EXAMPLES, tokenizer, model, source_max_length=32, target_max_length=16)
    first = data[0]
    source_length = len(tokenizer(EXAMPLES[0]["source"])["input_ids"])
    assert first["labels"][:source_length] == [-100] * source_length
    assert first["labels"][-1] == tokenizer.sep_token_id and len(first["labels"]) == len(first["input_ids"])

    params = config.load(config.write_profile("smoke", tmp_path / "params.yaml", Path("params").resolve()))
    settings = {**params["qg"]["train"], "max_steps": 4, "batch_size": 2, "checkpoint_every": 2}
    monkeypatch.chdir(tmp_path)
    result = qg.train_generator(model, tokenizer, EXAMPLES, tmp_path / "run", settings, seed=0,
                                source_max_length=32, target_max_length=16, progress=False)
    assert result["steps"] == 4

    records, drops = qg.generate_questions(model, tokenizer, INPUTS, samples=2, batch_size=3, max_new_tokens=6,
                                           seed=1, progress=False)
    assert drops["generated"] == 8 and len(records) + sum(v for k, v in drops.items() if k != "generated") == 8
    again_records, _ = qg.generate_questions(model, tokenizer, INPUTS, samples=2, batch_size=3, max_new_tokens=6,
                                             seed=1, progress=False)
    assert again_records == records                                            # seeded per batch

    qg.save_generator(model, tokenizer, tmp_path / "gen")
    again, _ = qg.load_generator(tmp_path / "gen")
    assert isinstance(again, GPT2LMHeadModel)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    with pytest.raises(ValueError, match="qg.dropout applies to generators built from a BERT-family encoder"):
        qg.set_dropout(model, 0.1)


def test_params_name_exactly_the_architectures_built_from_an_encoder():
    """params validation (which must not import torch) lists qg.architecture's values itself: they must be the
    registry's."""
    from ecqg.core.config import RULES

    check = RULES["qg.architecture"][1]
    assert all(check(name) for name in encoder_architectures()) and not check("seq2seq") and not check("gpt")
    with pytest.raises(ValueError, match="unknown generator architecture 'test_causal_lm'"):
        qg.build_generator("bundled:minilm", architecture="test_causal_lm")


def test_two_architectures_claiming_one_model_is_an_error():
    """The registry must never pick between two claimants by import order."""
    from ecqg.core.registry import Registry

    registry = Registry("toy architecture", {})
    for kind in ("first", "second"):
        registry.register(type(kind, (), {"kind": kind, "handles": classmethod(lambda cls, m: m == "same")}))
    assert [c.kind for c in registry.claimants(lambda cls: cls.handles("other"))] == []
    with pytest.raises(ValueError, match=r"more than one toy architecture claims it: \['first', 'second'\]"):
        registry.claimants(lambda cls: cls.handles("same"))
