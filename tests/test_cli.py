"""``--help`` of every ``python -m`` entry point prints its usage and a description in whole sentences, and does
nothing else (issue 57, item 2). The entry points are found in the package, not listed: every module with an
``if __name__ == "__main__":`` block and every package with a ``__main__.py``, so a new one is checked too."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ecqg.core import cli

PACKAGE = Path(__file__).resolve().parents[1] / "ecqg"
SECTIONS = ("options:", "optional arguments:", "positional arguments:")   # argparse's headings (3.10+ / before)
SENTENCE_END = re.compile(r"[.!?][)`'\"]*$")


def _has_main_block(source: str) -> bool:
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if {getattr(n, "id", None) for n in names} & {"__name__"} and \
                    any(isinstance(n, ast.Constant) and n.value == "__main__" for n in names):
                return True
    return False


def entry_points() -> list[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if path.name == "__main__.py":
            found.add(".".join(parts[:-1]))
        elif _has_main_block(path.read_text(encoding="utf-8")):
            found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(found)


ENTRY_POINTS = entry_points()


def test_the_entry_points_are_found():
    # the two of issue 57 and a stage: if the search breaks, the parametrized test below must not pass on nothing
    assert {"ecqg.stages.report", "ecqg.tooling.doctor", "ecqg.stages.prepare", "ecqg.tooling.dag"} <= set(ENTRY_POINTS)


def description_of(help_text: str) -> list[str]:
    """The lines between the usage block and argparse's first heading."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if not line.strip())        # the usage block ends at a blank line
    end = next((i for i, line in enumerate(lines) if line in SECTIONS), len(lines))
    return [line for line in lines[start:end] if line.strip()]


# One interpreter runs every entry point's `--help` in turn (runpy, as `python -m` does, each from an empty folder of
# its own): a process per entry point spent up to 12 s each starting Python and importing torch / pandas again under
# the suite's load (21 entry points, 3 Dec 2026), one interpreter ~11 s for all of them. Whether each imports in a fresh interpreter is checked by the
# stages themselves (every DVC stage is a `python -m` process) and tests/test_layers.py.
HELP_DRIVER = """
import contextlib, io, json, os, runpy, sys
out, root, modules = {}, sys.argv[1], sys.argv[2:]
for module in modules:
    folder = os.path.join(root, module)
    os.makedirs(folder)
    os.chdir(folder)
    sys.argv = [module, "--help"]
    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        except BaseException as error:
            code, stderr = 1, io.StringIO(stderr.getvalue() + repr(error))
    out[module] = {"returncode": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def helps(tmp_path_factory) -> tuple[Path, dict]:
    """Every entry point's ``--help``: its folder and ``{module: {returncode, stdout, stderr}}``."""
    root = tmp_path_factory.mktemp("help")
    run = subprocess.run([sys.executable, "-c", HELP_DRIVER, str(root), *ENTRY_POINTS], capture_output=True,
                         text=True, timeout=600, env={**os.environ, "COLUMNS": "100"}, cwd=root)
    assert run.returncode == 0, f"the --help driver failed:\n{run.stderr[-3000:]}"
    return root, json.loads(run.stdout.splitlines()[-1])


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_help_prints_usage_and_whole_sentences_and_does_nothing_else(module, helps):
    # run from an empty folder: an entry point that ignored --help and ran would find no params.yaml (or write there)
    root, results = helps
    run = results[module]
    assert run["returncode"] == 0, f"python -m {module} --help exited {run['returncode']}:\n{run['stderr'][-2000:]}"
    usage = run["stdout"].splitlines()[0] if run["stdout"] else ""
    assert usage.startswith("usage:") and f"-m {module}" in usage, f"no usage line naming the module:\n{run['stdout']}"
    description = description_of(run["stdout"])
    assert description, f"python -m {module} --help describes nothing:\n{run['stdout']}"
    assert SENTENCE_END.search(description[-1].strip()), \
        f"python -m {module} --help: the description ends mid-sentence ({description[-1].strip()!r})"
    assert not list((root / module).iterdir()), f"python -m {module} --help wrote {sorted((root / module).iterdir())}"


def test_the_help_driver_reports_an_entry_point_that_ran_instead(tmp_path):
    # the driver itself: a module that ignores --help, writes and exits 2 is reported as such, not hidden
    (tmp_path / "ran_instead.py").write_text("open('written', 'w').write('x')\nraise SystemExit(2)\n")
    run = subprocess.run([sys.executable, "-c", HELP_DRIVER, str(tmp_path / "out"), "ran_instead"],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    result = json.loads(run.stdout.splitlines()[-1])["ran_instead"]
    assert result["returncode"] == 2 and (tmp_path / "out/ran_instead/written").is_file()


def test_the_description_is_whole_paragraphs_of_the_docstring():
    doc = """First line of a sentence that
    goes on here.

    Second paragraph.

    Third."""
    assert cli.description(doc) == "First line of a sentence that\ngoes on here."
    assert cli.description(doc, paragraphs=2) == "First line of a sentence that\ngoes on here.\n\nSecond paragraph."
    help_text = cli.parser("ecqg.x", doc, paragraphs=2).format_help()
    assert "sentence that goes on here.\n\nSecond paragraph.\n" in help_text
