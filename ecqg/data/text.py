"""Text utilities shared by data building, evaluation, the attention study and QG: DPR answer matching, and spaCy
entities and sentences (``analyze``).

Answer matching follows DPR exactly by delegating to pyserini's copy of DrQA's code
(``pyserini.eval.evaluate_dpr_retrieval``): Unicode NFD, the DrQA ``SimpleTokenizer``, uncased token-sequence match;
or a case-insensitive regular-expression search for CuratedTREC-style answers. The helpers here add what large
evaluations need on top of that: DrQA's tokenizer pattern applied directly (``dpr_tokens``) and each passage tokenised
once (``TokenizedPassages``), with results identical to ``has_answers`` (tests check both).
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import regex

# Pure Python (DrQA's code): no JVM is started, so answer matching runs where Java is absent (a GPU node that only
# samples or encodes); BM25 (retrieval/bm25.py) checks for Java before it touches Lucene.
from pyserini.eval.evaluate_dpr_retrieval import SimpleTokenizer, has_answers, regex_match

from ecqg.runtime.models import load_spacy


@functools.lru_cache(maxsize=1)
def dpr_tokenizer() -> SimpleTokenizer:
    return SimpleTokenizer()


# DrQA SimpleTokenizer's own pattern, non-capturing so ``findall`` returns whole tokens: the same tokens as
# ``SimpleTokenizer().tokenize(text).words()`` (a test checks), faster, as no Tokens objects are built.
_TOKEN_RE = regex.compile(f"(?:{SimpleTokenizer.ALPHA_NUM})|(?:{SimpleTokenizer.NON_WS})",
                          flags=regex.IGNORECASE + regex.UNICODE + regex.MULTILINE)
_SEP = "\x00"  # a control character: never inside a token (tokens exclude \p{C}), so it marks token boundaries


def dpr_tokens(text: str) -> list[str]:
    """The uncased DrQA tokens of ``text`` after NFD normalisation: the units DPR's has_answer compares."""
    return [t.lower() for t in _TOKEN_RE.findall(unicodedata.normalize("NFD", text))]


def has_answer(text: str, answers: Sequence[str], regex: bool = False) -> bool:
    """DPR's has_answer. Answers that contain no token at all are ignored (DrQA would match them anywhere)."""
    if regex:
        return has_answers(text, list(answers), dpr_tokenizer(), regex=True)
    usable = [a for a in answers if dpr_tokens(a)]
    return bool(usable) and has_answers(text, usable, dpr_tokenizer(), regex=False)


def answer_regex_match(text: str, pattern: str) -> bool:
    """CuratedTREC-style match (a pattern that does not compile never matches, as in DPR)."""
    return regex_match(unicodedata.normalize("NFD", text), unicodedata.normalize("NFD", pattern))


class TokenizedPassages:
    """Tokenise each passage once and keep it as one separator-joined string of its tokens.

    ``contains(pid, answer_token_lists)`` equals ``has_answer(text_of(pid), answers)`` for answers given as
    ``[dpr_tokens(a) for a in answers]``: a token-sequence match is a substring test of the joined answer tokens
    (the separator never occurs inside a token). One string per passage: far less time and memory than per-length
    n-gram sets.
    """

    def __init__(self, text_of: Callable[[str], str]):
        self._text_of = text_of
        self._joined: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._joined)

    @staticmethod
    def needles(answer_token_lists: Iterable[Sequence[str]]) -> list[str]:
        """Answers prepared for :meth:`contains_needles` (answers without tokens are dropped: they match nothing)."""
        return [_SEP + _SEP.join(tokens) + _SEP for tokens in answer_token_lists if tokens]

    def contains_needles(self, pid: str, needles: Sequence[str]) -> bool:
        joined = self._joined.get(pid)
        if joined is None:
            joined = self._joined[pid] = _SEP + _SEP.join(dpr_tokens(self._text_of(pid))) + _SEP
        return any(needle in joined for needle in needles)

    def contains(self, pid: str, answer_token_lists: Iterable[Sequence[str]]) -> bool:
        return self.contains_needles(pid, self.needles(answer_token_lists))


# ================================================================================================ spaCy analysis
# Entities and sentences for the attention study (docs/design.md, "Method", step 1) and entity-conditioned QG (step 2).
ENTITY_TYPES = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE")
# Not needed for NER or the parser's sentence boundaries (en_core_web_sm: ner has its own tok2vec, the parser listens
# to the shared tok2vec; neither reads tags or lemmas). Switching them off is faster and leaves the entities and
# sentences unchanged. ``senter`` is disabled in the package already (the parser sets the boundaries).
SPACY_UNUSED = ("tagger", "attribute_ruler", "lemmatizer", "senter")


@dataclass(frozen=True)
class Entity:
    """One unique entity of a passage: the first occurrence's text, label and span, plus every occurrence's span."""
    text: str
    label: str
    start_char: int
    end_char: int
    occurrences: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Analysis:
    entities: tuple[Entity, ...]              # restricted to ENTITY_TYPES, unique by normalised surface form
    sentences: tuple[tuple[int, int], ...]    # (start_char, end_char) from the dependency parser


def entity_key(surface: str) -> str:
    """Normalised surface form used to deduplicate entities: NFKC, case-folded, whitespace collapsed.

    The label is not part of the key: "Washington" tagged GPE once and PERSON once is one conditioning string for QG.
    """
    return " ".join(unicodedata.normalize("NFKC", surface).casefold().split())


def _unique_entities(doc, types: frozenset[str]) -> tuple[Entity, ...]:
    first: dict[str, tuple] = {}
    spans: dict[str, list[tuple[int, int]]] = {}
    for ent in doc.ents:
        if ent.label_ not in types:
            continue
        key = entity_key(ent.text)
        if not key:
            continue
        first.setdefault(key, (ent.text, ent.label_, ent.start_char, ent.end_char))
        spans.setdefault(key, []).append((ent.start_char, ent.end_char))
    return tuple(Entity(*first[k], occurrences=tuple(spans[k])) for k in first)


def analyze(texts: Sequence[str], batch_size: int = 64, n_process: int = 1, types: Sequence[str] = ENTITY_TYPES,
            model: str = "bundled:en_core_web_sm") -> list[Analysis]:
    """Entities (of ``types``, deduplicated per text, first occurrence kept) and sentence spans for each text.

    One ``nlp.pipe`` over all texts with the components NER and sentence splitting do not need switched off.
    """
    nlp = load_spacy(model, disable=SPACY_UNUSED)
    wanted = frozenset(types)
    out = []
    for doc in nlp.pipe(list(texts), batch_size=batch_size, n_process=n_process):
        sentences = tuple((s.start_char, s.end_char) for s in doc.sents)
        out.append(Analysis(_unique_entities(doc, wanted), sentences))
    return out
