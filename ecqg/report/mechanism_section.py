"""The report's section on notebook 07: answer-position slices with PSI, entity-attention slices, moved-sentence
gaps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ecqg.analysis.mechanism import THIRDS
from ecqg.report.markdown import EXPLORATORY, TABLE3_ORDER, accuracy_cell, label, md_table, num, ordered, pval, with_ci
from ecqg.retrieval.probes import BUCKETS

MECHANISM_KS = (1, 5, 20)


def _slice_rows(accuracy: Mapping, slices: Sequence[str], k: int, extra=None) -> list[list[str]]:
    rows = []
    for system in ordered(accuracy, TABLE3_ORDER):
        node = accuracy[system]
        rows.append([label(system)] + [accuracy_cell(node[s], k) if s in node else "–" for s in slices]
                    + ([extra(system)] if extra else []))
    return rows


def _slice_header(accuracy: Mapping, slices: Sequence[str]) -> list[str]:
    n = {s: next((node[s]["n"] for node in accuracy.values() if s in node), "?") for s in slices}
    return [f"{s} (n={n[s]})" for s in slices]


def _paired_slice_rows(paired: Mapping, slices: Sequence[str], ks: Sequence[int]) -> list[list[str]]:
    rows = []
    for pair, by_slice in paired.items():
        a, _, b = pair.partition("_minus_")
        for s in slices:
            node = by_slice.get(s)
            if node is None:
                continue
            rows.append([f"{label(a)} - {label(b)}", s, str(node.get("n", "–"))]
                        + [f"{with_ci(node, f'top{k}_diff', f'top{k}_ci_low', f'top{k}_ci_high', signed=True)}, "
                           f"p {pval(node.get(f'top{k}_p'))}" if f"top{k}_diff" in node else "–" for k in ks])
    return rows


def render_mechanism(mech: Mapping) -> str:
    """Notebook 07: Top-k by answer position with PSI, by the baseline's attention to the answer entity, and the
    moved-sentence gaps, each with CIs and paired differences of the dense variants."""
    out = ["#### Where the method acts (notebook 07)\n"]
    setting = mech.get("setting", {})
    out.append(f"NQ test ({setting.get('questions', '?')} questions); dense rows are seed-means; 95% bootstrap CIs"
               + (f" ({setting['n_boot']} resamples)" if setting.get("n_boot") else "") + ".\n")
    gold = setting.get("gold_passages", {})
    if set(gold) - {"annotated"}:      # a test set without gold passages (DPR's csv): say where they came from
        out.append(f"Gold passages: {gold.get('annotated', 0)} annotated, {gold.get('bm25_first_answer', 0)} the "
                   "first passage of BM25's ranking that contains an answer (the test set names none), "
                   f"{gold.get('none', 0)} none.\n")
    position = mech.get("position", {})
    if position.get("accuracy"):
        counts = position.get("counts", {})
        left = {k: v for k, v in counts.items() if k not in BUCKETS and k != "ok"}
        out.append("**Answer position.** Questions by the sentence of their gold passage where an answer first "
                   f"occurs ({counts.get('ok', '?')} located"
                   + ("; left out: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(left.items()))
                      if left else "") + "). PSI = 1 - min / max accuracy over the buckets (0: position does not "
                   "matter), stratified bootstrap CI.\n")
        psi = position.get("psi", {})
        for k in MECHANISM_KS:
            slices = [b for b in BUCKETS if any(b in node for node in position["accuracy"].values())]
            if not any(f"top{k}" in node[s] for node in position["accuracy"].values() for s in slices if s in node):
                continue
            rows = _slice_rows(position["accuracy"], slices, k,
                               lambda system: with_ci(psi.get(system, {}), f"top{k}", f"top{k}_ci_low",
                                                  f"top{k}_ci_high", 3))
            out.append(f"Top-{k}:\n")
            out.append(md_table(["system"] + _slice_header(position["accuracy"], slices) + ["PSI"], rows))
        pairs = [(key, node) for key, node in psi.items() if "_minus_" in key]
        if pairs:
            out.append("PSI differences A - B (same questions resampled for both; negative: A less position-"
                       "sensitive):\n")
            rows = [[f"{label(key.partition('_minus_')[0])} - {label(key.partition('_minus_')[2])}"]
                    + [with_ci(node, f"top{k}", f"top{k}_ci_low", f"top{k}_ci_high", 3, signed=True)
                       + f", p {pval(node.get(f'top{k}_p'))}" for k in MECHANISM_KS] for key, node in pairs]
            out.append(md_table(["pair"] + [f"Top-{k}" for k in MECHANISM_KS], rows))
        if position.get("paired"):
            out.append(f"Paired differences per bucket (points [95% CI]; {EXPLORATORY}):\n")
            out.append(md_table(["pair", "answer in", "n"] + [f"Top-{k}" for k in MECHANISM_KS],
                              _paired_slice_rows(position["paired"], BUCKETS, MECHANISM_KS), ["l", "l"] + ["r"] * 4))
    entity = mech.get("entity_attention", {})
    if entity.get("accuracy"):
        counts = entity.get("counts", {})
        out.append("**Entity attention.** Questions whose answer is a named entity of its gold passage, by the "
                   "baseline DPR's [CLS] attention rank of that entity among the passage's entities (first training "
                   f"seed; at least {setting.get('min_entities', '?')} entities; "
                   + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(counts.items()) if k not in THIRDS)
                   + ").\n")
        slices = [t for t in THIRDS if any(t in node for node in entity["accuracy"].values())]
        for k in MECHANISM_KS:
            out.append(f"Top-{k}:\n")
            out.append(md_table(["system"] + _slice_header(entity["accuracy"], slices),
                              _slice_rows(entity["accuracy"], slices, k)))
        if entity.get("paired"):
            out.append(f"Paired differences per third (points [95% CI]; {EXPLORATORY}):\n")
            out.append(md_table(["pair", "answer entity", "n"] + [f"Top-{k}" for k in MECHANISM_KS],
                              _paired_slice_rows(entity["paired"], THIRDS, MECHANISM_KS), ["l", "l"] + ["r"] * 4))
    moved = mech.get("moved_sentence", {})
    if moved.get("systems"):
        counts = moved.get("counts", {})
        out.append("**Moved-sentence probe.** Each question scored against its gold passage with the answer sentence "
                   "moved to the front and to the end (dot product); gap = front - end: positive, the encoder prefers "
                   "the evidence early; negative, late; 0, position does not matter. "
                   f"{counts.get('probed', '?')} passages probed of {counts.get('eligible', '?')} eligible "
                   f"(answer in sentence 1: {counts.get('answer_in_sentence_1', '?')}; truncated by the encoder: "
                   f"{counts.get('truncated_by_encoder', '?')}).\n")
        rows = []
        for system in ordered(moved["systems"], TABLE3_ORDER):
            node = moved["systems"][system]
            gap = with_ci(node, "gap", "ci_low", "ci_high", 3, signed=True)
            if node.get("seeds", 1) > 1 and node.get("seed_sd") is not None:
                value, _, interval = gap.partition(" ")
                gap = f"{value} ± {num(node['seed_sd'], 3)} {interval}"
            rows.append([label(system), str(node.get("n", "–")), str(node.get("seeds", "–")), gap,
                         num(node.get("front_higher_pct"))])
        out.append(md_table(["system", "passages", "seeds", "gap (± sd over seeds) [95% CI]", "front higher %"], rows))
        if moved.get("paired"):
            rows = [[f"{label(key.partition('_minus_')[0])} - {label(key.partition('_minus_')[2])}",
                     str(node.get("n", "–")), with_ci(node, "gap", "ci_low", "ci_high", 3, signed=True)
                     + f", p {pval(node.get('p'))}"] for key, node in moved["paired"].items()]
            out.append("Gap differences A - B, paired per passage (A's gap minus B's; whether A is the less position-"
                       f"biased one depends on the sign of the gaps above; {EXPLORATORY}):\n")
            out.append(md_table(["pair", "passages", "gap difference [95% CI]"], rows))
    return "\n".join(out)
