"""Small file helpers: atomic writes and deterministic (byte-identical) jsonl / gzip output.

Why atomic: a killed stage must never leave a file that looks complete, so everything is written to a temporary
sibling and renamed into place. Why deterministic gzip: the committed data bundle must rebuild to identical bytes.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import gzip
import io
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ecqg.core.errors import DataFormatError


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Delete the hidden ``.<name>.*.tmp`` folders a killed writer of ``path`` left behind (one writer per path:
    a leftover is never another process's work in progress)."""
    path = Path(path)
    stale = sorted(path.parent.glob(f".{glob.escape(path.name)}.*.tmp")) if path.parent.is_dir() else []
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True)
    return stale


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it to ``path`` (file or directory). Leftovers of
    an earlier, killed write of the same path are removed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)) / path.name
    try:
        yield tmp
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def copy_directory(source: str | Path, target: str | Path,
                   extra_jsonl: dict[str, Iterable[dict[str, Any]]] | None = None) -> Path:
    """Copy a directory (a saved model) to ``target`` atomically, plus ``extra_jsonl`` files (name -> records)
    written into it: a copy cut short (disk full, kill) leaves only a hidden temporary directory, never a model
    directory that looks complete."""
    target = Path(target)
    with atomic_path(target) as tmp:
        shutil.copytree(source, tmp)
        for name, records in (extra_jsonl or {}).items():
            write_jsonl(tmp / name, records)
    return target


CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")


def complete_checkpoints(directory: str | Path, marker: str) -> list[Path]:
    """``checkpoint-<step>`` directories holding ``marker`` (the file a trainer writes last), by step. A save killed
    midway has no marker (or is still a hidden temporary) and never counts."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir()
             if p.is_dir() and (m := CHECKPOINT_DIR.match(p.name)) and (p / marker).is_file()]
    return [p for _, p in sorted(found)]


def checkpoint_step(path: str | Path) -> int:
    """The step a ``checkpoint-<step>`` directory was saved at."""
    return int(CHECKPOINT_DIR.match(Path(path).name).group(1))


def remove_directory(path: str | Path) -> None:
    """Rename first, then delete, so a half-deleted directory (a checkpoint) never looks complete to a resume."""
    path = Path(path)
    doomed = path.with_name(f".{path.name}.deleting")
    shutil.rmtree(doomed, ignore_errors=True)
    os.replace(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def empty_directory(path: str | Path) -> Path:
    """Leave ``path`` an existing, empty directory (drops a finished run's training checkpoints)."""
    path = Path(path)
    if path.is_dir():
        remove_directory(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _open_write(path: Path):
    if path.suffix == ".gz":
        # mtime=0 and no embedded file name: the same content gives the same bytes.
        raw = open(path, "wb")
        gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9)
        return raw, io.TextIOWrapper(gz, encoding="utf-8", newline="\n")
    return None, open(path, "w", encoding="utf-8", newline="\n")


def write_text(path: str | Path, text: str) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        raw, handle = _open_write(tmp)
        with handle:
            handle.write(text)
        if raw is not None:
            raw.close()
    return path


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records as one compact, key-ordered-as-given JSON object per line; returns the count."""
    path = Path(path)
    count = 0
    with atomic_path(path) as tmp:
        raw, handle = _open_write(tmp)
        with handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
                handle.write("\n")
                count += 1
        if raw is not None:
            raw.close()
    return count


def write_json(path: str | Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


# Reading: "utf-8-sig" is UTF-8 that drops a byte-order mark at the start of the file (one that Windows tools such as
# Excel or Notepad write), which would otherwise stay inside the first field ("\ufeffwho was ...") or make json
# refuse the file. A BOM anywhere else is kept, as UTF-8 is.
READ_ENCODING = "utf-8-sig"


def open_text(path: str | Path):
    """Open a text file for reading, transparently un-gzipping ``*.gz``; a leading UTF-8 BOM is dropped."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=READ_ENCODING)
    return open(path, encoding=READ_ENCODING)


_READ_ERRORS = (EOFError, gzip.BadGzipFile, UnicodeDecodeError, zlib.error)


def _unreadable(path: str | Path, where: str, exc: Exception):
    """A DataFormatError naming the file and where reading stopped: a truncated .gz (EOFError), a file that is not
    gzip at all, or bytes that are not UTF-8, instead of the bare exception from deep inside the codec."""
    if isinstance(exc, UnicodeDecodeError):
        problem = f"not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at offset {exc.start} of the line)"
    elif isinstance(exc, EOFError):
        problem = "the gzip stream ends early (a truncated or partly downloaded file?)"
    else:
        problem = f"not a readable gzip file ({exc})"
    return DataFormatError(path, where, None, problem)


def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` of a UTF-8 text file (``*.gz`` un-gzipped; a leading BOM dropped). Bytes are
    decoded line by line, so bytes that are not UTF-8 or a gzip stream that ends early raise DataFormatError naming
    the exact line."""
    path = Path(path)
    handle = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    with handle:
        line_no = 0
        while True:
            try:
                raw = handle.readline()
                line = raw.decode(READ_ENCODING if line_no == 0 else "utf-8")
            except _READ_ERRORS as exc:
                raise _unreadable(path, f"line {line_no + 1}", exc) from None
            if not raw:
                return
            line_no += 1
            yield line_no, line.replace("\r\n", "\n")


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)``; a line that is not a JSON object raises DataFormatError naming the line."""
    for line_no, line in read_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, f"line {line_no}", None, f"not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise DataFormatError(path, f"line {line_no}", None, "expected a JSON object")
        yield line_no, record


def read_json(path: str | Path, expected: type, what: str) -> Any:
    """Parse a whole JSON file; a syntax error or a top-level value of the wrong type names the file (and line)."""
    with open_text(path) as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, f"line {exc.lineno}", None, f"not valid JSON ({exc.msg})") from None
        except _READ_ERRORS as exc:
            raise _unreadable(path, None, exc) from None
    if not isinstance(data, expected):
        raise DataFormatError(path, None, None, f"expected {what}, got {type(data).__name__}")
    return data


def read_tsv_rows(path: str | Path, columns: Sequence[str] = ()) -> Iterator[tuple[str, list[str]]]:
    """Yield ``("line N", row)`` for each non-blank row of a TSV file (CSV quoting allowed), N being the line the
    row starts on, so that callers can name it in errors; bad quoting raises DataFormatError naming that line.

    Strict about row boundaries, lenient inside a line (as DPR's ``csv.reader`` is, so every valid file parses as
    before): a quoted value that is not closed on its own line would swallow the next rows into one field (an
    unbalanced double quote merges two passages silently), so a row that spans lines is refused, naming the line it
    starts on and the field (``columns[i]``, or "column i+1"). One streamed pass, one row in memory.
    """
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # psgs_w100 passages are long fields
    ended: list[bool] = []
    with open_text(path) as handle:
        # The extra "\n" after the last line closes the final row, or shows a quote still open at the end of the file.
        reader = csv.reader(itertools.chain(handle, _end_of_file(ended)), delimiter="\t")
        while True:
            line = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise DataFormatError(path, f"line {line}", None, f"bad CSV/TSV quoting ({exc})") from None
            except _READ_ERRORS as exc:
                raise _unreadable(path, f"line {line}", exc) from None
            if reader.line_num > line:
                raise _row_across_lines(path, line, reader.line_num, bool(ended), row, columns)
            if row and not (len(row) == 1 and not row[0].strip()):
                yield f"line {line}", row


def _end_of_file(ended: list[bool]) -> Iterator[str]:
    """One last empty line, noting in ``ended`` that the file was read to its end."""
    ended.append(True)
    yield "\n"


def _row_across_lines(path: str | Path, line: int, last: int, at_end: bool, row: list[str], columns: Sequence[str]):
    """The DataFormatError for a row whose quoted field runs past the end of its line (``last``: the line where the
    parser stopped; past the file's end when ``at_end``)."""
    index = next((i for i, value in enumerate(row) if "\n" in value), len(row) - 1)
    field = columns[index] if index < len(columns) else f"column {index + 1}"
    reach = "the end of the file" if at_end else f"line {last}"
    return DataFormatError(path, f"line {line}", field, "a quoted value opened on this line is not closed on it (an "
                           f"unbalanced double quote?): it would swallow the rows up to {reach} into this field. A "
                           "field may not hold a line break")


def write_csv(path: str | Path, rows: Iterable[dict[str, Any]], columns: list[str]) -> Path:
    """Rows as CSV (header ``columns``; a missing value is an empty cell), atomically: plot data for DVC."""
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path
