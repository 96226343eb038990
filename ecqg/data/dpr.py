"""DPR formats: the retriever training json, the qas TSV (anserini ``topics.dpr.*.txt``) and the anserini JSONL topics.

* Retriever json (DPR ``biencoder-*.json``): a JSON list of ``{question, answers, positive_ctxs, negative_ctxs,
  hard_negative_ctxs}``; a ctx is ``{title, text}`` plus optional ``passage_id`` / ``score`` / ``title_score``.
  ``negative_ctxs`` and ``hard_negative_ctxs`` may be absent (read as ``[]``); extra keys (``dataset``) are kept.
* qas TSV: ``question TAB python-list-of-answers`` per line, read with ``csv.reader(delimiter="\\t")`` exactly as DPR
  does (so CSV-quoted fields with doubled quotes work); the answer list is parsed with ``ast.literal_eval`` (or json),
  never ``eval``. A few TriviaQA questions are CSV-quoted twice (``\"\"\"How many ... \"\"\"\"Animal Crackers\"\"\"\"...\"\"\"``);
  such a field, once it is still a complete CSV-quoted field after the first pass, is un-quoted once more.
* JSONL topics (anserini wq / curated / squad): ``{"question": str, "answer": [str]}`` per line (curated answers are
  regular expressions).

Every reader yields ``{"question": str, "answers": [str]}`` in file order and names file, line and field on errors.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from ecqg.data.fields import require, require_nonempty_str, require_str_list
from ecqg.core.errors import DataFormatError
from ecqg.core.io import atomic_path, read_json, read_jsonl, read_lines, read_tsv_rows

CTX_LISTS = ("positive_ctxs", "negative_ctxs", "hard_negative_ctxs")


# --------------------------------------------------------------------------------------------------------------------
# retriever json


def _validate_ctx(ctx: Any, path: str | Path, where: str) -> dict[str, Any]:
    if not isinstance(ctx, dict):
        raise DataFormatError(path, where, None, f"ctx must be an object, got {type(ctx).__name__}")
    require(ctx, "title", str, path, where)
    require(ctx, "text", str, path, where)
    pid = require(ctx, "passage_id", (str, int), path, where, optional=True)
    out = dict(ctx)
    if pid is not None:
        out["passage_id"] = str(pid)
    return out


def validate_dpr_example(rec: Any, path: str | Path, index: int) -> dict[str, Any]:
    where = f"record {index + 1}"
    if not isinstance(rec, dict):
        raise DataFormatError(path, where, None, f"expected an object, got {type(rec).__name__}")
    out = dict(rec)
    out["question"] = require_nonempty_str(rec, "question", path, where)
    out["answers"] = require_str_list(rec, "answers", path, where)
    for name in CTX_LISTS:
        ctxs = require(rec, name, list, path, where, optional=name != "positive_ctxs", default=[])
        out[name] = [_validate_ctx(c, path, f"{where}, {name}[{j}]") for j, c in enumerate(ctxs)]
    return out


def check_positives(example: dict[str, Any], path: str | Path, index: int) -> None:
    """Refuse a training record that teaches nothing: no positive passage, or a positive without text. Checked at
    intake (stage `prepare`), not in :func:`validate_dpr_example`, which also reads and writes the pipeline's own
    sets."""
    if not example["positive_ctxs"]:
        raise DataFormatError(path, index, "positive_ctxs", "empty list: a training record needs a positive passage")
    for j, ctx in enumerate(example["positive_ctxs"]):
        if not ctx["text"].strip():
            raise DataFormatError(path, index, f"positive_ctxs[{j}].text", "empty passage text")


def read_dpr_retriever_json(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield validated DPR retriever examples. The file is one JSON list, so it is parsed whole (as DPR does)."""
    data = read_json(path, list, "a JSON list of examples")
    for i, rec in enumerate(data):
        yield validate_dpr_example(rec, path, i)


def write_dpr_retriever_json(path: str | Path, examples: Iterable[dict[str, Any]]) -> int:
    """Write examples (validated on the way) as DPR retriever json, atomically; returns the count."""
    path = Path(path)
    count = 0
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write("[")
            for i, ex in enumerate(examples):
                ex = validate_dpr_example(ex, path, i)
                ex.setdefault("negative_ctxs", [])
                ex.setdefault("hard_negative_ctxs", [])
                handle.write(",\n" if i else "\n")
                handle.write(json.dumps(ex, ensure_ascii=False, indent=None))
                count += 1
            handle.write("\n]\n")
    return count


# --------------------------------------------------------------------------------------------------------------------
# qas TSV and JSONL topics


def parse_answer_list(raw: str, path: str | Path, where: str, field: str = "answers") -> list[str]:
    """Parse a python- or json-style list of strings without eval."""
    value: Any
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise DataFormatError(path, where, field, f"not a python/json list literal: {raw[:80]!r}") from None
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise DataFormatError(path, where, field, f"expected a list of strings, got {raw[:80]!r}")
    if not value:
        raise DataFormatError(path, where, field, "empty answer list")
    return value


def _unquote_twice_quoted(field: str) -> str:
    if len(field) >= 2 and field[0] == '"' and field[-1] == '"':
        inner = field[1:-1]
        if '"' in inner and inner.replace('""', "").count('"') == 0:
            return inner.replace('""', '"')
    return field


def read_qas_tsv(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield ``{"question", "answers"}`` from a DPR qas TSV (``question TAB ['a', 'b']``)."""
    for where, row in read_tsv_rows(path, ("question", "answers")):
        if len(row) != 2:
            raise DataFormatError(path, where, None, f"expected 2 tab-separated columns, got {len(row)}")
        question = _unquote_twice_quoted(row[0]).strip()
        if not question:
            raise DataFormatError(path, where, "question", "empty string")
        yield {"question": question, "answers": parse_answer_list(row[1], path, where)}


def read_topics_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield ``{"question", "answers"}`` from anserini JSONL topics (``{"question", "answer": [...]}``)."""
    for line_no, rec in read_jsonl(path):
        where = f"line {line_no}"
        yield {
            "question": require_nonempty_str(rec, "question", path, where).strip(),
            "answers": require_str_list(rec, "answer", path, where, nonempty=True),
        }


def read_qas(path: str | Path) -> Iterator[dict[str, Any]]:
    """Dispatch on the first non-blank character: ``{`` -> JSONL topics, anything else -> qas TSV."""
    first = ""
    for _, line in read_lines(path):
        if line.strip():
            first = line.lstrip()[:1]
            break
    return read_topics_jsonl(path) if first == "{" else read_qas_tsv(path)
