"""What the paper profile's IVF-PQ index costs against an exact (flat) search, on a trained DPR's real vectors.

    .venv/bin/python bench/ivfpq_recall.py [--run dpr_baseline_s2022] [--nprobe 1 2 4 8 16 32]

The paper profile searches its 21M passages with IVF-PQ (``params/paper.yaml``: nlist 16,384 = ~4 sqrt(N), 96
sub-quantizers of 8 dimensions at 8 bits, nprobe 128 = 0.78% of the cells) where DPR searches a flat index. This
rebuilds a finished run's corpus vectors (its flat index, ``outputs/indexes/dense/<variant>_s<seed>``) as IVF-PQ
with the same shape scaled to the corpus (nlist ~4 sqrt(N) as a power of two, one sub-quantizer per 8 dimensions, 8
bits; the k-means on every vector), encodes the NQ test questions with the run's query encoder, and prints per nprobe:
recall@100 of the exact top 100, and NQ Top-1 / 5 / 20 / 100 against the flat run's. The row whose nprobe / nlist
is closest to the paper's 0.78% is marked. Run it in a checkout whose profile trained the run (``dvc repro
retrieve_dense@baseline-2022``); a smaller corpus than 21M, so the figures are that corpus's, not 21M's.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

PAPER_NPROBE_SHARE = 128 / 16384


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="dpr_baseline_s2022", help="a dense run: dpr_<variant>_s<seed>")
    parser.add_argument("--nprobe", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--dims-per-code", type=int, nargs="+", default=[8],
                        help="dimensions per sub-quantizer (the paper profile: 8); each value builds an index")
    parser.add_argument("--k", type=int, default=100)
    args = parser.parse_args()

    import faiss

    from ecqg.core import config, paths, settings
    from ecqg.core.device import host
    from ecqg.stages import located
    from ecqg.stages.results import load_passage_texts
    from ecqg.retrieval import faiss_index
    from ecqg.retrieval.dense import encode_queries
    from ecqg.retrieval.evaluation import hit_matrix
    from ecqg.retrieval.retriever import load_retriever
    from ecqg.retrieval.run_files import read_run

    s = settings.of(config.load())
    variant_seed = args.run.removeprefix("dpr_")
    flat, ids = faiss_index.load_index(paths.DENSE_INDEXES / variant_seed, use_gpu=False)
    vectors = flat.reconstruct_n(0, flat.ntotal)
    n, dim = vectors.shape
    nlist = 2 ** round(math.log2(4 * math.sqrt(n)))
    questions = located.nq_questions(s.data, s.retrieval)
    model = load_retriever(paths.MODELS / args.run)
    queries = encode_queries(model, [q["question"] for q in questions], progress=False)
    qids = [str(q["id"]) for q in questions]
    text_of = load_passage_texts()

    def top_k(run) -> list[float]:
        hits = hit_matrix(run, questions, text_of, args.k)
        return [round(100 * float(hits[:, :k].any(axis=1).mean()), 1) for k in (1, 5, 20, 100)]

    exact = faiss_index.search(flat, ids, queries, args.k, qids=qids, progress=False)
    stored = read_run(paths.run_file(args.run, located.TEST_SET))
    agree = np.mean([[p for p, _ in exact[q][:20]] == [p for p, _ in stored[q][:20]] for q in qids])
    closest = min(args.nprobe, key=lambda p: abs(p / nlist - PAPER_NPROBE_SHARE))
    print(json.dumps({"run": args.run, "passages": n, "dim": dim, "questions": len(qids), "nlist": nlist,
                      "nbits": 8, "flat_bytes_per_vector": 4 * dim, "exact_matches_stored_run_top20":
                      round(float(agree), 3), "host": host(), "faiss": faiss.__version__}))
    print(f"flat (exact): NQ Top-1/5/20/100 {top_k(exact)}")
    for dims in args.dims_per_code:
        m = dim // dims
        start = time.perf_counter()
        index = faiss_index.build_index(vectors, "ivfpq", use_gpu=False, progress=False, nlist=nlist, m=m, nbits=8,
                                        nprobe=args.nprobe[0], train_size=n)
        print(f"ivfpq m {m} ({dims} dimensions per code, {m} bytes per vector), built in "
              f"{time.perf_counter() - start:.1f} s")
        faiss_ivf = faiss.extract_index_ivf(index)
        for nprobe in args.nprobe:
            faiss_ivf.nprobe = nprobe
            start = time.perf_counter()
            run = faiss_index.search(index, ids, queries, args.k, qids=qids, progress=False)
            seconds = time.perf_counter() - start
            recall = np.mean([len({p for p, _ in run[q]} & {p for p, _ in exact[q]}) / args.k for q in qids])
            mark = "  <- the paper's nprobe / nlist" if nprobe == closest else ""
            print(f"  nprobe {nprobe:3d} ({100 * nprobe / nlist:5.2f}% of cells): recall@{args.k} {recall:.3f}, "
                  f"NQ Top-1/5/20/100 {top_k(run)}, {len(qids) / seconds:,.0f} queries/s{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
