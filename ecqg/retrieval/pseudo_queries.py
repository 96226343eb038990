"""Generator-free pre-training pairs (Luo et al. 2022, §5): pseudo-queries built from a passage's own words.

* **ETM** (expanded title matching): the query is the passage's title plus its ``m`` words of highest TF-IDF weight;
  the positive is the passage.
* **RSM** (reduced sentence matching): the query is one sentence of the passage reduced to its ``m`` words of
  highest TF-IDF weight (in the sentence's order); the positive is the passage.

Choices the paper's text does not fix, made here (docs/design.md, "ETM / RSM"):

* TF-IDF weights are scikit-learn's (``TfidfVectorizer``, English stop words removed, sublinear tf) with the IDF
  fitted on the whole corpus; a word already in the title is not repeated in the ETM query.
* The sets are built over a given list of passages *with repeats* (the pipeline passes the UnCon set's positives, so
  ETM / RSM have its passages and its size). A passage's first query is the paper's (its top ``m`` words); a
  passage's j-th query (j >= 1) must differ, so RSM moves to the next sentence of a seeded order and ETM, which has
  one text only, takes a seeded sample of ``m`` of the passage's top ``2m`` words.
* The RSM sentence is drawn from the passage's spaCy sentences with at least ``m`` content words; a passage without
  one gives its richest sentence, shorter (counted as ``short_queries``), so no passage of the pool is dropped.
* Negatives: the best BM25 hit that is neither the positive nor a passage sharing the positive's title (about half
  of the bundle's passages share a title; for ETM, whose query starts with the title, such a passage is as good a
  match as the positive, a false negative). Pseudo-queries carry no answer, so DPR's answer rule does not apply.
"""

from __future__ import annotations

import collections
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from ecqg.core.errors import DataFormatError
from ecqg.core.paths import PSEUDO_KINDS as KINDS
_WORD = re.compile(r"(?u)\b\w\w+\b")   # scikit-learn's default token pattern


class TermWeights:
    """Corpus TF-IDF: document frequencies counted once over every passage text, then the words of any text weighed.

    The idf is scikit-learn's ``TfidfVectorizer`` idf (its analyzer: lowercase, English stop words removed, its token
    pattern; smooth idf ``ln((1 + N) / (1 + df)) + 1``), counted from a stream: ``fit`` would build the whole
    document-term matrix first (about 1.3 billion non-zeros for 21M passages), a word -> df count holds only the
    vocabulary (``tests/test_pseudo_queries.py`` checks the idf equals ``fit``'s)."""

    def __init__(self, texts: Iterable[str]):
        # scikit-learn (for its analyzer) loads only when idf is counted
        from sklearn.feature_extraction.text import TfidfVectorizer

        analyze = TfidfVectorizer(lowercase=True, stop_words="english", token_pattern=_WORD.pattern).build_analyzer()
        df: collections.Counter = collections.Counter()
        n = 0
        for n, text in enumerate(texts, 1):
            df.update(set(analyze(text)))
        words = sorted(df)
        self.vocabulary = {w: i for i, w in enumerate(words)}
        self.idf = np.log((n + 1) / (np.array([df[w] for w in words], dtype=np.float64) + 1.0)) + 1.0

    def ranked_words(self, text: str, exclude: set[str] = frozenset()) -> tuple[list[str], dict[str, int]]:
        """The content words of ``text`` by falling tf-idf (ties: first occurrence), and each one's first position."""
        counts: dict[str, int] = {}
        first: dict[str, int] = {}
        for i, w in enumerate(w.lower() for w in _WORD.findall(text)):
            if w in self.vocabulary and w not in exclude:
                counts[w] = counts.get(w, 0) + 1
                first.setdefault(w, i)
        weight = {w: (1.0 + np.log(c)) * self.idf[self.vocabulary[w]] for w, c in counts.items()}
        return sorted(weight, key=lambda w: (-weight[w], first[w])), first

    def top_words(self, text: str, m: int, exclude: set[str] = frozenset()) -> list[str]:
        """The ``m`` words of ``text`` with the highest tf-idf (ties: first occurrence), in the text's order."""
        return self.query_words(text, m, exclude)

    def query_words(self, text: str, m: int, exclude: set[str] = frozenset(), resample_key: str | None = None
                    ) -> list[str]:
        """The top ``m`` words in the text's order; with ``resample_key``, a sample of ``m`` of the top ``2m``
        seeded by that key instead (a passage's further queries)."""
        ranked, first = self.ranked_words(text, exclude)
        if resample_key is None or len(ranked) <= m:
            chosen = ranked[:m]
        else:
            chosen = random.Random(resample_key).sample(ranked[:2 * m], m)
        return sorted(chosen, key=lambda w: first[w])


def etm_query(passage: Mapping, weights: TermWeights, m: int, occurrence: int = 0, seed: int = 0,
              passage_id: str = "") -> str:
    """The title, then the passage's top ``m`` words not in the title (``occurrence`` >= 1: a sample seeded by
    ``seed``, ``passage_id`` and the occurrence)."""
    title = passage.get("title") or ""
    title_words = {w.lower() for w in _WORD.findall(title)}
    key = None if occurrence == 0 else f"{seed}-etm-{passage_id}-{occurrence}"
    return " ".join([title] + weights.query_words(passage["text"], m, exclude=title_words, resample_key=key)).strip()


def rsm_query(passage_id: str, sentences: Sequence[str], weights: TermWeights, m: int, seed: int,
              occurrence: int = 0) -> tuple[str, bool]:
    """(query, short): sentence ``occurrence`` of a seeded order of the sentences with at least ``m`` content words,
    reduced to its top ``m`` (past the last sentence the order repeats with a seeded sample of the top ``2m``).
    Without such a sentence, the richest one's words and ``short`` True; ``("", True)`` when there are none."""
    content = [len(weights.ranked_words(s)[0]) for s in sentences]
    usable = [s for s, n in zip(sentences, content) if n >= m]
    if not usable:
        if not content or max(content) == 0:
            return "", True
        return " ".join(weights.query_words(sentences[int(np.argmax(content))], m)), True
    order = random.Random(f"{seed}-rsm-{passage_id}").sample(usable, len(usable))
    turn, position = divmod(occurrence, len(order))
    key = None if turn == 0 else f"{seed}-rsm-{passage_id}-{occurrence}"
    return " ".join(weights.query_words(order[position], m, resample_key=key)), False


def build(kind: str, passage_ids: Sequence[str], passages: Mapping[str, Mapping], weights: TermWeights, m: int,
          seed: int, sentences: Mapping[str, Sequence[str]] | None = None) -> tuple[list[dict], dict]:
    """One pseudo-query record ``{id, question, passage_id, generator}`` per entry of ``passage_ids`` (a passage may
    repeat: its j-th entry gets its j-th query), in order; and counts. An error names the passage an entry lacks."""
    if kind not in KINDS:
        raise ValueError(f"pseudo-query kind must be one of {KINDS}, not {kind!r}")
    records, seen = [], collections.Counter()
    counts = {"entries": len(passage_ids), "passages": len(set(passage_ids)), "queries": 0, "repeated_passage": 0,
              "short_queries": 0, "empty": 0, "m": m}
    for i, pid in enumerate(passage_ids):
        if pid not in passages:
            raise DataFormatError("pseudo-query passage pool", i, "passage_id", f"passage {pid!r} is not in the corpus")
        occurrence = seen[pid]
        seen[pid] += 1
        if kind == "etm":
            query, short = etm_query(passages[pid], weights, m, occurrence, seed, pid), False
        else:
            if sentences is None or pid not in sentences:
                raise DataFormatError("pseudo-query passage pool", i, "passage_id",
                                      f"RSM needs the sentences of passage {pid!r}")
            query, short = rsm_query(pid, sentences[pid], weights, m, seed, occurrence)
        counts["repeated_passage"] += occurrence > 0
        counts["short_queries"] += short and bool(query)
        if not query:
            counts["empty"] += 1
            continue
        records.append({"id": f"{kind}-{pid}-{occurrence}", "question": query, "passage_id": pid, "generator": kind})
    counts["queries"] = len(records)
    counts["distinct_queries"] = len({r["question"].lower() for r in records})
    counts["mean_words"] = round(float(np.mean([len(r["question"].split()) for r in records])), 2) if records else None
    return records, counts


def same_title_guard(passages: Mapping[str, Mapping]) -> Callable[[str, str], bool]:
    """``excluded(positive id, candidate id)``: True when the candidate shares the positive's title (a false
    negative for a title-led pseudo-query)."""
    def norm(title: str) -> str:
        return " ".join(title.lower().split())

    titles = {pid: norm(p.get("title") or "") for pid, p in passages.items()}
    return lambda positive, candidate: bool(titles.get(positive)) and titles.get(positive) == titles.get(candidate)


def dpr_examples(records: Sequence[Mapping], run: Mapping[str, Sequence[tuple[str, float]]],
                 passages: Mapping[str, Mapping], n_hard: int = 1) -> tuple[list[dict], dict]:
    """DPR retriever examples (answers empty) with ``n_hard`` BM25 hard negatives each from ``run``: the best hits
    that are neither the positive nor of the positive's title. Figures: how often the guard skipped a hit, how
    often BM25 ranks the positive first, questions left with fewer negatives."""
    excluded = same_title_guard(passages)
    examples = []
    stats = {"questions": len(records), "n_hard": n_hard, "fewer_hard_negatives": 0, "same_title_skipped": 0,
             "positive_bm25_top1": 0}
    for i, rec in enumerate(records):
        if rec["id"] not in run:
            raise DataFormatError("pseudo-queries", i, "id", f"query {rec['id']!r} has no BM25 run")
        hits = list(run[rec["id"]])
        positive = rec["passage_id"]
        stats["positive_bm25_top1"] += bool(hits) and hits[0][0] == positive
        negatives = []
        for pid, score in hits:
            if pid == positive:
                continue
            if excluded(positive, pid):
                stats["same_title_skipped"] += 1
                continue
            negatives.append((pid, score))
            if len(negatives) == n_hard:
                break
        stats["fewer_hard_negatives"] += len(negatives) < n_hard
        p = passages[positive]
        examples.append({
            "dataset": f"ecqg_{rec['generator']}", "id": rec["id"], "generator": rec["generator"],
            "question": rec["question"], "answers": [],
            "positive_ctxs": [{"title": p.get("title") or "", "text": p["text"], "passage_id": positive}],
            "negative_ctxs": [],
            "hard_negative_ctxs": [{"title": passages[pid].get("title") or "", "text": passages[pid]["text"],
                                    "passage_id": pid, "score": float(score)} for pid, score in negatives]})
    return examples, stats
