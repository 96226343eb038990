"""SQuAD json (v1.1 and v2.0; XQuAD and haystack's small sample use the same format).

``{"version", "data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers": [{"text",
"answer_start"}], "is_impossible"?, "plausible_answers"?}]}]}]}``. Every answer (and plausible answer) is checked:
``context[answer_start:answer_start+len(text)] == text``. v2.0 unanswerable questions have ``is_impossible: true``,
no answers, and (in the official dev file) ``plausible_answers``; an answerable question must have answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ecqg.data.fields import require, require_nonempty_str
from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_json


def _answers(qa: dict, name: str, context: str, path: str | Path, where: str) -> list[dict[str, Any]]:
    out = []
    for j, ans in enumerate(require(qa, name, list, path, where, optional=True, default=[])):
        w = f"{where}, {name}[{j}]"
        text = require(ans, "text", str, path, w)
        start = require(ans, "answer_start", int, path, w)
        if start < 0 or context[start : start + len(text)] != text:
            raise DataFormatError(
                path, w, "answer_start",
                f"offset {start} gives {context[start:start + len(text)]!r}, not the answer text {text!r}",
            )
        out.append({"text": text, "answer_start": start})
    return out


def read_squad(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield one validated paragraph at a time.

    Each item: ``{"article": i, "paragraph": j, "title", "context", "qas": [{"id", "question", "answers",
    "is_impossible", "plausible_answers"}]}`` with answers as ``{"text", "answer_start"}``.
    """
    doc = read_json(path, dict, "a SQuAD json object")
    articles = require(doc, "data", list, path, "top level")
    for i, art in enumerate(articles):
        a_where = f"data[{i}]"
        title = require(art, "title", str, path, a_where)
        for j, para in enumerate(require(art, "paragraphs", list, path, a_where)):
            p_where = f"{a_where}.paragraphs[{j}]"
            context = require_nonempty_str(para, "context", path, p_where)
            qas = []
            for k, qa in enumerate(require(para, "qas", list, path, p_where)):
                q_where = f"{p_where}.qas[{k}]"
                qid = require(qa, "id", (str, int), path, q_where)
                question = require_nonempty_str(qa, "question", path, q_where)
                impossible = require(qa, "is_impossible", bool, path, q_where, optional=True, default=False)
                answers = _answers(qa, "answers", context, path, q_where)
                plausible = _answers(qa, "plausible_answers", context, path, q_where)
                if impossible and answers:
                    raise DataFormatError(path, q_where, "answers", "is_impossible is true but answers are given")
                if not impossible and not answers:
                    raise DataFormatError(path, q_where, "answers", "answerable question without answers")
                qas.append({"id": str(qid), "question": question, "answers": answers, "is_impossible": impossible,
                            "plausible_answers": plausible})
            yield {"article": i, "paragraph": j, "title": title, "context": context, "qas": qas}
