"""The paper's reported numbers are declared once, in ecqg/core/paper.py (issue 65: they sat in three modules on two
layers, and the page typed 'BM25 22.7, DPR 44.3' once more): no other module of the package, bench/ or a notebook's
code writes one of its distinctive values as a literal."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from ecqg.core import paper

REPO = Path(__file__).resolve().parents[1]
# Values distinctive enough that a literal of them is the paper's number typed again (0.65, 1.8 or 3.8, a figure height, are not).
DISTINCTIVE = {paper.PASSAGES, 22.7, 44.6, 44.3, 67.1, 45.8, 68.4, 45.9, 3.97, 73.7, 72.1}


def _literals(source: str) -> set:
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)}


def _sources():
    for path in sorted([*(REPO / "ecqg").rglob("*.py"), *(REPO / "bench").glob("*.py")]):
        if path != REPO / "ecqg" / "core" / "paper.py":
            yield path, path.read_text(encoding="utf-8")
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        yield path, "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))


def test_the_papers_numbers_are_typed_in_one_module():
    found = [f"{path.relative_to(REPO)}: {sorted(_literals(text) & DISTINCTIVE)}"
             for path, text in _sources() if _literals(text) & DISTINCTIVE]
    assert not found, "the paper's numbers typed outside ecqg/core/paper.py:\n" + "\n".join(found)


def test_every_paper_lookup_answers_from_the_one_table():
    assert paper.table3_accuracy("dpr_mixed", 1) == 45.9 and paper.table3_accuracy("dpr_mixed", 20) is None
    assert paper.table3_cells("nq", "all")[("bm25", 5)] == 44.6 and paper.table3_cells("tqa", "all") == {}
    assert len(paper.TABLE3_COLUMNS) == len(paper.TABLE3[0])
