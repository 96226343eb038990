"""Stage `index_tfidf`: the DrQA-style hashed unigram+bigram TF-IDF index of the prepared corpus (scikit-learn)."""

import sys
from collections.abc import Sequence

from ecqg.core import cli, config, paths, settings
from ecqg.data.records import read_corpus
from ecqg.retrieval.tfidf import build_tfidf_index
from ecqg.core.stage_record import timed_stage


def main(argv: Sequence[str] = ()) -> int:
    cli.parser("ecqg.stages.index_tfidf", __doc__).parse_args(argv)
    s = settings.of(config.load())
    tfidf = s.tfidf
    with timed_stage("index_tfidf", s.profile, s.device) as figures:
        figures.update(build_tfidf_index(read_corpus(paths.CORPUS), paths.TFIDF_INDEX,
                                         n_features=tfidf.n_features, ngram_range=[1, tfidf.ngram_max]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
