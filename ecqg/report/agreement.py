"""How far two runs of one profile agree: ``python -m ecqg.report.agreement A B``.

Why: the paired tests of Table 3 and the mechanism evaluations resample *questions*; they say nothing about how the
trained models would move if training itself ran again. With one training seed (mini) that noise is invisible. A
second run of the same code and parameters on another machine is a cheap probe of it: runs reproduce bit for bit
on one kind of CPU, but bf16 kernels round differently on another (Intel AMX vs AMD AVX512-BF16), so the generators
sample other questions and every model downstream of them trains on slightly different data.

For two metrics folders (``results/<profile>`` and a copy from another run) it reports
- first, whether the two runs are one design: the code and params each ran (:func:`identity`, from the run's
  ``dvc.lock``); two designs are refused (``--different-designs`` compares them anyway, and says so in its first
  line), because their differences mix the change of design with the drift this tool measures;
- per system, the largest difference of a Top-k point estimate (``table3.json``'s ``accuracy``);
- every paired test (``<name>_p`` beside ``<name>_diff`` in ``table3.json``, ``mechanism.json`` and
  ``encoder_comparison.json``): whether its verdict at ``alpha`` agrees, and how many verdicts flip or reverse.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from dvc_data.hashfile.hash_info import HashInfo
from dvc_data.hashfile.tree import Tree

from ecqg.core import cli

TEST_FILES = ("table3.json", "mechanism.json", "encoder_comparison.json")
_TOPK = re.compile(r"^accuracy/([^/]+)/.+/top\d+$")


def flatten(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``("a/b/c", leaf)`` pairs of a JSON tree (lists indexed ``a/0``)."""
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            yield from flatten(value, f"{prefix}/{key}" if prefix else str(key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from flatten(value, f"{prefix}/{i}")
    else:
        yield prefix, tree


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _load(directory: Path, name: str) -> dict[str, Any] | None:
    path = directory / name
    if not path.is_file():
        return None
    try:
        return dict(flatten(json.loads(path.read_text(encoding="utf-8"))))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc


def system_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per system of Table 3: the largest |A - B| over its Top-k point estimates, where, and how many differ."""
    out: dict[str, dict[str, Any]] = {}
    for key, va in a.items():
        m = _TOPK.match(key)
        vb = b.get(key)
        if not m or not (_number(va) and _number(vb)):
            continue
        row = out.setdefault(m.group(1), {"max_abs_diff": 0.0, "where": None, "values": 0, "differ": 0})
        row["values"] += 1
        diff = abs(va - vb)
        row["differ"] += diff > 0
        if diff > row["max_abs_diff"]:
            row.update(max_abs_diff=round(diff, 4), where=key.split("/", 2)[2])
    return out


def _tests(flat: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """``name -> (p, difference)`` for every ``<name>_p`` with a ``<name>_diff`` (or ``<name>``) beside it."""
    tests = {}
    for key, p in flat.items():
        if not key.endswith("_p") or not _number(p):
            continue
        stem = key[:-2]
        diff = flat.get(stem + "_diff", flat.get(stem))
        if _number(diff):
            tests[stem] = (float(p), float(diff))
    return tests


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def verdict_agreement(a: Mapping[str, Any], b: Mapping[str, Any], alpha: float) -> dict[str, Any]:
    """Count paired tests by how their verdicts at ``alpha`` compare; list those that disagree."""
    ta, tb = _tests(a), _tests(b)
    counts = {"tests": 0, "identical": 0, "both_not_significant": 0, "both_significant_same_sign": 0,
              "significant_in_a_only": 0, "significant_in_b_only": 0, "reversed": 0}
    disagreeing = []
    for name in sorted(ta.keys() & tb.keys()):
        (pa, da), (pb, db) = ta[name], tb[name]
        counts["tests"] += 1
        counts["identical"] += (pa, da) == (pb, db)
        sa, sb = pa < alpha, pb < alpha
        if sa and sb:
            kind = "both_significant_same_sign" if _sign(da) == _sign(db) else "reversed"
        elif sa or sb:
            kind = "significant_in_a_only" if sa else "significant_in_b_only"
        else:
            kind = "both_not_significant"
        counts[kind] += 1
        if kind in ("significant_in_a_only", "significant_in_b_only", "reversed"):
            disagreeing.append({"test": name, "kind": kind, "a": {"p": pa, "diff": da}, "b": {"p": pb, "diff": db}})
    return {"counts": counts, "disagreeing": disagreeing}


# ------------------------------------------------------------------------------------------------ which design
# A copied run's record: the commit it ran and any params set on top of it (``dvc exp run -S``).
IDENTITY_FILE = "identity.json"
SKIPPED_STAGES = ("report",)      # renders pages only: no figure of a run depends on its code
CODE = ("ecqg/", "notebooks/")


def identity(folder: Path) -> dict | None:
    """What a run's metrics folder came from: ``{"lock": dvc.lock text}`` for a committed profile (its own
    ``dvc.lock``, or the repository's for the current profile's ``results/<profile>``), or ``{"commit": ...,
    "params_changed": {...}}`` from a copied run's ``identity.json``. None: unknown."""
    folder = Path(folder)
    if (folder / IDENTITY_FILE).is_file():
        record = json.loads((folder / IDENTITY_FILE).read_text(encoding="utf-8"))
        return {"commit": str(record["commit"]), "params_changed": record.get("params_changed") or {}}
    if (folder / "dvc.lock").is_file():
        return {"lock": (folder / "dvc.lock").read_text(encoding="utf-8")}
    if folder.resolve().parent == Path("results").resolve() and Path("dvc.lock").is_file() \
            and _current_profile() == folder.name:
        return {"lock": Path("dvc.lock").read_text(encoding="utf-8")}
    return None


def _lock_state(lock_text: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The code files (path -> md5) and params (dotted key -> value) a ``dvc.lock``'s stages ran with."""
    code, params = {}, {}
    for name, entry in ((yaml.safe_load(lock_text) or {}).get("stages") or {}).items():
        if name in SKIPPED_STAGES:
            continue
        for dep in entry.get("deps", []):
            if dep["path"].startswith(CODE) and dep.get("md5"):
                code[dep["path"]] = dep["md5"]
        for values in (entry.get("params") or {}).values():
            params.update(_dotted(values))
    return code, params


def _dotted(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            out.update(_dotted(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _commit_state(commit: str, changed: Mapping, paths: list[str], keys: list[str]
                  ) -> tuple[dict[str, str | None], dict[str, Any]] | None:
    """The md5 of ``paths`` and the values of params ``keys`` at ``commit`` (git), ``changed`` on top; None without
    git or the commit."""
    text = _git_show(f"{commit}:params.yaml")
    if text is None:
        return None
    params = {**_dotted(yaml.safe_load(text) or {}), **changed}
    return {path: _git_md5(commit, path) for path in paths}, {k: params.get(k) for k in keys}


def _git_md5(commit: str, path: str) -> str | None:
    """DVC's hash of ``path`` at ``commit``: the md5 of a file, or of a folder the ``.dir`` hash DVC computes from its
    files' md5 (DVC's own ``Tree``, fed from git's blobs), so it compares with a ``dvc.lock`` entry."""
    listing = _git(["ls-tree", "-r", commit, "--", path])
    if not listing:
        return None
    entries = [(line.split("\t", 1)[1], line.split()[2]) for line in listing.splitlines() if "\t" in line]
    digests = {name: hashlib.md5(_git(["cat-file", "blob", sha], binary=True)).hexdigest() for name, sha in entries}
    if list(digests) == [path]:
        return digests[path]
    tree = Tree()
    for name, digest in digests.items():
        tree.add(tuple(name[len(path.rstrip("/")) + 1:].split("/")), None, HashInfo("md5", digest))
    tree.digest()
    return tree.hash_info.value


def _current_profile() -> str | None:
    try:
        return (yaml.safe_load(Path("params.yaml").read_text(encoding="utf-8")) or {}).get("profile")
    except OSError:
        return None


def _git_show(spec: str, binary: bool = False):
    return _git(["show", spec], binary)


def _git(args: list[str], binary: bool = False):
    try:
        out = subprocess.run(["git", *args], capture_output=True, check=False)
    except OSError:
        return None
    if out.returncode != 0:
        return None
    return out.stdout if binary else out.stdout.decode("utf-8")


def same_design(a: dict | None, b: dict | None) -> tuple[bool | None, str]:
    """(True / False / None: unknown, why): whether two runs ran the same code files and params. A ``dvc.lock`` says
    it exactly (md5 of every code file each stage depends on, every param it read); a commit is read from git at the
    same files and params; two commits, over the files and params either's ``dvc.lock`` at that commit lists."""
    if a is None or b is None:
        return None, " and ".join(n for n, i in (("A", a), ("B", b)) if i is None) + \
            "'s code and params are unknown (no dvc.lock, no identity.json)"
    locked = [x for x in (a, b) if "lock" in x]
    if not locked:                                      # two commits: take the file and key lists from their locks
        lists = [_git_show(f"{x['commit']}:dvc.lock") for x in (a, b)]
        if not any(lists):
            return None, "neither commit has a dvc.lock to say which files and params matter"
        paths, keys = set(), set()
        for text in filter(None, lists):
            code, params = _lock_state(text)
            paths |= set(code)
            keys |= set(params)
        states = [_commit_state(x["commit"], x["params_changed"], sorted(paths), sorted(keys)) for x in (a, b)]
    else:
        reference = _lock_state(locked[0]["lock"])
        states = [(_lock_state(x["lock"]) if "lock" in x else
                   _commit_state(x["commit"], x["params_changed"], sorted(reference[0]), sorted(reference[1])))
                  for x in (a, b)]
    if any(state is None for state in states):
        return None, "a commit could not be read from git"
    (code_a, params_a), (code_b, params_b) = states
    files = sorted(p for p in set(code_a) | set(code_b) if code_a.get(p) != code_b.get(p))
    keys = sorted(k for k in set(params_a) | set(params_b) if params_a.get(k) != params_b.get(k))
    if files or keys:
        shown = files[:4] + keys[:4]
        return False, (f"{len(files)} code files and {len(keys)} params differ, e.g. {', '.join(shown)}")
    return True, f"the same {len(code_a)} code files and {len(params_a)} params"


def compare_runs(dir_a: str | Path, dir_b: str | Path, alpha: float = 0.05,
                 different_designs: bool = False) -> dict[str, Any]:
    """The agreement of two metrics folders (see the module docstring); raises if they share no file, or (unless
    ``different_designs``) if they are not known to be one design."""
    dir_a, dir_b = Path(dir_a), Path(dir_b)
    for d in (dir_a, dir_b):
        if not d.is_dir():
            raise FileNotFoundError(f"{d}: no such metrics folder")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    same, why = same_design(identity(dir_a), identity(dir_b))
    if not same and not different_designs:
        raise ValueError(f"{dir_a} and {dir_b} are {'two designs' if same is False else 'not known to be one design'}"
                         f" ({why}): their differences would mix a change of design with run-to-run drift. "
                         "Compare two runs of one commit and profile, or pass --different-designs to compare anyway")
    result: dict[str, Any] = {"a": str(dir_a), "b": str(dir_b), "alpha": alpha, "same_design": same,
                              "design": why, "files": {}}
    for name in TEST_FILES:
        a, b = _load(dir_a, name), _load(dir_b, name)
        if a is None or b is None:
            result["files"][name] = {"missing_in": [str(d) for d, f in ((dir_a, a), (dir_b, b)) if f is None]}
            continue
        entry = verdict_agreement(a, b, alpha)
        if name == "table3.json":
            entry["systems"] = system_differences(a, b)
        result["files"][name] = entry
    if all("missing_in" in f for f in result["files"].values()):
        raise FileNotFoundError(f"{dir_a} and {dir_b} share none of {', '.join(TEST_FILES)}")
    return result


def render(result: Mapping[str, Any], show: int = 10) -> str:
    """Markdown: the per-system table, then the verdict counts per file and the first ``show`` disagreements."""
    a, b, alpha = result["a"], result["b"], result["alpha"]
    same = result.get("same_design")
    lines = ([f"**Not one design** ({result.get('design')}): the differences below mix the change of code or params "
              "with run-to-run drift; they do not measure drift.", ""] if same is not True else [])
    lines += [f"Agreement of two runs: A = `{a}`, B = `{b}` (verdicts at p < {alpha}"
              + (f"; one design: {result['design']})" if same else ")"), ""]
    systems = result["files"].get("table3.json", {}).get("systems")
    if systems:
        lines += ["| system | Top-k values that differ | largest abs. difference (points) | where |", "|---|---:|---:|---|"]
        for name, row in sorted(systems.items(), key=lambda kv: -kv[1]["max_abs_diff"]):
            lines.append(f"| {name} | {row['differ']} of {row['values']} | {row['max_abs_diff']:.2f} | "
                         f"{row['where'] or '-'} |")
        lines.append("")
    lines += ["| file | paired tests | identical | both n.s. | both significant, same sign | significant in A only | "
              "significant in B only | reversed |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, entry in result["files"].items():
        if "missing_in" in entry:
            lines.append(f"| {name} | missing in {', '.join(entry['missing_in'])} | | | | | | |")
            continue
        c = entry["counts"]
        lines.append(f"| {name} | {c['tests']} | {c['identical']} | {c['both_not_significant']} | "
                     f"{c['both_significant_same_sign']} | {c['significant_in_a_only']} | "
                     f"{c['significant_in_b_only']} | {c['reversed']} |")
    for name, entry in result["files"].items():
        shown = entry.get("disagreeing", [])[:show]
        if shown:
            lines += ["", f"{name}: {len(shown)} of {len(entry['disagreeing'])} disagreeing verdicts", ""]
            lines += [f"- `{d['test']}`: A {d['a']['diff']:+g} (p {d['a']['p']:g}), "
                      f"B {d['b']['diff']:+g} (p {d['b']['p']:g})" for d in shown]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.parser("ecqg.report.agreement", __doc__)
    parser.add_argument("a", help="a metrics folder, e.g. results/mini")
    parser.add_argument("b", help="the same profile's metrics from another run")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--show", type=int, default=10, help="disagreeing tests listed per file")
    parser.add_argument("--json", action="store_true", help="print the whole comparison as JSON")
    parser.add_argument("--different-designs", action="store_true",
                        help="compare two runs of different code or params anyway (the output says so first)")
    args = parser.parse_args(argv)
    try:
        result = compare_runs(args.a, args.b, args.alpha, args.different_designs)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(result, indent=1) + "\n" if args.json else render(result, args.show))
    return 0


if __name__ == "__main__":
    sys.exit(main())
