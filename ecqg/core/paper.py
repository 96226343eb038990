"""The paper's reported numbers, declared once: every table, claim, figure and page that shows one reads it here.

All of them come from a BERT-base DPR on DPR's 21M-passage Wikipedia and the full test sets, so next to a smaller or
substitute setting they compare orderings, never levels; every place that shows one labels it as the paper's.
In the core and plain data (no pandas, no torch) so that every room, the cost model and ``bench/gpu_check.py`` on a
bare GPU machine may import it; only the stages that show a paper number depend on it.
"""

from __future__ import annotations

PASSAGES = 21_015_324          # passages of DPR's Wikipedia split (psgs_w100.tsv), the paper's corpus

# Table 3 and the DPR baselines it quotes: (system, dataset, subset, k) -> Top-k accuracy in %.
TABLE3_COLUMNS = ("system", "dataset", "subset", "k", "paper_accuracy")
TABLE3 = (
    ("bm25", "nq", "all", 1, 22.7), ("bm25", "nq", "all", 5, 44.6),
    ("dpr_baseline", "nq", "all", 1, 44.3), ("dpr_baseline", "nq", "all", 5, 67.1),
    ("dpr_uncon", "nq", "all", 1, 45.8), ("dpr_uncon", "nq", "all", 5, 68.4),
    ("dpr_mixed", "nq", "all", 1, 45.9), ("dpr_mixed", "nq", "all", 5, 69.0),
)

# Section 3: the position bias of its DPR passage encoder (shares of passages).
POSITION_BIAS = {"highest_first_half": 0.65, "lowest_second_half": 0.60}

# The attention of the three encoders: token-level entropy (nats), the later-sentence share's difference (points),
# and the Table 1 probe (DPR dot products of questions about the highest- and lowest-attended entity).
ATTENTION = {
    "entropy": {"dpr_baseline": 3.97, "dpr_uncon": 3.80, "dpr_mixed": 4.10},
    "later_sentence_share_diff": {"dpr_mixed_minus_dpr_baseline": 1.8, "dpr_mixed_minus_dpr_uncon": 1.1},
    "table1_probe": {"dpr_baseline": {"highest": 73.7, "lowest": 72.1}},
}


def table3_cells(dataset: str = "nq", subset: str = "all") -> dict[tuple[str, int], float]:
    """``(system, k) -> accuracy`` of one test set and subset (empty where the paper reports none)."""
    return {(system, k): value for system, d, s, k, value in TABLE3 if d == dataset and s == subset}


def table3_accuracy(system: str, k: int, dataset: str = "nq", subset: str = "all") -> float | None:
    return table3_cells(dataset, subset).get((system, k))
