"""Is a question a sentence, and does its wh-phrase ask for the kind of thing its answer is? Two checks that can fail
for every generator, the rule-based cloze one included (for which "answer in passage" and "about its entity" hold by
construction and so say nothing).

* :func:`is_fragment`: no finite verb (spaCy's morphology: ``VerbForm=Fin``, or a finite tag), or unbalanced
  brackets or double quotes. "To carry airborne forces such as what?" and "Released in 1998, by whom for Spears's
  debut album (1999?" are fragments; "When did Denmark join the EU?" is not.
* :func:`wh_type_agrees`: the question's wh-phrase (:data:`WH_TYPES`) against spaCy's entity label of the answer
  read on its own. None where the wh-phrase asks for no particular type ("what", "which"). The cloze generator
  chooses its wh-phrase from spaCy's label of the span in its passage, so for its questions this check fails only
  where the label changes out of context (a weak check, said on the page); for a learned generator and for real
  questions it is an ordinary one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# wh-phrase -> the OntoNotes labels an answer to it may carry (longest phrases are matched first).
WH_TYPES: dict[str, frozenset[str]] = {phrase: frozenset(labels) for phrase, labels in {
    "what organization": {"ORG"}, "which organization": {"ORG"},
    "what group": {"NORP", "ORG"}, "what place": {"GPE", "LOC", "FAC"}, "where": {"GPE", "LOC", "FAC"},
    "what year": {"DATE"}, "what date": {"DATE"}, "when": {"DATE", "TIME"}, "what time": {"TIME", "DATE"},
    "how many": {"CARDINAL", "QUANTITY", "MONEY", "PERCENT"},
    "how much": {"MONEY", "QUANTITY", "CARDINAL", "PERCENT"}, "what percentage": {"PERCENT"},
    "what event": {"EVENT"}, "what work": {"WORK_OF_ART"}, "what law": {"LAW"}, "what language": {"LANGUAGE"},
    "who": {"PERSON", "ORG", "NORP"}, "whom": {"PERSON", "ORG", "NORP"}, "whose": {"PERSON", "ORG", "NORP"},
}.items()}
_WH = re.compile(r"\b(" + "|".join(sorted(map(re.escape, WH_TYPES), key=len, reverse=True)) + r")\b", re.IGNORECASE)
_FINITE_TAGS = frozenset({"VBD", "VBP", "VBZ", "MD"})
_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"))


def balanced(question: str) -> bool:
    """Brackets close in order and double quotes (straight or curly) come in pairs."""
    stack = []
    closing = {close: open_ for open_, close in _PAIRS}
    for ch in question:
        if ch in "([{":
            stack.append(ch)
        elif ch in closing:
            if not stack or stack.pop() != closing[ch]:
                return False
    straight = question.count('"') % 2 == 0
    curly = question.count("\u201c") == question.count("\u201d")
    return not stack and straight and curly


def has_finite_verb(doc) -> bool:
    return any("Fin" in token.morph.get("VerbForm") or token.tag_ in _FINITE_TAGS for token in doc
               if token.pos_ in ("VERB", "AUX"))


def is_fragment(question: str, doc) -> bool:
    """``doc``: spaCy's parse of ``question``."""
    return not balanced(question) or not has_finite_verb(doc)


def wh_phrase(question: str) -> str | None:
    """The first typed wh-phrase of the question, lower-cased (None: none, or only an untyped "what" / "which")."""
    found = _WH.search(question)
    return None if found is None else found.group(1).lower()


def answer_label(doc) -> str | None:
    """The label of the entity covering most of the answer's characters (None: spaCy finds no entity in it)."""
    if not doc.ents:
        return None
    return max(doc.ents, key=lambda e: len(e.text)).label_


def wh_type_agrees(question: str, answer_doc) -> bool | None:
    phrase = wh_phrase(question)
    if phrase is None:
        return None
    return answer_label(answer_doc) in WH_TYPES[phrase]


def measures(questions: Sequence[str], answers: Sequence[str], nlp) -> dict[str, float | int | None]:
    """``fragment``: share of fragments; ``wh_type_agrees``: share of agreeing questions among those with a typed
    wh-phrase (``wh_typed`` of them); both over the questions given (callers pass a fixed random sample)."""
    if len(questions) != len(answers):
        raise ValueError(f"{len(questions)} questions but {len(answers)} answers")
    fragments = sum(is_fragment(q, doc) for q, doc in zip(questions, _parse(nlp, questions)))
    agree = [wh_type_agrees(q, doc) for q, doc in zip(questions, _parse(nlp, [a or "" for a in answers]))]
    typed = [a for a in agree if a is not None]
    n = len(questions)
    return {"fragment": round(fragments / n, 4) if n else None,
            "wh_type_agrees": round(sum(typed) / len(typed), 4) if typed else None, "wh_typed": len(typed),
            "checked": n}


def _parse(nlp, texts: Iterable[str]):
    return nlp.pipe(list(texts), batch_size=256)
