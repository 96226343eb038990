"""TempQG's question templates (Luo et al., AAAI 2022, §4): questions with their specific entities blanked, near
duplicates merged, one template per cluster.

1. **Blanks.** Each training question's named entities (spaCy, every label, every mention) are looked up in the
   corpus: an entity found in fewer than ``min_df`` passages (its document frequency, a whole-word match,
   case-insensitive) is specific and becomes ``_``; a frequent one (spaCy tags "river" or "French" as well) stays,
   so the template keeps the words a question type is made of. Adjacent blanks merge into one.
2. **Clusters.** Templates are compared by their word sequences (lower-cased) with RapidFuzz's normalised Indel
   similarity (``1 - edits / (len_a + len_b)``, insertions and deletions): in order of frequency, then length, then
   text, a template joins the cluster of the most similar earlier leader when that similarity reaches ``threshold``
   (the paper: 0.75), else it leads a cluster of its own. The order makes the result the same on every run.
3. **Representatives.** A cluster's template is its shortest member (fewest words, then fewest characters, then
   text), or the second shortest (``representative: second_shortest``) where the shortest is often too bare to
   guide a generator; a single-member cluster keeps its one.

The statistics (:func:`template_statistics`) say how many questions got a blank, how many templates and clusters
there are, how large the clusters are, with examples.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Indel

from ecqg.runtime.models import load_spacy

BLANK = "_"
REPRESENTATIVES = ("shortest", "second_shortest")
WORD = r"(?u)\b\w+\b"        # the words of the document-frequency count, one-letter words included
_ADJACENT_BLANKS = re.compile(r"(?<!\w)_(?:\s+_)+(?!\w)")


@dataclass(frozen=True)
class Templates:
    """Clustered templates: ``representatives[c]`` is cluster ``c``'s template, ``members[c]`` its distinct raw
    templates (most frequent first), ``of_question[i]`` the cluster of question ``i``."""

    representatives: tuple[str, ...]
    members: tuple[tuple[str, ...], ...]
    of_question: tuple[int, ...]
    raw: tuple[str, ...]               # each question's template before clustering


def _words(text: str) -> list[str]:
    return re.findall(WORD, text.lower())


def entity_document_frequency(entities: Iterable[str], passages: Iterable[str], max_words: int = 8) -> dict[str, int]:
    """How many of ``passages`` contain each entity as a word sequence (case-insensitive); scikit-learn's
    ``CountVectorizer`` over the entities' own n-grams, streamed over the passages. An entity of more than
    ``max_words`` words counts 0 (specific)."""
    # scikit-learn loads only to count document frequencies
    from sklearn.feature_extraction.text import CountVectorizer

    keys = {entity: " ".join(_words(entity)) for entity in dict.fromkeys(entities)}
    vocabulary = sorted({k for k in keys.values() if k and len(k.split()) <= max_words})
    if not vocabulary:
        return {entity: 0 for entity in keys}
    longest = max(len(k.split()) for k in vocabulary)
    counter = CountVectorizer(vocabulary=vocabulary, ngram_range=(1, longest), binary=True, lowercase=True,
                              token_pattern=WORD, dtype=np.int32)
    df = np.asarray(counter.transform(passages).sum(axis=0)).ravel()
    index = counter.vocabulary_
    return {entity: int(df[index[k]]) if k in index else 0 for entity, k in keys.items()}


def blank_entities(question: str, spans: Sequence[tuple[int, int]], specific: Sequence[bool]) -> str:
    """``question`` with each specific entity span (``(start_char, end_char)``) replaced by ``_`` (a space added only
    where a word would touch it), adjacent blanks merged, whitespace collapsed."""
    out, at = [], 0
    for (start, end), blank in sorted(zip(spans, specific)):
        if not blank or start < at:
            continue
        before, after = question[at:start], question[end:end + 1]
        out += [before, (" " if before[-1:].isalnum() else "") + BLANK + (" " if after.isalnum() else "")]
        at = end
    out.append(question[at:])
    return _ADJACENT_BLANKS.sub(BLANK, " ".join("".join(out).split()))


def ner_labels() -> tuple[str, ...]:
    """Every label the bundled spaCy NER predicts: templates blank specific entities of any kind (dates and numbers
    too, which :data:`ecqg.data.text.ENTITY_TYPES` leaves out of the conditioning candidates)."""
    return tuple(load_spacy().get_pipe("ner").labels)


def extract_templates(questions: Sequence[str], passages: Iterable[str], min_df: int, *,
                      nlp_batch_size: int = 64) -> tuple[list[str], dict[str, int]]:
    """Each question's raw template and the document frequency of every entity seen (spaCy NER through
    :func:`ecqg.data.text.analyze`, every label, every occurrence)."""
    # data.text brings pyserini; this module imports without it
    from ecqg.data.text import analyze

    if min_df < 1:
        raise ValueError(f"min_df must be >= 1, got {min_df!r}")
    analyses = analyze(list(questions), batch_size=nlp_batch_size, types=ner_labels())
    df = entity_document_frequency((e.text for a in analyses for e in a.entities), passages)
    templates = []
    for question, analysis in zip(questions, analyses):
        spans = [(span, df[e.text] < min_df) for e in analysis.entities for span in e.occurrences]
        templates.append(blank_entities(question, [s for s, _ in spans], [b for _, b in spans]))
    return templates, df


def cluster_templates(raw: Sequence[str], threshold: float = 0.75,
                      representative: str = "shortest") -> Templates:
    """Cluster the raw templates (see the module docstring) and pick each cluster's template."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    if representative not in REPRESENTATIVES:
        raise ValueError(f"representative must be one of {REPRESENTATIVES}, not {representative!r}")
    counts = Counter(raw)
    order = sorted(counts, key=lambda t: (-counts[t], len(_words(t)), t))
    leaders: list[list[str]] = []          # each cluster's first template, as words
    clusters: list[list[str]] = []
    cluster_of: dict[str, int] = {}
    for template in order:
        words = _words(template)
        best = process.extractOne(words, leaders, scorer=Indel.normalized_similarity, score_cutoff=threshold,
                                  processor=None) if leaders else None
        if best is None:
            cluster_of[template] = len(clusters)
            leaders.append(words)
            clusters.append([template])
        else:
            cluster_of[template] = best[2]
            clusters[best[2]].append(template)

    def pick(members: list[str]) -> str:
        ranked = sorted(members, key=lambda t: (len(_words(t)), len(t), t))
        return ranked[1] if representative == "second_shortest" and len(ranked) > 1 else ranked[0]

    return Templates(representatives=tuple(pick(m) for m in clusters), members=tuple(tuple(m) for m in clusters),
                     of_question=tuple(cluster_of[t] for t in raw), raw=tuple(raw))


def template_statistics(templates: Templates, examples: int = 10) -> dict:
    """Counts, cluster sizes (in questions) and the largest clusters with a few members each."""
    sizes = Counter(templates.of_question)
    n = len(templates.raw)
    largest = sorted(sizes, key=lambda c: (-sizes[c], c))[:examples]
    return {
        "questions": n,
        "with_blank": sum(BLANK in _words(t) for t in templates.raw),
        "distinct_templates": len(set(templates.raw)),
        "clusters": len(templates.representatives),
        "singleton_clusters": sum(size == 1 for size in sizes.values()),
        "largest_cluster": max(sizes.values(), default=0),
        "mean_cluster_size": round(n / max(len(sizes), 1), 2),
        "examples": [{"template": templates.representatives[c], "questions": sizes[c],
                      "members": list(templates.members[c][:3])} for c in largest],
    }


def assign(templates: Templates) -> list[str]:
    """Each question's cluster template, in question order."""
    return [templates.representatives[c] for c in templates.of_question]


def candidates(templates: Templates, min_size: int) -> list[int]:
    """The clusters a selector chooses among: those holding at least ``min_size`` training questions (a template
    seen once is one question with its entities blanked, not a reusable question form), largest first."""
    sizes = Counter(templates.of_question)
    return sorted((c for c, n in sizes.items() if n >= min_size), key=lambda c: (-sizes[c], c))


def similarity(a: str, b: str) -> float:
    """The clustering's similarity of two templates: normalised Indel over their lower-cased words."""
    return float(Indel.normalized_similarity(_words(a), _words(b)))


def adherence(question_templates: Sequence[str], conditioning: Sequence[str], threshold: float) -> dict:
    """How closely generated questions follow the templates they were given: each question's own template (its
    specific entities blanked, :func:`extract_templates`) against the conditioning one; the mean similarity and the
    share that would join the conditioning template's cluster (similarity >= ``threshold``)."""
    if len(question_templates) != len(conditioning):
        raise ValueError(f"{len(question_templates)} question templates but {len(conditioning)} conditioning ones")
    scores = [similarity(q, c) for q, c in zip(question_templates, conditioning)]
    n = len(scores)
    return {"n": n, "mean_similarity": round(sum(scores) / n, 4) if n else None,
            "follows_template": round(sum(s >= threshold for s in scores) / n, 4) if n else None}
