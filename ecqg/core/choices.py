"""The names params may give for retrieval components, in one light module: the index builder
(:mod:`ecqg.retrieval.dense`), the retriever registry (:mod:`ecqg.retrieval.retriever`) and params validation
(:mod:`ecqg.core.config`, which must not import FAISS or torch) all read them from here."""

from dataclasses import dataclass

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


@dataclass(frozen=True)
class RetrieverTraits:
    """What the pipeline asks of a retriever kind, declared beside its name so that no stage compares kind strings
    (and the DAG writer and params validation need not import torch to ask): ``settings`` names the params block of
    its own settings (its stages depend on it; its constructor takes its keys), ``one_vector`` whether a passage is
    one [CLS] vector whose attention stage 06 analyses and the Table 1 probe scores, ``seeded_init`` whether it adds
    weights drawn from the training seed when built (the constructor takes ``code_seed``)."""

    settings: str | None = None
    one_vector: bool = True
    seeded_init: bool = False


TRAITS = {"biencoder": RetrieverTraits(), "polydpr": RetrieverTraits("polydpr", one_vector=False, seeded_init=True)}


def traits(kind: str) -> RetrieverTraits:
    if kind not in TRAITS:
        raise ValueError(f"unknown retriever kind {kind!r}; known: {sorted(TRAITS)}")
    return TRAITS[kind]
