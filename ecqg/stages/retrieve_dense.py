"""Stage `retrieve_dense@<variant>-<seed>`: encode the corpus with a bi-encoder, index it with FAISS, search every
test set.

``python -m ecqg.stages.retrieve_dense untrained`` uses the base checkpoint as is (Table 3's "not fine-tuned" row);
``python -m ecqg.stages.retrieve_dense baseline --seed 2022`` (or any variant stage 05 trains, or one of them right
after pre-training: ``mixed_pre``) uses the model notebook 05 trained with that seed. Runs go to
``outputs/runs/<system>/<set>.trec``, the index to ``outputs/indexes/dense/<variant>[_s<seed>]/``.
"""

from __future__ import annotations

from ecqg.core import cli, config, settings, variants
from ecqg.pipeline.dense import UNTRAINED
from ecqg.pipeline.retrieve_dense import retrieve_all
from ecqg.stages import timed_stage


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.stages.retrieve_dense", __doc__, paragraphs=2)
    parser.add_argument("variant", help=" | ".join([UNTRAINED, *(v.name for v in variants.TABLE)])
                        + " (a variant's pre-trained model: <variant>_pre; a dose: <set>_d<size>_pre)")
    parser.add_argument("--seed", type=int, help="training seed of the model (not for untrained)")
    args = parser.parse_args(argv)
    s = settings.of(config.load())
    name = args.variant if args.seed is None else f"{args.variant}-{args.seed}"
    with timed_stage(f"retrieve_dense_{name}", s.profile, s.device) as figures:
        figures.update(retrieve_all(args.variant, s, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
