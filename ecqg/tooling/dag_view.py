"""A readable view of the pipeline: dvc.yaml's stages collapsed to one node per declared stage (a ``foreach`` /
``matrix`` stage's items are one node, with their count), drawn as a Mermaid flowchart in ``docs/pipeline.md``.

Why: ``dvc dag`` draws every expanded stage (87 lines up to 4,812 columns for mini, which no terminal shows); a
reader wants the order of the work and which stage feeds which. ``python -m ecqg.tooling.dag_view`` prints the
flowchart for the profile of ``params.yaml``, ``--write`` rewrites it in ``docs/pipeline.md`` between the
``<!-- dag:start -->`` and ``<!-- dag:end -->`` lines, ``--check`` exits 1 when that copy differs
(``tests/test_dag.py``). Edges are reduced transitively (an edge implied by a longer path is not drawn).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import networkx as nx
import yaml

from ecqg.core import cli, config
from ecqg.tooling.dvc_stages import Tree, declared_paths, expanded_stages

DOC = Path("docs/pipeline.md")
START, END = "<!-- dag:start -->", "<!-- dag:end -->"
NOTEBOOK = re.compile(r"ecqg\.tooling\.notebook (\d\d)_")


def _feeds(out: str, dep: str) -> bool:
    """An output feeds a dependency that is it, lies inside it (a folder dep) or contains it."""
    out, dep = out.rstrip("/"), dep.rstrip("/")
    return out == dep or dep.startswith(out + "/") or out.startswith(dep + "/")


def stage_groups(dvc_yaml: Mapping, tree: Tree) -> tuple[nx.DiGraph, dict[str, str]]:
    """The graph of declared stages (an edge: some item of A writes what some item of B reads) and each node's
    label (the notebook's number where the stage runs one, ``xN`` for a stage of N items); ``tree``: the params the
    stages expand with (the whole tree: :func:`ecqg.tooling.dvc_stages.expanded_stages`). A stage whose items sit
    on both sides of another stage (``retrieve_dense``: the baseline's run feeds filtering, which feeds the synthetic
    variants' runs) would close a loop as one node: its items stay apart."""
    expanded = list(expanded_stages(dvc_yaml, tree))
    outs = {name: [*declared_paths(s, "outs"), *declared_paths(s, "metrics")] for name, s in expanded}
    items = nx.DiGraph()
    items.add_nodes_from(name for name, _ in expanded)
    for name, stage in expanded:
        for dep in declared_paths(stage, "deps"):
            items.add_edges_from((other, name) for other, written in outs.items()
                                 if other != name and any(_feeds(o, dep) for o in written))
    node_of = {name: name for name, _ in expanded}
    for group in dict.fromkeys(name.partition("@")[0] for name, _ in expanded):
        trial = {n: (group if n.partition("@")[0] == group else node) for n, node in node_of.items()}
        if nx.is_directed_acyclic_graph(_contract(items, trial)):
            node_of = trial
    graph = _contract(items, node_of)
    commands = dict(expanded)
    labels = {}
    for node in graph.nodes:
        members = [n for n, m in node_of.items() if m == node]
        number = NOTEBOOK.search(str(commands[members[0]].get("cmd", "")))
        labels[node] = (f"{number.group(1)} {node}" if number else node) + (f" x{len(members)}" if len(members) > 1
                                                                           else "")
    return graph, labels


def _contract(items: nx.DiGraph, node_of: Mapping[str, str]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(dict.fromkeys(node_of[n] for n in items.nodes))
    graph.add_edges_from((node_of[a], node_of[b]) for a, b in items.edges if node_of[a] != node_of[b])
    return graph


def mermaid(graph: nx.DiGraph, labels: Mapping[str, str]) -> str:
    """A top-down Mermaid flowchart, nodes in an order they can run in (ties: dvc.yaml's order), edges transitively
    reduced."""
    reduced = nx.transitive_reduction(graph)
    declared = {node: i for i, node in enumerate(graph.nodes)}
    order = list(nx.lexicographical_topological_sort(graph, key=declared.get))
    lines = ["```mermaid", "flowchart TD"]
    pos = {node: i for i, node in enumerate(order)}
    lines += [f'  s{pos[node]}["{labels[node]}"]' for node in order]     # '@' and '-' are not Mermaid ids
    lines += [f"  s{pos[a]} --> s{pos[b]}" for a, b in sorted(reduced.edges, key=lambda e: (pos[e[0]], pos[e[1]]))]
    return "\n".join(lines + ["```"])


def view(dvc_yaml_path: str | Path = "dvc.yaml", params_path: str | Path = "params.yaml") -> str:
    graph, labels = stage_groups(yaml.safe_load(Path(dvc_yaml_path).read_text()), config.load_settings(params_path))
    return mermaid(graph, labels)


def with_view(doc_text: str, block: str, doc: Path = DOC) -> str:
    if doc_text.count(START) != 1 or doc_text.count(END) != 1:
        raise ValueError(f"{doc}: needs exactly one '{START}' and one '{END}' line around the pipeline's flowchart")
    head, rest = doc_text.split(START)
    _, tail = rest.split(END)
    return f"{head}{START}\n{block}\n{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.parser("ecqg.tooling.dag_view", __doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite the flowchart in {DOC}")
    mode.add_argument("--check", action="store_true", help=f"exit 1 if {DOC}'s flowchart is stale")
    args = parser.parse_args(argv)
    block = view()
    if not (args.write or args.check):
        print(block)
        return 0
    text = DOC.read_text()
    wanted = with_view(text, block)
    if args.check:
        if wanted != text:
            print(f"{DOC}: the pipeline's flowchart is stale; run python -m ecqg.tooling.dag_view --write",
                  file=sys.stderr)
            return 1
        print(f"{DOC}: the pipeline's flowchart is up to date")
        return 0
    DOC.write_text(wanted)
    print(f"{DOC} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
