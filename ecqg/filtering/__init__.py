"""Filtering of generated questions (the paper's step 3): an extractive-reader round trip, then DPR hardness.

One module per idea: ``generated`` (the generated-question records every filter reads, and the funnel counts),
``reader`` (the SQuAD2-style extractive reader: examples, features, training, inference), ``reader_eval`` (SQuAD 2.0
exact match / F1), ``roundtrip`` (stage 1) and ``hardness`` (stage 2). The names below are the package's public API.
"""

from ecqg.filtering.generated import check_generated, filter_stats, passage_of, read_generated, validate_generated
from ecqg.filtering.hardness import HARDNESS_MODES, dpr_hardness, hardness_filter
from ecqg.filtering.reader import (MAX_QUESTION_TOKENS, build_mrc_model, mrc_examples, predict, save_mrc,
                                   split_by_passage, train_features, train_mrc)
from ecqg.filtering.reader_eval import (confidence_table, evaluate_mrc, exact_match, f1_score, max_over_gold,
                                        normalize_answer)
from ecqg.filtering.roundtrip import REASONS, answer_in_passage_filter, roundtrip_filter

__all__ = [
    "HARDNESS_MODES", "MAX_QUESTION_TOKENS", "REASONS", "answer_in_passage_filter", "build_mrc_model",
    "check_generated", "confidence_table", "dpr_hardness", "evaluate_mrc", "exact_match", "f1_score", "filter_stats",
    "hardness_filter", "max_over_gold", "mrc_examples", "normalize_answer", "passage_of", "predict",
    "read_generated", "roundtrip_filter", "save_mrc", "split_by_passage", "train_features", "train_mrc",
    "validate_generated",
]
