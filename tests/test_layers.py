"""The package shows its architecture and is layered: the root holds the rooms, not loose modules; the core imports
only the core; the stages (one room: a module per DVC stage) -> the report's sections and the repository's
machinery -> the research rooms and the runtime -> the core, with no import going up a layer, no import cycle anywhere in ``ecqg`` (function-level
imports included) and none between rooms. docs/design.md, "Code layout", describes the same layers."""

from __future__ import annotations

import sys
from pathlib import Path

import networkx as nx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ecqg.tooling.code_deps import REPO, closure  # noqa: E402
from ecqg.tooling.code_deps import imports as _imports  # noqa: E402
from ecqg.tooling.code_deps import module_file as _module_file  # noqa: E402

STAGES = ("ecqg.stages",)
MIDDLE = ("ecqg.tooling", "ecqg.report")     # the notebook runner and the page sections sit below the stages
# The core: what every module may import and what imports nothing outside itself: paths and files, errors, process
# set-up, the device policy, params (and the names params may give: the variant table, the retrieval choices, the
# training settings among them). No model, torch-heavy or data code.
CORE = "ecqg.core"
MAX_LINES = 400
ROOT_MODULES_MAX = 8


def in_core(module: str) -> bool:
    return module in ("ecqg", CORE) or module.startswith(CORE + ".")


def _modules() -> list[str]:
    out = []
    for path in sorted((REPO / "ecqg").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _layer(module: str) -> int:
    if module.startswith(STAGES):
        return 2
    if module.startswith(MIDDLE):
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
    assert not upward, "imports going up a layer (library -> report, tooling -> stages):\n" + "\n".join(upward)


def test_the_core_imports_only_the_core():
    outside = [f"{a} -> {b}" for a, b in import_graph().edges if in_core(a) and not in_core(b)]
    assert not outside, "core modules importing outside the core:\n" + "\n".join(outside)


def room(module: str) -> str:
    """The room a module lives in: ``ecqg.retrieval.bm25`` -> ``ecqg.retrieval``."""
    return ".".join(module.split(".")[:2])


def test_the_root_holds_rooms_not_modules():
    loose = sorted(p.name for p in (REPO / "ecqg").glob("*.py"))
    assert len(loose) <= ROOT_MODULES_MAX, f"ecqg/ holds {len(loose)} modules: {loose}; put them in their rooms"
    for package in sorted(p.parent for p in (REPO / "ecqg").glob("*/__init__.py")):
        assert (package / "__init__.py").read_text(encoding="utf-8").lstrip().startswith('"""'), \
            f"{package.relative_to(REPO)}: a room says in its docstring what it holds"


def test_no_loop_between_rooms():
    rooms = nx.DiGraph()
    for a, b in import_graph().edges:
        if room(a) != room(b) and not in_core(room(b)) and room(a) != "ecqg":
            rooms.add_edge(room(a), room(b))
    loops = list(nx.simple_cycles(rooms))
    assert not loops, f"rooms importing each other in a loop: {loops}"


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
# notebooks. Who may import it: itself, the analysis stages, the report and the notebook runner; nothing in the
# library below. And no stage but the analysis stages (01, 06, 07, report) may reach it through its imports: a stage
# depends on every module it imports, so otherwise an edit to a statistic would rerun a training.
ANALYSIS = "ecqg.analysis"
MAY_IMPORT_ANALYSIS = (ANALYSIS, "ecqg.report", "ecqg.stages", "ecqg.tooling.notebook")
ANALYSIS_STAGES = ("attention_bias", "results", "mechanism", "report")


def test_the_library_does_not_import_the_analysis_room():
    leaks = [f"{a} -> {b}" for a, b in import_graph().edges
             if b.startswith(ANALYSIS) and not a.startswith(MAY_IMPORT_ANALYSIS)]
    assert not leaks, "library modules importing ecqg.analysis:\n" + "\n".join(leaks)


def test_no_stage_but_the_analysis_stages_depends_on_analysis_code():
    from test_pipeline import _expanded_stages

    from ecqg.tooling.code_deps import command_roots

    reached = {}
    for name, stage in _expanded_stages():
        if name.split("@")[0] in ANALYSIS_STAGES:
            continue
        files = [str(f.relative_to(REPO)) for f in closure(command_roots(stage["cmd"])) if "analysis" in f.parts]
        if files:
            reached[name] = files
    assert not reached, "stages that train or build data reach the analysis room:\n" + "\n".join(
        f"  {stage}: {', '.join(files)}" for stage, files in reached.items())
