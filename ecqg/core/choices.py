"""The names params may give for retrieval components, in one light module: the index builder
(:mod:`ecqg.retrieval.dense`), the retriever registry (:mod:`ecqg.retrieval.retriever`) and params validation
(:mod:`ecqg.core.config`, which must not import FAISS or torch) all read them from here."""

# FAISS index kinds and their settings with defaults.
INDEX_KINDS = {
    "flat": {},                                                         # exact inner product (DPR's choice)
    "hnsw": {"M": 32, "efSearch": 128, "efConstruction": 200},          # graph, fast on CPU
    "ivfpq": {"nlist": 1024, "m": 64, "nbits": 8, "nprobe": 32, "train_size": None},  # compressed, paper-size
}

# Retriever kinds (``dpr.model``) -> the module that defines and registers the class (imported on first use).
RETRIEVERS = {
    "biencoder": "ecqg.retrieval.biencoder",      # DPR: one [CLS] vector per passage, dot product
    "polydpr": "ecqg.retrieval.polydpr",          # Poly-DPR: K code-pooled vectors per passage, best one scores
}
