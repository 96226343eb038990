"""Stage `training_data`: the gold DPR training set, in DPR retriever-json (``outputs/train/``).

Two parts, both with BM25 hard negatives (DPR's recipe):
- ``gold_dpr.json``: the annotated (question, passage, answer) triples; positive = the annotated passage. When the
  input is already DPR retriever-json (the paper profile's ``nq-train.json``), its records are passed through.
- ``nq_dev_distant.json``: NQ dev questions, which have no annotated passage here; positive = the highest-ranked BM25
  passage containing an answer (questions without one are dropped and counted).
"""

import sys
from collections.abc import Sequence

from ecqg.core import cli, config, paths, settings
from ecqg.data.dpr import read_dpr_retriever_json, write_dpr_retriever_json
from ecqg.data.records import read_corpus, read_nq_dev
from ecqg.core.io import read_jsonl
from ecqg.retrieval.bm25 import BM25Searcher
from ecqg.retrieval.distant import bm25_distant_supervision, gold_training_records
from ecqg.core.stage_record import timed_stage


def main(argv: Sequence[str] = ()) -> int:
    cli.parser("ecqg.stages.training_data", __doc__).parse_args(argv)
    s = settings.of(config.load())
    bm25, distant = s.bm25, s.distant
    with timed_stage("training_data", s.profile, s.device) as figures:
        passages = {p["id"]: p for p in read_corpus(paths.CORPUS)}
        searcher = BM25Searcher(paths.BM25_INDEX, k1=bm25.k1, b=bm25.b)

        questions = list(read_nq_dev(paths.NQ_DEV))
        records, stats = bm25_distant_supervision(questions, searcher, depth=distant.depth,
                                                  n_hard=distant.hard_negatives, threads=bm25.threads,
                                                  passages=passages, where=str(paths.NQ_DEV))
        write_dpr_retriever_json(paths.NQ_DEV_DISTANT, records)
        figures["nq_dev_distant"] = stats

        records = list(read_dpr_retriever_json(paths.TRAIN_GOLD_DPR))
        if records:  # DPR's own training file (prepare wrote it): positives and hard negatives included
            figures["gold"] = {"records": len(records), "source": "dpr-retriever-json input, passed through"}
        else:
            triples = [t for _, t in read_jsonl(paths.TRAIN_GOLD)]
            # Search deep enough to find hard negatives past the positive and answer-bearing passages.
            run = searcher.search({t["id"]: t["question"] for t in triples}, k=distant.depth,
                                  threads=bm25.threads)
            records, figures["gold"] = gold_training_records(triples, run, passages,
                                                             n_hard=distant.hard_negatives,
                                                             where=str(paths.TRAIN_GOLD))
        write_dpr_retriever_json(paths.GOLD_DPR, records)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
