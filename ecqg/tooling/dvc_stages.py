"""dvc.yaml expanded the way DVC expands it (``foreach``, ``matrix``, ``${...}`` from params), without DVC.

Why: the report must list only what the current run produced (a stage file left by an earlier run with more seeds
is not part of it), and the tests check the pipeline's declarations (every input a dependency, every output path
known). Both need the stages as DVC sees them for a given params.yaml, cheaply and without a DVC lock (the report
runs inside ``dvc repro``).

The params these functions resolve against are the whole tree (a ``${...}`` reference may name any key): the typed
:class:`ecqg.core.settings.Params` of this project's params file, or the plain mapping of any DVC params file (a toy
project's in the tests; ``dvc.lock`` pruning reads params.yaml as DVC does, unvalidated).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

from ecqg.core import config
from ecqg.core.settings.schema import Block

Tree = Mapping | Block                 # a params tree: a parsed params file, or the typed settings (ecqg.core.settings)
_REF = re.compile(r"\$\{([A-Za-z0-9_.\[\]]+)\}")


def param(tree: Tree, dotted: str):
    """A value by DVC's reference syntax: ``dpr.seeds``, ``dpr.seeds[0]``, ``data.test_sets`` (a typed block's
    setting by its field, which is its params key)."""
    node = tree
    for part in dotted.split("."):
        name, _, index = part.partition("[")
        node = getattr(node, name) if isinstance(node, Block) else node[name]
        if index:
            node = node[int(index.rstrip("]"))]
    return node


def interpolate(text: str, tree: Tree) -> str:
    return _REF.sub(lambda m: str(param(tree, m.group(1))), text)


def expanded_stages(dvc_yaml: Mapping, tree: Tree) -> Iterator[tuple[str, dict]]:
    """(name, stage) for every stage, ``foreach`` / ``matrix`` stages expanded (``name@item``, ``name@a-b``) and
    every ``${item}``, ``${key}``, ``${item.<axis>}`` and params reference resolved (against ``tree``: the whole
    params tree, see the module docstring)."""
    for name, stage in dvc_yaml.get("stages", {}).items():
        if "foreach" in stage:
            items = stage["foreach"]
            items = param(tree, items[2:-1]) if isinstance(items, str) else items
            pairs = items.items() if isinstance(items, dict) else [(item, item) for item in items]
            for key, item in pairs:
                text = yaml.safe_dump(stage["do"]).replace("${item}", str(item)).replace("${key}", str(key))
                yield f"{name}@{key}", yaml.safe_load(interpolate(text, tree))
        elif "matrix" in stage:
            axes = {k: param(tree, v[2:-1]) if isinstance(v, str) and v.startswith("${") else v
                    for k, v in stage["matrix"].items()}
            body = {k: v for k, v in stage.items() if k != "matrix"}
            for combo in itertools.product(*axes.values()):
                text = yaml.safe_dump(body)
                for axis, value in zip(axes, combo):
                    text = text.replace(f"${{item.{axis}}}", str(value))
                yield f"{name}@{'-'.join(map(str, combo))}", yaml.safe_load(interpolate(text, tree))
        else:
            yield name, yaml.safe_load(interpolate(yaml.safe_dump(stage), tree))


def declared_paths(stage: Mapping, key: str) -> Iterator[str]:
    """The paths a stage lists under ``deps`` / ``outs`` / ``metrics`` (with or without options)."""
    for entry in stage.get(key, []) or []:
        yield next(iter(entry)) if isinstance(entry, dict) else entry


def metric_files(dvc_yaml_path: str | Path = "dvc.yaml", tree: Tree | None = None) -> set[str]:
    """Every metrics file the current pipeline declares (for the current params, ``tree``; default: params.yaml's):
    DVC's metrics (the headline) and the committed JSON outputs under ``results/`` beside them
    (``ecqg.tooling.dag_file.DVC_METRICS`` says why they are outs)."""
    dvc_yaml = yaml.safe_load(Path(dvc_yaml_path).read_text(encoding="utf-8"))
    tree = config.load_settings() if tree is None else tree
    return {path for _, stage in expanded_stages(dvc_yaml, tree)
            for path in [*declared_paths(stage, "metrics"), *declared_paths(stage, "outs")]
            if path.startswith("results/") and path.endswith(".json")}
