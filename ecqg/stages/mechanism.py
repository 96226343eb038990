"""Notebook 07 in the pipeline: which questions and models the mechanism evaluations use, and ``mechanism.json``.

Notebook 07 calls these one step at a time; the measures themselves are in :mod:`ecqg.analysis.mechanism`. The test set is
NQ (gold passages annotated in the bundle, or BM25's first answer-bearing passage for DPR's csv); systems are
Table 3's rows, dense ones as the mean over their training seeds.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ecqg.analysis import mechanism, tables
from ecqg.analysis.attention import cls_attention, entity_scores
from ecqg.core import paths, settings, variants
from ecqg.core.io import write_csv
from ecqg.retrieval import evaluation, probes
from ecqg.stages import dpr_training, hybrid, results
from ecqg.stages.located import (  # noqa: F401
    TEST_SET,
    fits_encoder,
    gold_counts,
    gold_passage_records,
    locate,
    moved_pairs,
    nq_questions,
)

log = logging.getLogger(__name__)

def systems(dpr: settings.Dpr, mixing: settings.Mixing, fused: settings.Hybrid) -> list[str]:
    """07's systems: Table 3's rows (``ecqg.stages.results.table3_systems``), each with an NQ run."""
    return results.table3_systems(dpr, mixing, fused)


def dense_systems(dpr: settings.Dpr, mixing: settings.Mixing, fused: settings.Hybrid) -> list[str]:
    """Table 3's dense rows (the untrained encoder, the pre-training-only rows, every trained variant): the systems
    the moved-sentence probe loads, one model per training seed."""
    hybrids = set(hybrid.systems(fused))
    return [s for s in results.table3_systems(dpr, mixing, fused) if s not in results.SPARSE_SYSTEMS
            and s not in hybrids]


def pairs(dpr: settings.Dpr, mixing: settings.Mixing, fused: settings.Hybrid) -> list[tuple[str, str]]:
    """07's paired comparisons: Table 3's among the dense models (``ecqg.core.variants``), not those against a sparse
    run or the untrained encoder."""
    return [(a, b) for a, b in results.comparison_pairs(dpr, mixing, fused)
            if a.startswith("dpr_") and b.startswith("dpr_")]


# =========================================================================================================== slices
def slice_tables(hits: Mapping[str, np.ndarray], questions: Sequence[Mapping], masks: Mapping[str, np.ndarray],
                 ks: Sequence[int], pairs: Sequence[tuple[str, str]], n_boot: int, seed: int,
                 confidence: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Top-k accuracy per slice for every system, and paired differences per slice (tidy; ``subset`` = slice)."""
    table = pd.concat([tables.accuracy_table(h, questions, ks, n_boot, seed, confidence, system, TEST_SET,
                                                 masks=masks) for system, h in hits.items()], ignore_index=True)
    paired = [tables.paired_table(hits[a], hits[b], questions, ks, n_boot, seed, a, b, TEST_SET, masks=masks)
              for a, b in pairs if a in hits and b in hits]
    return table, (pd.concat(paired, ignore_index=True) if paired else pd.DataFrame())


def psi_table(hits: Mapping[str, np.ndarray], masks: Mapping[str, np.ndarray], ks: Sequence[int],
              pairs: Sequence[tuple[str, str]], n_boot: int, seed: int, confidence: float) -> pd.DataFrame:
    """PSI of every system at every k (seed-means for seeded systems) and PSI differences for ``pairs``; empty when
    fewer than two buckets hold questions (a tiny test set)."""
    if len(masks) < 2:
        log.warning("PSI needs two non-empty answer-position buckets; got %s", list(masks))
        return pd.DataFrame(columns=["kind", "system", "reference", "psi", "ci_low", "ci_high", "p_value", "k"])
    frames = []
    for k in ks:
        at_k = {system: evaluation.hits_at_k(h, [k])[:, 0].astype(float) for system, h in hits.items()}
        frame = mechanism.position_sensitivity(at_k, masks, [p for p in pairs if set(p) <= set(hits)], n_boot,
                                               seed, confidence)
        frames.append(frame.assign(k=k))
    return pd.concat(frames, ignore_index=True)


# ================================================================================================ entity attention
def entity_attention(dpr: settings.Dpr, batch_size: int, min_entities: int, locations: pd.DataFrame,
                     analyses: Mapping, passages: Mapping[str, Mapping], questions: Sequence[Mapping],
                     progress: bool = True) -> pd.DataFrame:
    """Per question (aligned with ``questions``): the baseline DPR's attention rank of its answer entity among its
    gold passage's entities (first training seed, the model stage 01 studies), with a status for the others.
    ``batch_size``: ``attention.batch_size``; ``min_entities``: ``evaluation.mechanism.min_entities``."""
    where = [i for i, r in enumerate(locations.itertuples()) if r.status == "ok"]
    matched = [mechanism.answer_entity(analyses[locations.passage_id.iloc[i]], evaluation._answers_of(questions[i]))
               for i in where]
    with_entity = [i for i, index in zip(where, matched) if index is not None]
    pids = [locations.passage_id.iloc[i] for i in with_entity]
    model = dpr_training.load_model("baseline", dpr, attn_implementation="eager")
    attention = cls_attention(model, [passages[p].get("title") or "" for p in pids],
                              [passages[p]["text"] for p in pids], batch_size, progress=progress)
    scores = {i: entity_scores(pa, analyses[pid].entities, len(passages[pid]["text"]))
              for i, pid, pa in zip(with_entity, pids, attention)}
    ranked = mechanism.entity_attention_ranks([scores.get(i, []) for i in where], matched, min_entities)
    rows = [{"status": "not_located", "rank": -1, "n_entities": 0, "third": None, "attention": math.nan}
            for _ in questions]
    for i, row in zip(where, ranked.to_dict("records")):
        rows[i] = row
    return pd.DataFrame(rows, columns=list(ranked.columns))


# ============================================================================================ moved-sentence probe
def dense_models(dpr: settings.Dpr, mixing: settings.Mixing, fused: settings.Hybrid
                 ) -> dict[str, list[tuple[str, int | None]]]:
    """Each dense system -> (variant, seed) of each of its models (one per training seed)."""
    runs = dpr_training.seed_runs(dpr, mixing)
    untrained = variants.UNTRAINED_SYSTEM
    out: dict[str, list[tuple[str, int | None]]] = {untrained: [(variants.UNTRAINED, None)]}
    for system in dense_systems(dpr, mixing, fused):
        if system == untrained:
            continue
        variant = system.removeprefix("dpr_")
        out[system] = [(variant, int(run.rsplit("_s", 1)[1])) for run in runs[system]]
    return {system: models for system, models in out.items() if models}


def moved_sentence_gaps(dpr: settings.Dpr, pairs: Sequence[Mapping],
                        models: Mapping[str, Sequence[tuple[str, int | None]]],
                        progress: bool = False) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """Front - end score gaps (seeds x pairs) per system, and the per-model scores (tidy) for inspection."""
    gaps, rows = {}, []
    encode = dpr.encode
    for system, members in models.items():
        per_seed = []
        for variant, seed in members:
            model = dpr_training.load_model(variant, dpr, seed)
            front, end = probes.moved_sentence_scores(model, pairs, encode.batch_size, encode.autocast,
                                                         progress)
            per_seed.append(front - end)
            rows += [{"system": system, "seed": seed, "question_id": p["question_id"], "front": float(f),
                      "end": float(e), "gap": float(f - e)} for p, f, e in zip(pairs, front, end)]
            del model
        gaps[system] = np.vstack(per_seed)
    return gaps, pd.DataFrame(rows)


def write_position_plot(table: pd.DataFrame, profile: str, k: int = 5) -> Path:
    """Top-k accuracy (%) by answer sentence (1, 2, 3 = 3+), one column per system: DVC plot data,
    ``results/<profile>/plots/position_top<k>.csv``."""
    sel = table[table.k == k]
    systems = list(dict.fromkeys(sel.system))
    wide = sel.pivot(index="subset", columns="system", values="accuracy").mul(100).round(2)
    rows = [{"answer_sentence": i + 1, **wide.loc[b, systems].to_dict()}
            for i, b in enumerate(probes.BUCKETS) if b in wide.index]
    return write_csv(paths.plot_data(profile, f"position_top{k}.csv"), rows, ["answer_sentence", *systems])


# ========================================================================================================= metrics
def _r(x, digits: int = 4):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


def _accuracy_node(table: pd.DataFrame) -> dict:
    tree: dict = {}
    for r in table.itertuples():
        node = tree.setdefault(r.system, {}).setdefault(r.subset, {"n": int(r.n)})
        node[f"top{r.k}"] = _r(100 * r.accuracy, 2)
        node[f"top{r.k}_ci_low"], node[f"top{r.k}_ci_high"] = _r(100 * r.ci_low, 2), _r(100 * r.ci_high, 2)
        if getattr(r, "seeds", 1) > 1:
            node["seeds"] = int(r.seeds)
            node[f"top{r.k}_seed_sd"] = _r(100 * r.seed_sd, 2)
    return tree


def _paired_node(paired: pd.DataFrame) -> dict:
    tree: dict = {}
    for r in paired.itertuples():
        node = tree.setdefault(f"{r.system_a}_minus_{r.system_b}", {}).setdefault(r.subset, {"n": int(r.n)})
        node[f"top{r.k}_diff"] = _r(100 * r.difference, 2)
        node[f"top{r.k}_ci_low"], node[f"top{r.k}_ci_high"] = _r(100 * r.ci_low, 2), _r(100 * r.ci_high, 2)
        node[f"top{r.k}_p"] = _r(r.p_value)
    return tree


def metrics_tree(setting: Mapping, position: Mapping, entity: Mapping, moved: Mapping) -> dict:
    """``mechanism.json``: scalar leaves only (``dvc metrics show/diff``); accuracies and differences in % / points,
    PSI as a fraction, score gaps in the encoders' dot-product units.

    ``position`` / ``entity``: {"counts": {...}, "table": slice accuracy, "paired": slice differences, ["psi"]};
    ``moved``: {"counts": {...}, "summary": ``mechanism.summarise_gaps`` output}.
    """
    tree: dict = {"setting": dict(setting)}
    for name, part in (("position", position), ("entity_attention", entity)):
        node = {"counts": dict(part["counts"]), "accuracy": _accuracy_node(part["table"]),
                "paired": _paired_node(part["paired"]) if len(part["paired"]) else {}}
        if "psi" in part:
            psi: dict = {}
            for r in part["psi"].itertuples():
                key = r.system if r.kind == "system" else f"{r.system}_minus_{r.reference}"
                leaf = psi.setdefault(key, {})
                leaf[f"top{r.k}"] = _r(r.psi)
                leaf[f"top{r.k}_ci_low"], leaf[f"top{r.k}_ci_high"] = _r(r.ci_low), _r(r.ci_high)
                if r.kind == "paired":
                    leaf[f"top{r.k}_p"] = _r(r.p_value)
            node["psi"] = psi
        tree[name] = node
    systems, paired = {}, {}
    for r in moved["summary"].itertuples():
        leaf = {"n": int(r.n), "gap": _r(r.gap), "ci_low": _r(r.ci_low), "ci_high": _r(r.ci_high),
                "p": _r(r.p_value)}
        if r.kind == "system":
            systems[r.system] = {**leaf, "seeds": int(r.seeds), "seed_sd": _r(r.seed_sd),
                                 "front_higher_pct": _r(r.share_front_higher, 2)}
        else:
            paired[f"{r.system}_minus_{r.reference}"] = leaf
    tree["moved_sentence"] = {"counts": dict(moved["counts"]), "systems": systems, "paired": paired}
    return tree
