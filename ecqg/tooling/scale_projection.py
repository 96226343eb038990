"""The CPU stages at the paper's corpus size, projected from the scale rehearsal's measurements
(``bench/scale_rehearsal.py`` writes ``bench/results/scale_rehearsal.json``): the benchmark prints the table and the
cost model (:mod:`ecqg.tooling.cost_model`) adds the projected host hours to the wall figure, from this one definition."""

from __future__ import annotations

import math

from ecqg.core.paper import PASSAGES as PAPER_PASSAGES  # noqa: F401  (bench/scale_rehearsal.py, cost_model)

# Steps whose work is spread over threads / processes by the host's core count: the 16-core projection of a
# point measured without CPU time (an older rehearsal's) divides their time by 16 / cores and keeps the others'.
# A point with its CPU time is split by measurement instead (:func:`parallel_share`).
THREADED = {"index_bm25", "retrieve_bm25", "training_data"}


def parallel_share(point: dict, cores: int, step: str) -> float:
    """The share of a step's wall time that ran spread over the cores, from its CPU and wall seconds (Amdahl's
    model on ``cores`` cores: wall = serial + parallel / cores, CPU = serial + parallel), clipped to [0, 1]. An
    estimate: time a thread spends beside the work (the JVM's garbage collector and compiler) counts as parallel
    work. A point without its CPU time falls back to :data:`THREADED`."""
    if "cpu_seconds" not in point:
        return 1.0 if step in THREADED else 0.0
    wall, cpu = point["seconds"], point["cpu_seconds"]
    if cores < 2 or wall <= 0:
        return 0.0
    parallel_work = (cpu - wall) * cores / (cores - 1)       # CPU seconds of the spread part
    return min(max(parallel_work / cores / wall, 0.0), 1.0)     # ... as a share of the wall time


def fit(points: list[dict]) -> dict:
    """Growth between the two largest sizes, projected from the largest to the paper's corpus: the time exponent
    ``log(t2 / t1) / log(n2 / n1)`` and the memory slope ``(m2 - m1) / (n2 - n1)``. The two largest, because at the
    smallest sizes a process's fixed costs (imports, spaCy, the JVM) dominate and would flatten a fit over all."""
    if len(points) < 2:
        return {"exponent": None, "seconds_21m": None, "rss_gb_21m": None, "bytes_per_passage": None}
    (n1, t1, m1), (n2, t2, m2) = ((p["passages"], max(p["seconds"], 1e-3), p["peak_rss_gb"]) for p in points[-2:])
    exponent = math.log(t2 / t1) / math.log(n2 / n1)
    slope = max((m2 - m1) / (n2 - n1), 0.0)              # GB per passage; memory never projected to shrink
    return {"exponent": round(exponent, 2),
            "seconds_21m": round(t2 * (PAPER_PASSAGES / n2) ** max(exponent, 0.0), 1),
            "rss_gb_21m": round(m2 + slope * (PAPER_PASSAGES - n2), 1),
            "bytes_per_passage": round(slope * 1e9, 1)}


def on_cores(hours: float, share: float, measured_on: int, cores: int) -> float:
    """A step's hours on ``cores`` cores from those measured on ``measured_on``: its parallel ``share`` divided by
    ``cores`` / ``measured_on`` (near-linear scaling of that share assumed), the rest as it was."""
    return hours * ((1 - share) + share * measured_on / cores)


def host_hours(result: dict, cores: int = 16) -> float:
    """Every rehearsed step's projected hours at the paper's size on ``cores`` cores (:func:`on_cores`)."""
    total = 0.0
    for step, points in result["steps"].items():
        f = fit(points)
        if f["exponent"] is not None:
            share = parallel_share(points[-1], result["cores"], step)
            total += on_cores(f["seconds_21m"] / 3600, share, result["cores"], cores)
    return total
