"""Execute a numbered notebook headlessly with papermill, as a DVC stage.

``python -m ecqg.tooling.notebook 05_dpr_training [--tag baseline] [-p name value ...]`` runs ``notebooks/<name>.ipynb``
with ``params_file=params.yaml`` (and the ``-p`` values) injected, streams its output so progress shows in the DVC
log, writes the executed copy to ``outputs/notebooks/<name>[.<tag>].ipynb`` atomically (a failed run leaves the
failing notebook next to it as ``<name>[.<tag>].failed.ipynb`` for inspection, never a file that looks complete) and
records the wall time in ``results/<profile>/stage_<name>[.<tag>].json``. A tag names one run of a notebook that DVC
runs once per variant (``foreach``).

A notebook run once per profile (not 05's runs, one per variant and seed) is also published: a copy with its tables
and figures but without progress bars and log streams goes to ``results/<profile>/notebooks/<name>.ipynb``, committed
with the metrics, so a fresh clone shows the last run's notebooks without running anything.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ecqg.core import cli, config, device, paths
from ecqg.core.io import atomic_path, write_text
from ecqg.core.stage_record import timed_stage


def executed_name(name: str, tag: str | None = None) -> str:
    return f"{name}.{tag}" if tag else name


def execute(name: str, extra: dict | None = None, params_file: str = str(config.PARAMS_FILE),
            tag: str | None = None) -> Path:
    # papermill imports nbformat, nbformat jsonschema, and jsonschema its optional "iri" format checker
    # rfc3987_syntax, which builds its Earley parsers at import, seconds of every notebook stage's start.
    # No notebook schema has an iri format; without the module jsonschema leaves that one format unchecked.
    sys.modules.setdefault("rfc3987_syntax", None)
    # papermill: kept out of --help
    import papermill

    source = paths.NOTEBOOKS_SRC / f"{name}.ipynb"
    if not source.is_file():
        raise FileNotFoundError(f"no notebook {source}")
    params = config.load(params_file)
    run_name = executed_name(name, tag)
    target = paths.NOTEBOOKS_OUT / f"{run_name}.ipynb"
    failed = paths.NOTEBOOKS_OUT / f"{run_name}.failed.ipynb"
    inherited = os.environ.get(device.ENV_VAR)   # a user's override stays; ours is removed afterwards
    with timed_stage(run_name, params["profile"], params["device"]):
        with atomic_path(target) as tmp:
            try:
                # the notebook's kernel is a child process: it follows this stage's device policy through the env
                os.environ[device.ENV_VAR] = device.setting_in_force()
                papermill.execute_notebook(
                    str(source), str(tmp), parameters={"params_file": params_file, **(extra or {})},
                    kernel_name="python3", log_output=True, progress_bar=False, cwd=os.getcwd(),
                )
            except Exception:
                if tmp.exists():
                    os.replace(tmp, failed)
                raise
            finally:
                if inherited is None:
                    os.environ.pop(device.ENV_VAR, None)
        failed.unlink(missing_ok=True)
        if tag is None:
            publish(target, paths.published_notebook(params["profile"], name))
    return target


NOISE_STREAMS = ("stderr",)      # tqdm bars, logging: what a reader of the executed notebook does not need


def published(notebook: dict) -> dict:
    """An executed notebook as committed: every output but the stderr streams (progress bars, logs), stdout with
    carriage-return redraws collapsed to their last state, and no per-run execution timestamps."""
    out = {**notebook, "cells": []}
    for cell in notebook["cells"]:
        cell = {**cell, "metadata": {k: v for k, v in cell.get("metadata", {}).items() if k != "execution"}}
        if cell["cell_type"] == "code":
            outputs = []
            for o in cell.get("outputs", []):
                if o.get("output_type") == "stream":
                    if o.get("name") in NOISE_STREAMS:
                        continue
                    text = "".join(o.get("text", ""))
                    o = {**o, "text": "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))}
                outputs.append(o)
            cell["outputs"] = outputs
        out["cells"].append(cell)
    return out


def publish(executed: Path, target: Path) -> Path:
    notebook = json.loads(executed.read_text(encoding="utf-8"))
    target.parent.mkdir(parents=True, exist_ok=True)
    return write_text(target, json.dumps(published(notebook), indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.tooling.notebook", __doc__, paragraphs=2)
    parser.add_argument("name", help="notebook name without .ipynb, e.g. 06_results_and_attention_entropy")
    parser.add_argument("--tag", help="name of this run (a variant); also passed to the notebook as `variant`")
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="extra papermill parameter (string)")
    args = parser.parse_args(argv)
    extra = dict(args.p)
    if args.tag:
        extra.setdefault("variant", args.tag)
    execute(args.name, extra, tag=args.tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
