"""Passages/s of ``ecqg.retrieval.dense.encode_passages`` against a plain Hugging Face loop, and the share of the
machine's float32 matmul peak that each reaches.

    .venv/bin/python bench/bench_encode.py [--passages 2000] [--batch-size 32] [--max-length 256] [--threads N]

Both sides encode the same real passages (``data/corpus.jsonl.gz``, else ``outputs/data/corpus.jsonl``) with the
bundled MiniLM (6 layers, 384 wide) as the passage encoder, at the same batch size and maximum length:

* ecqg: tokenise once, sort by length, pad per batch, ``torch.inference_mode()``;
* plain: tokenise each batch in corpus order (padding to the batch's longest), ``model(**batch)``, take [CLS]; no
  sorting, no inference_mode (autograd bookkeeping on, as in a naive script);
* ecqg under bf16 autocast (``dpr.encode.autocast: bfloat16``): the same, with matmuls in bfloat16; the vectors'
  cosine to the float32 ones is printed.

Useful FLOPs count real (unpadded) tokens only, so both sides are credited with the same work.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from pathlib import Path

import numpy as np
import torch

from ecqg.data.records import read_corpus
from ecqg.retrieval import dense
from ecqg.retrieval.biencoder import BiEncoder

ROOT = Path(__file__).resolve().parents[1]
CORPORA = (ROOT / "data" / "corpus.jsonl.gz", ROOT / "outputs" / "data" / "corpus.jsonl")


def load_passages(n: int) -> tuple[Path, list[dict]]:
    """The first ``n`` passages of the corpus (real text, the mix of lengths the pipeline will see)."""
    path = next((p for p in CORPORA if p.is_file()), None)
    if path is None:
        raise SystemExit(f"no corpus at {' or '.join(map(str, CORPORA))}; build the data bundle first")
    return path, list(itertools.islice(read_corpus(path), n))


def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
    """Measured float32 GFLOP/s of an ``n x n`` matmul (best of ``repeats``), the machine's practical peak."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)
    best = min(_timed(lambda: torch.matmul(a, b)) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def encoder_flops(model, lengths: np.ndarray) -> tuple[float, str]:
    """Forward FLOPs for passages of the given token counts: 2·P·T + 4·L·d·T² per passage (formula returned)."""
    config = model.passage_encoder.config
    params = sum(p.numel() for name, p in model.passage_encoder.named_parameters()
                 if "embeddings" not in name and "pooler" not in name)  # the pooler sees one token per passage
    layers, width = config.num_hidden_layers, config.hidden_size
    flops = float(np.sum(2 * params * lengths + 4 * layers * width * lengths.astype(np.float64) ** 2))
    formula = (f"FLOPs/passage = 2*P*T + 4*L*d*T^2 (P={params / 1e6:.2f}M non-embedding encoder params, "
               f"L={layers}, d={width}, T=real tokens; the T^2 term is QK^T and attention x V)")
    return flops, formula


def plain_hf_loop(model, passages: list[dict], batch_size: int) -> np.ndarray:
    """What a naive script does: corpus order, pad each batch, autograd on, [CLS] of the last layer."""
    encoder, tokenizer, out = model.passage_encoder, model.tokenizer, []
    encoder.eval()
    for lo in range(0, len(passages), batch_size):
        chunk = passages[lo:lo + batch_size]
        batch = tokenizer([p["title"] for p in chunk], [p["text"] for p in chunk], padding=True,
                          truncation="only_second", max_length=model.config.passage_max_length, return_tensors="pt")
        out.append(encoder(**batch).last_hidden_state[:, 0].detach().numpy())
    return np.concatenate(out)


def padded_tokens(lengths: np.ndarray, batch_size: int, sort: bool) -> int:
    """Tokens actually pushed through the model (including padding) for a given batching."""
    lengths = np.sort(lengths)[::-1] if sort else lengths
    return int(sum(len(b) * b.max() for b in np.array_split(lengths, range(batch_size, len(lengths), batch_size))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    path, passages = load_passages(args.passages)
    model = BiEncoder.from_base("bundled:minilm", passage_max_length=args.max_length)
    lengths = np.array([len(ids) for ids in model.tokenizer(
        [p["title"] for p in passages], [p["text"] for p in passages], truncation="only_second",
        max_length=args.max_length)["input_ids"]])
    flops, formula = encoder_flops(model, lengths)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device cpu, "
          f"load average {os.getloadavg()[0]:.2f} (other processes share this machine)")
    print(f"corpus {path} : {len(passages)} passages, tokens/passage mean {lengths.mean():.1f} "
          f"(min {lengths.min()}, max {lengths.max()}), max_length {args.max_length}, batch {args.batch_size}")
    peak = matmul_peak()
    print(f"float32 matmul peak (2048x2048, best of 10): {peak:.1f} GFLOP/s")
    print(formula)
    print(f"useful work: {flops / 1e9:.1f} GFLOP ({flops / len(passages) / 1e9:.2f} GFLOP/passage)")

    dense.encode_passages(model, passages[:64], batch_size=args.batch_size, progress=False)  # warm-up
    plain_hf_loop(model, passages[:64], args.batch_size)
    vectors = {}

    def ours(autocast):
        vectors[autocast] = dense.encode_passages(model, passages, batch_size=args.batch_size, progress=False,
                                                  autocast=autocast)[1]

    seconds = {"plain HF loop (unsorted, autograd on)": _timed(lambda: plain_hf_loop(model, passages,
                                                                                      args.batch_size)),
               "ecqg encode_passages (length-sorted, inference_mode)": _timed(lambda: ours(None)),
               "ecqg encode_passages under bf16 autocast": _timed(lambda: ours("bfloat16"))}
    padded = {sort: padded_tokens(lengths, args.batch_size, sort) for sort in (False, True)}
    print(f"tokens through the model incl. padding: unsorted {padded[False]}, sorted {padded[True]}, "
          f"real {int(lengths.sum())}")
    for name, s in seconds.items():
        achieved = flops / s / 1e9
        print(f"{name:55s} {s:7.1f} s  {len(passages) / s:7.1f} passages/s  {achieved:6.1f} GFLOP/s useful  "
              f"= {100 * achieved / peak:4.1f}% of matmul peak")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    plain, fp32, bf16 = seconds.values()
    print(f"speed-up: {plain / fp32:.2f}x (ecqg float32 over the plain loop), {fp32 / bf16:.2f}x (bf16 autocast over "
          "float32; dpr.encode.autocast)")
    a, b = vectors[None], vectors["bfloat16"]
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    print(f"bf16 vs float32 passage vectors: cosine min {cosine.min():.6f}, mean {cosine.mean():.6f}")


if __name__ == "__main__":
    main()
