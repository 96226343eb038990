"""dvc.yaml expanded the way DVC expands it (``foreach``, ``matrix``, ``${...}`` from params), without DVC.

Why: the report must list only what the current run produced (a stage file left by an earlier run with more seeds
is not part of it), and the tests check the pipeline's declarations (every input a dependency, every output path
known). Both need the stages as DVC sees them for a given params.yaml, cheaply and without a DVC lock (the report
runs inside ``dvc repro``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

_REF = re.compile(r"\$\{([A-Za-z0-9_.\[\]]+)\}")


def param(params: Mapping, dotted: str):
    """A value by DVC's reference syntax: ``dpr.seeds``, ``dpr.seeds[0]``, ``data.test_sets``."""
    node = params
    for part in dotted.split("."):
        name, _, index = part.partition("[")
        node = node[name]
        if index:
            node = node[int(index.rstrip("]"))]
    return node


def interpolate(text: str, params: Mapping) -> str:
    return _REF.sub(lambda m: str(param(params, m.group(1))), text)


def expanded_stages(dvc_yaml: Mapping, params: Mapping) -> Iterator[tuple[str, dict]]:
    """(name, stage) for every stage, ``foreach`` / ``matrix`` stages expanded (``name@item``, ``name@a-b``) and
    every ``${item}``, ``${key}``, ``${item.<axis>}`` and params reference resolved."""
    for name, stage in dvc_yaml.get("stages", {}).items():
        if "foreach" in stage:
            items = stage["foreach"]
            items = param(params, items[2:-1]) if isinstance(items, str) else items
            pairs = items.items() if isinstance(items, dict) else [(item, item) for item in items]
            for key, item in pairs:
                text = yaml.safe_dump(stage["do"]).replace("${item}", str(item)).replace("${key}", str(key))
                yield f"{name}@{key}", yaml.safe_load(interpolate(text, params))
        elif "matrix" in stage:
            axes = {k: param(params, v[2:-1]) if isinstance(v, str) and v.startswith("${") else v
                    for k, v in stage["matrix"].items()}
            body = {k: v for k, v in stage.items() if k != "matrix"}
            for combo in itertools.product(*axes.values()):
                text = yaml.safe_dump(body)
                for axis, value in zip(axes, combo):
                    text = text.replace(f"${{item.{axis}}}", str(value))
                yield f"{name}@{'-'.join(map(str, combo))}", yaml.safe_load(interpolate(text, params))
        else:
            yield name, yaml.safe_load(interpolate(yaml.safe_dump(stage), params))


def declared_paths(stage: Mapping, key: str) -> Iterator[str]:
    """The paths a stage lists under ``deps`` / ``outs`` / ``metrics`` (with or without options)."""
    for entry in stage.get(key, []) or []:
        yield next(iter(entry)) if isinstance(entry, dict) else entry


def metric_files(dvc_yaml_path: str | Path = "dvc.yaml", params: Mapping | None = None) -> set[str]:
    """Every metrics file the current pipeline declares (for the current params): DVC's metrics (the headline) and
    the committed JSON outputs under ``results/`` beside them (``ecqg.tooling.dag_file.DVC_METRICS`` says why they are outs)."""
    from ecqg.core import config

    dvc_yaml = yaml.safe_load(Path(dvc_yaml_path).read_text(encoding="utf-8"))
    params = config.load() if params is None else params
    return {path for _, stage in expanded_stages(dvc_yaml, params)
            for path in [*declared_paths(stage, "metrics"), *declared_paths(stage, "outs")]
            if path.startswith("results/") and path.endswith(".json")}
