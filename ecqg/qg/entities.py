"""Conditioning entities for the generators' training triples, and the held-out split.

The conditioning entity of a gold triple is a spaCy noun chunk of its question that also occurs in the passage
(case-insensitive, whole words): objects / prepositional objects first, then other non-subject chunks, then subjects;
the wh-phrase ("which team"), pronouns and stop-word-only chunks never. Triples without one are counted by reason
(``no_noun_chunk``, ``only_wh_or_pronoun``, ``not_in_passage``) and train only the unconditioned generator.
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from typing import Any, Mapping, Sequence

from tqdm.auto import tqdm

from ecqg.data.text import entity_key
from ecqg.runtime.models import load_spacy

log = logging.getLogger(__name__)

NO_ENTITY_REASONS = ("no_noun_chunk", "only_wh_or_pronoun", "not_in_passage")
_WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_STRIP_LEADING_TAGS = frozenset({"DT", "PDT", "PRP$", "WDT", "WP", "WP$"})
_OBJECT_DEPS = frozenset({"pobj", "dobj"})
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})


def find_mention(text: str, surface: str) -> int | None:
    """Start of the first case-insensitive, whole-word occurrence of ``surface`` in ``text`` (None if absent)."""
    if not surface.strip():
        return None
    pattern = r"(?<!\w)" + r"\s+".join(re.escape(w) for w in surface.split()) + r"(?!\w)"
    match = re.search(pattern, text, flags=re.IGNORECASE)
    return match.start() if match else None


def _chunk_candidates(doc) -> tuple[list[tuple[tuple, str, str | None]], int]:
    """Usable noun chunks of a parsed question as ``(sort key, surface, NER label)``, and the number of chunks.

    Each chunk (leading determiners / possessives dropped) comes with fall-backs inside it, tried after it: its
    named entities and its runs of proper nouns ("the Norman religion" -> "Norman"), for chunks whose exact wording
    is not in the passage.
    """
    chunks = list(doc.noun_chunks)
    out = []
    for chunk in chunks:
        if any(t.tag_ in _WH_TAGS for t in chunk):
            continue                                   # the wh-phrase asks for the answer: never the entity
        tokens = list(chunk)
        while tokens and (tokens[0].tag_ in _STRIP_LEADING_TAGS or tokens[0].is_punct):
            tokens = tokens[1:]
        if not tokens or all(t.is_stop or t.pos_ == "PRON" or t.is_punct for t in tokens):
            continue
        dep = chunk.root.dep_
        tier = 0 if dep in _OBJECT_DEPS else 2 if dep in _SUBJECT_DEPS else 1
        spans = [doc[tokens[0].i : tokens[-1].i + 1]]
        spans += [e for e in doc.ents if spans[0].start <= e.start and e.end <= spans[0].end]
        run: list = []
        for t in [*tokens, None]:
            if t is not None and t.pos_ == "PROPN":
                run.append(t)
            elif run:
                spans.append(doc[run[0].i : run[-1].i + 1])
                run = []
        seen = set()
        for variant, span in enumerate(spans):
            if span.text.casefold() in seen or all(t.is_stop or t.is_punct for t in span):
                continue
            seen.add(span.text.casefold())
            label = next((e.label_ for e in doc.ents if e.start <= span.start and span.end <= e.end), None)
            out.append(((tier, variant > 0, label is None, -len(span.text), span.start), span.text, label))
    out.sort(key=lambda c: c[0])
    return out, len(chunks)


def select_entities(triples: Sequence[Mapping[str, Any]], passages: Mapping[str, Mapping[str, str]], *,
                    batch_size: int = 256, progress: bool = True) -> tuple[list[dict | None], Counter]:
    """The conditioning entity of each gold triple, or None; plus counts (``found`` and the no-entity reasons).

    Each result is ``{"entity", "entity_start", "entity_label"}`` (start in the passage text, label from the
    question's NER or None). ``passages`` maps passage id -> ``{"title", "text"}``. Questions go through one
    ``nlp.pipe`` (the lemmatizer is off: noun chunks need the parser and tagger only, labels need NER).
    """
    nlp = load_spacy(disable=("lemmatizer",))
    results: list[dict | None] = []
    counts: Counter = Counter()
    docs = nlp.pipe((t["question"] for t in triples), batch_size=batch_size)
    for triple, doc in tqdm(zip(triples, docs), total=len(triples), desc="QG entities", disable=not progress):
        text = passages[triple["passage_id"]]["text"]
        candidates, n_chunks = _chunk_candidates(doc)
        chosen = None
        for _, surface, label in candidates:
            start = find_mention(text, surface)
            if start is not None:
                chosen = {"entity": surface, "entity_start": start, "entity_label": label}
                break
        if chosen is None:
            reason = "no_noun_chunk" if n_chunks == 0 else "not_in_passage" if candidates else "only_wh_or_pronoun"
            counts[reason] += 1
        else:
            counts["found"] += 1
        results.append(chosen)
    return results, counts


def split_heldout(triples: Sequence[Mapping[str, Any]], n: int, *, seed: int) -> tuple[list, list]:
    """``(train, heldout)``: whole passages drawn at random until ``n`` triples are held out, so no held-out passage
    is seen in training (SQuAD has several questions per paragraph)."""
    by_passage: dict[str, list] = {}
    for t in triples:
        by_passage.setdefault(t["passage_id"], []).append(t)
    order = sorted(by_passage)
    random.Random(seed).shuffle(order)
    held: set[str] = set()
    count = 0
    for pid in order:
        if count >= n:
            break
        held.add(pid)
        count += len(by_passage[pid])
    return ([t for t in triples if t["passage_id"] not in held], [t for t in triples if t["passage_id"] in held])


def heldout_inputs(triples: Sequence[Mapping[str, Any]], passages: Mapping[str, Mapping[str, str]],
                   entities: Sequence[dict | None] | None = None) -> tuple[list[dict], dict[str, list[str]]]:
    """Generation inputs and references for held-out triples: one input per passage (``entities`` None, uncon) or
    per (passage, entity) (con; triples without an entity skipped); references = their gold questions."""
    inputs: dict[str, dict] = {}
    refs: dict[str, list[str]] = {}
    for i, t in enumerate(triples):
        ent = entities[i] if entities is not None else None
        if entities is not None and ent is None:
            continue
        passage = passages[t["passage_id"]]
        key = reference_key(t["passage_id"], ent and ent["entity"])
        inputs.setdefault(key, {"passage_id": t["passage_id"], "title": passage["title"], "text": passage["text"],
                                "entity": ent and ent["entity"], "entity_start": ent and ent["entity_start"],
                                "entity_label": ent and ent["entity_label"]})
        refs.setdefault(key, []).append(t["question"])
    return list(inputs.values()), refs


def mentions(question: str, entity: str) -> bool:
    """Whether the question mentions the entity (case-insensitive, whole words)."""
    return find_mention(question, entity) is not None


def reference_key(passage_id: str, entity: str | None) -> str:
    """The key of a generation input (and of its references in :func:`evaluate_generator`)."""
    return f"{passage_id}\x01{entity_key(entity)}" if entity else passage_id
