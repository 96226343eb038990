"""How far two runs of one profile agree: ``python -m ecqg.report.agreement A B``.

Why: the paired tests of Table 3 and the mechanism evaluations resample *questions*; they say nothing about how the
trained models would move if training itself ran again. With one training seed (mini) that noise is invisible. A
second run of the same code and parameters on another machine is a cheap probe of it: runs reproduce bit for bit
on one kind of CPU, but bf16 kernels round differently on another (Intel AMX vs AMD AVX512-BF16), so the generators
sample other questions and every model downstream of them trains on slightly different data.

For two metrics folders (``results/<profile>`` and a copy from another run) it reports
- per system, the largest difference of a Top-k point estimate (``table3.json``'s ``accuracy``);
- every paired test (``<name>_p`` beside ``<name>_diff`` in ``table3.json``, ``mechanism.json`` and
  ``encoder_comparison.json``): whether its verdict at ``alpha`` agrees, and how many verdicts flip or reverse.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

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


def compare_runs(dir_a: str | Path, dir_b: str | Path, alpha: float = 0.05) -> dict[str, Any]:
    """The agreement of two metrics folders (see the module docstring); raises if they share no file."""
    dir_a, dir_b = Path(dir_a), Path(dir_b)
    for d in (dir_a, dir_b):
        if not d.is_dir():
            raise FileNotFoundError(f"{d}: no such metrics folder")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    result: dict[str, Any] = {"a": str(dir_a), "b": str(dir_b), "alpha": alpha, "files": {}}
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
    lines = [f"Agreement of two runs: A = `{a}`, B = `{b}` (verdicts at p < {alpha})", ""]
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
    args = parser.parse_args(argv)
    try:
        result = compare_runs(args.a, args.b, args.alpha)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(result, indent=1) + "\n" if args.json else render(result, args.show))
    return 0


if __name__ == "__main__":
    sys.exit(main())
