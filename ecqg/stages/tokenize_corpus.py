"""Stage `tokenize_corpus`: the prepared corpus in the base model's word pieces, once for every dense encoding of
the profile (:mod:`ecqg.retrieval.tokenized_corpus`; ``datasets.map`` over the host's cores, Arrow on disk)."""

import sys
from collections.abc import Sequence

from ecqg.core import cli, config, paths, settings
from ecqg.core.stage_record import timed_stage
from ecqg.retrieval.tokenized_corpus import tokenize_corpus
from ecqg.runtime.models import from_pretrained


def main(argv: Sequence[str] = ()) -> int:
    cli.parser("ecqg.stages.tokenize_corpus", __doc__).parse_args(argv)
    from transformers import AutoTokenizer  # transformers: kept out of --help

    s = settings.of(config.load())
    with timed_stage("tokenize_corpus", s.profile, s.device) as figures:
        tokenizer = from_pretrained(AutoTokenizer, s.dpr.base_model)
        figures.update(tokenize_corpus(paths.CORPUS, tokenizer, s.dpr.passage_max_length,
                                       paths.TOKENIZED_CORPUS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
