"""The params blocks of the data, the sparse retrievers, the attention study, the filter chain and the evaluation:
one frozen dataclass per block, each field's rule beside it (``params/mini.yaml`` explains the values)."""

from __future__ import annotations

from dataclasses import dataclass

from ecqg.core.settings.checks import (AUTOCAST_EXPECTED, NUMBER, OPTIONAL_INT, autocast, ks, nonneg, optional_positive,
                                       paths, positive, positive_ints, prob)
from ecqg.core.settings.schema import Block, nested, setting
from ecqg.core.variants import TABLE as VARIANT_TABLE

SYNTHETIC_POOLS = ("corpus", "all")   # data.synthetic_pool
_OPTIONAL_COUNT = "null or an integer > 0"


@dataclass(frozen=True)
class Data(Block):
    corpus: str = setting((str,), bool, "a file path")
    test_sets: dict = setting((dict,), paths, "a mapping name -> file path")
    train_gold: str = setting((str,), bool, "a file path")
    nq_dev: str = setting((str,), bool, "a file path")
    mrc_unanswerable: str = setting((str,), bool, "a file path")
    max_questions_per_set: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)
    max_corpus_passages: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)
    synthetic_pool: str = setting((str,), lambda v: v in SYNTHETIC_POOLS, f"one of {SYNTHETIC_POOLS}")
    max_nq_dev: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)
    max_train_triples: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)


@dataclass(frozen=True)
class Bm25(Block):
    k1: float = setting(NUMBER, nonneg, "a number >= 0")
    b: float = setting(NUMBER, lambda v: 0 <= v <= 1, "a number in [0, 1]")
    threads: int | str = setting((int, str), lambda v: v == "auto" or (isinstance(v, int) and v > 0),
                                 "an integer > 0, or auto (the cores this process may run on)")


@dataclass(frozen=True)
class Tfidf(Block):
    ngram_max: int = setting((int,), lambda v: 1 <= v <= 3, "1, 2 or 3")
    n_features: int = setting((int,), lambda v: v >= 1024, "an integer >= 1024")


@dataclass(frozen=True)
class Retrieval(Block):
    depth: int = setting((int,), positive, "an integer > 0")


@dataclass(frozen=True)
class Distant(Block):
    depth: int = setting((int,), positive, "an integer > 0")
    hard_negatives: int = setting((int,), nonneg, "an integer >= 0")


@dataclass(frozen=True)
class Attention(Block):
    sample_passages: int = setting((int,), positive, "an integer > 0")
    condition_passages: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)
    exclude_test_gold: bool = setting((bool,), None, "true or false")
    lowest_entities: int = setting((int,), positive, "an integer > 0")
    min_entities: int = setting((int,), positive, "an integer > 0")
    example_passage: str | None = setting((str, type(None)), None, "null or a passage id")
    batch_size: int = setting((int,), positive, "an integer > 0")
    analysis_passages: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)
    probe_passages: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)


@dataclass(frozen=True)
class Filtering(Block):
    stage1: str = setting((str,), lambda v: v in ("roundtrip", "answer_in_passage", "none"),
                          "roundtrip, answer_in_passage or none")
    min_confidence: float = setting(NUMBER, lambda v: 0 <= v <= 1, "a number in [0, 1]")
    require_overlap: bool = setting((bool,), None, "true or false")
    hardness: str = setting((str,), lambda v: v in ("lowest_score", "rank"), "lowest_score or rank")
    keep_fraction: float = setting(NUMBER, lambda v: 0 < v <= 1, "a number in (0, 1]")
    max_rank: int = setting((int,), positive, "an integer > 0")
    depth: int = setting((int,), positive, "an integer > 0")
    autocast: str | None = setting((str, type(None)), autocast, AUTOCAST_EXPECTED + ": the hardness encoder's")
    ablation: bool = setting((bool,), None, "true or false")


@dataclass(frozen=True)
class Mixing(Block):
    total: int = setting((int,), lambda v: v >= 2, "an integer >= 2")
    doses: list = setting((list,), lambda v: all(isinstance(n, int) and not isinstance(n, bool) and n >= 2
                                                 and n % 2 == 0 for n in v) and list(v) == sorted(set(v)),
                          "a list of even sizes >= 2 in increasing order (may be empty)")
    require_total: bool = setting((bool,), None, "true or false")


def _share():
    return setting(NUMBER, lambda v: 0 < v <= 1, "a share in (0, 1]")


@dataclass(frozen=True)
class Yields(Block):
    """Measured keep rates the set sizes are planned with (``mixing.require_total``)."""

    parsed_uncon: float = _share()
    parsed_con: float = _share()
    roundtrip: float = _share()
    answer_in_passage: float = _share()
    entity_passages: float = _share()
    distinct: float = _share()
    margin: float = setting(NUMBER, lambda v: 0 <= v < 1,
                            "a share in [0, 1): how far below the measured yields the keep rates may come out and "
                            "the sets still reach their size ('mixing.require_total')")


_VARIANT_NAMES = ", ".join(x.name for x in VARIANT_TABLE)


@dataclass(frozen=True)
class Hybrid(Block):
    variants: list = setting((list,), lambda v: bool(v) and len(set(v)) == len(v)
                             and set(v) <= {x.name for x in VARIANT_TABLE},
                             f"a non-empty list of distinct trained dense variants ({_VARIANT_NAMES})")
    depth: int = setting((int,), positive, "an integer > 0")
    rrf_k: int = setting((int,), nonneg, "an integer >= 0")


@dataclass(frozen=True)
class Pseudo(Block):
    m: int = setting((int,), positive, "an integer > 0 (TF-IDF words per pseudo-query)")
    m_sweep: list = setting((list,), positive_ints, "a non-empty list of integers > 0")
    sweep_queries: int = setting((int,), positive, "an integer > 0 (queries the m sweep searches: a seeded sample)")


@dataclass(frozen=True)
class Mechanism(Block):
    min_entities: int = setting((int,), lambda v: v >= 2, "an integer >= 2")
    moved_sentence_passages: int | None = setting(OPTIONAL_INT, optional_positive, _OPTIONAL_COUNT)


@dataclass(frozen=True)
class Evaluation(Block):
    ks: list = setting((list,), ks, "a sorted list of distinct positive integers")
    bootstrap_samples: int = setting((int,), lambda v: v >= 100, "an integer >= 100")
    confidence: float = setting((float,), prob, "a number in (0, 1)")
    mechanism: Mechanism = nested(Mechanism)
