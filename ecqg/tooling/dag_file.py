"""dvc.yaml as text and the lock's upkeep: a stage block in flow style (its data dependencies, then the import closure
of its command), the digest line that tells a hand edit from a written file, dropping a lock's entries of stages the
DAG no longer has, and the files git does not track in a code folder. :mod:`ecqg.tooling.dag` declares the stages.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ecqg.core.io import atomic_path
from ecqg.tooling import dvc_stages
from ecqg.tooling.code_deps import REPO, code_deps

DVC_YAML = Path("dvc.yaml")


@dataclass
class Stage:
    """One dvc.yaml block; code dependencies are appended from the command's import closure."""

    name: str
    cmd: str
    deps: list = field(default_factory=list)
    params: list = field(default_factory=list)
    outs: list = field(default_factory=list)
    metrics: list = field(default_factory=list)
    matrix: dict | None = None
    foreach: object = None
    comment: str = ""


def _scalar(value, flow: bool = False) -> str:
    """A YAML scalar, quoted where YAML would read it otherwise (in a flow list, any ``{`` or ``,``)."""
    text = str(value)
    special = text.startswith(("${", "*", "&", "!", "{", "[")) or ": " in text or " #" in text
    return f"'{text}'" if special or (flow and any(c in text for c in "{},[]")) else text


def _item(item) -> str:
    """A flow-style entry: a path, or ``{path: {option: value}}``."""
    if isinstance(item, dict):
        (path, options), = item.items()
        inner = ", ".join(f"{k}: {str(v).lower()}" for k, v in options.items())
        return f"{{{_scalar(path, flow=True)}: {{{inner}}}}}"
    return _scalar(item, flow=True)


def flow(key: str, items: Sequence, indent: str, width: int = 118) -> list[str]:
    """``key: [a, b, ...]`` wrapped at ``width``, continuation lines indented under the key."""
    if not items:
        return []
    lines, line = [], f"{indent}{key}: ["
    for i, item in enumerate(items):
        piece = _item(item) + (", " if i < len(items) - 1 else "]")
        if len(line) + len(piece.rstrip()) > width and not line.endswith("["):
            lines.append(line.rstrip())
            line = indent + "  "
        line += piece
    return lines + [line]


def render_stage(stage: Stage, root: Path = REPO) -> str:
    """One block: its data dependencies first, then its code (the import closure), all in flow style so a block
    reads in a few lines."""
    head = f"  {stage.name}:"
    lines = [head + (" " * max(1, 42 - len(head)) + f"# {stage.comment}" if stage.comment else "")]
    ind = "    "
    if stage.foreach is not None:
        each = _scalar(stage.foreach) if isinstance(stage.foreach, str) else "[" + ", ".join(stage.foreach) + "]"
        lines += [f"{ind}foreach: {each}", f"{ind}do:"]
        ind = "      "
    if stage.matrix:
        lines.append(f"{ind}matrix:")
        lines += [f"{ind}  {k}: {_scalar(v) if isinstance(v, str) else '[' + ', '.join(v) + ']'}"
                  for k, v in stage.matrix.items()]
    lines.append(f"{ind}cmd: {stage.cmd}")
    lines += flow("deps", [*stage.deps, *code_deps(stage.cmd, root)], ind)
    lines += flow("params", stage.params, ind)
    headline = [m for m in stage.metrics if _path(m).endswith(DVC_METRICS)]
    lines += flow("outs", [*stage.outs, *(m for m in stage.metrics if m not in headline)], ind)
    lines += flow("metrics", headline, ind)
    return "\n".join(lines)


# What `dvc metrics show` / `dvc exp show` print: the headline figures only (a dozen short keys). Every other metrics
# file of a stage is declared as a committed output (cache: false) beside it: still in git, still diffable with
# `dvc metrics show results/<profile>/table3.json`, but not thousands of columns wide by default.
DVC_METRICS = ("/headline.json",)


def _path(entry) -> str:
    return next(iter(entry)) if isinstance(entry, dict) else entry


DIGEST = "# digest of the text below this line (a hand edit changes it; `dag write` then refuses): "


def signed(text: str) -> str:
    """``text`` with a first line holding the digest of the rest, so a later write can tell a hand edit from a
    file this module wrote (as ``make profile`` tells a hand-edited params.yaml from a preset)."""
    return f"{DIGEST}{hashlib.sha256(text.encode()).hexdigest()[:16]}\n{text}"


def hand_edited(text: str) -> bool:
    """Whether a dvc.yaml was changed after ``dag write`` wrote it (a file without the digest line: not known)."""
    first, _, rest = text.partition("\n")
    if not first.startswith(DIGEST):
        return False
    return first.removeprefix(DIGEST) != hashlib.sha256(rest.encode()).hexdigest()[:16]


def prune_lock(lock: Path, params_file: Path = Path("params.yaml")) -> list[str]:
    """Remove from ``lock`` the entries of stages the DAG no longer has (for the current params): DVC rewrites the
    entries of the stages it runs and leaves the others, so a renamed or dropped stage's entry would stay forever.
    Returns the removed names."""
    # ruamel: not on the torch+transformers-only GPU image, where bench/gpu_check.py imports the DAG writer
    from ruamel.yaml import YAML

    if not lock.is_file():
        return []
    dag = yaml.safe_load((lock.parent / DVC_YAML).read_text(encoding="utf-8"))
    params = yaml.safe_load((lock.parent / params_file).read_text(encoding="utf-8"))
    names = {name for name, _ in dvc_stages.expanded_stages(dag, params)}
    rt = YAML()
    doc = rt.load(lock.read_text(encoding="utf-8"))
    gone = [name for name in list(doc.get("stages") or {}) if name not in names]
    if gone:
        for name in gone:
            del doc["stages"][name]
        with atomic_path(lock) as tmp, open(tmp, "w", encoding="utf-8") as handle:
            rt.dump(doc, handle)
    return gone


def untracked_code_files(root: Path = REPO, dag_file: Path = DVC_YAML) -> list[str]:
    """Files that DVC would hash into a stage's code folder (``ecqg/retrieval``) but git does not track.

    Why: a folder dependency's hash in dvc.lock covers every file DVC sees in it. A stray file there (an editor's
    backup, a compiled module written by a tool that ignores PYTHONDONTWRITEBYTECODE) enters the hash, so a clean
    clone, which lacks the file, calls every stage that imports the folder stale although the code is the same.
    ``make repro`` refuses to run while this list is not empty."""
    # dvc: not on the torch+transformers-only GPU image, where bench/gpu_check.py imports the DAG writer
    from dvc.repo import Repo

    dag = yaml.safe_load((root / dag_file).read_text(encoding="utf-8"))
    deps = {dep for stage in (dag.get("stages") or {}).values()
            for dep in ((stage.get("do") or stage).get("deps") or [])}
    folders = sorted(dep for dep in deps if "$" not in dep and (root / dep).is_dir()
                     and subprocess.run(["git", "ls-files", "--error-unmatch", dep], cwd=root,
                                        capture_output=True).returncode == 0)
    if not folders:
        return []
    others = subprocess.run(["git", "ls-files", "--others", "-z", "--", *folders], cwd=root, check=True,
                            capture_output=True, text=True).stdout.split("\0")
    ignore = Repo(str(root)).dvcignore

    def dvc_ignores(rel: str) -> bool:
        path = root / rel
        return ignore.is_ignored_file(str(path)) or any(
            ignore.is_ignored_dir(str(parent)) for parent in path.parents if parent != root and root in parent.parents)

    return sorted(rel for rel in others if rel and not dvc_ignores(rel))
