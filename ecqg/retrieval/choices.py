"""The names params may give for retrieval components, in one light module: the index builder
(:mod:`ecqg.retrieval.dense`), the retriever registry (:mod:`ecqg.retrieval.retriever`) and params validation
(:mod:`ecqg.config`, which must not import FAISS or torch) all read them from here."""

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

# The dense variants stage 05 trains (``ecqg.pipeline.dense``): DPR on the gold data, DPR pre-trained on stage 04's
# UnCon / Mixed synthetic set first, on the generator-free ETM / RSM set (stage pseudo_queries, Luo et al. 2022) or
# on TempQG's template-conditioned questions (stage tempqg, Luo et al. 2022) first. Params name them
# (``hybrid.variants``), so they are listed here.
DENSE_VARIANTS = ("baseline", "uncon", "mixed", "etm", "rsm", "tempqg")
# Poly-DPR is trained beside DPR variants (as poly_<data>): the 2 x 2 of architecture and pre-training (baseline,
# mixed), and Luo et al.'s best recipe, pre-trained on RSM's pseudo-queries and then on TempQG's questions.
POLY_VARIANT_DATA = ("baseline", "mixed", "rsm_tempqg")
# What a hybrid may fuse with BM25 (``hybrid.variants``).
HYBRID_VARIANTS = DENSE_VARIANTS + tuple("poly_" + v for v in POLY_VARIANT_DATA)
