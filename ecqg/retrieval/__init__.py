"""Retrieval: sparse baselines (BM25 via pyserini, DrQA-style TF-IDF via scikit-learn) and DPR-style distant
supervision. Import the submodules directly (``from ecqg.retrieval.bm25 import BM25Searcher``): importing pyserini
starts a JVM, so nothing heavy is imported here."""
