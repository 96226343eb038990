"""What notebooks 06 and 07 show (issue 68, item 3): the claims rows as the page computes them, question-level tables
summarised with every row behind the summary, and figures a notebook can show (width, one colour per system, the
paper's systems marked, the legend outside the data)."""

from __future__ import annotations

import base64
import json
import re
import struct
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from ecqg.analysis.plots import plot_accuracy_bars, plot_topk_curves, system_colors  # noqa: E402
from ecqg.analysis.tables import full_table_html, paired_summary  # noqa: E402
from ecqg.report.claim import CLAIMS, claim_rows  # noqa: E402
from ecqg.report.claims_table import claims_frame  # noqa: E402
from ecqg.report.evidence import claim_inputs  # noqa: E402
from ecqg.report.markdown import pval  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MAX_PX = 1600


@pytest.fixture(scope="module")
def replicate_rows():
    return claim_rows(claim_inputs(REPO / "results" / "replicates"))


def test_every_claim_names_the_notebook_that_measures_it():
    assert {c.notebook for c in CLAIMS} == {"01", "06", "07"}
    assert [c.text for c in CLAIMS if c.notebook == "07"][0].startswith("premise, DPR Top-5")


def test_07_shows_the_page_s_rows_with_holm_and_06_its_own_rows_alone(replicate_rows):
    whole = claims_frame(replicate_rows)
    assert len(whole) == len(replicate_rows)
    assert list(whole["p (Holm)"]) == [pval(r["p_holm"]) if r["p_holm"] is not None else "–"
                                       for r in replicate_rows]
    mine = claims_frame(replicate_rows, "07")
    assert len(mine) == sum(r["notebook"] == "07" for r in replicate_rows) == 3
    alone = claims_frame(replicate_rows, "06", family=False)
    rows_06 = [r for r in replicate_rows if r["notebook"] == "06"]
    assert list(alone["p (alone)"]) == [pval(r["runs"].p) if r["runs"] is not None else "–" for r in rows_06]
    # alone, a row's p is never above its Holm-adjusted p
    assert all(r["runs"] is None or r["runs"].p <= r["p_holm"] + 1e-12 for r in rows_06)


def _paired(n_pairs: int = 3, ks=(1, 5, 20)) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [dict(system_a=f"a{i}", system_b="base", dataset=d, subset=s, k=k, n=100,
                 difference=rng.normal(0, 0.03), ci_low=-0.1, ci_high=0.1, p_value=p)
            for i in range(n_pairs) for d, s in (("nq", "all"), ("nq", "no_answer_overlap"), ("webq", "all"))
            for k, p in zip(ks, (0.01, 0.2, 0.049))]
    return pd.DataFrame(rows)


def test_the_paired_summary_has_a_line_per_comparison_and_k_and_the_full_table_every_row():
    diffs = _paired()
    summary = paired_summary(diffs, {"a0": "A zero"}, titles={("nq", "all"): "NQ"})
    assert summary.shape == (3 * 3, 3)
    assert list(summary.columns) == ["NQ", "nq no_answer_overlap", "webq all"]
    assert summary.loc[("A zero - base", 1), "NQ"].endswith("*")            # p 0.01
    assert not summary.loc[("A zero - base", 5), "NQ"].endswith("*")        # p 0.2
    html = full_table_html(diffs, "every paired difference")
    assert html.count("<tr") == len(diffs) + 1 and f"({len(diffs)} rows)" in html


def _curves(n_systems: int, panels) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(1)
    table, curves = [], []
    for s in range(n_systems):
        for d, sub in panels:
            for k in (1, 5, 20, 100):
                a = rng.uniform(0.2, 0.9)
                table.append(dict(system=f"s{s}", dataset=d, subset=sub, k=k, accuracy=a, ci_low=a - 0.02,
                                  ci_high=a + 0.02, n=300))
            curves += [dict(system=f"s{s}", dataset=d, subset=sub, k=k, accuracy=rng.uniform()) for k in range(1, 101)]
    return pd.DataFrame(curves), pd.DataFrame(table)


def _width_px(fig, tmp_path: Path) -> int:
    path = tmp_path / "figure.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return struct.unpack(">I", path.read_bytes()[16:20])[0]


def test_results_figures_fit_a_notebook_with_a_colour_per_system_and_the_paper_s_systems_marked(tmp_path):
    panels = [("nq", "all"), ("nq", "no_answer_overlap"), ("nq", "no_question_overlap"), ("webq", "all"),
              ("trivia", "all")]
    curves, table = _curves(15, panels)
    marked = ["s1", "s2"]
    fig = plot_topk_curves(curves, table, marked=marked)
    assert _width_px(fig, tmp_path) <= MAX_PX
    assert not any(ax.get_legend() for ax in fig.axes) and len(fig.legends) == 1       # outside every panel
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend.count("s1 (paper)") == 1 and "s0" in legend
    bars = plot_accuracy_bars(table, 20, marked=marked)
    assert _width_px(bars, tmp_path) <= MAX_PX
    assert {t.get_text() for t in bars.axes[0].get_yticklabels()} >= {"s1 (paper)", "s2 (paper)", "s14"}
    for n in (3, 12, 15, 24):
        colors = system_colors([f"s{i}" for i in range(n)])
        assert len(set(colors.values())) == n, f"{n} systems share a colour"
        paper = system_colors([f"s{i}" for i in range(n)], marked=["s0", "s1", "s2"])
        assert len({str(c) for c in paper.values()}) == n and [paper[f"s{i}"] for i in range(3)] == \
            ["black", "#e6007e", "#7b2cbf"], "the paper's systems drawn in colours of their own"
    styles = {line.get_label(): line.get_linestyle() for line in fig.axes[0].get_lines() if line.get_label() in
              ("s1 (paper)", "s2 (paper)", "s0")}
    assert styles == {"s1 (paper)": "-", "s2 (paper)": "--", "s0": "-"}, styles


@pytest.mark.parametrize("profile", ["mini"])
def test_the_committed_executed_notebooks_figures_fit_a_notebook(profile):
    """Every figure of the default profile's executed notebooks is at most 1,600 px wide (mini's 06 drew a 9,860 px
    bar chart before)."""
    for path in sorted((REPO / "results" / profile / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for out in cell.get("outputs", []):
                png = out.get("data", {}).get("image/png")
                if png:
                    width = struct.unpack(">I", base64.b64decode(png)[16:20])[0]
                    assert width <= MAX_PX, f"{path.name}: a figure {width} px wide"


def _outputs(path: Path):
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        yield from cell.get("outputs", [])


@pytest.mark.parametrize("profile", ["mini"])
def test_the_committed_notebooks_show_every_row_and_06_and_07_the_claims_rows(profile):
    """No displayed table of the default profile's executed notebooks is cut by pandas (its HTML then holds a row of
    '...' cells, or a question or claim cut to 50 characters and '...'); 06 shows its claims rows and 07 the whole claims table, Holm-corrected."""
    folder = REPO / "results" / profile / "notebooks"
    for path in sorted(folder.glob("*.ipynb")):
        for out in _outputs(path):
            html = out.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            assert "<td>...</td>" not in html, f"{path.name}: a displayed table is truncated"
            cut = re.findall(r"<t[dh]>([^<]{40,}\.\.\.)</t[dh]>", html)
            assert not cut, f"{path.name}: displayed cells cut by pandas' display.max_colwidth: {cut[:3]}"
    html_of = {name: "".join("".join(o.get("data", {}).get("text/html", "")) for o in _outputs(folder / name))
               for name in ("06_results_and_attention_entropy.ipynb", "07_mechanism.ipynb")}
    assert "Table 3, NQ Top-1: Mixed-DPR - DPR &gt; 0" in html_of["06_results_and_attention_entropy.ipynb"]
    assert "p (alone)" in html_of["06_results_and_attention_entropy.ipynb"]
    assert "p (Holm)" in html_of["07_mechanism.ipynb"]
    assert "mechanism: Mixed-DPR - DPR, Top-5 on the least-attended" in html_of["07_mechanism.ipynb"]
