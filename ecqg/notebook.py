"""Execute a numbered notebook headlessly with papermill, as a DVC stage.

``python -m ecqg.notebook 06_results_and_attention_entropy [-p name value ...]`` runs
``notebooks/<name>.ipynb`` with ``params_file=params.yaml`` injected, streams its output (so progress shows in the
DVC log), writes the executed copy to ``outputs/notebooks/<name>.ipynb`` atomically (a failed run leaves the failing
notebook next to it as ``<name>.failed.ipynb`` for inspection, never a file that looks complete) and records the wall
time in ``outputs/metrics/stage_<name>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ecqg import config, paths
from ecqg.io import atomic_path
from ecqg.stages import timed_stage


def execute(name: str, extra: dict | None = None, params_file: str = str(config.PARAMS_FILE)) -> Path:
    import papermill

    source = paths.NOTEBOOKS_SRC / f"{name}.ipynb"
    if not source.is_file():
        raise FileNotFoundError(f"no notebook {source}")
    params = config.load(params_file)
    target = paths.NOTEBOOKS_OUT / f"{name}.ipynb"
    failed = target.with_suffix(".failed.ipynb")
    with timed_stage(name, params):
        with atomic_path(target) as tmp:
            try:
                papermill.execute_notebook(
                    str(source), str(tmp), parameters={"params_file": params_file, **(extra or {})},
                    kernel_name="python3", log_output=True, progress_bar=False, cwd=os.getcwd(),
                )
            except Exception:
                if tmp.exists():
                    os.replace(tmp, failed)
                raise
        failed.unlink(missing_ok=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ecqg.notebook", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="notebook name without .ipynb, e.g. 06_results_and_attention_entropy")
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="extra papermill parameter (string)")
    args = parser.parse_args(argv)
    execute(args.name, dict(args.p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
