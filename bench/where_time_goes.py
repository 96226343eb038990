"""Where a finished run's time went, from what it committed: each stage's wall time (``stage_<name>.json``), split into
its kinds (pre-trainings, fine-tunings, corpus encodings, notebooks, the rest), and inside the notebook stages the
cells that took longest (papermill's per-cell durations in ``notebooks/*.ipynb``). What is left of a notebook stage
after its cells, and of an encoding stage after encoding, is start-up and glue: kernel, imports, loading, searching.

Why: issue 68 asks to measure first where mini's time goes and then cut what buys most; this reads the numbers off
any committed run (``results/<profile>/``) without running anything. Prints a table; not a test.

Run: ``.venv/bin/python bench/where_time_goes.py [results/mini] [--cells 12]``.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def stage_kind(name: str) -> str:
    if name.startswith("05_dpr_training."):
        return "pre-training" if "-pre-" in name else "fine-tuning"
    if name.startswith("retrieve_dense_"):
        return "encoding + search"
    if name[:2].isdigit():
        return "notebook"
    return "other"


def stage_records(folder: Path) -> list[dict]:
    records = []
    for path in sorted(folder.glob("stage_*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("wall_time_s") is not None:
            records.append(record)
    return records


def notebook_cells(folder: Path) -> dict[str, list[tuple[float, str]]]:
    """notebook stem -> (seconds, first source line) of every executed code cell."""
    out = {}
    for path in sorted((folder / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        out[path.stem] = [(float(c.get("metadata", {}).get("papermill", {}).get("duration") or 0.0),
                           "".join(c["source"]).strip().splitlines()[0][:70] if c["source"] else "")
                          for c in cells if c["cell_type"] == "code"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?", type=Path, default=Path("results/mini"))
    ap.add_argument("--cells", type=int, default=12, help="how many of the slowest notebook cells to list")
    args = ap.parse_args()
    records, cells = stage_records(args.folder), notebook_cells(args.folder)
    if not records:
        raise SystemExit(f"{args.folder}: no stage_*.json with a wall time")
    hosts = sorted({f"{r['host']['cpu']}, {r['host']['cores']} cores" for r in records if r.get("host")})
    total = sum(r["wall_time_s"] for r in records)
    print(f"{args.folder}: {len(records)} timed stages, {total / 60:.1f} min of stages; host(s): {'; '.join(hosts)}\n")

    by_kind, glue = defaultdict(list), defaultdict(float)
    for r in records:
        kind = stage_kind(r["stage"])
        by_kind[kind].append(r["wall_time_s"])
        if kind == "encoding + search" and r.get("encode_s") is not None:
            glue[kind] += r["wall_time_s"] - r["encode_s"]
        if kind == "notebook":
            stem = next((s for s in cells if r["stage"].startswith(s)), None)
            if stem is not None:
                glue[kind] += max(r["wall_time_s"] - sum(d for d, _ in cells[stem]), 0.0)
    print(f"{'kind':<20}{'stages':>7}{'minutes':>9}{'share':>7}{'each (min)':>14}{'outside the work (min)':>24}")
    for kind, times in sorted(by_kind.items(), key=lambda kv: -sum(kv[1])):
        each = f"{min(times) / 60:.1f}-{max(times) / 60:.1f}"
        outside = f"{glue[kind] / 60:.1f}" if kind in glue else "-"
        print(f"{kind:<20}{len(times):>7}{sum(times) / 60:>9.1f}{sum(times) / total:>7.0%}{each:>14}{outside:>24}")

    slow = sorted(((d, stem, line) for stem, cs in cells.items() for d, line in cs), reverse=True)[:args.cells]
    print(f"\nslowest notebook cells (of {sum(len(c) for c in cells.values())}):")
    for seconds, stem, line in slow:
        print(f"{seconds / 60:>6.1f} min  {stem}: {line}")


if __name__ == "__main__":
    main()
