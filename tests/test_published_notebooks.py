"""The executed notebooks a fresh clone shows: figures and tables kept, progress output stripped, within budget."""

from __future__ import annotations

import json
from pathlib import Path

from ecqg.tooling.notebook import published

REPO = Path(__file__).resolve().parents[1]
BUDGET = 10 * 2 ** 20          # committed executed notebooks, all profiles together


def test_published_notebooks_keep_results_and_drop_progress_noise():
    image = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"},
             "metadata": {}}
    notebook = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# 06"},
        {"cell_type": "code", "metadata": {"execution": {"iopub.execute_input": "2026-12-03T12:00:00"}, "tags": []},
         "source": "train()", "outputs": [
             {"output_type": "stream", "name": "stderr", "text": "QG generate:  10%|#   | 1/10\r 100%|####| 10/10\n"},
             {"output_type": "stream", "name": "stdout", "text": "epoch 1\r epoch 2\r epoch 3\ndone\n"},
             image, {"output_type": "execute_result", "data": {"text/html": "<table/>"}, "metadata": {},
                     "execution_count": 1}]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    cell = published(notebook)["cells"][1]
    assert [o["output_type"] for o in cell["outputs"]] == ["stream", "display_data", "execute_result"]
    assert cell["outputs"][0]["text"] == " epoch 3\ndone\n" and cell["outputs"][1] == image
    assert cell["metadata"] == {"tags": []}
    assert notebook["cells"][1]["outputs"][0]["name"] == "stderr"          # the executed copy is left as it is


def test_the_committed_notebooks_stay_within_budget():
    committed = list((REPO / "results").glob("*/notebooks/*.ipynb"))
    total = sum(p.stat().st_size for p in committed)
    assert total <= BUDGET, f"{total / 2 ** 20:.1f} MB of executed notebooks committed (budget 10 MB)"
    for path in committed:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        assert not any(o.get("name") == "stderr" for c in cells for o in c.get("outputs", [])), path
