"""Which of a profile's stages are stale against the tree: the code, committed inputs or params their last run used
(as ``dvc.lock`` recorded them) differ from what the repository holds now.

Why on the results page: a profile's committed numbers come from its last ``dvc repro``; an edit since (a stage's
code, a notebook, a params value) means the numbers may no longer be what the committed code computes. DVC knows this
(``dvc status``), but only with the outputs present; a fresh clone has none. So the page compares the hashes the lock
recorded for every dependency that the repository tracks (code, notebooks, ``data/`` inputs; not DVC outputs) with
the files' hashes now, computed the way DVC does (``dvc_data``: plain md5 of a file, the ``.dir`` hash of a folder),
and every params value the lock recorded with ``params.yaml``'s (or the profile preset's). A lock entry of a stage that
has left the DAG is reported too. ``tests/test_staleness.py`` checks the list against a real ``dvc repro``.

The lock of the mini profile is the repository's ``dvc.lock``; a profile run in a clone of its own keeps its lock as
``results/<profile>/dvc.lock``; a profile with no lock kept says so.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import yaml
from dvc.fs import LocalFileSystem
from dvc.ignore import DvcIgnoreFilter
from dvc_data.hashfile.build import build
from dvc_data.hashfile.db import HashFileDB
from ruamel.yaml import YAML

from ecqg.core import config, settings
from ecqg.tooling import dvc_stages

PRODUCED = ("outputs/", "results/")     # DVC outputs: not in a fresh clone, their staleness is their stage's
SELF = "report"                         # renders this list; its own entry is written after it runs


@lru_cache(maxsize=None)
def tree_hash(path: str, root: str) -> str | None:
    """DVC's md5 of a file, or ``<md5>.dir`` of a folder (``.dvcignore`` respected); None when it is missing."""
    full = Path(root) / path
    if full.is_file():
        return hashlib.md5(full.read_bytes()).hexdigest()
    if not full.is_dir():
        return None
    fs = LocalFileSystem()
    with tempfile.TemporaryDirectory() as scratch:
        _, _, obj = build(HashFileDB(fs, scratch), str(full), fs, "md5", ignore=DvcIgnoreFilter(fs, root))
    return obj.hash_info.value


def _flat(tree, prefix: str = "") -> dict[str, object]:
    if not isinstance(tree, Mapping):
        return {prefix: tree}
    out: dict[str, object] = {}
    for key, value in tree.items():
        out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def read_lock(path: str | Path) -> dict:
    """``dvc.lock`` read as DVC reads it, in YAML 1.2: PyYAML (YAML 1.1) would read DVC's ``lr: 5e-05`` as a
    string and ``mixed_precision: no`` as False, and list unchanged stages as stale."""
    return YAML(typ="safe", pure=True).load(Path(path).read_text(encoding="utf-8")) or {}


def stale_stages(lock: Mapping, values: Mapping, stage_names: set[str] | None = None, root: str | Path = "."
                 ) -> dict[str, list[str]]:
    """``{stage: [what changed]}`` for every stage of ``lock`` (``dvc.lock`` parsed) whose tracked dependencies or
    params differ from the tree and ``values`` (the params file's values now, as DVC reads the file: the whole
    tree, since the lock may record any key; a plain mapping, as any DVC project's); a stage missing from
    ``stage_names`` (the current DAG's) is listed as having left it. Stages with nothing changed are left out."""
    root = str(Path(root).resolve())
    current = _flat(values)
    out: dict[str, list[str]] = {}
    for name, entry in (lock.get("stages") or {}).items():
        if name == SELF:
            continue
        if stage_names is not None and name not in stage_names:
            out[name] = ["left the DAG"]
            continue
        changed = []
        for dep in entry.get("deps") or []:
            path = dep["path"]
            if path.startswith(PRODUCED):
                continue
            now = tree_hash(path, root)
            if now is None:
                changed.append(f"{path} (gone)")
            elif now != dep.get("md5"):
                changed.append(path)
        for values in (entry.get("params") or {}).values():
            for key, value in _flat(values).items():
                if value != current.get(key, "<absent>"):
                    changed.append(f"params {key}")
        if changed:
            out[name] = changed
    return out


def profile_lock(profile: str, root: str | Path = ".") -> Path | None:
    """The lock of a profile's committed results: ``results/<profile>/dvc.lock``, or for the default profile the
    repository's own; None when none was kept."""
    root = Path(root)
    kept = root / "results" / profile / "dvc.lock"
    if kept.is_file():
        return kept
    return root / "dvc.lock" if profile == "mini" and (root / "dvc.lock").is_file() else None


def stale_banner(count: int) -> str:
    """The line at the top of a page whose numbers partly come from earlier code (the section says which)."""
    return (f"> **{count} stages of this page ran on earlier code** than the repository holds, or have left its DAG: "
            "their numbers are the earlier code's until `dvc repro` reruns them (see *Stages stale against the "
            "committed code* at the end).\n")


def staleness(profile: str, root: str | Path = ".") -> tuple[str, int | None]:
    """The results page's section (the stale stages and what changed, or that none is, or that no lock was kept)
    and the number of stale stages (None when no lock was kept)."""
    root = Path(root)
    head = "#### Stages stale against the committed code\n\n"
    lock_path = profile_lock(profile, root)
    if lock_path is None:
        return head + ("_No `dvc.lock` was kept for this profile, so which of its stages the code has changed under "
                       "since its run cannot be told from the repository: read its numbers as those of the commit "
                       "its findings name._\n"), None
    tree = settings.of(config.preset(profile, root / "params"))
    lock = read_lock(lock_path)
    dag = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))
    names = {name for name, _ in dvc_stages.expanded_stages(dag, tree)}
    stale = stale_stages(lock, tree.as_dict(), names, root)
    where = lock_path.relative_to(root).as_posix() if lock_path.is_absolute() else lock_path.as_posix()
    if not stale:
        return head + (f"None: every stage in `{where}` ran on the code, inputs and params the repository holds now "
                       "(the report stage, which writes this list, aside).\n"), 0
    rows = "".join(f"| `{name}` | {', '.join(f'`{c}`' for c in changes[:6])}"
                   f"{f' and {len(changes) - 6} more' if len(changes) > 6 else ''} |\n"
                   for name, changes in sorted(stale.items()))
    return head + (f"{len(stale)} of the stages in `{where}` ran on other code, inputs or params than the repository "
                   "holds now: their numbers below are those of the earlier code until `dvc repro` reruns them.\n\n"
                   "| stage | what changed since it ran |\n| --- | --- |\n" + rows), len(stale)
