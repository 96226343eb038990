"""Stage `pseudo_queries`: the generator-free ETM and RSM pre-training sets (Luo et al. 2022, §5).

``python -m ecqg.stages.pseudo_queries`` reads stage 04's UnCon set (its passages), the corpus and the BM25 index and
writes ``outputs/pseudo/etm.json`` and ``outputs/pseudo/rsm.json`` (DPR retriever json, as stage 04's sets), which
stage 05 pre-trains ETM-DPR and RSM-DPR on. Its figures (counts, negatives, the ``pseudo.m`` sweep) go to
``results/<profile>/stage_pseudo_queries.json``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ecqg.core import cli, config, settings
from ecqg.pipeline.pseudo import build_sets, write_sets
from ecqg.stages import timed_stage


def main(argv: Sequence[str] = ()) -> int:
    cli.parser("ecqg.stages.pseudo_queries", __doc__, paragraphs=2).parse_args(argv)
    s = settings.of(config.load())
    with timed_stage("pseudo_queries", s.profile, s.device) as figures:
        sets, built = build_sets(s.pseudo, s.bm25, s.seed)
        figures.update({"sizes": write_sets(sets), **built})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
