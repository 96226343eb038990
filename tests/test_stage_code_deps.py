"""Stale results are impossible: every stage depends (in dvc.yaml) on every project module it imports.

Why: DVC reruns a stage only when one of its declared dependencies changes. A module a stage imports but does not
declare (``text.py`` under question generation, say) can change what the stage computes while ``dvc status`` says
"up to date". So the import closure of each stage is derived here from the code itself (the module its command runs,
and for notebook stages every import in the notebook's code cells), following ``ecqg`` imports transitively,
function-level imports and package ``__init__`` files included, and each module file must be covered by a dependency
(the file itself or a folder above it).

Run ``python tests/test_stage_code_deps.py`` to print what each stage is missing, and
``python tests/test_stage_code_deps.py --write`` to rewrite the code dependencies in dvc.yaml from the closures (a
folder stands for a package whose every module the stage imports).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pipeline import REPO, _expanded_stages  # noqa: E402

PACKAGE = "ecqg"


def _module_file(module: str) -> Path | None:
    """The file of a project module (``ecqg.text`` -> ecqg/text.py, a package -> its __init__.py), or None."""
    base = REPO / Path(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _imports(source: str, module: str | None = None) -> set[str]:
    """Project modules imported anywhere in ``source`` (module level or inside functions)."""
    found: set[str] = set()
    package = None if module is None else (module if _is_package(module) else module.rpartition(".")[0])
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            found.add(target)
            for alias in node.names:                         # `from ecqg import paths`: a submodule
                if _module_file(f"{target}.{alias.name}") is not None:
                    found.add(f"{target}.{alias.name}")
    return found


def _is_package(module: str) -> bool:
    return (REPO / Path(*module.split(".")) / "__init__.py").is_file()


def closure(roots: set[str]) -> set[Path]:
    """Files of every project module reached from ``roots``, with the ``__init__`` of each package on the way."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):                   # importing a.b.c runs a/__init__ and a/b/__init__
            name = ".".join(parts[:i])
            if name in seen or _module_file(name) is None:
                continue
            seen.add(name)
            todo += _imports(_module_file(name).read_text(encoding="utf-8"), name)
    return {_module_file(m) for m in seen}


def stage_roots(stage: dict) -> set[str]:
    """The modules a stage's command runs: ``python -m <module>``, plus a notebook stage's notebook imports."""
    words = stage["cmd"].split()
    roots = {words[2]}
    if words[2] == "ecqg.notebook":
        notebook = nbformat.read(REPO / "notebooks" / f"{words[3]}.ipynb", as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                roots |= _imports("\n".join(line for line in cell.source.splitlines()
                                            if not line.lstrip().startswith(("%", "!"))))
    return roots


def missing_code_deps() -> dict[str, list[str]]:
    """Stage -> module files it imports but does not depend on (empty when every stage is covered)."""
    out = {}
    for name, stage in _expanded_stages():
        deps = [REPO / d for d in stage.get("deps", [])]
        missing = [str(f.relative_to(REPO)) for f in sorted(closure(stage_roots(stage)))
                   if not any(f == d or d in f.parents for d in deps)]
        if missing:
            out[name] = missing
    return out


def test_import_closure_helper_follows_function_level_and_relative_imports():
    files = {str(f.relative_to(REPO)) for f in closure({"ecqg.stages.retrieve_dense"})}
    # retrieve_all imports ecqg.retrieval.dense inside the function; ecqg/__init__ runs ecqg/env.py
    assert {"ecqg/retrieval/dense.py", "ecqg/pipeline/dense.py", "ecqg/__init__.py", "ecqg/env.py",
            "ecqg/stages/__init__.py", "ecqg/stages/retrieve_dense.py"} <= files


def test_every_stage_depends_on_every_module_it_imports():
    missing = missing_code_deps()
    assert not missing, "stages import project modules that are not DVC dependencies (add them to dvc.yaml):\n" + \
        "\n".join(f"  {stage}: {', '.join(files)}" for stage, files in missing.items())


def minimal_cover(files: set[Path]) -> list[str]:
    """The files, with every package folder whose modules are all in ``files`` (sub-packages included) given as
    the folder."""
    covered: set[Path] = set()
    folders = []
    for package in sorted({f.parent for f in files}, key=lambda d: len(d.parts)):
        if any(d in package.parents for d in folders):
            continue
        modules = set(package.rglob("*.py"))
        if modules and modules <= files:
            folders.append(package)
            covered |= modules
    return sorted([str(d.relative_to(REPO)) for d in folders] + [str(f.relative_to(REPO)) for f in files - covered])


def write_code_deps() -> None:
    """Replace each stage's ``ecqg/`` dependencies in dvc.yaml by the minimal cover of its import closure."""
    from ruamel.yaml import YAML

    from test_pipeline import DVC_YAML

    yaml_rt = YAML()
    yaml_rt.width = 118
    yaml_rt.indent(mapping=2, sequence=4, offset=2)
    path = REPO / "dvc.yaml"
    doc = yaml_rt.load(path.read_text(encoding="utf-8"))
    closures: dict[str, set[Path]] = {}
    for name, stage in _expanded_stages():
        closures.setdefault(name.split("@")[0], set()).update(closure(stage_roots(stage)))
    for name, files in closures.items():
        body = doc["stages"][name]
        body = body.get("do", body)
        deps = body["deps"]
        for i in reversed(range(len(deps))):      # in place, so the comments on the other deps stay
            if str(deps[i]).startswith("ecqg/"):
                del deps[i]
        deps.extend(minimal_cover(files))
    with open(path, "w", encoding="utf-8") as handle:
        yaml_rt.dump(doc, handle)
    assert DVC_YAML is not None


if __name__ == "__main__":
    if "--write" in sys.argv:
        write_code_deps()
    for stage, files in missing_code_deps().items():
        print(f"{stage}:")
        for f in files:
            print(f"  - {f}")
