"""The names Table 3's rows, test sets and subsets print under, declared once for the notebooks, the results
pages and the figures (every row's label derives from :mod:`ecqg.core.variants` and :mod:`ecqg.core.bases`)."""

from __future__ import annotations

from collections.abc import Sequence

from ecqg.core import variants
from ecqg.core.bases import untrained_label
from ecqg.retrieval import evaluation

SPARSE_LABELS = {"tfidf": "TF-IDF", "bm25": "BM25"}
HYBRID_METHODS = {"sum": "normalised sum", "rrf": "RRF"}     # BM25 + dense hybrids (stage hybrid, Luo et al. 2022)


def system_labels(table: Sequence | None = None) -> dict[str, str]:
    """Table 3's label of every row, in Table 3's order: the sparse retrievers, the untrained encoder, every
    variant's row right after pre-training, every trained variant, the hybrids (all from ``ecqg.core.variants``)."""
    table = variants.TABLE if table is None else table
    labels = {**SPARSE_LABELS, variants.UNTRAINED_SYSTEM: untrained_label()}
    labels.update({v.pre_system: variants.label(v.pre_system, table) for v in table if v.pretrained})
    labels.update({v.system: variants.label(v.system, table) for v in table})
    labels.update({f"hybrid_{method}_{v.name}": f"BM25 + {v.label}, {how}" for v in table
                   for method, how in HYBRID_METHODS.items()})
    return labels


SYSTEM_LABELS = system_labels()
# The attention study's encoders (stage 01's and 06's keys): each variant's own label (Table 3's says "(ours)" to
# set a row run here apart from the paper's columns; a figure of encoders needs no such mark) and the base's.
ENCODER_LABELS = {**{v.system: v.label for v in variants.TABLE}, variants.UNTRAINED: untrained_label()}
DATASET_LABELS = {"nq": "NQ", "wq": "WebQuestions", "tqa": "TriviaQA", "trec": "CuratedTREC"}
# The subsets of the paper's Table 3 (the bundle also carries the complementary overlap labels; kept in the data,
# left out of the table).
TABLE3_SUBSETS = (evaluation.FULL_SET, "no_answer_overlap", "no_question_overlap")
SUBSET_LABELS = {
    evaluation.FULL_SET: "full",
    "no_answer_overlap": "no-answer-overlap",
    "no_question_overlap": "no-question-overlap",
}
