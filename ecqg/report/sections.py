"""The report's sections rendered from metrics files: Table 3 (with the base encoder's history), the
attention bias, the dense models' attention and the Table 1 probe, the synthetic-data stages (settings and wall times:
:mod:`ecqg.report.stage_records`)."""

from __future__ import annotations

from collections.abc import Mapping

from ecqg.analysis.labels import DATASET_LABELS, ENCODER_LABELS, SUBSET_LABELS
from ecqg.analysis.stats import hierarchical_bootstrap
from ecqg.core import paper as reported
from ecqg.core.bases import untrained_label
from ecqg.core.variants import UNTRAINED_SYSTEM
from ecqg.report.evidence import BOOT_SEED, N_BOOT
from ecqg.report.markdown import (EXPLORATORY, KS, TABLE3_ORDER, accuracy_cell, base_encoder_note, label, md_table, num,
                                  ordered, pval, with_ci)


def _paper_cells(dataset: str, subset: str) -> dict[tuple[str, int], float]:
    return reported.table3_cells(dataset, subset)


def _paired_cell(node: Mapping, k: int) -> str:
    """``+0.3 [-0.2, +0.8], p 0.31`` for one paired difference at Top-k, or a dash where it was not computed."""
    if f"top{k}_diff" not in node:
        return "–"
    return (f"{with_ci(node, f'top{k}_diff', f'top{k}_ci_low', f'top{k}_ci_high', signed=True)}, "
            f"p {pval(node.get(f'top{k}_p'))}")


def render_table3(table3: Mapping, ev=None) -> str:
    """Top-k accuracy (%) with 95% CIs, one table per test set / subset, systems in the paper's order, the paper's
    numbers beside ours where it reports them; then the paired differences the results stage computed, those whose
    arms ran a different number of times recomputed at one common seed from the per-run files ``ev``."""
    setting, accuracy = table3.get("setting", {}), table3.get("accuracy", {})
    out = ["#### Table 3: top-k retrieval accuracy\n"]
    facts = [f"profile `{setting['profile']}`" if "profile" in setting else None,
             f"{setting['corpus_passages']:,} corpus passages" if "corpus_passages" in setting else None]
    if any(facts):
        seeds = sorted({c.get("seeds", 1) for name, subs in accuracy.items()          # trained rows' seed counts
                        if name.startswith(("dpr_", "hybrid_")) and not name.endswith("_pre")
                        for sets in subs.values() for c in sets.values()}) or [1]
        spread = ("" if seeds[-1] == 1 else
                  f" Dense rows trained with {seeds[-1]} seeds: mean ± sd over seeds." if len(seeds) == 1 else
                  f" Rows with ± were trained with {seeds[-1]} seeds (mean ± sd over seeds), the other trained rows "
                  f"with {' or '.join(map(str, seeds[:-1]))} (`dpr.related_seeds`).")
        out.append("Setting: " + ", ".join(f for f in facts if f) + ". Cells: accuracy % [95% bootstrap CI]."
                   + spread + "\n")
    if setting.get("note"):
        out.append(f"_{setting['note']}._\n")
    if note := base_encoder_note(setting.get("base_model")):
        out.append(f"**What the base encoder already knows.** {note}\n")
    if any(s.endswith("_pre") for s in accuracy):
        out.append("_Pre-training only_: UnCon / Mixed (and ETM / RSM) right after pre-training, before fine-tuning "
                   "(the pre-training data's own effect on the base encoder).\n")
    if any(s in ("dpr_etm", "dpr_rsm") for s in accuracy):
        out.append("_ETM-DPR / RSM-DPR_ (Luo et al. 2022, §5): pre-trained on generator-free pseudo-queries (the "
                   "title plus a passage's top TF-IDF words; one sentence reduced to its top TF-IDF words) over the "
                   "UnCon set's passages, as many, then fine-tuned exactly like DPR: against UnCon-DPR they ask "
                   "whether the question generator matters at all.\n")
    if any(s.startswith("dpr_poly_") for s in accuracy):
        out.append("_Poly-DPR_ (Luo et al. 2022, §3.2): `polydpr.codes` learned code vectors attention-pool the "
                   "passage encoder's last layer into that many passage vectors; the query is its [CLS] vector; "
                   "trained with a softmax mix of the codes, searched by the best code. Trained exactly like the DPR "
                   "row beside it (Poly-DPR like DPR, Mixed Poly-DPR like Mixed-DPR: same data and settings; its "
                   "seeds: `dpr.related_seeds`).\n")
    if any(s.startswith("hybrid_") for s in accuracy):
        out.append("_Hybrids_ (Luo et al. 2022, §3.3): BM25's and a dense model's top lists fused per question, for "
                   "each seed of `dpr.related_seeds` (the mean over them); normalised sum = each list min-max "
                   "normalised to [0, 1], a passage missing from a list scores 0 there, scores summed (the paper's "
                   "hybrid); RRF = reciprocal-rank fusion (k = `hybrid.rrf_k`, 60 in every preset). Equal "
                   "weights: nothing is tuned, on the test sets or elsewhere.\n")
    systems = ordered(accuracy, TABLE3_ORDER)
    panels = list(dict.fromkeys((d, s) for sys_ in systems for d, subs in accuracy[sys_].items() for s in subs))
    for dataset, subset in panels:
        cells = {s: accuracy[s][dataset][subset] for s in systems if subset in accuracy[s].get(dataset, {})}
        ns = sorted({c.get("n") for c in cells.values()}, key=str)
        ks = [k for k in KS if any(f"top{k}" in c for c in cells.values())]
        paper = _paper_cells(dataset, subset)
        paper_ks = sorted({k for _, k in paper})
        header = ["system"] + [f"Top-{k}" for k in ks] + [f"paper Top-{k}" for k in paper_ks]
        rows = []
        for system, node in cells.items():
            rows.append([_untrained_label(setting) if system == UNTRAINED_SYSTEM else label(system)]
                        + [accuracy_cell(node, k) for k in ks]
                        + [num(paper.get((system, k))) for k in paper_ks])
        n_text = ", ".join(f"n={n}" for n in ns)
        out.append(f"**{DATASET_LABELS.get(dataset, dataset)} {SUBSET_LABELS.get(subset, subset)}** ({n_text})\n")
        out.append(md_table(header, rows))
    if any(row[0] in systems for row in reported.TABLE3):
        out.append("Paper columns: the paper's Table 3 on the 21M-passage Wikipedia; compare orderings, not levels.\n")
    paired = _same_seed(table3.get("paired", {}), ev)
    if paired:
        out.append(f"Paired differences A - B on the same questions (points [95% CI]; {EXPLORATORY}). A row "
                   "whose arms were trained a different number of times compares the run of the first seed of each "
                   "(where the per-run files give it) or, marked *(mean of runs)*, a single run with the mean over "
                   "the other arm's runs:\n")
        rows = []
        for pair, by_set in paired.items():
            pair, _, seed = pair.partition("@s")
            a, _, b = pair.partition("_minus_")
            for dataset, subs in by_set.items():
                for subset, node in subs.items():
                    how = f" (seed {seed})" if seed else " *(mean of runs)*" if node.get("mixed_runs") else ""
                    rows.append([f"{label(a)} - {label(b)}{how}",
                                 f"{DATASET_LABELS.get(dataset, dataset)} {SUBSET_LABELS.get(subset, subset)}",
                                 str(node.get("n", "–"))]
                                + [_paired_cell(node, k) for k in KS])
        out.append(md_table(["pair", "test set", "n"] + [f"Top-{k}" for k in KS], rows, ["l", "l"] + ["r"] * 5))
    return "\n".join(out)


def _untrained_label(setting: Mapping) -> str:
    """Table 3's row of the base checkpoint, named after the profile's base (``ecqg.core.bases``)."""
    return untrained_label(setting.get("base_model"))


def _same_seed(paired: Mapping, ev) -> dict:
    """The paired differences with every pair whose arms ran a different number of times (a hybrid of one seed
    against DPR's five) recomputed from the per-run files at the seed both ran, on the test sets the files hold
    (question-level paired bootstrap, as the results stage does); the pair is named ``<a>_minus_<b>@s<seed>``.
    Where the files cannot give it (an NQ subset, or no files), the stored row stays, marked ``mixed_runs``."""
    out: dict = {}
    for pair, by_set in paired.items():
        a, _, b = pair.partition("_minus_")
        for dataset, subs in by_set.items():
            seeds = (ev.seeds(a, dataset), ev.seeds(b, dataset)) if ev is not None else ((), ())
            common = [x for x in seeds[0] if x in seeds[1]]
            for subset, node in subs.items():
                if ev is None or len(seeds[0]) == len(seeds[1]):
                    out.setdefault(pair, {}).setdefault(dataset, {})[subset] = node
                    continue
                if not common or subset != "all":
                    out.setdefault(pair, {}).setdefault(dataset, {})[subset] = {**node, "mixed_runs": True}
                    continue
                cell = {"n": node.get("n")}
                for k in KS:
                    ha, hb = ev.hits(a, dataset, k), ev.hits(b, dataset, k)
                    col_a, col_b = ha[0][:, ha[1].index(common[0])], hb[0][:, hb[1].index(common[0])]
                    got = hierarchical_bootstrap(100 * col_a, 100 * col_b, n_boot=N_BOOT, seed=BOOT_SEED)
                    cell.update({f"top{k}_diff": got.diff, f"top{k}_ci_low": got.low, f"top{k}_ci_high": got.high,
                                 f"top{k}_p": got.p})
                out.setdefault(f"{pair}@s{common[0]}", {}).setdefault(dataset, {})[subset] = cell
    return out


def render_attention_bias(bias: Mapping) -> str:
    """Stage 01: position bias of the highest / lowest-attended entities and the entropy, per encoder."""
    out = ["#### Attention bias (stage 01)\n"]
    sampling = bias.get("sampling", {})
    if sampling:
        out.append(f"{sampling.get('sampled', '?')} passages sampled from a pool of {sampling.get('pool', '?'):,}"
                   + (f" ({sampling['excluded_test_gold']:,} test gold passages excluded)"
                      if sampling.get("excluded_test_gold") else "") + ".\n")
    rows = []
    for key, node in bias.get("encoders", {}).items():
        rows.append([_encoder_label(key), str(node.get("passages", "–")),
                     str(node.get("passages_with_enough_entities", node.get("n_passages", "–"))),
                     num(node.get("mean_entropy"), 2), num(_pct(node.get("mean_first_sentence_share"))),
                     _pct_ci(node, "highest_first_half"), _pct_ci(node, "lowest_second_half")])
    paper = bias.get("paper", {})
    if paper:
        rows.append(["paper (BERT-base DPR)", "–", "–", "–", "–", num(_pct(paper.get("highest_first_half"))),
                     num(_pct(paper.get("lowest_second_half")))])
    out.append(md_table(["encoder", "passages", "with enough entities", "entropy (nats)", "first-sentence share %",
                       "highest in 1st half %", "lowest in 2nd half %"], rows))
    return "\n".join(out)


def _encoder_label(key: str) -> str:
    """Short encoder names of 06's tables (``DPR``), else the Table 3 label."""
    return ENCODER_LABELS.get(key, label(key))


def _pct(x):
    return None if x is None else 100.0 * x


def _pct_ci(node: Mapping, key: str) -> str:
    ci = node.get(f"{key}_ci") or [None, None]
    return with_ci({"v": _pct(node.get(key)), "lo": _pct(ci[0]), "hi": _pct(ci[1])}, "v", "lo", "hi")


def render_encoder_comparison(comparison: Mapping) -> str:
    """The dense models on the same passages: entropy and later-sentence share with CIs, paired differences
    (points), and the Table 1 probe; the paper's numbers beside ours."""
    out = ["#### Attention of the dense models (notebook 06)\n"]
    setting = comparison.get("setting", {})
    if setting.get("passages"):
        first_only = (f" **The tables below are of the first training seed ({setting['dpr_training_seed']}) "
                      f"alone**, of {setting['dpr_training_seeds']}: every seed's value is in the last table, the "
                      "interval over the runs in the claims table." if (setting.get("dpr_training_seeds") or 1) > 1
                      and setting.get("dpr_training_seed") is not None else "")
        out.append(f"{setting['passages']} passages, every model on the same ones; 95% bootstrap CIs"
                   + (f" ({setting['n_boot']} resamples)" if setting.get("n_boot") else "") + f"; {EXPLORATORY}."
                   + first_only + "\n")
    if setting.get("note"):
        out.append(f"_{setting['note']}._\n")
    attention = comparison.get("attention", {})
    rows = []
    for key, node in attention.get("encoders", {}).items():
        rows.append([_encoder_label(key), str(node.get("entropy_n", "–")),
                     with_ci(node, "entropy", "entropy_ci_low", "entropy_ci_high", 2),
                     num(reported.ATTENTION["entropy"].get(key), 2),
                     with_ci(node, "later_sentence_share", "later_sentence_share_ci_low",
                         "later_sentence_share_ci_high")])
    if rows:
        out.append(md_table(["encoder", "n", "entropy (nats)", "paper entropy", "later-sentence share %"], rows))
    rows = []
    for pair, node in attention.get("paired", {}).items():
        a, _, b = pair.partition("_minus_")
        rows.append([f"{_encoder_label(a)} - {_encoder_label(b)}",
                     str(node.get("later_sentence_share_n", "–")),
                     with_ci(node, "entropy_diff", "entropy_ci_low", "entropy_ci_high", 3, signed=True)
                     + f", p {pval(node.get('entropy_p'))}",
                     with_ci(node, "later_sentence_share_diff", "later_sentence_share_ci_low",
                         "later_sentence_share_ci_high", 2, signed=True)
                     + f", p {pval(node.get('later_sentence_share_p'))}",
                     num(reported.ATTENTION["later_sentence_share_diff"].get(pair), 1, signed=True)])
    if rows:
        out.append("Paired over passages (A - B):\n")
        out.append(md_table(["pair", "n", "entropy diff (nats)", "later-sentence share diff (points)",
                           "paper (points)"], rows))
    probe = comparison.get("table1_probe", {})
    if probe:
        out.append("Table 1 probe: questions about each passage's highest- vs lowest-attended entity, scored against "
                   "their own passage with the retriever's score (the dot product; Poly-DPR: its best code). Levels "
                   "depend on the encoder (the profile's base here, BERT-base in the paper); the gap is what compares.\n")
        rows = []
        for key, node in probe.items():
            paper = reported.ATTENTION["table1_probe"].get(key, {})
            rows.append([_encoder_label(key), str(node.get("n_passages", "–")),
                         with_ci(node, "highest", "highest_ci_low", "highest_ci_high", 2),
                         with_ci(node, "lowest", "lowest_ci_low", "lowest_ci_high", 2),
                         with_ci(node, "difference", "difference_ci_low", "difference_ci_high", 2, signed=True)
                         + f", p {pval(node.get('difference_p'))}",
                         with_ci(node, "highest_wins", "highest_wins_ci_low", "highest_wins_ci_high"),
                         f"{paper['highest']} vs {paper['lowest']}" if paper else "–"])
        out.append(md_table(["encoder", "passages", "highest", "lowest", "gap", "highest wins %", "paper"], rows))
    seeds = comparison.get("seeds", {})
    if seeds.get("n_seeds", 0) > 1:
        out.append(render_seed_comparisons(seeds))
    return "\n".join(out)


SEED_MEASURE_LABELS = {"later_sentence_share": ("later-sentence share (points)", 2),
                       "entropy": ("entropy (nats)", 3), "difference": ("probe gap", 2)}


def render_seed_comparisons(seeds: Mapping) -> str:
    """Notebook 06's comparisons for every training seed: each seed's value with its p over passages, the seeds'
    mean and sd, and how many seeds agree in sign (and are significant) - the check one seed's p cannot make."""
    alpha, n = seeds.get("alpha", 0.05), seeds.get("n_seeds", 0)
    rows = []
    for branch, title in (("attention_paired", None), ("table1_probe", "Table 1 probe")):
        for name, node in seeds.get(branch, {}).items():
            a, sep, b = name.partition("_minus_")
            who = f"{_encoder_label(a)} - {_encoder_label(b)}" if sep else f"{_encoder_label(name)}, {title}"
            per_seed = {k: v for k, v in node.items() if k.startswith("s")}
            measures = [m for m in SEED_MEASURE_LABELS
                        if any(f"{m}_diff" in v or m in v for v in per_seed.values())]
            for measure in measures:
                key = measure if branch == "table1_probe" else f"{measure}_diff"
                what, digits = SEED_MEASURE_LABELS[measure]
                cells = "; ".join(f"{seed.removeprefix('s')}: {num(v.get(key), digits, signed=True)} "
                                  f"(p {pval(v.get(f'{measure}_p'))})" for seed, v in per_seed.items())
                across = node.get("across", {})
                rows.append([who, what, cells,
                             f"{num(across.get(f'{measure}_mean'), digits, signed=True)} ± "
                             f"{num(across.get(f'{measure}_sd'), digits)}",
                             f"{across.get(f'{measure}_same_sign', '–')} / {n}",
                             f"{across.get(f'{measure}_significant_same_sign', '–')} / {n}"])
    if not rows:
        return ""
    return (f"\nThe same comparisons for each of the {n} training seeds ({seeds.get('seeds', '')}): p over passages "
            f"within a seed (exploratory, uncorrected); mean ± sd over seeds; how many seeds have the sign of the mean, and how many of those "
            f"have p < {alpha:g} too.\n\n"
            + md_table(["comparison", "measure", "per seed", "mean ± sd over seeds", "same sign",
                        "same sign, p < alpha"], rows))
