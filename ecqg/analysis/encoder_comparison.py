"""The paper's attention analysis of the dense models (DPR, UnCon-DPR, Mixed-DPR; ETM / RSM-DPR beside them) and its
Table 1 probe.

Why a module of its own: stage 01 studies ONE encoder in depth (entities, positions); the results stage asks whether
pre-training on entity-conditioned questions spread the passage encoder's attention. That needs every model measured
on the SAME passages, so differences can be paired passage by passage (a paired bootstrap removes the large
between-passage variance that would otherwise swamp effects of one or two points).

Measures (definitions of ``ecqg.analysis.attention``: last-layer [CLS] attention, renormalised over the TEXT word pieces):

* ``entropy``: token-level attention entropy in nats (paper: DPR 3.97, UnCon-DPR 3.80, Mixed-DPR 4.10). It grows
  with the number of pieces (uniform = log n), so only comparisons on the same passages mean anything.
* ``later_sentence_share``: attention mass on sentences 2.. of the text over the text mass (= 1 - first-sentence
  share), NaN when fewer than two sentences were encoded. The paper reports Mixed-DPR "+1.8% over DPR, +1.1% over
  UnCon-DPR" on later sentences without saying whether that is absolute or relative; it is read here as percentage
  points of this share (``ecqg.core.paper.ATTENTION``), and our differences are reported in points.
* ``first_sentence_mean`` / ``later_sentence_mean``: mean per-piece attention (length-independent), as in stage 01.

Table 1 probe: conditioned questions about each studied passage's highest- and lowest-attended entity (stages 02/03),
scored by each bi-encoder against their own passage with its own similarity (dot product of [CLS] vectors). Absolute
scores depend on the encoder (the paper's BERT-base DPR vs the MiniLM here, different vector norms), so only the
highest-minus-lowest gap, and the share of passages where the highest-entity question wins, carry over.

``encoder_comparison.json`` (written with :func:`write_metrics`, read by ``ecqg.stages.report``), scalar leaves only so
``dvc metrics show/diff`` work; shares and their differences in percent / percentage points, entropy in nats::

    {"setting": {"passages": int, "n_boot": int, "seed": int, "confidence": float, ...caller's keys},
     "attention": {
        "encoders": {"<encoder>": {"entropy": f, "entropy_ci_low": f, "entropy_ci_high": f, "entropy_n": int,
                                   "later_sentence_share": f, ..._ci_low, ..._ci_high, ..._n,
                                   "first_sentence_mean": f, ..., "later_sentence_mean": f, ...}},
        "paired":   {"<a>_minus_<b>": {"entropy_diff": f, "entropy_ci_low": f, "entropy_ci_high": f,
                                       "entropy_p": f, "entropy_n": int,
                                       "later_sentence_share_diff": f, ..._ci_low, _ci_high, _p, _n, ...}}},
     "table1_probe": {"<encoder>": {"n_passages": int, "n_questions": int, "highest": f, "highest_ci_low": f,
                                    "highest_ci_high": f, "lowest": f, "lowest_ci_low": f, "lowest_ci_high": f,
                                    "difference": f, "difference_ci_low": f, "difference_ci_high": f,
                                    "difference_p": f, "highest_wins": f, "highest_wins_ci_low": f,
                                    "highest_wins_ci_high": f}},
     "seeds": {"n_seeds": int, "seeds": "2022, 2023, 2024", "alpha": f,          # every training seed's models
               "attention_paired": {"<a>_minus_<b>": {"s<seed>": {"<measure>_diff": f, ..._ci_low, _ci_high, _p, _n},
                                                      "across": {"<measure>_mean": f, _sd, _min, _max, _same_sign,
                                                                 _significant_same_sign}}},
               "table1_probe": {"<encoder>": {"s<seed>": {"difference": f, ...}, "across": {"difference_mean": f,
                                                                                           ...}}}},
     "paper": ecqg.core.paper.ATTENTION (string keys)}

Encoder keys are the run-file system names (``dpr_baseline``, ``dpr_uncon``, ``dpr_mixed``);
``ecqg.analysis.labels.ENCODER_LABELS`` names them for display.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ecqg.core import variants
from ecqg.core import paper as reported
from ecqg.analysis import stats
from ecqg.core.errors import DataFormatError
from ecqg.core.io import write_json

log = logging.getLogger(__name__)

DEFAULT_PAIRS = tuple(variants.paper_pairs())   # the paper's orderings: UnCon - DPR, Mixed - UnCon, Mixed - DPR
ROLES = ("highest", "lowest")

# Summary measures: frame column -> (unit, scale applied in the summary).
MEASURES = {"entropy": ("nats", 1.0), "later_sentence_share": ("%", 100.0),
            "first_sentence_mean": ("per-piece", 1.0), "later_sentence_mean": ("per-piece", 1.0)}


# ===================================================================================================== attention
def compare_attention(models: Mapping[str, object], passages: Sequence[Mapping], batch_size: int = 32,
                      progress: bool = False, spacy_batch_size: int = 64,
                      sentences: Sequence[Sequence] | None = None) -> pd.DataFrame:
    """One row per (encoder, passage): entropy, first / later sentence shares, per-piece means, text share.

    ``models``: encoder key -> ``BiEncoder`` loaded with ``attn_implementation="eager"``. The spaCy sentence split
    runs once for all models (it depends on the text only); ``ecqg.analysis.attention.analyze_passages`` would redo it and
    the entity scoring per model, which this comparison does not need, so its building blocks are used instead.
    ``sentences``: the split of an earlier call on the same passages (``sentence_split``), to measure more models
    (another training seed's) without splitting again.
    """
    # torch / transformers / spaCy are imported where used, so the report can read this module's constants cheaply.
    from ecqg.analysis.attention import _checked_passages, attention_entropy, cls_attention, sentence_shares

    if not models:
        raise ValueError("compare_attention: no models given")
    ids, titles, texts = _checked_passages(passages)
    if sentences is None:
        sentences = sentence_split(passages, spacy_batch_size)
    elif len(sentences) != len(texts):
        raise ValueError(f"compare_attention: {len(sentences)} sentence splits for {len(texts)} passages")
    rows = []
    for key, model in models.items():
        for pid, pa, sents in zip(ids, cls_attention(model, titles, texts, batch_size, progress=progress), sentences):
            shares = sentence_shares(pa.attention, pa.offsets, pa.sequence_ids, sents)
            n_text = int(pa.text_mask.sum())
            rows.append({
                "encoder": key, "passage_id": pid, "n_text_tokens": n_text, "truncated": pa.truncated,
                "text_share": float(pa.attention[pa.text_mask].sum()),
                "entropy": attention_entropy(pa.attention, pa.text_mask),
                "max_entropy": math.log(n_text) if n_text else float("nan"),
                "n_sentences": shares.n_sentences,
                "first_sentence_share": shares.first_sentence_share,
                "later_sentence_share": 1.0 - shares.first_sentence_share if shares.n_sentences >= 2
                else float("nan"),
                "first_sentence_mean": shares.first_sentence_mean,
                "later_sentence_mean": shares.later_sentence_mean,
            })
    return pd.DataFrame(rows)


def sentence_split(passages: Sequence[Mapping], spacy_batch_size: int = 64) -> list:
    """spaCy's sentences of each passage's text (``ecqg.data.text.analyze``), as ``compare_attention`` uses them."""
    # attention brings torch, data.text pyserini: kept out so the report reads this module's constants cheaply
    from ecqg.analysis.attention import _checked_passages
    from ecqg.data.text import analyze

    _, _, texts = _checked_passages(passages)
    start = time.perf_counter()
    sentences = [a.sentences for a in analyze(texts, batch_size=spacy_batch_size)]
    log.info("sentence_split: spaCy sentences for %d passages in %.1f s", len(texts), time.perf_counter() - start)
    return sentences


def _wide(frame: pd.DataFrame, value: str, encoders: Sequence[str]) -> pd.DataFrame:
    """passage x encoder table of one measure, restricted to passages finite for every encoder (paired design)."""
    if frame.duplicated(["encoder", "passage_id"]).any():
        raise ValueError("attention frame has repeated (encoder, passage_id) rows")
    wide = frame.pivot(index="passage_id", columns="encoder", values=value).reindex(columns=list(encoders))
    return wide.dropna()


def _mean_ci(values: np.ndarray, n_boot: int, seed: int, confidence: float) -> tuple[float, float, float]:
    lo, hi = stats.bootstrap_ci(np.asarray(values, dtype=float)[:, None], n_boot, seed, confidence)
    mean = float(np.mean(values)) if len(values) else float("nan")
    return mean, float(lo[0]), float(hi[0])


def paired_mean_difference(diff: np.ndarray, n_boot: int = 10000, seed: int = 0,
                           confidence: float = 0.95) -> dict:
    """Mean of per-item differences with a percentile CI and a two-sided bootstrap p-value.

    The same recipe as ``ecqg.analysis.tables.paired_bootstrap`` (null-centred resamples, +1 correction), which only
    takes 0/1 hits; here the differences are real-valued (attention shares, dot-product scores).
    """
    diff = np.asarray(diff, dtype=float)
    means = stats.bootstrap_means(diff, n_boot, seed)
    if means is None:
        nan = float("nan")
        return {"n": 0, "difference": nan, "ci_low": nan, "ci_high": nan, "p_value": nan}
    observed, boot = float(diff.mean()), means[:, 0]
    alpha = (1.0 - confidence) / 2.0
    return {"n": len(diff), "difference": observed, "ci_low": float(np.quantile(boot, alpha)),
            "ci_high": float(np.quantile(boot, 1.0 - alpha)), "p_value": stats.null_centred_p(boot, observed)}


def attention_summary(frame: pd.DataFrame, reference_pairs: Sequence[tuple[str, str]] | None = None,
                      n_boot: int = 2000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per-encoder means and paired differences (A - B over the same passages), tidy, with CIs and p-values.

    Rows: ``kind`` "encoder" (``encoder``, ``value`` = mean) or "paired" (``encoder`` = A, ``reference`` = B,
    ``value`` = mean difference, ``p_value``); ``measure`` names the column, ``unit`` its unit (shares in %,
    differences in points). Each measure uses the passages where it is finite for every encoder, so the encoder
    means and their differences are over one set of passages (``n``). Pairs naming an absent encoder are skipped;
    ``None`` means ``DEFAULT_PAIRS``. The paper's value sits in ``paper`` where it reports one.
    """
    encoders = list(dict.fromkeys(frame.encoder))
    pairs = [(a, b) for a, b in (DEFAULT_PAIRS if reference_pairs is None else reference_pairs)
             if a in encoders and b in encoders]
    rows = []
    for measure, (unit, scale) in MEASURES.items():
        wide = _wide(frame, measure, encoders) * scale
        for enc in encoders:
            mean, lo, hi = _mean_ci(wide[enc].to_numpy(), n_boot, seed, confidence)
            paper = reported.ATTENTION["entropy"].get(enc) if measure == "entropy" else None
            rows.append({"kind": "encoder", "measure": measure, "unit": unit, "encoder": enc, "reference": None,
                         "n": len(wide), "value": mean, "ci_low": lo, "ci_high": hi, "p_value": float("nan"),
                         "paper": paper})
        for a, b in pairs:
            res = paired_mean_difference((wide[a] - wide[b]).to_numpy(), n_boot, seed, confidence)
            paper = reported.ATTENTION["later_sentence_share_diff"].get(f"{a}_minus_{b}") \
                if measure == "later_sentence_share" else None
            rows.append({"kind": "paired", "measure": measure, "unit": "points" if unit == "%" else unit,
                         "encoder": a, "reference": b, "n": res["n"], "value": res["difference"],
                         "ci_low": res["ci_low"], "ci_high": res["ci_high"], "p_value": res["p_value"],
                         "paper": paper})
    return pd.DataFrame(rows)


# ======================================================================================================= probe
def _checked_probes(probes: Sequence[Mapping], passage_ids: set[str]) -> list[Mapping]:
    out = []
    for i, p in enumerate(probes):
        for field in ("passage_id", "role", "question"):
            if field not in p:
                raise DataFormatError("<probes>", i, field, "missing")
        if p["role"] not in ROLES:
            raise DataFormatError("<probes>", i, "role", f"must be one of {ROLES}, got {p['role']!r}")
        if not isinstance(p["question"], str) or not p["question"].strip():
            raise DataFormatError("<probes>", i, "question", "must be a non-empty string")
        if str(p["passage_id"]) not in passage_ids:
            raise DataFormatError("<probes>", i, "passage_id", f"'{p['passage_id']}' is not among the passages")
        out.append(p)
    return out


def probe_scores(models: Mapping[str, object], probes: Sequence[Mapping], passages: Sequence[Mapping],
                 batch_size: int = 32, progress: bool = False) -> pd.DataFrame:
    """Each probe question scored by each retriever against its own passage with its retrieval score (the dot
    product for DPR; the best of its vectors for a multi-vector retriever).

    ``probes``: records with ``passage_id``, ``role`` ("highest" | "lowest"), ``question`` (``entity`` and ``id``
    kept when present); ``passages``: ``{id, title, text}``. Only the passages the probes name are encoded.
    """
    # dense brings torch and FAISS
    from ecqg.retrieval.dense import encode_passages, encode_queries

    if not models:
        raise ValueError("probe_scores: no models given")
    by_id = {str(p["id"]): p for p in passages if "id" in p}
    probes = _checked_probes(probes, set(by_id))
    needed = list(dict.fromkeys(str(p["passage_id"]) for p in probes))
    row_of = {pid: i for i, pid in enumerate(needed)}
    which = np.array([row_of[str(p["passage_id"])] for p in probes], dtype=np.int64)
    questions = [p["question"] for p in probes]
    rows = []
    for key, model in models.items():
        q = encode_queries(model, questions, batch_size, progress=progress)
        _, v = encode_passages(model, [by_id[pid] for pid in needed], batch_size, progress=progress)
        scores = model.pair_scores(q, v[which]) if len(probes) else np.zeros(0)
        for p, score in zip(probes, scores):
            rows.append({"encoder": key, "passage_id": str(p["passage_id"]), "role": p["role"],
                         "entity": p.get("entity"), "question_id": p.get("id"), "question": p["question"],
                         "score": float(score)})
    return pd.DataFrame(rows, columns=["encoder", "passage_id", "role", "entity", "question_id", "question",
                                       "score"])


def probe_summary(frame: pd.DataFrame, n_boot: int = 2000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per encoder: mean score of highest- vs lowest-entity questions, their paired gap, and how often the
    highest-entity question wins, over passages that have both (paper, BERT-base DPR: 73.7 vs 72.1).

    Several questions for one passage and role are averaged first, so every passage weighs the same; the gap is the
    mean of per-passage differences (paired CI and p-value); ``highest_wins`` is the % of passages where the
    highest-entity mean is strictly larger. Absolute scores are encoder-specific; compare gaps, not levels.
    """
    rows = []
    for enc, group in frame.groupby("encoder", sort=False):
        per = group.pivot_table(index="passage_id", columns="role", values="score", aggfunc="mean")
        per = per.reindex(columns=list(ROLES)).dropna()
        high, low = per["highest"].to_numpy(), per["lowest"].to_numpy()
        h, h_lo, h_hi = _mean_ci(high, n_boot, seed, confidence)
        lo_, l_lo, l_hi = _mean_ci(low, n_boot, seed, confidence)
        gap = paired_mean_difference(high - low, n_boot, seed, confidence)
        w, w_lo, w_hi = _mean_ci(100.0 * (high > low), n_boot, seed, confidence)
        paper = reported.ATTENTION["table1_probe"].get(enc, {})
        rows.append({"encoder": enc, "n_passages": len(per),
                     "n_questions": int(group.passage_id.isin(per.index).sum()),
                     "highest": h, "highest_ci_low": h_lo, "highest_ci_high": h_hi,
                     "lowest": lo_, "lowest_ci_low": l_lo, "lowest_ci_high": l_hi,
                     "difference": gap["difference"], "difference_ci_low": gap["ci_low"],
                     "difference_ci_high": gap["ci_high"], "difference_p": gap["p_value"],
                     "highest_wins": w, "highest_wins_ci_low": w_lo, "highest_wins_ci_high": w_hi,
                     "paper_highest": paper.get("highest"), "paper_lowest": paper.get("lowest")})
    return pd.DataFrame(rows)


# ============================================================================================= training seeds
SEED_MEASURES = ("entropy", "later_sentence_share")     # the attention measures compared seed by seed


def seed_rows(attention_by_seed: Mapping[int, pd.DataFrame],
              probe_by_seed: Mapping[int, pd.DataFrame] | None = None) -> pd.DataFrame:
    """What each training seed's models show, one tidy frame: the paired attention differences (the "paired" rows of
    ``attention_summary``, ``SEED_MEASURES`` only) and the Table 1 probe gaps (``probe_summary``).

    Why: a CI over passages says how sure one seed's models are, not how far another fine-tuning seed would move
    them; the claims compare models, so each seed's comparison is kept and ``across_seeds`` sets them side by side.
    Columns: ``kind`` ("attention" | "probe"), ``name`` (``<a>_minus_<b>`` or the encoder), ``measure`` (the
    attention measure, "difference" for the probe gap), ``seed``, ``n``, ``value``, ``ci_low``, ``ci_high``,
    ``p_value``.
    """
    rows = []
    for seed, summary in attention_by_seed.items():
        paired = summary[(summary.kind == "paired") & summary.measure.isin(SEED_MEASURES)]
        for r in paired.itertuples():
            rows.append({"kind": "attention", "name": f"{r.encoder}_minus_{r.reference}", "measure": r.measure,
                         "seed": int(seed), "n": int(r.n), "value": r.value, "ci_low": r.ci_low,
                         "ci_high": r.ci_high, "p_value": r.p_value})
    for seed, probe in (probe_by_seed or {}).items():
        for r in probe.itertuples():
            rows.append({"kind": "probe", "name": r.encoder, "measure": "difference", "seed": int(seed),
                         "n": int(r.n_passages), "value": r.difference, "ci_low": r.difference_ci_low,
                         "ci_high": r.difference_ci_high, "p_value": r.difference_p})
    return pd.DataFrame(rows, columns=["kind", "name", "measure", "seed", "n", "value", "ci_low", "ci_high",
                                       "p_value"])


def across_seeds(rows: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per (kind, name, measure) of ``seed_rows``: the seeds' mean, sd (n - 1; NaN for one seed), min and max of the
    per-seed values, how many seeds have the sign of the mean (``same_sign``) and how many of those are also
    significant at ``alpha`` within their seed (``significant_same_sign``). "3 of 3, each p < .05" is the
    statement a single seed's p-value cannot make."""
    out = []
    for (kind, name, measure), group in rows.groupby(["kind", "name", "measure"], sort=False):
        values = group.value.to_numpy(dtype=float)
        mean = float(values.mean())
        sign = np.sign(values) == np.sign(mean)
        out.append({"kind": kind, "name": name, "measure": measure, "seeds": len(values), "mean": mean,
                    "sd": float(values.std(ddof=1)) if len(values) > 1 else float("nan"),
                    "min": float(values.min()), "max": float(values.max()), "same_sign": int(sign.sum()),
                    "significant_same_sign": int((sign & (group.p_value.to_numpy(dtype=float) < alpha)).sum())})
    return pd.DataFrame(out, columns=["kind", "name", "measure", "seeds", "mean", "sd", "min", "max", "same_sign",
                                      "significant_same_sign"])


def seeds_tree(rows: pd.DataFrame, alpha: float = 0.05) -> dict:
    """The ``seeds`` node of ``encoder_comparison.json``: per comparison, one node per seed (``s<seed>``, the same
    keys as the first seed's node, so ``ecqg.report.agreement`` reads them) and ``across`` (``across_seeds``)."""
    seeds = sorted({int(s) for s in rows.seed})
    tree: dict = {"n_seeds": len(seeds), "seeds": ", ".join(map(str, seeds)), "alpha": alpha,
                  "attention_paired": {}, "table1_probe": {}}
    for r in rows.itertuples():
        if r.kind == "attention":
            node = tree["attention_paired"].setdefault(r.name, {}).setdefault(f"s{r.seed}", {})
            key = r.measure
            node[f"{key}_diff"] = _r(r.value)
        else:
            node = tree["table1_probe"].setdefault(r.name, {}).setdefault(f"s{r.seed}", {})
            key = "difference"
            node[key] = _r(r.value)
        node[f"{key}_ci_low"], node[f"{key}_ci_high"] = _r(r.ci_low), _r(r.ci_high)
        node[f"{key}_p"], node[f"{key}_n"] = _r(r.p_value), int(r.n)
    for r in across_seeds(rows, alpha).itertuples():
        branch = tree["attention_paired" if r.kind == "attention" else "table1_probe"]
        node = branch[r.name].setdefault("across", {})
        for stat in ("mean", "sd", "min", "max"):
            node[f"{r.measure}_{stat}"] = _r(getattr(r, stat))
        node[f"{r.measure}_same_sign"] = int(r.same_sign)
        node[f"{r.measure}_significant_same_sign"] = int(r.significant_same_sign)
    return tree


# ===================================================================================================== metrics
def _r(x, digits: int = 6):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


def metrics_tree(summary: pd.DataFrame | None = None, probe: pd.DataFrame | None = None,
                 setting: Mapping | None = None, seeds: pd.DataFrame | None = None) -> dict:
    """The ``encoder_comparison.json`` layout (module docstring) from the two summary tables (either may be None)
    and, where given, ``seed_rows`` of every training seed (the ``seeds`` node, ``seeds_tree``)."""
    tree: dict = {"setting": dict(setting or {}), "attention": {"encoders": {}, "paired": {}}, "table1_probe": {}}
    if summary is not None:
        for r in summary.itertuples():
            if r.kind == "encoder":
                node = tree["attention"]["encoders"].setdefault(r.encoder, {})
                node[r.measure] = _r(r.value)
            else:
                node = tree["attention"]["paired"].setdefault(f"{r.encoder}_minus_{r.reference}", {})
                node[f"{r.measure}_diff"] = _r(r.value)
                node[f"{r.measure}_p"] = _r(r.p_value)
            node[f"{r.measure}_ci_low"], node[f"{r.measure}_ci_high"] = _r(r.ci_low), _r(r.ci_high)
            node[f"{r.measure}_n"] = int(r.n)
    if probe is not None:
        for r in probe.to_dict("records"):
            tree["table1_probe"][r["encoder"]] = {
                k: (int(v) if k.startswith("n_") else _r(v)) for k, v in r.items()
                if k != "encoder" and not k.startswith("paper_")}
    if seeds is not None and len(seeds):
        tree["seeds"] = seeds_tree(seeds)
    tree["paper"] = reported.ATTENTION
    return tree


def write_metrics(summary: pd.DataFrame | None, probe: pd.DataFrame | None, setting: Mapping, path: Path,
                  seeds: pd.DataFrame | None = None) -> Path:
    return write_json(path, metrics_tree(summary, probe, setting, seeds))
