"""Training a generator: the (source, target) dataset, the collator of its architecture, the HF Trainer run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

from ecqg.qg.generators import generator_for
from ecqg.runtime.hf_training import train_with_checkpoints

log = logging.getLogger(__name__)



class QGDataset:
    """Tokenised examples for HF Trainer: ``input_ids``, ``attention_mask``, ``labels`` (unpadded lists), in the form
    the generator's architecture trains on (:meth:`ecqg.qg.generators.Generator.training_items`: a prefix LM gets
    one sequence per example; a BERT2BERT's labels are ``target [SEP]``; other seq2seq models use their tokenizer's
    own target format)."""

    def __init__(self, examples: Sequence[Mapping[str, str]], tokenizer, model, *, source_max_length: int = 256,
                 target_max_length: int = 64):
        sources = [e["source"] for e in examples]
        targets = [e["target"] for e in examples]
        enc = tokenizer(sources, max_length=source_max_length, truncation=True)
        self.truncated_sources = sum(len(i) >= source_max_length for i in enc["input_ids"])
        self.items = generator_for(model).training_items(model, tokenizer, enc, targets, target_max_length)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, idx: int) -> dict[str, list[int]]:
        return self.items[idx]


def make_collator(tokenizer, model):
    """Pads a batch as the generator's architecture needs (labels padded with -100)."""
    return generator_for(model).collator(model, tokenizer)


def train_generator(model, tokenizer, examples: Sequence[Mapping[str, str]], output_dir: str | Path,
                    settings: Mapping[str, Any], *, seed: int, source_max_length: int = 256,
                    target_max_length: int = 64, progress: bool = True) -> dict:
    """Train in place through :func:`ecqg.runtime.hf_training.train_with_checkpoints` (checkpoints, resume)."""
    dataset = QGDataset(examples, tokenizer, model, source_max_length=source_max_length,
                        target_max_length=target_max_length)
    log.info("QG training: %d examples (%d sources truncated at %d tokens)", len(dataset),
             dataset.truncated_sources, source_max_length)
    result = train_with_checkpoints(model, dataset, output_dir, settings, seed=seed,
                                    data_collator=make_collator(tokenizer, model), progress=progress)
    result = dict(result)
    result["truncated_sources"] = dataset.truncated_sources
    return result
