"""The paper's Table 3 on whatever benchmark the profile built: load runs, score them, lay the table out.

Notebook 06 calls these one step at a time. All numbers come from ``ecqg.retrieval.evaluation`` over the run files that the
retrieval stages wrote; nothing here is typed in: the paper's own reported values come from :mod:`ecqg.core.paper` and are always
labelled as the paper's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ecqg.analysis import encoder_comparison as ec
from ecqg.analysis import tables

# notebooks 06 and 07 read the labels through this module
from ecqg.analysis.labels import (  # noqa: F401
    DATASET_LABELS,
    ENCODER_LABELS,
    HYBRID_METHODS,
    SPARSE_LABELS,
    SUBSET_LABELS,
    SYSTEM_LABELS,
    TABLE3_SUBSETS,
    system_labels,
)
from ecqg.core import paper, paths, settings, variants
from ecqg.core.settings.retrievers import traits
from ecqg.core.io import read_jsonl, write_csv, write_json
from ecqg.retrieval import evaluation
from ecqg.retrieval.run_files import read_run
from ecqg.stages import common, hybrid


def load_test_sets(names: Sequence[str]) -> dict[str, list[dict]]:
    """The prepared test questions of each set (the `prepare` stage validated them)."""
    return {name: [record for _, record in read_jsonl(paths.questions_file(name))] for name in names}


def load_passage_texts(corpus: Path = paths.CORPUS) -> dict[str, str]:
    return evaluation.passage_texts((record for _, record in read_jsonl(corpus)), corpus)


def count_table(test_sets: Mapping[str, list[dict]], subsets: Sequence[str] = TABLE3_SUBSETS) -> pd.DataFrame:
    """Questions per set and subset: reported next to every accuracy."""
    rows = []
    for name, questions in test_sets.items():
        for subset, mask in evaluation.subset_masks(questions).items():
            if subset not in subsets:
                continue
            rows.append(dict(dataset=DATASET_LABELS.get(name, name), subset=SUBSET_LABELS.get(subset, subset),
                             questions=int(mask.sum())))
    return pd.DataFrame(rows)


@dataclass
class Evaluation:
    """Everything the results notebook shows: the tidy accuracy table, top-k curves and the raw hit matrices."""

    table: pd.DataFrame
    curves: pd.DataFrame
    hits: dict[tuple[str, str], np.ndarray] = field(repr=False)


def evaluate_systems(systems: Sequence[str], test_sets: Mapping[str, list[dict]], text_of: Mapping[str, str],
                     ks: Sequence[int], n_boot: int, seed: int, confidence: float, depth: int,
                     subsets: Sequence[str] = TABLE3_SUBSETS,
                     seed_runs: Mapping[str, Sequence[str]] | None = None) -> Evaluation:
    """Score every system's run on every test set; a missing run file is an error, not a blank row.

    ``seed_runs``: a system trained with several seeds -> its run names (``ecqg.stages.dpr_training.seed_runs``). Its
    hits are then a question x seed x rank stack: the table gives the seed-mean with the spread over seeds, and
    paired differences compare seed-means question by question. Other systems are their own single run.
    """
    seed_runs = seed_runs or {}
    frames, curves, hits = [], [], {}
    caches = {name: evaluation.HitCache(text_of) for name in test_sets}   # runs share most passages per question
    for system in systems:
        runs = list(seed_runs.get(system, [system]))
        for name, questions in test_sets.items():
            matrices = []
            for run in runs:
                run_path = paths.run_file(run, name)
                if not run_path.is_file():
                    raise FileNotFoundError(f"{run_path}: no run '{run}' of system '{system}' on '{name}' "
                                            "(run `dvc repro`)")
                matrices.append(evaluation.hit_matrix(read_run(run_path), questions, text_of,
                                                      k_max=depth, cache=caches[name]))
            matrix = matrices[0] if len(matrices) == 1 else np.stack(matrices, axis=1)
            hits[(system, name)] = matrix
            frames.append(tables.accuracy_table(matrix, questions, ks, n_boot, seed, confidence, system, name))
            curves.append(_curve(matrix, questions, system, name))
    table, curves = pd.concat(frames, ignore_index=True), pd.concat(curves, ignore_index=True)
    return Evaluation(table[table.subset.isin(subsets)].reset_index(drop=True),
                      curves[curves.subset.isin(subsets)].reset_index(drop=True), hits)


def _curve(matrix: np.ndarray, questions: list[dict], system: str, dataset: str) -> pd.DataFrame:
    """Top-k accuracy for every k from 1 to the run depth (for the curves figure; a seed stack: the seed-mean)."""
    found = np.logical_or.accumulate(matrix, axis=-1)
    if found.ndim == 3:
        found = found.mean(axis=1)
    frames = []
    for subset, mask in evaluation.subset_masks(questions).items():
        acc = found[mask].mean(axis=0) if mask.any() else np.full(found.shape[1], np.nan)
        frames.append(pd.DataFrame(dict(system=system, dataset=dataset, subset=subset,
                                        k=np.arange(1, found.shape[1] + 1), accuracy=acc)))
    return pd.concat(frames, ignore_index=True)


def table3_view(table: pd.DataFrame, ks: Sequence[int], with_ci: bool = True) -> pd.DataFrame:
    """The paper's layout: one row per system; columns (test set, subset, Top-k); cells in % with the 95% CI, and
    ``± sd`` over seeds for a system trained with more than one."""
    def cell(row) -> str:
        text = f"{100 * row.accuracy:.1f}"
        if getattr(row, "seeds", 1) > 1:
            text += f" ± {100 * row.seed_sd:.1f}"
        return f"{text} [{100 * row.ci_low:.1f}, {100 * row.ci_high:.1f}]" if with_ci else text

    view = table.assign(
        system=table.system.map(lambda s: SYSTEM_LABELS.get(s, s)),
        column=[(f"{DATASET_LABELS.get(d, d)} {SUBSET_LABELS.get(s, s)} (n={n})", f"Top-{k}")
                for d, s, n, k in zip(table.dataset, table.subset, table.n, table.k)],
        cell=table.apply(cell, axis=1),
    )
    wide = view.pivot(index="system", columns="column", values="cell")
    order = list(dict.fromkeys(view.column))
    wide = wide[order]
    wide.columns = pd.MultiIndex.from_tuples(order, names=["test set", "k"])
    return wide.loc[list(dict.fromkeys(view.system))]


def paired_differences(ev: Evaluation, test_sets: Mapping[str, list[dict]], pairs: Sequence[tuple[str, str]],
                       ks: Sequence[int], n_boot: int, seed: int) -> pd.DataFrame:
    """Paired bootstrap of A - B for each requested pair of systems, on every set and subset."""
    frames = []
    for a, b in pairs:
        for name, questions in test_sets.items():
            frames.append(tables.paired_table(ev.hits[(a, name)], ev.hits[(b, name)], questions, ks, n_boot,
                                                  seed, a, b, name))
    if not frames:
        return pd.DataFrame()
    paired = pd.concat(frames, ignore_index=True)
    return paired[paired.subset.isin(ev.table.subset.unique())].reset_index(drop=True)


def paper_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Our numbers next to the paper's wherever the paper reports one (different corpus size: compare orderings)."""
    ours = table[["system", "dataset", "subset", "k", "n", "accuracy", "ci_low", "ci_high"]]
    merged = pd.DataFrame(paper.TABLE3, columns=paper.TABLE3_COLUMNS).merge(ours, on=["system", "dataset", "subset", "k"], how="inner")
    merged["ours"] = (100 * merged.accuracy).round(1)
    merged["ours_ci"] = [f"[{100 * lo:.1f}, {100 * hi:.1f}]" for lo, hi in zip(merged.ci_low, merged.ci_high)]
    merged["system"] = merged.system.map(lambda s: SYSTEM_LABELS.get(s, s))
    return merged[["system", "dataset", "subset", "k", "n", "ours", "ours_ci", "paper_accuracy"]]


def metrics_tree(table: pd.DataFrame, paired: pd.DataFrame, setting: Mapping) -> dict:
    """Nested dict with scalar leaves, so `dvc metrics show` and `dvc metrics diff` can read it."""
    tree: dict = {"setting": dict(setting), "accuracy": {}, "paired": {}}
    for r in table.itertuples():
        node = tree["accuracy"].setdefault(r.system, {}).setdefault(r.dataset, {}).setdefault(r.subset, {"n": r.n})
        node[f"top{r.k}"] = round(100 * r.accuracy, 2)
        node[f"top{r.k}_ci_low"] = round(100 * r.ci_low, 2)
        node[f"top{r.k}_ci_high"] = round(100 * r.ci_high, 2)
        if getattr(r, "seeds", 1) > 1:
            node["seeds"] = int(r.seeds)
            node[f"top{r.k}_seed_sd"] = round(100 * r.seed_sd, 2)
            node[f"top{r.k}_seed_min"] = round(100 * r.seed_min, 2)
            node[f"top{r.k}_seed_max"] = round(100 * r.seed_max, 2)
    for r in paired.itertuples():
        pair = f"{r.system_a}_minus_{r.system_b}"
        node = tree["paired"].setdefault(pair, {}).setdefault(r.dataset, {}).setdefault(r.subset, {"n": r.n})
        node[f"top{r.k}_diff"] = round(100 * r.difference, 2)
        node[f"top{r.k}_ci_low"] = round(100 * r.ci_low, 2)
        node[f"top{r.k}_ci_high"] = round(100 * r.ci_high, 2)
        node[f"top{r.k}_p"] = round(r.p_value, 4)
    return tree


def write_topk_plots(curves: pd.DataFrame, profile: str) -> list[Path]:
    """Top-k accuracy (%) against k, one column per system, one file per test set (full set): DVC plot data,
    ``results/<profile>/plots/topk/<set>.csv`` (``dvc plots show``)."""
    written = []
    full = curves[curves.subset == evaluation.FULL_SET]
    for dataset, group in full.groupby("dataset", sort=False):
        wide = group.pivot(index="k", columns="system", values="accuracy").mul(100).round(2)
        systems = list(dict.fromkeys(group.system))
        rows = [{"k": int(k), **row} for k, row in wide[systems].iterrows()]
        written.append(write_csv(paths.plot_data(profile, f"topk/{dataset}.csv"), rows, ["k", *systems]))
    return written


def write_table3_metrics(table: pd.DataFrame, paired: pd.DataFrame, setting: Mapping, path: Path) -> Path:
    return write_json(path, metrics_tree(table, paired, setting))


# --- which rows and comparisons (derived from the variant table and params, never typed in a notebook) ------------
SPARSE_SYSTEMS = variants.SPARSE
UNTRAINED_SYSTEM = variants.UNTRAINED_SYSTEM     # the base checkpoint, not fine-tuned


def table3_systems(dpr: settings.Dpr, mixing: settings.Mixing, fused: settings.Hybrid) -> list[str]:
    """Table 3's rows in order: the sparse retrievers, the untrained encoder, each pre-trained variant right after
    pre-training (and the dose curve's rows), every trained variant, the BM25 + dense hybrids; only the variants the
    profile trains."""
    # torch: kept out of results' import (the Table 3 scoring: notebooks 06, 07)
    from ecqg.stages import dpr_training as dense

    trained = variants.trained(dpr)
    return [*SPARSE_SYSTEMS, UNTRAINED_SYSTEM, *(v.pre_system for v in trained if v.pretrained),
            *(v.pre_system for v in dense.dose_variants(mixing)), *(v.system for v in trained),
            *hybrid.systems(fused)]


def comparison_pairs(dpr: settings.Dpr, mixing: settings.Mixing, fused: settings.Hybrid) -> list[tuple[str, str]]:
    """The paired comparisons (A - B) of Table 3, each a question the study asks: sparse against sparse, every
    variant against what the table says it is compared with (``ecqg.core.variants``: the paper's three orderings,
    architecture, generator-free and template-conditioned pre-training, Luo et al.'s recipe, each right after
    pre-training too), the dose curve's rows against each other at each size, then the hybrids'
    (:func:`ecqg.stages.hybrid.pairs`)."""
    # torch: kept out of results' import (the Table 3 scoring: notebooks 06, 07)
    from ecqg.stages import dpr_training as dense

    doses = dense.dose_variants(mixing)
    dose_pairs = [(f"dpr_mixed_d{n}_pre", f"dpr_uncon_d{n}_pre") for n in variants.doses(mixing)]
    dose_pairs += [(v.pre_system, UNTRAINED_SYSTEM) for v in doses]
    pairs = [("bm25", "tfidf"), *variants.pairs(dpr), *dose_pairs, *hybrid.pairs(fused)]
    rows = set(table3_systems(dpr, mixing, fused))
    return [pair for pair in pairs if set(pair) <= rows]


def attention_systems(dpr: settings.Dpr) -> list[str]:
    """The one-vector dense models whose [CLS] attention 06 analyses and which answer the Table 1 probe."""
    return [v.system for v in variants.trained(dpr) if traits(v.retriever_kind(dpr.model)).one_vector]


def poly_systems(dpr: settings.Dpr) -> list[str]:
    """The fine-tuned Poly-DPR models: probed with their inference score (best code) and whose codes 06 reads
    (their pre-training-only rows stay Table 3 rows, as DPR's do)."""
    return [v.system for v in variants.trained(dpr) if not traits(v.retriever_kind(dpr.model)).one_vector]


def seed_systems(dpr: settings.Dpr) -> list[str]:
    """The paper's variants (DPR, UnCon-DPR, Mixed-DPR, as far as the profile trains them), trained with every seed
    of ``dpr.seeds``: the ones 06 measures replicate by replicate."""
    return [v.system for v in variants.trained(dpr) if v.seeds == variants.PAPER]


# --- 06's analyses of every training seed and of Poly-DPR's codes ---------------------------------------------------
def attention_by_seed(dpr: settings.Dpr, eval_settings: settings.Evaluation, boot_seed: int, batch_size: int,
                      studied: Sequence[Mapping], sentences: Sequence, probes: Sequence[Mapping],
                      probe_passages: Sequence[Mapping], first: tuple[pd.DataFrame, pd.DataFrame],
                      compared: Sequence[str], progress: bool = True,
                      measured_out: dict | None = None) -> pd.DataFrame:
    """One row per seed of ``dpr.seeds`` and comparison of ``compared`` (``ecqg.analysis.encoder_comparison.seed_rows``):
    the first seed's attention and probe summaries are ``first`` (already measured); every further seed's models
    measure the same passages and probe questions, one seed in memory at a time. ``measured_out``: filled with
    ``seed -> (per-passage attention, probe scores)`` of every further seed, for the per-run evidence files.
    ``boot_seed``: the bootstrap's (the profile's ``seed``); ``batch_size``: the attention pass's
    (``attention.batch_size``)."""
    # torch: kept out of results' import (the Table 3 scoring: notebooks 06, 07)
    from ecqg.stages import dpr_training as dense

    boot = dict(n_boot=eval_settings.bootstrap_samples, seed=boot_seed, confidence=eval_settings.confidence)
    seeds = common.seeds(dpr)
    pairs = [p for p in ec.DEFAULT_PAIRS if set(p) <= set(compared)]
    attention, probe = {seeds[0]: first[0]}, {seeds[0]: first[1][first[1].encoder.isin(compared)]}
    for seed in seeds[1:]:
        models = {name: dense.load_model(name.removeprefix("dpr_"), dpr, seed=seed, attn_implementation="eager")
                  for name in compared}
        measured = ec.compare_attention(models, studied, batch_size=batch_size,
                                        progress=progress, sentences=sentences)
        attention[seed] = ec.attention_summary(measured, pairs, **boot)
        scores = ec.probe_scores(models, probes, probe_passages, batch_size=dpr.encode.batch_size)
        probe[seed] = ec.probe_summary(scores, **boot)
        if measured_out is not None:
            measured_out[seed] = (measured, scores)
        del models
    return ec.seed_rows(attention, probe)


def poly_codes_metrics(models: Mapping[str, object], studied: Sequence[Mapping], sentences: Sequence,
                       probes: Sequence[Mapping], probe_passages: Sequence[Mapping], batch_size: int
                       ) -> tuple[dict, dict[str, pd.DataFrame]]:
    """What each Poly-DPR's K codes do (``ecqg.analysis.poly_codes``): per code the entropy and later-sentence share of its
    attention on the studied passages (a ``mean`` row: the codes' mean attention), its wins on the probe questions,
    and the codes' similarity. Returns ``(metrics for poly_codes.json, per-code table per model)``."""
    # torch, FAISS: kept out of results' import (notebooks 06, 07)
    from ecqg.analysis import poly_codes

    with_sentences = [{**p, "sentences": s} for p, s in zip(studied, sentences)]
    passage_of = {p["id"]: p for p in probe_passages}
    metrics, per_model = {}, {}
    for name, model in models.items():
        per_code = (poly_codes.code_attention_table(model, with_sentences, batch_size=batch_size)
                    .groupby("code", sort=False)[["entropy", "later_sentence_share"]].mean())
        wins = poly_codes.code_wins(model, [r["question"] for r in probes],
                                    [passage_of[str(r["passage_id"])] for r in probes], batch_size=batch_size)
        per_code["wins"] = [int(w) for w in wins] + [None]          # the "mean" row has none
        similarity = poly_codes.code_similarity(model, studied, batch_size=batch_size)
        metrics[name] = {"similarity": {k: round(v, 4) for k, v in similarity.items()},
                         "codes": {str(code): {k: (None if v is None or v != v else round(float(v), 4))
                                               for k, v in row.items()}
                                   for code, row in per_code.to_dict("index").items()}}
        per_model[name] = per_code
    return metrics, per_model
