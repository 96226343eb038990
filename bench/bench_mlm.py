"""Benchmark: a masked-LM step of the retrieval-naive base, the vocabulary scored at every position (as
``BertForMaskedLM`` does) against at the masked positions only (``ecqg.mlm.model.SparseMaskedLM``, what
``python -m ecqg.mlm.build`` trains with): the same loss, fewer multiply-adds.

Prints figures; not a test. Random word pieces at BERT's 15% masking, the default architecture of
``ecqg.mlm.model.Architecture`` unless given. Run: ``.venv/bin/python bench/bench_mlm.py [--steps 4 --batch-size 64
--length 128 --mixed-precision bf16]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch
from transformers import BertForMaskedLM

from ecqg.core.device import cpu_name
from ecqg.mlm.model import Architecture, SparseMaskedLM


class _Vocabulary:
    """What ``Architecture.config`` reads of a tokenizer."""

    def __init__(self, size: int):
        self.size, self.pad_token_id = size, 0

    def __len__(self) -> int:
        return self.size


def seconds_per_step(model, batch: dict, steps: int, bf16: bool) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for _ in range(steps + 1):                       # the first step warms up
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - start)
    return min(times[1:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--mixed-precision", choices=("no", "bf16"), default="bf16")
    args = ap.parse_args()
    arch = Architecture()
    config = arch.config(_Vocabulary(arch.vocab_size))
    torch.manual_seed(0)
    ids = torch.randint(5, arch.vocab_size, (args.batch_size, args.length))
    labels = ids.clone()
    labels[torch.rand(ids.shape) >= 0.15] = -100
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    out = {"cpu": cpu_name(), "threads": torch.get_num_threads(), "machine": platform.machine(), **vars(args)}
    for name, cls in (("full vocabulary", BertForMaskedLM), ("masked positions only", SparseMaskedLM)):
        torch.manual_seed(0)
        s = seconds_per_step(cls(config), batch, args.steps, args.mixed_precision == "bf16")
        out[name] = {"s_per_step": round(s, 3), "tokens_per_s": round(args.batch_size * args.length / s)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
