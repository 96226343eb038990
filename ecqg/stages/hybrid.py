"""Stage `hybrid@<variant>-<seed>`: BM25 fused with one trained dense model (Luo et al. 2022, §3.3).

``python -m ecqg.stages.hybrid baseline --seed 2022`` reads ``outputs/runs/bm25/`` and
``outputs/runs/dpr_baseline_s2022/`` and writes, for every test set, ``outputs/runs/hybrid_sum_baseline_s2022/``
(the paper's normalised sum) and ``outputs/runs/hybrid_rrf_baseline_s2022/`` (reciprocal-rank fusion).
"""

from __future__ import annotations

from ecqg.core import cli, config, settings, variants
from ecqg.pipeline.hybrid import fuse_with_bm25
from ecqg.stages import timed_stage


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
