"""The report's section on the synthetic questions a profile's verdicts rest on: their quality against the method's
bar (``ecqg.qg.quality.BAR``) along the filter chain, beside real questions, with a sample of each set.

Why beside the claims table: a verdict about entity-conditioned pre-training means something only when the questions
it pre-trained on are questions about their passage; a reader should see what they were like before reading it.
Reads ``question_quality.json`` (stage 04, from 3 Dec 2026) and, for every profile, stage 02's held-out quality and
stage 03's filter settings (``question_generation.json``, ``filtering.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ecqg.qg.quality import BAR
from ecqg.report.markdown import load_metrics, md_table

MEASURES = (("answer_in_passage", "answer in passage"), ("about_entity", "about its entity"),
            ("repeated_word", "word repeated back to back"), ("duplicate", "duplicate"), ("words", "words"),
            ("passage_word_rate", "passage-word rate"))


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def _bar_text() -> str:
    return ", ".join(f"{label} {op} {100 * limit:.0f}%" for key, label in MEASURES if key in BAR
                     for op, limit in [BAR[key]])


def _cell(key: str, value) -> str:
    if value is None:
        return "–"
    if key == "words":
        return f"{value:.1f}"
    if key == "passage_word_rate":
        return f"{value:.2f}"
    text = _pct(value)
    if key in BAR:
        op, limit = BAR[key]
        text += "" if (value >= limit if op == ">=" else value <= limit) else " ✗"
    return text


def _filter_line(filtering: Mapping | None) -> str:
    if not filtering:
        return ""
    mrc = filtering.get("mrc") or {}
    rule = filtering.get("stage1_rule")
    reader = (f"the reader's has-answer F1 on held-out SQuAD 2.0 is {mrc['has_ans_f1']:.1f}"
              if mrc.get("has_ans_f1") is not None else "the reader was not evaluated")
    hardness = filtering.get("hardness") or {}
    stage2 = (f" Stage 2 (hardness, `{hardness['rule']}`) scores with {hardness['model']}."
              if hardness.get("model") else "")
    if rule == "none":
        return (f"The round trip (stage 1) **did not run** here (`filtering.stage1: none`; {reader}): the hardness "
                "stage chose among all generated questions, so \"hardest\" kept the ones least related to their "
                "passage." + stage2)
    return f"Stage 1: `{rule}`; {reader} (the bar: 60).{stage2}"


def _generator_line(generation: Mapping | None, quality: Mapping | None) -> str:
    """Which generator wrote the questions, and whether each replicate has its own (the rows pool them)."""
    if not generation or not generation.get("architecture"):
        return ""
    arch = generation["architecture"]
    who = ("the rule-based cloze generator (`qg.architecture: cloze`: an answer span of the passage replaced by a "
           "wh-phrase of its type; answerable by construction, worded like its passage)" if arch == "cloze"
           else f"`{generation.get('model')}` as a `{arch}` generator")
    sets = [k for k in generation.get("generation", {}) if k.startswith("uncon s")]
    pooled = (f" Each of the {len(sets)} replicates sampled, filtered and mixed its own sets; the rows pool them."
              if len(sets) > 1 else "")
    return f" Questions by {who}.{pooled}"


def render_question_quality(metrics_dir: Path) -> str:
    """The section: the quality table along the filter chain (or, for a run before it existed, stage 02's held-out
    figures), the filter settings, and the sampled questions; empty when the profile has neither file."""
    quality = load_metrics(metrics_dir, "question_quality.json")
    generation = load_metrics(metrics_dir, "question_generation.json")
    filtering = load_metrics(metrics_dir, "filtering.json")
    out = ["#### The synthetic questions the verdicts rest on\n",
           f"The method's bar (`ecqg.qg.quality.BAR`, ✗ where missed): {_bar_text()}. "
           + _filter_line(filtering) + _generator_line(generation, quality) + "\n"]
    if quality:
        table = [[r["set"], r["stage"], f"{r['questions']:,}", *(_cell(k, r.get(k)) for k, _ in MEASURES)]
                 for r in quality["rows"]]
        out.append(md_table(["set", "where", "questions", *(label for _, label in MEASURES)], table,
                            ["l", "l", "r"] + ["r"] * len(MEASURES)))
        for name, records in quality.get("samples", {}).items():
            lines = [f"- {r['question']} → *{r.get('answer', '')}*" + (f" (entity: {r['entity']})"
                                                                         if r.get("entity") else "")
                     for r in records]
            out.append(f"<details><summary>{len(records)} random questions of {name}</summary>\n\n"
                       + "\n".join(lines) + "\n\n</details>\n")
    elif generation and generation.get("quality"):
        table = [[scheme, f"{q.get('kept', 0):,}", _cell("answer_in_passage", q.get("answer_in_passage_rate")),
                  _cell("about_entity", q.get("entity_mention_rate")), _cell("duplicate", q.get("duplicate_rate")),
                  _cell("passage_word_rate", q.get("passage_word_rate")),
                  _cell("passage_word_rate", q.get("reference_passage_word_rate"))]
                 for scheme, q in generation["quality"].items()]
        out.append("This run predates the quality table along the filter chain (`question_quality.json`, written by "
                   "stage 04 from 3 Dec 2026); stage 02's figures on held-out passages, before any filter:\n")
        out.append(md_table(["generator", "questions", "answer in passage", "about its entity", "duplicate",
                             "passage-word rate", "real questions' passage-word rate"], table,
                            ["l", "r", "r", "r", "r", "r", "r"]))
    else:
        return ""
    return "\n".join(out)


def what_varies(mixing: Mapping | None) -> str:
    """The sentence that says what differs between two runs of a synthetic arm, from stage 04's record of its sets
    (``mixing.json``: ``replicates`` names a set per seed where each run has its own)."""
    own = [name for name in (mixing or {}).get("replicates", {}) if name.startswith("s")]
    if len(own) > 1:
        return (f"Between two runs of a synthetic arm everything its seed reaches varies: its own synthetic questions "
                f"(sampled, filtered and mixed with that seed: {len(own)} sets), its pre-training and its "
                "fine-tuning.")
    if own or mixing:
        return ("Between two runs of a synthetic arm its pre-training and fine-tuning vary; its synthetic questions "
                "do not (one set" + (", sampled once" if not own else "") + ", read by every run).")
    return ""
