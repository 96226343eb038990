"""Passages/s of the attention study's extraction (``ecqg.analysis.attention``: batched, length-sorted [CLS] attention plus
spaCy NER / sentences through ``nlp.pipe``) against a plain per-passage loop.

    .venv/bin/python bench/bench_attention.py [--passages 300] [--batch-size 32] [--max-length 128] [--threads N]

Both sides use the bundled MiniLM (eager attention) as the passage encoder and the bundled en_core_web_sm, on the
same real passages (``data/corpus.jsonl.gz``):

* ecqg: ``cls_attention`` (tokenise once, longest-first batches padded per batch, ``inference_mode``) and
  ``ecqg.data.text.analyze`` (``nlp.pipe`` with tagger / attribute_ruler / lemmatizer off);
* plain: for each passage, tokenise it, run the model under ``no_grad``, take the last layer's [CLS] row, then
  ``nlp(text)`` with the same components off (so the gap measures batching, not the pipeline choice).

The two sides' attention vectors are checked to agree.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np
import torch

from ecqg.analysis.attention import cls_attention
from ecqg.data.records import read_corpus
from ecqg.runtime.models import load_spacy
from ecqg.retrieval.biencoder import BiEncoder
from ecqg.data.text import SPACY_UNUSED, analyze

ROOT = Path(__file__).resolve().parents[1]
CORPORA = (ROOT / "data" / "corpus.jsonl.gz", ROOT / "outputs" / "data" / "corpus.jsonl")


def load_passages(n: int) -> list[dict]:
    path = next((p for p in CORPORA if p.is_file()), None)
    if path is None:
        raise SystemExit(f"no corpus at {' or '.join(map(str, CORPORA))}; build the data bundle first")
    return list(itertools.islice(read_corpus(path), n))


def plain_attention(model: BiEncoder, titles, texts, max_length: int) -> list[np.ndarray]:
    out = []
    with torch.no_grad():
        for title, text in zip(titles, texts):
            batch = model.tokenizer(title, text, truncation="only_second", max_length=max_length,
                                    return_tensors="pt")
            att = model.passage_encoder(**batch, output_attentions=True).attentions[-1]
            out.append(att[0, :, 0, :].mean(0).numpy())
    return out


def plain_spacy(texts) -> list:
    nlp = load_spacy(disable=SPACY_UNUSED)
    return [(doc.ents, list(doc.sents)) for doc in map(nlp, texts)]


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128, help="params: dpr.passage_max_length (mini: 128)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    passages = load_passages(args.passages)
    titles, texts = [p.get("title") or "" for p in passages], [p["text"] for p in passages]
    model = BiEncoder.from_base("bundled:minilm", passage_max_length=args.max_length, attn_implementation="eager")
    model.eval()
    analyze(texts[:8])                                   # load spaCy and warm both paths up
    cls_attention(model, titles[:8], texts[:8], args.batch_size)

    fast_att, t_fast_att = timed(cls_attention, model, titles, texts, args.batch_size)
    _, t_fast_nlp = timed(analyze, texts)
    slow_att, t_slow_att = timed(plain_attention, model, titles, texts, args.max_length)
    _, t_slow_nlp = timed(plain_spacy, texts)

    diff = max(float(np.abs(a.attention - b).max()) for a, b in zip(fast_att, slow_att))
    n = len(passages)
    tokens = sum(len(a.attention) for a in fast_att)
    print(f"{n} passages, {tokens / n:.1f} tokens each on average (max length {args.max_length}), "
          f"batch {args.batch_size}, {torch.get_num_threads()} torch threads")
    print(f"{'':>26}{'ecqg':>12}{'plain loop':>14}{'speed-up':>10}")
    for name, fast, slow in [("[CLS] attention", t_fast_att, t_slow_att), ("spaCy NER + sentences", t_fast_nlp,
                                                                            t_slow_nlp),
                             ("total", t_fast_att + t_fast_nlp, t_slow_att + t_slow_nlp)]:
        print(f"{name + ' (psg/s)':>26}{n / fast:>12.1f}{n / slow:>14.1f}{slow / fast:>9.2f}x")
    print(f"max |attention difference| between the two paths: {diff:.2e}")


if __name__ == "__main__":
    main()
