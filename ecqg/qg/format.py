"""The generators' text formats: source (passage window, conditioning entity marked) and target (answer <sep>
question), parsing generated targets back, and the entity placeholder.

* Entity marking: ``markers`` puts ``<hl>`` around the entity's occurrence in the passage (the highlight convention
  of answer-aware QG); ``segment`` prepends ``entity <sep>`` to the source (first, so truncation never cuts it).
* Target = ``answer <sep> question`` (answer-aware, as in the paper); :func:`parse_target` reads it back and drops
  malformed outputs with a counted reason, never an exception.
* Entity placeholder (``qg.entity_placeholder``): in the conditioned targets the entity's mention in the gold
  question is one new token ``[ENT]``, and a generated ``[ENT]`` is replaced by the entity again (delexicalisation,
  as in slot-filling NLG); records say which mentions came through it (``entity_via_placeholder``). Why and the
  measurements: docs/design.md, "Question generation".
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any, Mapping, Sequence

from ecqg.core import schemes
from ecqg.qg.entities import find_mention, select_entities

log = logging.getLogger(__name__)

SEPARATOR = "<sep>"          # between answer and question in targets, and between source segments
HIGHLIGHT = "<hl>"           # around the conditioning entity in the passage (``markers``)
MARKINGS = ("markers", "segment")
DEFAULT_MARKING = "markers"
DROP_REASONS = ("no_separator", "extra_separator", "empty_answer", "empty_question", "no_question_mark",
                "question_too_short", "entity_not_mentioned")
_SEP_RE = re.compile(r"\s*<\s*sep\s*>\s*", re.IGNORECASE)


def crop_passage(text: str, focus: int | None, window_words: int | None) -> tuple[str, int]:
    """``(window, offset)``: at most ``window_words`` whitespace words of ``text`` around the character ``focus``
    (a third of the window before it; the opening words when ``focus`` is None). Why: on CPU the source must stay
    short (128 tokens), and a plain truncation would cut off the marked entity or the answer of most passages."""
    if window_words is None:
        return text, 0
    words = [m.span() for m in re.finditer(r"\S+", text)]
    if len(words) <= window_words:
        return text, 0
    at = 0 if focus is None else next((i for i, (_, end) in enumerate(words) if end > focus), len(words) - 1)
    lo = max(0, min(at - window_words // 3, len(words) - window_words))
    start, end = words[lo][0], words[lo + window_words - 1][1]
    return text[start:end], start


def format_source(title: str, text: str, entity: str | None = None, entity_start: int | None = None,
                  marking: str | None = None, *, window_words: int | None = None, focus: int | None = None) -> str:
    """The generator's source text; ``marking`` None (or no entity) gives the unconditioned form.

    ``markers``: ``<hl>`` around the entity's occurrence at ``entity_start`` (found case-insensitively when None;
    a ValueError when the passage does not contain it). ``segment``: ``entity <sep>`` in front. ``window_words``
    crops the passage (:func:`crop_passage`) around ``focus`` (default: the entity), always keeping the entity.
    """
    head = f"{title} {SEPARATOR} " if title else ""
    conditioned = marking is not None and entity is not None
    if conditioned and marking not in MARKINGS:
        raise ValueError(f"unknown entity marking {marking!r}; known: {MARKINGS}")
    start = entity_start
    if conditioned and (start is None or text[start : start + len(entity)].casefold() != entity.casefold()):
        start = find_mention(text, entity)
        if start is None:
            raise ValueError(f"entity {entity!r} does not occur in the passage {title!r}, so it cannot be marked")
    crop, offset = crop_passage(text, focus if focus is not None else start, window_words)
    if conditioned and not offset <= start <= start + len(entity) <= offset + len(crop):
        crop, offset = crop_passage(text, start, window_words)      # the entity always stays in the window
    if not conditioned:
        return head + crop
    if marking == "segment":
        return f"{entity} {SEPARATOR} {head}{crop}"
    start -= offset
    end = start + len(entity)
    return f"{head}{crop[:start]}{HIGHLIGHT} {crop[start:end]} {HIGHLIGHT}{crop[end:]}"


def format_target(answer: str, question: str) -> str:
    return f"{answer} {SEPARATOR} {question}"


def parse_target(generated: str) -> tuple[dict[str, str] | None, str | None]:
    """``(answer, question)`` read back from a decoded target, or ``(None, reason)`` with a reason of DROP_REASONS."""
    parts = _SEP_RE.split(generated.strip())
    if len(parts) < 2:
        return None, "no_separator"
    if len(parts) > 2:
        return None, "extra_separator"
    answer, question = (" ".join(p.split()) for p in parts)
    if not answer:
        return None, "empty_answer"
    if not question.rstrip("?").strip():
        return None, "empty_question"
    if not question.endswith("?"):
        return None, "no_question_mark"
    if len(re.findall(r"\w+", question)) < 3:
        return None, "question_too_short"
    return {"answer": answer, "question": question}, None


def build_examples(triples: Sequence[Mapping[str, Any]], passages: Mapping[str, Mapping[str, str]],
                   generator: str, *, marking: str = DEFAULT_MARKING, entities: Sequence[dict | None] | None = None,
                   window_words: int | None = None, placeholder: str | None = None,
                   progress: bool = True) -> tuple[list[dict], Counter]:
    """``[{"id", "source", "target", "passage_id", "entity"}]`` for one generator, plus counts.

    ``uncon`` uses every triple. ``con`` uses the triples with a conditioning entity (``entities`` from
    :func:`select_entities`, computed here when None) and reports the no-entity reasons in the counts.
    ``window_words`` crops each passage around the answer (and the entity; see :func:`crop_passage`).
    ``placeholder`` (con only): the entity's mention in the target question becomes this token (:func:`delexicalise`).
    """
    scheme = schemes.get(generator)
    if scheme.condition not in (None, "entity"):
        raise ValueError(f"{generator}: its inputs carry a {scheme.condition}, built by its own stage, not here")
    on_entity = scheme.condition == "entity"
    counts: Counter = Counter()
    if on_entity and entities is None:
        entities, counts = select_entities(triples, passages, progress=progress)
    examples = []
    for i, triple in enumerate(triples):
        passage = passages.get(triple["passage_id"])
        if passage is None:
            raise KeyError(f"gold triple {triple['id']!r}: passage_id {triple['passage_id']!r} is not in the corpus")
        ent = entities[i] if on_entity else None
        if on_entity and ent is None:
            continue
        focus = triple["answer_start"]
        if ent is not None and ent["entity_start"] is not None:
            focus = (focus + ent["entity_start"]) // 2
        source = format_source(passage["title"], passage["text"], ent and ent["entity"],
                               ent and ent["entity_start"], marking if scheme.marked else None,
                               window_words=window_words, focus=focus)
        question = triple["question"]
        if ent is not None and placeholder:
            question = delexicalise(question, ent["entity"], placeholder,
                                    where=f"gold triple {triple['id']!r}, field 'question'")
        examples.append({"id": triple["id"], "source": source, "target": format_target(triple["answer"], question),
                         "passage_id": triple["passage_id"], "entity": ent and ent["entity"]})
    counts["examples"] = len(examples)
    return examples, counts


def delexicalise(question: str, entity: str, placeholder: str, *, where: str = "question") -> str:
    """``question`` with its first mention of ``entity`` (case-insensitive, whole words) replaced by ``placeholder``.
    The conditioning entity is a noun chunk of the question by construction, so a miss is a data error."""
    start = find_mention(question, entity)
    if start is None:
        raise ValueError(f"{where}: the conditioning entity {entity!r} does not occur in {question!r}")
    return f"{question[:start]}{placeholder}{question[start + len(entity):]}"


def relexicalise(text: str, entity: str, placeholder: str) -> tuple[str, bool]:
    """``(text with every placeholder replaced by the entity, whether there was one)``."""
    if placeholder not in text:
        return text, False

    def spaced(match: re.Match) -> str:  # a space only where the entity would touch a word ("the[ENT]'s" stays)
        before = text[match.start() - 1] if match.start() else " "
        after = text[match.end()] if match.end() < len(text) else " "
        return f"{' ' if before.isalnum() else ''}{entity}{' ' if after.isalnum() else ''}"

    return " ".join(re.sub(re.escape(placeholder), spaced, text).split()), True
