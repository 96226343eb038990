"""Memory of the corpus-wide structures that are not indexes, measured per passage on the bundle and projected to the
paper's 21,015,324 passages: the README's paper section quotes this script's output.

    .venv/bin/python bench/memory_at_scale.py [--corpus data/corpus.jsonl.gz] [--passages 21015324]

* 06 / 07's ``{passage id: text}`` (``results.load_passage_texts``): the dict and its strings (``sys.getsizeof``);
* ``index_tfidf``: the hashed unigram + bigram counts (CSR: int32 index + float32 value per non-zero), held twice
  while the terms x documents copy is made;
* ``pseudo_queries``: the streamed document-frequency count (one entry per distinct word). Vocabulary grows slower
  than the corpus (Heaps' law, V = K n^beta): beta is fitted on halves of the bundle, a rough projection.

The dense indexes have their own estimate (``ecqg.retrieval.capacity``, checked by every ``retrieve_*`` stage).
"""

from __future__ import annotations

import argparse
import math
import platform
import sys

from ecqg.core.paper import PASSAGES as PAPER_PASSAGES
from ecqg.data.records import read_corpus
from ecqg.retrieval.pseudo_queries import TermWeights
from ecqg.retrieval.tfidf import DEFAULT_PARAMS, _vectorizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="data/corpus.jsonl.gz")
    parser.add_argument("--passages", type=int, default=PAPER_PASSAGES)
    args = parser.parse_args()
    passages = list(read_corpus(args.corpus))
    n, scale = len(passages), args.passages / len(passages)
    print(f"corpus {args.corpus}: {n:,} passages; projected to {args.passages:,} (x{scale:,.0f}); "
          f"{platform.machine()} {platform.processor() or ''}".rstrip())

    texts = {p["id"]: p["text"] for p in passages}
    texts_bytes = sys.getsizeof(texts) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in texts.items())
    del texts
    print(f"06/07 passage texts dict: {texts_bytes / n:,.0f} B/passage -> {texts_bytes * scale / 1e9:,.1f} GB")

    counts = _vectorizer(DEFAULT_PARAMS).transform([p["text"] for p in passages])
    per_nnz = 8  # int32 column index + float32 value
    tfidf = counts.nnz * per_nnz * scale * 2
    print(f"index_tfidf: {counts.nnz / n:,.1f} hashed n-grams/passage -> {counts.nnz * scale / 1e9:,.2f}G non-zeros, "
          f"{tfidf / 1e9:,.1f} GB at the peak (counts + the transposed copy)")

    half = TermWeights(p["text"] for p in passages[: n // 2])
    full = TermWeights(p["text"] for p in passages)
    v_half, v_full = len(half.vocabulary), len(full.vocabulary)
    beta = math.log(v_full / v_half) / math.log(n / (n // 2))
    v_paper = v_full * scale ** beta
    per_word = 150   # a str key (~60 B), an int count, a dict slot: about 150 B in CPython
    print(f"pseudo_queries df count: vocabulary {v_half:,} (half) -> {v_full:,} (all), Heaps beta {beta:.2f} -> "
          f"~{v_paper / 1e6:,.1f}M words, ~{v_paper * per_word / 1e9:,.1f} GB")


if __name__ == "__main__":
    main()
