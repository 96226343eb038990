"""Markdown building blocks of the report: tables, numbers with CIs, p-values, labels, constants."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ecqg.analysis.labels import ENCODER_LABELS, SYSTEM_LABELS
from ecqg.core import metrics_files
from ecqg.core.bases import describe
from ecqg.core.io import read_json

CLAIM_BLOCK = re.compile(r"<!-- claim:([A-Za-z0-9_-]+):(start|end) -->")
TABLE3_ORDER = tuple(SYSTEM_LABELS)   # the paper's rows, then the related system's (Poly-DPR, hybrids)
# What the bundled base encoder already learned: said next to every dense number it underlies.
def base_encoder_note(base_model: str | None) -> str:
    """What a base that already learned retrieval means for the dense rows (empty for one that did not), from the
    declared facts of ``ecqg.core.bases``."""
    base = describe(base_model)
    if base is None or not base.learned_retrieval:
        return ""
    return (f"The dense rows start from {base.trained_on}, not from an MLM-only BERT as the paper's do. So "
            "unconditioned synthetic pre-training at scale has already happened inside every dense row, WebQuestions "
            "and TriviaQA are not zero-shot for it, and NQ's training questions were seen; its [CLS] row was never "
            "its output. The paper's premise (a position-biased [CLS] attention whose least-attended entities' "
            "questions retrieve worse) is measured in the claims table's first rows before any verdict rests on it.")


KS = (1, 5, 20, 100)
SYNTHETIC_STAGES = (("question_generation", "02 question generation"), ("filtering", "03 filtering"),
                    ("mixing", "04 mixing"))
# Pipeline order of the stage_<name>.json files; names not listed follow in alphabetical order.
STAGE_ORDER = ("prepare", "index_bm25", "index_tfidf", "tokenize_corpus", "retrieve_bm25", "retrieve_tfidf",
               "training_data",
               "05_dpr_training.baseline", "retrieve_dense_untrained", "retrieve_dense_baseline",
               "01_attention_bias", "02_question_generation", "03_filtering", "04_mixing",
               "05_dpr_training.uncon", "05_dpr_training.mixed", "retrieve_dense_uncon_pre",
               "retrieve_dense_mixed_pre", "retrieve_dense_uncon", "retrieve_dense_mixed", "pseudo_queries",
               "05_dpr_training.etm", "05_dpr_training.rsm", "retrieve_dense_etm_pre", "retrieve_dense_rsm_pre",
               "retrieve_dense_etm", "retrieve_dense_rsm",
               "05_dpr_training.poly_baseline", "05_dpr_training.poly_mixed", "retrieve_dense_poly_baseline",
               "retrieve_dense_poly_mixed", "hybrid_baseline", "hybrid_uncon", "hybrid_mixed", "hybrid_poly_baseline",
               "06_results_and_attention_entropy", "07_mechanism")



def load_metrics(metrics_dir: Path, name: str) -> dict | None:
    """A metrics file's fields, or None where its stage has not run; a notebook stage's file is read through its
    type (``ecqg.core.metrics_files``: a missing or unknown field is refused naming the file and the field)."""
    record = metrics_files.RECORDS.get(name)
    if record is not None:
        got = record.read(metrics_dir)
        return None if got is None else got.as_dict()
    path = metrics_dir / name
    return read_json(path, dict, "a JSON object") if path.is_file() else None


def missing_note(metrics_dir: Path, name: str, stage: str) -> str:
    return f"_The {stage} stage has not run yet (no `{metrics_dir / name}`)._\n"


def subtree(tree: Mapping | None, *keys: str) -> Mapping | None:
    """The mapping at ``tree[k1][k2]...``, or None where a key is missing or leads to a non-mapping."""
    for key in keys:
        if not isinstance(tree, Mapping):
            return None
        tree = tree.get(key)
    return tree if isinstance(tree, Mapping) else None


def interval_text(diff, low, high, digits: int, unit: str) -> str:
    if diff is None:
        return "–"
    text = num(diff, digits, signed=True)
    if low is not None and high is not None and not (isinstance(low, float) and math.isnan(low)):
        text += f" [{num(low, digits, signed=True)}, {num(high, digits, signed=True)}]"
    return f"{text} {unit}"


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> str:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def num(x, digits: int = 1, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def with_ci(node: Mapping, key: str, low: str, high: str, digits: int = 1, signed: bool = False) -> str:
    if node.get(key) is None:
        return "–"
    text = num(node[key], digits, signed)
    if node.get(low) is None or node.get(high) is None:
        return text
    return f"{text} [{num(node[low], digits, signed)}, {num(node[high], digits, signed)}]"


# Every p-value on a page outside a Holm family (the claims table, the dose curve, the comparisons' tables) says so:
# it resamples the questions or passages of one set of runs and is not corrected for the page's many comparisons.
EXPLORATORY = ("*exploratory* p: a bootstrap over the questions (or passages) of these runs, uncorrected for the "
               "page's many comparisons, not a verdict (the verdicts are the claims table's)")


def pval(x) -> str:
    return "–" if x is None else ("< .001" if x < 0.001 else f"{x:.3f}")


def ordered(keys, order: Sequence[str]) -> list[str]:
    keys = list(keys)
    return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def label(system: str) -> str:
    return SYSTEM_LABELS.get(system, ENCODER_LABELS.get(system, system))


def accuracy_cell(node: Mapping, k: int) -> str:
    """``71.5 [69.9, 73.2]``, or ``71.5 ± 0.4 [69.9, 73.2]`` for a seed-mean (sd over seeds)."""
    text = with_ci(node, f"top{k}", f"top{k}_ci_low", f"top{k}_ci_high")
    sd = node.get(f"top{k}_seed_sd")
    if sd is None or text == "–":
        return text
    value, _, interval = text.partition(" ")
    return f"{value} ± {num(sd)} {interval}".rstrip()
