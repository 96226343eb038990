"""Stage `distant_supervision`: NQ dev questions -> DPR training records with BM25-mined positives.

DPR's recipe for questions without annotated passages: positive = the highest-ranked BM25 passage containing an
answer, hard negatives = the top BM25 passages that do not. Output: DPR retriever-json (``outputs/train/``).
"""

from ecqg import config, paths
from ecqg.data.dpr import write_dpr_retriever_json
from ecqg.data.records import read_corpus, read_nq_dev
from ecqg.retrieval.bm25 import BM25Searcher
from ecqg.retrieval.distant import bm25_distant_supervision
from ecqg.stages import timed_stage


def main() -> int:
    params = config.load()
    bm25, distant = params["bm25"], params["distant"]
    with timed_stage("distant_supervision", params) as figures:
        questions = list(read_nq_dev(paths.NQ_DEV))
        passages = {p["id"]: p for p in read_corpus(paths.CORPUS)}
        searcher = BM25Searcher(paths.BM25_INDEX, k1=bm25["k1"], b=bm25["b"])
        records, stats = bm25_distant_supervision(questions, searcher, depth=distant["depth"],
                                                  n_hard=distant["hard_negatives"], threads=bm25["threads"],
                                                  passages=passages, where=str(paths.NQ_DEV))
        write_dpr_retriever_json(paths.NQ_DEV_DISTANT, records)
        figures.update(stats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
