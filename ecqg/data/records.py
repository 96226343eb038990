"""Schemas of the bundle's own files, the text style they share, and validating readers.

Every reader streams (yields records) and raises :class:`ecqg.core.errors.DataFormatError` naming the file, the line and
the field on malformed input. The schemas (one JSON object per line, gzip for ``*.gz``):

corpus passage        {"id": str, "title": str, "text": str, "source": str}
test question         {"id", "question", "answers": [str], "gold_ids": [str], "subsets": [str],
                       "answer_type": "text" | "regex"}
gold training triple  {"id", "question", "answer", "answer_start": int, "passage_id", "source"}
SQuAD 2.0 unanswerable {"id", "question", "passage_id", "plausible_answers": [str]}
NQ dev question       {"id", "question", "answers": [str]}

One text style for every passage, title and question in the bundle (:func:`normalize_text`): Unicode NFC, every run
of whitespace collapsed to one space, no leading/trailing space. Titles (:func:`normalize_title`) also lose
underscores (``Super_Bowl_50`` -> ``Super Bowl 50``) and a pair of wrapping double quotes (FlashRAG's ``"Evan Morris"``).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ecqg.data import wiki
from ecqg.data.fields import require, require_nonempty_str, require_passage_id, require_str_list
from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_jsonl

# --------------------------------------------------------------------------------------------------------------------
# text style


def normalize_text(text: str) -> str:
    """Unicode NFC, whitespace runs collapsed to one space, stripped."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def normalize_title(title: str) -> str:
    """:func:`normalize_text` plus underscores -> spaces and one pair of wrapping double quotes removed."""
    title = normalize_text(title.replace("_", " "))
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        title = normalize_text(title[1:-1])
    return title


def question_key(question: str) -> str:
    """Key for "the same question": NFKC, casefolded, only word characters kept (robust to DPR's "dog 's")."""
    return " ".join(re.findall(r"\w+", unicodedata.normalize("NFKC", question).casefold()))


def text_key(text: str) -> str:
    """Key for "the same passage text": NFKC, casefolded, whitespace removed and every dash written as '-'."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[\u2010-\u2015\u2212]|--", "-", text)
    return re.sub(r"\s+", "", text)


def normalize_span(context: str, start: int, answer: str) -> tuple[str, int, str] | None:
    """Carry an answer span through :func:`normalize_text`.

    Returns ``(normalized_context, new_start, normalized_answer)``, or None when the re-mapped span does not
    reproduce the normalised answer (the caller records it as a drop).
    """
    lead = len(answer) - len(answer.lstrip())
    start += lead
    answer = answer.strip()
    norm_ctx = normalize_text(context)
    norm_ans = normalize_text(answer)
    new_start = len(normalize_text(context[:start] + "x")) - 1
    if not norm_ans or norm_ctx[new_start : new_start + len(norm_ans)] != norm_ans:
        return None
    return norm_ctx, new_start, norm_ans


# --------------------------------------------------------------------------------------------------------------------
# the bundle's record kinds

ANSWER_TYPES = ("text", "regex")


def validate_passage(rec: Mapping[str, Any], path: str | Path, where: int | str) -> dict[str, str]:
    out = {
        "id": require_passage_id(require(rec, "id", str, path, where), path, where),
        "title": require(rec, "title", str, path, where),
        "text": require_nonempty_str(rec, "text", path, where),
        "source": require_nonempty_str(rec, "source", path, where),
    }
    return out


def validate_test_question(rec: Mapping[str, Any], path: str | Path, where: int | str) -> dict[str, Any]:
    answer_type = require(rec, "answer_type", str, path, where)
    if answer_type not in ANSWER_TYPES:
        raise DataFormatError(path, where, "answer_type", f"must be one of {ANSWER_TYPES}, got {answer_type!r}")
    answers = require_str_list(rec, "answers", path, where, nonempty=True)
    if answer_type == "regex":
        for pattern in answers:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise DataFormatError(path, where, "answers", f"pattern {pattern!r} does not compile: {exc}") from None
    return {
        "id": require_nonempty_str(rec, "id", path, where),
        "question": require_nonempty_str(rec, "question", path, where),
        "answers": answers,
        "gold_ids": require_str_list(rec, "gold_ids", path, where),
        "subsets": require_str_list(rec, "subsets", path, where),
        "answer_type": answer_type,
    }


def validate_train_triple(rec: Mapping[str, Any], path: str | Path, where: int | str) -> dict[str, Any]:
    start = require(rec, "answer_start", int, path, where)
    if start < 0:
        raise DataFormatError(path, where, "answer_start", f"negative offset {start}")
    return {
        "id": require_nonempty_str(rec, "id", path, where),
        "question": require_nonempty_str(rec, "question", path, where),
        "answer": require_nonempty_str(rec, "answer", path, where),
        "answer_start": start,
        "passage_id": require_nonempty_str(rec, "passage_id", path, where),
        "source": require_nonempty_str(rec, "source", path, where),
    }


def validate_unanswerable(rec: Mapping[str, Any], path: str | Path, where: int | str) -> dict[str, Any]:
    return {
        "id": require_nonempty_str(rec, "id", path, where),
        "question": require_nonempty_str(rec, "question", path, where),
        "passage_id": require_nonempty_str(rec, "passage_id", path, where),
        "plausible_answers": require_str_list(rec, "plausible_answers", path, where),
    }


def validate_nq_dev(rec: Mapping[str, Any], path: str | Path, where: int | str) -> dict[str, Any]:
    return {
        "id": require_nonempty_str(rec, "id", path, where),
        "question": require_nonempty_str(rec, "question", path, where),
        "answers": require_str_list(rec, "answers", path, where, nonempty=True),
    }


def _read_validated(path: str | Path, validate: Callable[..., dict[str, Any]]) -> Iterator[dict[str, Any]]:
    seen: set[str] = set()
    for line_no, rec in read_jsonl(path):
        out = validate(rec, path, f"line {line_no}")
        if out["id"] in seen:
            raise DataFormatError(path, f"line {line_no}", "id", f"duplicate id {out['id']!r}")
        seen.add(out["id"])
        yield out


def read_corpus(path: str | Path) -> Iterator[dict[str, str]]:
    """Stream corpus passages {id, title, text, source} from any of the supported corpus formats.

    * the bundle's own ``corpus.jsonl[.gz]`` (records with ``id``/``title``/``text``/``source``);
    * DPR's ``psgs_w100.tsv[.gz]`` (header ``id\\ttext\\ttitle``; 21M lines, streamed); source ``psgs_w100``;
    * a pyserini JsonCollection ``*.jsonl[.gz]`` (``{id, contents}``, see :func:`ecqg.data.wiki.split_contents`);
      source ``jsoncollection``.

    The format is chosen by the extension (``.tsv``) or, for jsonl, by the keys of the first record. The DPR and
    pyserini forms are passed through :func:`normalize_text` / :func:`normalize_title`; the bundle's own records are
    returned as stored. In every format a passage id must be non-empty, without whitespace and unique in the file
    (checked as it streams; the psgs_w100 and JsonCollection readers keep their ids in a
    :class:`ecqg.data.fields.SeenIds`, 2.6 MB for psgs_w100's 21M numeric ids).
    """
    path = Path(path)
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    if name.endswith(".tsv"):
        for p in wiki.read_psgs_w100(path):
            yield {"id": p["id"], "title": normalize_title(p["title"]), "text": normalize_text(p["text"]),
                   "source": "psgs_w100"}
        return
    first = None
    for _, rec in read_jsonl(path):
        first = rec
        break
    if first is None:
        return
    if "contents" in first and "text" not in first:
        for p in wiki.read_json_collection(path):
            yield {"id": p["id"], "title": normalize_title(p["title"]), "text": normalize_text(p["text"]),
                   "source": "jsoncollection"}
        return
    yield from _read_validated(path, validate_passage)


def read_test_questions(path: str | Path) -> Iterator[dict[str, Any]]:
    return _read_validated(path, validate_test_question)


def read_train_gold(path: str | Path) -> Iterator[dict[str, Any]]:
    return _read_validated(path, validate_train_triple)


def read_squad2_unanswerable(path: str | Path) -> Iterator[dict[str, Any]]:
    return _read_validated(path, validate_unanswerable)


def read_nq_dev(path: str | Path) -> Iterator[dict[str, Any]]:
    return _read_validated(path, validate_nq_dev)


def check_answer_offset(triple: Mapping[str, Any], passage_text: str, path: str | Path, where: int | str) -> None:
    """Raise unless ``passage_text[answer_start:answer_start+len(answer)] == answer``."""
    start, answer = triple["answer_start"], triple["answer"]
    found = passage_text[start : start + len(answer)]
    if found != answer:
        raise DataFormatError(
            path, where, "answer_start", f"offset {start} gives {found!r}, not the answer {answer!r}"
        )
