"""The FAISS index kinds params may name, with their settings' defaults, in one light module: the index builder
(:mod:`ecqg.retrieval.faiss_index`), the capacity check and params validation (:mod:`ecqg.core.config`, which
must not import FAISS or torch) read them from here. The retriever kinds are declared with their settings in
:mod:`ecqg.core.settings.retrievers`."""

# FAISS index kinds and their settings with defaults.
INDEX_KINDS = {
    "flat": {},                                                         # exact inner product (DPR's choice)
    "hnsw": {"M": 32, "efSearch": 128, "efConstruction": 200},          # graph, fast on CPU
    "ivfpq": {"nlist": 1024, "m": 64, "nbits": 8, "nprobe": 32, "train_size": None},  # compressed, paper-size
}
