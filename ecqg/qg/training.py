"""Training a generator: the (source, target) dataset, the collator of its architecture, the HF Trainer run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

from ecqg.qg.architectures import is_bert2bert, is_prefix_lm

log = logging.getLogger(__name__)



class QGDataset:
    """Tokenised examples for HF Trainer: ``input_ids``, ``attention_mask``, ``labels`` (unpadded lists).

    A prefix LM gets one sequence per example (source, then target; :func:`ecqg.prefix_lm.example_features`). Labels
    of a BERT2BERT are ``target [SEP]`` (the model prepends [CLS] as decoder start); other seq2seq models use their
    tokenizer's own target format.
    """

    def __init__(self, examples: Sequence[Mapping[str, str]], tokenizer, model, *, source_max_length: int = 256,
                 target_max_length: int = 64):
        sources = [e["source"] for e in examples]
        targets = [e["target"] for e in examples]
        enc = tokenizer(sources, max_length=source_max_length, truncation=True)
        self.truncated_sources = sum(len(i) >= source_max_length for i in enc["input_ids"])
        if is_prefix_lm(model) or is_bert2bert(model):
            raw = tokenizer(targets, add_special_tokens=False, max_length=target_max_length - 1,
                            truncation=True)["input_ids"]
        if is_prefix_lm(model):
            from ecqg.qg.prefix_lm import example_features

            self.items = [example_features(src, tgt, tokenizer.cls_token_id, tokenizer.sep_token_id)
                          for src, tgt in zip(enc["input_ids"], raw)]
            return
        if is_bert2bert(model):
            eos = model.config.eos_token_id
            labels = [ids + [eos] for ids in raw]
        else:
            labels = tokenizer(text_target=targets, max_length=target_max_length, truncation=True)["input_ids"]
        self.items = [{"input_ids": i, "attention_mask": m, "labels": lab}
                      for i, m, lab in zip(enc["input_ids"], enc["attention_mask"], labels)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, idx: int) -> dict[str, list[int]]:
        return self.items[idx]


def make_collator(tokenizer, model):
    """Pads a batch; labels padded with -100 (a seq2seq model makes ``decoder_input_ids`` from them; a prefix LM's
    labels are as long as its inputs and padded with them)."""
    from transformers import DataCollatorForSeq2Seq, DataCollatorForTokenClassification

    if is_prefix_lm(model):
        return DataCollatorForTokenClassification(tokenizer, label_pad_token_id=-100, padding=True)
    return DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100, padding=True)


def train_generator(model, tokenizer, examples: Sequence[Mapping[str, str]], output_dir: str | Path,
                    settings: Mapping[str, Any], *, seed: int, source_max_length: int = 256,
                    target_max_length: int = 64, progress: bool = True) -> dict:
    """Train in place through :func:`ecqg.hf_training.train_with_checkpoints` (checkpoints, resume)."""
    from ecqg.hf_training import train_with_checkpoints

    dataset = QGDataset(examples, tokenizer, model, source_max_length=source_max_length,
                        target_max_length=target_max_length)
    log.info("QG training: %d examples (%d sources truncated at %d tokens)", len(dataset),
             dataset.truncated_sources, source_max_length)
    result = train_with_checkpoints(model, dataset, output_dir, settings, seed=seed,
                                    data_collator=make_collator(tokenizer, model), progress=progress)
    result = dict(result)
    result["truncated_sources"] = dataset.truncated_sources
    return result
