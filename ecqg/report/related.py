"""README pieces for the related system (Luo et al. 2022) beyond Table 3: what Poly-DPR's codes do, and what the
generator-free ETM / RSM pre-training sets look like."""

from __future__ import annotations

from collections.abc import Mapping

from ecqg.report import evidence
from ecqg.report.markdown import label, md_table, num, pval, with_ci
from ecqg.analysis.stats import ONE_RUN, holm_checked, verdict


def _pct(x) -> str:
    return num(None if x is None else 100 * x)


def _n(x) -> str:
    """A count with thousands separators, ``?`` when the metrics lack it."""
    return f"{x:,}" if isinstance(x, int) else "?" if x is None else str(x)


def render_poly_codes(codes: Mapping) -> str:
    """Per code: attention entropy, later-sentence share, probe wins; and how alike the codes are."""
    out = ["#### Poly-DPR's codes\n",
           f"First training seed, K = {codes.get('codes_k', '?')}; attention on {codes.get('passages', '?')} studied "
           f"passages, wins on {codes.get('probe_questions', '?')} probe questions (the code that scores a question "
           "highest against its passage); `mean` = the codes' mean attention. Similarity: mean pairwise cosine of the "
           "codes and of a passage's K pooled vectors (near 1: the codes collapsed into one).\n"]
    for system, node in codes.get("systems", {}).items():
        sim = node.get("similarity", {})
        out.append(f"**{label(system)}** (similarity: " + ", ".join(f"{k} {num(v, 3)}" for k, v in sim.items())
                   + ")\n")
        rows = [[code, num(row.get("entropy"), 3), _pct(row.get("later_sentence_share")),
                 "–" if row.get("wins") is None else str(int(row["wins"]))] for code, row in node["codes"].items()]
        out.append(md_table(["code", "entropy (nats)", "later-sentence share %", "probe wins"], rows))
    return "\n".join(out)


def render_pseudo_sets(stage: Mapping) -> str:
    """The ETM / RSM sets: sizes, how they were made, and how lexically easy each kind of query is for BM25."""
    out = ["#### Generator-free pre-training sets (ETM / RSM)\n",
           f"Built over the `{stage.get('pool_set', 'uncon')}` set's passages, entry for entry (same passages, same "
           f"size), m = {stage.get('m', '?')} TF-IDF words per query; one BM25 hard negative each, never a passage "
           "of the positive's title.\n"]
    rows = []
    for kind in ("etm", "rsm"):
        node = stage.get(kind, {})
        rows.append([kind.upper(), str(stage.get("sizes", {}).get(kind, "–")), str(node.get("passages", "–")),
                     str(node.get("repeated_passage", "–")), str(node.get("short_queries", "–")),
                     num(node.get("mean_words")), str(node.get("negatives_same_title_skipped", "–")),
                     str(node.get("negatives_fewer_hard_negatives", "–"))])
    out.append(md_table(["set", "queries", "passages", "repeat of a passage", "short (RSM)", "words / query",
                         "same-title hits skipped", "without a negative"], rows))
    sweep = stage.get("sweep", {})
    if sweep:
        out.append("\nBM25 ranks the query's own passage first (%), by m, over the queries whose passage is in the "
                   "searched corpus; UnCon's generated questions for scale:\n")
        out.append(md_table(["queries", "BM25 top-1 %", "own passage in the corpus", "words / query"],
                            [[name, _pct(node.get("positive_bm25_top1")),
                              f"{node['positives_in_index']:,} of {node['queries']:,}" if "queries" in node else "–",
                              num(node.get("mean_words"))]
                             for name, node in sweep.items()]))
    return "\n".join(out)


# The comparisons the two papers make, each answered from Table 3's paired differences (A - B on the same questions).
QUESTIONS = (
    ("Architecture or data? (the 2 x 2 of Poly-DPR and Mixed pre-training)",
     (("dpr_poly_baseline", "dpr_baseline", "architecture: Poly-DPR - DPR"),
      ("dpr_mixed", "dpr_baseline", "data: Mixed-DPR - DPR"),
      ("dpr_poly_mixed", "dpr_mixed", "architecture given Mixed data: Mixed Poly-DPR - Mixed-DPR"),
      ("dpr_poly_mixed", "dpr_poly_baseline", "data given Poly-DPR: Mixed Poly-DPR - Poly-DPR"))),
    ("Does the question generator matter? (generated vs generator-free pre-training, same passages and size)",
     (("dpr_uncon", "dpr_etm", "UnCon-DPR - ETM-DPR"), ("dpr_uncon", "dpr_rsm", "UnCon-DPR - RSM-DPR"),
      ("dpr_mixed", "dpr_etm", "Mixed-DPR - ETM-DPR"), ("dpr_mixed", "dpr_rsm", "Mixed-DPR - RSM-DPR"),
      ("dpr_tempqg", "dpr_uncon", "TempQG-DPR - UnCon-DPR"), ("dpr_mixed", "dpr_tempqg", "Mixed-DPR - TempQG-DPR"),
      ("dpr_tempqg", "dpr_rsm", "TempQG-DPR - RSM-DPR"),
      ("dpr_tempqg_pre", "dpr_uncon_pre", "pre-training only: TempQG - UnCon"))),
    ("The related paper's best recipe (Poly-DPR pre-trained on RSM, then on TempQG's questions)",
     (("dpr_poly_rsm_tempqg", "dpr_poly_baseline", "Poly-DPR, RSM then TempQG - Poly-DPR"),
      ("dpr_poly_rsm_tempqg", "dpr_baseline", "Poly-DPR, RSM then TempQG - DPR"),
      ("dpr_poly_rsm_tempqg", "dpr_tempqg", "Poly-DPR, RSM then TempQG - TempQG-DPR"))),
)
COMPARISONS_FAMILY = "the comparisons of these tables"


def question_rows(table3: Mapping, dataset: str = "nq", subset: str = "all", ks: tuple[int, ...] = (1, 5, 20),
                  claims: list[dict] | None = None, ev=None) -> list[dict]:
    """Every pair of :data:`QUESTIONS` present in the metrics, at every k: its interval over training runs (from the
    per-run files ``ev`` where the profile has them, else :func:`ecqg.report.evidence.between_models`; None where an
    arm was trained once), the question-level bootstrap, and the verdict. A comparison that is a row of the claims
    table (``claims``) **is** that row: its interval, Holm p, family and verdict are reused, so no comparison gets two
    p-values; the others form one family of their own, Holm-corrected together."""
    paired, accuracy = table3.get("paired", {}), table3.get("accuracy", {})
    from_claims = {(r["pair"], r["k"]): r for r in claims or () if r.get("pair") and r.get("k")}
    rows = []
    for title, pairs in QUESTIONS:
        for a, b, name in pairs:
            node = paired.get(f"{a}_minus_{b}", {}).get(dataset, {}).get(subset)
            if node is None:
                continue
            for k in ks:
                if node.get(f"top{k}_diff") is None:
                    continue
                row = {"title": title, "name": name, "k": k, "n": node.get("n"), "node": node}
                claim = from_claims.get(((a, b), k)) if (dataset, subset) == ("nq", "all") else None
                if claim is not None:
                    row.update(arm_runs=claim["arm_runs"], runs=claim["runs"], family=claim["family"],
                               p_holm=claim["p_holm"])
                elif ev is not None and dataset == "nq" and subset == "all" and \
                        (got := evidence.topk_difference(ev, a, b, k)) is not None:
                    row.update(arm_runs=got.arm_runs, runs=got.interval)
                else:
                    arms = [evidence.arm(accuracy.get(s, {}).get(dataset, {}).get(subset), f"top{k}") for s in (a, b)]
                    row.update(arm_runs=tuple(x.runs if x else 1 for x in arms),
                               runs=evidence.between_models(*arms, node, f"top{k}", f"top{k}"))
                rows.append(row)
    own = [r for r in rows if "family" not in r]
    for row, p_holm in zip(own, holm_checked([r["runs"] for r in own])):
        row["family"], row["p_holm"] = COMPARISONS_FAMILY, p_holm
    words = {"holds": "A better", "reversed": "B better", "not shown": "no difference shown"}
    for row in rows:                # A - B's side of the verdict (a claims row predicts A > B: the same verdict)
        outcome = verdict(row["runs"], row["p_holm"], 1.0)
        row["verdict"] = words.get(outcome, outcome)
    return rows


def _cell(row: Mapping) -> str:
    k, node, interval = row["k"], row["node"], row["runs"]
    if interval is None:
        return (f"{with_ci(node, f'top{k}_diff', f'top{k}_ci_low', f'top{k}_ci_high', signed=True)} over questions, "
                f"{row['verdict']}")
    mark = " (claims row)" if row["family"] != COMPARISONS_FAMILY else ""
    return (f"{num(interval.diff, signed=True)} [{num(interval.low, signed=True)}, {num(interval.high, signed=True)}]"
            f", p {pval(row['p_holm'])}{mark}: {row['verdict']}")


def render_questions(table3: Mapping, dataset: str = "nq", subset: str = "all", ks: tuple[int, ...] = (1, 5, 20),
                     claims: list[dict] | None = None, ev=None) -> str:
    """Each question's pairs on one test set: the difference in points with its 95% interval over training runs and
    its Holm-corrected p, or, where an arm was trained once, the question-level interval and "one run" (no verdict
    about trained models). Cells that are claims rows carry the claims table's p and verdict (one comparison, one
    p-value); the others are one family."""
    rows = question_rows(table3, dataset, subset, ks, claims, ev)
    own = sum(r["runs"] is not None and r["family"] == COMPARISONS_FAMILY for r in rows)
    shared = sum(r["family"] != COMPARISONS_FAMILY for r in rows)
    out = []
    for title, _ in QUESTIONS:
        mine = [r for r in rows if r["title"] == title]
        if not mine:
            continue
        table = []
        for name in dict.fromkeys(r["name"] for r in mine):
            cells = {r["k"]: r for r in mine if r["name"] == name}
            first = next(iter(cells.values()))
            table.append([name, " v ".join(map(str, first["arm_runs"])), str(first.get("n", "–"))]
                         + [_cell(cells[k]) if k in cells else "–" for k in ks])
        family = (f"p Holm-corrected over the {own} tested {'cell' if own == 1 else 'cells'} of these tables outside "
                  "the claims table" if own else "")
        reused = (f"{'; ' if family else ''}{shared} cell{'s are' if shared != 1 else ' is'} a row of the claims table "
                  "and carr" + ("y" if shared != 1 else "ies") + " its p (Holm over the claims table) and verdict"
                  if shared else "")
        out.append(f"**{title}** ({dataset.upper()} {subset}; points [95% CI over training runs]; {family}{reused}; "
                   f"\"{ONE_RUN}\": an arm trained once, shown over questions only, no verdict)\n")
        out.append(md_table(["A - B", "runs", "n"] + [f"Top-{k}" for k in ks], table, ["l"] + ["r"] * (2 + len(ks))))
    return ("#### The questions the comparisons answer\n\n" + "\n".join(out)) if out else ""


def render_tempqg(stage: Mapping) -> str:
    """TempQG (stage tempqg): the templates, the selector's accuracy, the generator's quality beside UnCon's, and
    the set's funnel."""
    t, sel, sset = stage.get("templates", {}), stage.get("selector", {}), stage.get("set", {})
    out = ["#### TempQG: template-conditioned questions (Luo et al. 2022)\n",
           f"Templates of {_n(t.get('questions'))} training questions: {_n(t.get('with_blank'))} with a "
           f"blanked entity, {_n(t.get('distinct_templates'))} distinct, {_n(t.get('clusters'))} clusters "
           f"({_n(t.get('singleton_clusters'))} of one question, the largest {_n(t.get('largest_cluster'))}); "
           f"the selector chooses among {_n(t.get('candidates'))} clusters holding "
           f"{_pct(t.get('candidate_share'))}% of the questions. Largest:\n"]
    out.append(md_table(["template", "questions", "members (first 3)"],
                        [[e["template"], str(e["questions"]), "; ".join(e["members"])]
                         for e in t.get("examples", [])[:5]], ["l", "r", "l"]))
    out.append(f"\nSelector (Poly-DPR, {_n(sel.get('pairs'))} training pairs): top-1 {_pct(sel.get('top1'))}%, "
               f"top-5 {_pct(sel.get('top5'))}% on {_n(sel.get('n'))} held-out pairs over {_n(sel.get('templates'))} "
               f"templates; always the largest cluster: {_pct(sel.get('largest_cluster_top1'))}%.\n")
    quality = stage.get("quality", {})
    rows = [[name, str(q.get("kept", "–")), num(q.get("bleu4"), 2), num(q.get("rougeL_f")),
             _pct(q.get("answer_in_passage_rate")), num(q.get("template_mean_similarity"), 3),
             _pct(q.get("template_follows_template"))]
            for name, q in (("TempQG", quality.get("tempqg", {})), ("UnCon", quality.get("uncon", {})))]
    out.append("Generated questions on stage 02's held-out passages (adherence: each question's own template "
               "against the selector's template for its passage):\n")
    out.append(md_table(["generator", "questions", "BLEU-4", "ROUGE-L", "answer in passage %",
                         "template similarity", "follows the template %"], rows))
    out.append(f"\nThe set: {_n(sset.get('generated'))} questions sampled for {_n(sset.get('distinct_passages'))} "
               f"passages, {_n(sset.get('after_stage1'))} after stage 1 ({_n(sset.get('stage1_rule'))}), "
               f"{_n(sset.get('after_stage2'))} after the hardness cut, {_n(sset.get('after_dedupe'))} after "
               f"removing test questions and duplicates; {_n(sset.get('size'))} of the UnCon set's "
               f"{_n(sset.get('uncon_entries'))} entries got one ({_n(sset.get('entries_without_question'))} "
               "did not).\n")
    return "\n".join(out)
