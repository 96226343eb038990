"""Stage `index_bm25`: a Lucene index of the prepared corpus (title + text), through pyserini."""

import sys
from collections.abc import Sequence

from ecqg.core import cli, config, paths, settings
from ecqg.data.records import read_corpus
from ecqg.retrieval.bm25 import build_bm25_index
from ecqg.core.stage_record import timed_stage


def main(argv: Sequence[str] = ()) -> int:
    cli.parser("ecqg.stages.index_bm25", __doc__).parse_args(argv)
    s = settings.of(config.load())
    with timed_stage("index_bm25", s.profile, s.device) as figures:
        figures.update(build_bm25_index(read_corpus(paths.CORPUS), paths.BM25_INDEX,
                                        threads=s.bm25.threads, where=str(paths.CORPUS)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
