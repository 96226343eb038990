"""The package is layered: entry points (stages, notebook runner, report) -> the pipeline layer -> the library ->
its foundation, with no import going up a layer and no import cycle anywhere in ``ecqg`` (function-level imports
included). docs/design.md, "Code layout", describes the same layers."""

from __future__ import annotations

import sys
from pathlib import Path

import networkx as nx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ecqg.code_deps import REPO, closure  # noqa: E402
from ecqg.code_deps import imports as _imports  # noqa: E402
from ecqg.code_deps import module_file as _module_file  # noqa: E402

ENTRY = ("ecqg.stages", "ecqg.notebook", "ecqg.report")
PIPELINE = ("ecqg.pipeline",)
# What every module may import and what imports nothing above itself: paths and files, errors, process set-up, the
# device policy, params (and the names params may give: the variant table among them). No model, torch-heavy or data
# code.
FOUNDATION = ("ecqg", "ecqg.paths", "ecqg.io", "ecqg.errors", "ecqg.env", "ecqg.logs", "ecqg.cli", "ecqg.device",
              "ecqg.config", "ecqg.retrieval", "ecqg.retrieval.choices", "ecqg.retrieval.train_config",
              "ecqg.variants", "ecqg.schemes")
MAX_LINES = 400


def _modules() -> list[str]:
    out = []
    for path in sorted((REPO / "ecqg").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _layer(module: str) -> int:
    if module.startswith(ENTRY):
        return 2
    if module.startswith(PIPELINE):
        return 1
    return 0


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for module in _modules():
        graph.add_node(module)
        for target in _imports(_module_file(module).read_text(encoding="utf-8"), module):
            if _module_file(target) is not None and target != module:
                graph.add_edge(module, target)
    return graph


def test_no_import_goes_up_a_layer():
    upward = [f"{a} -> {b}" for a, b in import_graph().edges if _layer(b) > _layer(a)]
    assert not upward, "imports going up a layer (library -> pipeline -> entry points):\n" + "\n".join(upward)


def test_the_foundation_imports_only_the_foundation():
    outside = [f"{a} -> {b}" for a, b in import_graph().edges if a in FOUNDATION and b not in FOUNDATION]
    assert not outside, "foundation modules importing the library above them:\n" + "\n".join(outside)


def test_no_import_cycle():
    graph = import_graph()
    # a package's __init__ importing its own submodules is how a package re-exports; not a cycle of ideas
    graph.remove_edges_from([(a, b) for a, b in list(graph.edges) if b.startswith(a + ".")])
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_modules_stay_the_size_of_one_idea():
    """A module over ~400 lines says in its docstring why it is one piece (``Size:``)."""
    big = []
    for path in sorted((REPO / "ecqg").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES and "Size:" not in text.split('"""')[1 if text.startswith('"""') else 0]:
            big.append(f"{path.relative_to(REPO)} ({text.count(chr(10))} lines)")
    assert not big, "modules over 400 lines without a 'Size:' reason in their docstring:\n" + "\n".join(big)


# The analysis room (ecqg/analysis): statistics, attention measures, mechanism slices, figures of the analysis
# notebooks. Who may import it: itself, the pipeline's analysis steps, the report and the entry points; nothing in the
# library below. And no stage but the analysis stages (01, 06, 07, report) may reach it through its imports: a stage
# depends on every module it imports, so otherwise an edit to a statistic would rerun a training.
ANALYSIS = "ecqg.analysis"
MAY_IMPORT_ANALYSIS = (ANALYSIS, "ecqg.pipeline", "ecqg.report", "ecqg.stages", "ecqg.notebook")
ANALYSIS_STAGES = ("attention_bias", "results", "mechanism", "report")


def test_the_library_does_not_import_the_analysis_room():
    leaks = [f"{a} -> {b}" for a, b in import_graph().edges
             if b.startswith(ANALYSIS) and not a.startswith(MAY_IMPORT_ANALYSIS)]
    assert not leaks, "library modules importing ecqg.analysis:\n" + "\n".join(leaks)


def test_no_stage_but_the_analysis_stages_depends_on_analysis_code():
    from test_pipeline import _expanded_stages

    from ecqg.code_deps import command_roots

    reached = {}
    for name, stage in _expanded_stages():
        if name.split("@")[0] in ANALYSIS_STAGES:
            continue
        files = [str(f.relative_to(REPO)) for f in closure(command_roots(stage["cmd"])) if "analysis" in f.parts]
        if files:
            reached[name] = files
    assert not reached, "stages that train or build data reach the analysis room:\n" + "\n".join(
        f"  {stage}: {', '.join(files)}" for stage, files in reached.items())
