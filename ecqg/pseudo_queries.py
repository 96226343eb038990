"""Generator-free pre-training pairs (Luo et al. 2022, §5): pseudo-queries built from a passage's own words.

* **ETM** (expanded title matching): the query is the passage's title plus its ``m`` words of highest TF-IDF weight;
  the positive is the passage.
* **RSM** (reduced sentence matching): the query is one sentence of the passage reduced to its ``m`` words of
  highest TF-IDF weight (in the sentence's order); the positive is the passage.

Choices the paper's text does not fix, made here: TF-IDF weights are scikit-learn's (``TfidfVectorizer``, English
stop words removed, sublinear tf) with the IDF fitted on the whole corpus; a word already in the title is not
repeated in the ETM query; the RSM sentence is drawn from the passage's spaCy sentences with at least ``m`` content
words, seeded per passage. Negatives: DPR's BM25 rule, as for the synthetic sets, with one guard the paper needs
here: a passage that shares its title with the positive is never a hard negative (about half of the bundle's passages
share a title; for ETM, whose query starts with the title, such a passage is as good a match as the positive).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence

import numpy as np

KINDS = ("etm", "rsm")
_WORD = re.compile(r"(?u)\b\w\w+\b")   # scikit-learn's default token pattern


class TermWeights:
    """Corpus TF-IDF: fit once on every passage text, then weigh the words of any text."""

    def __init__(self, texts: Sequence[str]):
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(lowercase=True, stop_words="english", sublinear_tf=True,
                                          token_pattern=_WORD.pattern)
        self.vectorizer.fit(texts)
        self.vocabulary = self.vectorizer.vocabulary_
        self.idf = self.vectorizer.idf_

    def top_words(self, text: str, m: int, exclude: set[str] = frozenset()) -> list[str]:
        """The ``m`` words of ``text`` with the highest tf-idf (ties: first occurrence), in the text's order."""
        words = [w.lower() for w in _WORD.findall(text)]
        counts: dict[str, int] = {}
        first: dict[str, int] = {}
        for i, w in enumerate(words):
            if w in self.vocabulary and w not in exclude:
                counts[w] = counts.get(w, 0) + 1
                first.setdefault(w, i)
        weight = {w: (1.0 + np.log(c)) * self.idf[self.vocabulary[w]] for w, c in counts.items()}
        chosen = sorted(weight, key=lambda w: (-weight[w], first[w]))[:m]
        return sorted(chosen, key=lambda w: first[w])


def etm_query(passage: Mapping, weights: TermWeights, m: int) -> str:
    title = passage.get("title") or ""
    title_words = {w.lower() for w in _WORD.findall(title)}
    return " ".join([title] + weights.top_words(passage["text"], m, exclude=title_words)).strip()


def rsm_query(passage_id: str, sentences: Sequence[str], weights: TermWeights, m: int, seed: int) -> str | None:
    """A seeded choice among the sentences with at least ``m`` content words, reduced to its top ``m``; None when
    the passage has no such sentence."""
    usable = [s for s in sentences if len(weights.top_words(s, m)) >= m]
    if not usable:
        return None
    sentence = random.Random(f"{seed}-rsm-{passage_id}").choice(usable)
    return " ".join(weights.top_words(sentence, m))


def build(kind: str, passage_ids: Sequence[str], passages: Mapping[str, Mapping], weights: TermWeights, m: int,
          seed: int, sentences: Mapping[str, Sequence[str]] | None = None) -> tuple[list[dict], dict]:
    """Pseudo-query records ``{id, question, passage_id, generator}`` for the passages, in order; and the counts of
    passages that gave none (RSM: no sentence with ``m`` content words)."""
    if kind not in KINDS:
        raise ValueError(f"pseudo-query kind must be one of {KINDS}, not {kind!r}")
    records, skipped = [], 0
    for pid in passage_ids:
        if kind == "etm":
            query = etm_query(passages[pid], weights, m)
        else:
            query = rsm_query(pid, (sentences or {})[pid], weights, m, seed)
        if not query:
            skipped += 1
            continue
        records.append({"id": f"{kind}-{pid}", "question": query, "passage_id": pid, "generator": kind})
    return records, {"passages": len(passage_ids), "queries": len(records), "no_usable_sentence": skipped}


def same_title_guard(passages: Mapping[str, Mapping]):
    """``excluded(positive id, candidate id)``: True when the candidate shares the positive's title (a false
    negative for a title-led pseudo-query)."""
    def norm(title: str) -> str:
        return " ".join(title.lower().split())

    titles = {pid: norm(p.get("title") or "") for pid, p in passages.items()}
    return lambda positive, candidate: bool(titles.get(positive)) and titles.get(positive) == titles.get(candidate)
