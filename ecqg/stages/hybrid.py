"""Stage `hybrid@<variant>-<seed>`: BM25 fused with one trained dense model (Luo et al. 2022, §3.3).

``python -m ecqg.stages.hybrid baseline --seed 2022`` reads ``outputs/runs/bm25/`` and
``outputs/runs/dpr_baseline_s2022/`` and writes, for every test set, ``outputs/runs/hybrid_sum_baseline_s2022/``
(the paper's normalised sum) and ``outputs/runs/hybrid_rrf_baseline_s2022/`` (reciprocal-rank fusion).

BM25 + dense hybrids in the pipeline (Luo et al. 2022, §3.3): which runs are fused, what the fused runs are
called, and the fusion of one trained dense model's runs with BM25's on every test set.

Two fusions per dense model: ``sum``, the paper's hybrid (each run's top ``hybrid.depth`` min-max normalised per
question, a passage missing from a run scores 0 there, scores summed, re-ranked), and ``rrf``, reciprocal-rank fusion
(Cormack et al. 2009) beside it. Equal weights: nothing is tuned, so nothing is tuned on the test sets.
"""

from __future__ import annotations

from typing import Mapping

from ecqg.core import cli, config, paths, settings, variants
from ecqg.core.stage_record import timed_stage
from ecqg.retrieval.fusion import normalized_sum, reciprocal_rank_fusion
from ecqg.retrieval.run_files import read_run, write_run
from ecqg.stages.common import related_seeds

METHODS = ("sum", "rrf")
SPARSE = "bm25"


def run_name(method: str, variant: str, seed: int) -> str:
    """One fused run: ``hybrid_sum_baseline_s2022`` = BM25 + the baseline DPR of seed 2022, normalised sum."""
    return f"hybrid_{method}_{variant}_s{seed}"


def system_name(method: str, variant: str) -> str:
    """A Table 3 row: the fused runs of every training seed (``hybrid_sum_baseline``)."""
    return f"hybrid_{method}_{variant}"


def systems(hybrid: settings.Hybrid) -> list[str]:
    return [system_name(m, v) for v in hybrid.variants for m in METHODS]


def seed_runs(hybrid: settings.Hybrid, dpr: settings.Dpr) -> dict[str, list[str]]:
    """Table 3's hybrid rows -> the fused run of each training seed (``dpr.related_seeds``; like
    ``dpr_training.seed_runs``)."""
    return {system_name(m, v): [run_name(m, v, s) for s in related_seeds(dpr)]
            for v in hybrid.variants for m in METHODS}


def fuse_with_bm25(variant: str, seed: int, hybrid: settings.Hybrid, test_sets: Mapping[str, str],
                   out_depth: int) -> dict:
    """Fuse BM25's run with ``dpr_<variant>_s<seed>``'s on every test set (``data.test_sets``); write both fused runs,
    ``out_depth`` (``retrieval.depth``) deep; return figures (per set: questions, the mean share of the dense
    top-``depth`` that BM25's top-``depth`` also holds)."""
    depth = hybrid.depth
    dense_run = paths.dense_run_name(variant, seed)
    figures: dict = {"depth": depth, "rrf_k": hybrid.rrf_k}
    for name in test_sets:
        runs = [read_run(paths.run_file(SPARSE, name)), read_run(paths.run_file(dense_run, name))]
        fused = {"sum": normalized_sum(runs, depth=depth, k=out_depth),
                 "rrf": reciprocal_rank_fusion(runs, rrf_k=hybrid.rrf_k, depth=depth, k=out_depth)}
        for method, run in fused.items():
            write_run(paths.run_file(run_name(method, variant, seed), name), run, tag=f"hybrid_{method}")
        sparse, dense = runs
        shares = [len({pid for pid, _ in sparse.get(q, [])[:depth]} & {pid for pid, _ in ranking[:depth]})
                  / len(ranking[:depth]) for q, ranking in dense.items() if ranking]
        figures[f"{name}_questions"] = len(dense)
        figures[f"{name}_shared_top{depth}"] = round(sum(shares) / max(len(shares), 1), 4)
    return figures


def pairs(hybrid: settings.Hybrid) -> list[tuple[str, str]]:
    """Paired comparisons for Table 3: each hybrid against its dense model and BM25, RRF against the normalised sum,
    and the Mixed-DPR hybrid against the DPR one (the paper's question, asked again with BM25 alongside)."""
    variants = hybrid.variants
    out = []
    for v in variants:
        out += [(system_name("sum", v), f"dpr_{v}"), (system_name("sum", v), SPARSE),
                (system_name("rrf", v), system_name("sum", v))]
    if "mixed" in variants and "baseline" in variants:
        out.append((system_name("sum", "mixed"), system_name("sum", "baseline")))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.stages.hybrid", __doc__, paragraphs=2)
    parser.add_argument("variant", help="a trained dense variant: " + " | ".join(v.name for v in variants.TABLE))
    parser.add_argument("--seed", type=int, required=True, help="its training seed")
    args = parser.parse_args(argv)
    s = settings.of(config.load())
    with timed_stage(f"hybrid_{args.variant}-{args.seed}", s.profile, s.device) as figures:
        figures.update(fuse_with_bm25(args.variant, args.seed, s.hybrid, s.data.test_sets, s.retrieval.depth))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
