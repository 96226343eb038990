"""Queries/s of FAISS Flat / HNSW / IVF-PQ at k=100 through ``ecqg.retrieval.dense``, with recall@100 against Flat.

    .venv/bin/python bench/bench_faiss.py [--corpus 20000] [--queries 2000] [--dim 384] [--threads N]
                                          [--data clustered|gaussian]

Vectors are synthetic (seeded). ``clustered`` (default) draws passages and queries around 200 shared centres, which
is closer to real sentence embeddings than ``gaussian`` (i.i.d. noise, the hardest case for approximate search:
no structure for HNSW or IVF to exploit). Recall@100 = |approx top-100 ∩ exact top-100| / 100, averaged over queries.
"""

from __future__ import annotations

import argparse
import os
import time

import faiss
import numpy as np
import torch

from ecqg.retrieval import faiss_index

CONFIGS = {
    "flat": {},
    "hnsw": {"M": 32, "efSearch": 128, "efConstruction": 200},
    "ivfpq": {"nlist": 128, "m": 48, "nbits": 8, "nprobe": 16},
}


def make_vectors(n: int, q: int, dim: int, data: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if data == "gaussian":
        return (rng.standard_normal((n, dim), dtype=np.float32), rng.standard_normal((q, dim), dtype=np.float32))
    centres = rng.standard_normal((200, dim), dtype=np.float32)

    def around(count: int) -> np.ndarray:
        return centres[rng.integers(0, len(centres), count)] + 0.7 * rng.standard_normal((count, dim),
                                                                                       dtype=np.float32)
    return around(n), around(q)


def recall_at(run: dict, exact: dict, k: int) -> float:
    return float(np.mean([len({p for p, _ in run[q][:k]} & {p for p, _ in exact[q][:k]}) / k for q in exact]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--data", choices=("clustered", "gaussian"), default="clustered")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    corpus, queries = make_vectors(args.corpus, args.queries, args.dim, args.data)
    ids = [f"p{i}" for i in range(len(corpus))]
    print(f"faiss {faiss.__version__}, GPUs {faiss.get_num_gpus()}, threads torch={torch.get_num_threads()} "
          f"faiss={faiss.omp_get_max_threads()}, load average {os.getloadavg()[0]:.2f}")
    print(f"{args.data} vectors: corpus {corpus.shape}, queries {queries.shape}, k={args.k}, search batch 1024")
    runs = {}
    for kind, params in CONFIGS.items():
        start = time.perf_counter()
        index = faiss_index.build_index(corpus, kind=kind, seed=0, progress=False, **params)
        build = time.perf_counter() - start
        start = time.perf_counter()
        runs[kind] = faiss_index.search(index, ids, queries, k=args.k, batch_size=1024, progress=False)
        seconds = time.perf_counter() - start
        recall = ("" if kind == "flat"
                  else f"  recall@{args.k} vs flat {recall_at(runs[kind], runs['flat'], args.k):.4f}")
        print(f"{kind:6s} {str(params):55s} build {build:6.2f} s  search {seconds:6.2f} s  "
              f"{len(queries) / seconds:9.1f} queries/s{recall}")


if __name__ == "__main__":
    main()
