"""Text utilities shared by data building, evaluation and (later) QG: DPR answer matching.

Answer matching follows DPR exactly by delegating to pyserini's copy of DrQA's code
(``pyserini.eval.evaluate_dpr_retrieval``): Unicode NFD, the DrQA ``SimpleTokenizer``, uncased token-sequence match;
or a case-insensitive regular-expression search for CuratedTREC-style answers. The helpers here add what large
evaluations need on top of that: tokenising each passage once and matching answers against cached n-gram sets, with
results identical to ``has_answers`` (a test checks the two agree).
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Iterable, Sequence

from pyserini.eval.evaluate_dpr_retrieval import SimpleTokenizer, has_answers, regex_match


@functools.lru_cache(maxsize=1)
def dpr_tokenizer() -> SimpleTokenizer:
    return SimpleTokenizer()


def dpr_tokens(text: str) -> list[str]:
    """The uncased DrQA tokens of ``text`` after NFD normalisation: the units DPR's has_answer compares."""
    return dpr_tokenizer().tokenize(unicodedata.normalize("NFD", text)).words(uncased=True)


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
    """Tokenise each passage once; answer tokens are matched against per-length n-gram sets.

    ``contains(pid, answer_token_lists)`` equals ``has_answer(text_of(pid), answers)`` for answers given as
    ``[dpr_tokens(a) for a in answers]``, but costs a set look-up per answer once a passage has been seen.
    """

    def __init__(self, text_of):
        self._text_of = text_of
        self._tokens: dict[str, list[str]] = {}
        self._ngrams: dict[tuple[str, int], set[tuple[str, ...]]] = {}

    def tokens(self, pid: str) -> list[str]:
        toks = self._tokens.get(pid)
        if toks is None:
            toks = self._tokens[pid] = dpr_tokens(self._text_of(pid))
        return toks

    def _grams(self, pid: str, n: int) -> set[tuple[str, ...]]:
        key = (pid, n)
        grams = self._ngrams.get(key)
        if grams is None:
            toks = self.tokens(pid)
            grams = self._ngrams[key] = {tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)}
        return grams

    def contains(self, pid: str, answer_token_lists: Iterable[Sequence[str]]) -> bool:
        for ans in answer_token_lists:
            if ans and tuple(ans) in self._grams(pid, len(ans)):
                return True
        return False
