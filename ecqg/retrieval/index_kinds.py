"""The FAISS index kinds and their settings with defaults: one table read by the index builder
(:mod:`ecqg.retrieval.dense`) and by params validation (:mod:`ecqg.config`), which must not import FAISS or torch."""

INDEX_KINDS = {
    "flat": {},                                                         # exact inner product (DPR's choice)
    "hnsw": {"M": 32, "efSearch": 128, "efConstruction": 200},          # graph, fast on CPU
    "ivfpq": {"nlist": 1024, "m": 64, "nbits": 8, "nprobe": 32, "train_size": None},  # compressed, paper-size
}
