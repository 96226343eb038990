"""The code a DVC stage runs: the import closure of its module or notebook, and its shortest true cover.

Why: DVC reruns a stage only when one of its declared dependencies changes, so a stage must depend on every project
module it imports, function-level and relative imports and package ``__init__`` files included, or a result could
be stale while ``dvc status`` says "up to date". :mod:`ecqg.tooling.dag` writes these lists into dvc.yaml.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "ecqg"


def module_file(module: str, root: Path = REPO) -> Path | None:
    """The file of a project module (``ecqg.data.text`` -> ecqg/data/text.py, a package -> its __init__.py), or None."""
    base = root / Path(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _is_package(module: str, root: Path) -> bool:
    return (root / Path(*module.split(".")) / "__init__.py").is_file()


def imports(source: str, module: str | None = None, root: Path = REPO) -> set[str]:
    """Project modules imported anywhere in ``source`` (module level or inside functions)."""
    found: set[str] = set()
    package = None if module is None else (module if _is_package(module, root) else module.rpartition(".")[0])
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
                if module_file(f"{target}.{alias.name}", root) is not None:
                    found.add(f"{target}.{alias.name}")
    return found


def closure(roots: Iterable[str], root: Path = REPO) -> set[Path]:
    """Files of every project module reached from ``roots``, with the ``__init__`` of each package on the way."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):                   # importing a.b.c runs a/__init__ and a/b/__init__
            name = ".".join(parts[:i])
            if name in seen or module_file(name, root) is None:
                continue
            seen.add(name)
            path = module_file(name, root)
            todo += _file_imports(path, path.stat().st_mtime_ns, name, root)
    return {module_file(m, root) for m in seen}


@functools.lru_cache(maxsize=4096)
def _file_imports(path: Path, mtime_ns: int, module: str, root: Path) -> frozenset[str]:
    """:func:`imports` of one module file, parsed once per version of the file: the DAG writer follows the same
    modules for each of its stages."""
    return frozenset(imports(path.read_text(encoding="utf-8"), module, root))


def command_roots(cmd: str, root: Path = REPO) -> set[str]:
    """The modules a stage's command runs: ``python -m <module>``, plus a notebook stage's notebook imports."""
    # nbformat: not on the torch+transformers-only GPU image, where bench/gpu_check.py imports the DAG writer
    import nbformat

    words = cmd.split()
    roots = {words[2]}
    if words[2] == "ecqg.tooling.notebook":
        notebook = nbformat.read(root / "notebooks" / f"{words[3]}.ipynb", as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                roots |= imports("\n".join(line for line in cell.source.splitlines()
                                           if not line.lstrip().startswith(("%", "!"))), None, root)
    return roots


# Library rooms a stage depends on whole once it imports any of their modules: short lists, still true (an edit
# anywhere in the room reruns the stage, never less); the pipeline, stage and report modules stay one file each, so
# an analysis step's edit never reaches a training stage.
ROOMS = ("ecqg/data", "ecqg/retrieval", "ecqg/qg", "ecqg/filtering", "ecqg/tempqg", "ecqg/analysis")


def minimal_cover(files: set[Path], root: Path = REPO) -> list[str]:
    """The files, a room of :data:`ROOMS` standing for its modules, and any other package folder whose modules
    are all in ``files`` given as the folder."""
    rooms = {root / r for r in ROOMS}
    covered = {f for f in files if any(r in f.parents for r in rooms)}
    folders = sorted({r for r in rooms if any(r in f.parents for f in files)})
    for package in sorted({f.parent for f in files - covered}, key=lambda d: len(d.parts)):
        if package == root / PACKAGE or any(d in package.parents for d in folders):
            continue
        modules = set(package.rglob("*.py"))
        if modules and modules <= files:
            folders.append(package)
            covered |= modules
    return sorted([str(d.relative_to(root)) for d in folders] + [str(f.relative_to(root)) for f in files - covered])


def code_deps(cmd: str, root: Path = REPO) -> list[str]:
    return minimal_cover(closure(command_roots(cmd, root), root), root)
