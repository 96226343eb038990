"""NQ-open jsonl (google-research-datasets/natural-questions ``nq_open/NQ-open.*.jsonl``).

One ``{"question": str, "answer": [str]}`` per line. The official ``NQ-open.dev.jsonl`` holds the 3,610 questions that
DPR and everyone since use as the NQ *test* set, in the same order as anserini's ``topics.dpr.nq.test.txt`` and the
Lewis et al. overlap annotations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ecqg.data.fields import require_nonempty_str, require_str_list
from ecqg.core.io import read_jsonl


def read_nq_open(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield ``{"index", "question", "answers"}`` (index = 0-based position among the records)."""
    index = 0
    for line_no, rec in read_jsonl(path):
        where = f"line {line_no}"
        yield {
            "index": index,
            "question": require_nonempty_str(rec, "question", path, where).strip(),
            "answers": require_str_list(rec, "answer", path, where, nonempty=True),
        }
        index += 1
