"""The report's section on the synthetic questions a profile's verdicts rest on: their quality against the method's
bar (``ecqg.qg.quality.BAR``) along the filter chain, beside real questions, with a sample of each set.

Why beside the claims table: a verdict about entity-conditioned pre-training means something only when the questions
it pre-trained on are questions about their passage; a reader should see what they were like before reading it.
Reads ``question_quality.json`` (stage 04; a run before it has none) and, for every profile, stage 02's held-out
quality and stage 03's filter settings (``question_generation.json``, ``filtering.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ecqg.qg import wellformed
from ecqg.qg.generators import by_construction, construction_note, describe
from ecqg.qg.quality import BAR
from ecqg.report.markdown import load_metrics, md_table
from ecqg.runtime.models import load_spacy

MEASURES = (("answer_in_passage", "answer in passage"), ("about_entity", "about its entity"),
            ("repeated_word", "word repeated back to back"), ("fragment", "fragment"),
            ("wh_type_agrees", "wh-type agrees"), ("duplicate", "duplicate"), ("words", "words"),
            ("passage_word_rate", "passage-word rate"))
REAL = "real questions"          # the reference row: real questions, not the generator's
BY_CONSTRUCTION = " ‡"           # beside a generator's value that holds by construction


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def _bar_text() -> str:
    return ", ".join(f"{label} {op} {100 * limit:.0f}%" for key, label in MEASURES if key in BAR
                     for op, limit in [BAR[key]])


def _cell(key: str, value, constructed: bool = False) -> str:
    if value is None:
        return "–"
    if constructed:
        return _cell(key, value) + BY_CONSTRUCTION
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


def _architecture(generation: Mapping | None) -> str | None:
    return (generation or {}).get("architecture") or None


def _generator_line(generation: Mapping | None, quality: Mapping | None) -> str:
    """Which generator wrote the questions (named for what it is: the registry's description), which measures hold
    by construction for it, and whether each replicate has its own set (the rows pool them)."""
    arch = _architecture(generation)
    if arch is None:
        return ""
    who = f"{describe(arch)} (`qg.architecture: {arch}`, base `{generation.get('model')}`)"
    held = [label for key, label in MEASURES if key in by_construction(arch)]
    if held:
        who += (f". For it, {', '.join(held)} hold **by construction** (marked{BY_CONSTRUCTION}): they say "
                "nothing about its questions; fragment and wh-type agreement can fail")
        if note := construction_note(arch):
            who += f" ({note})"
    sets = [k for k in generation.get("generation", {}) if k.startswith("uncon s")]
    pooled = (f" Each of the {len(sets)} replicates sampled, filtered and mixed its own sets; the rows pool them."
              if len(sets) > 1 else "")
    return f" Questions by {who}.{pooled}"


def _with_wellformed(quality: Mapping) -> tuple[list[dict], str]:
    """The quality rows with the fragment and wh-type measures; a run whose stage 04 predates them gets them from
    the questions its page prints, on the rows that have such a sample, and says so."""
    rows = [dict(r) for r in quality["rows"]]
    if all("fragment" in r for r in rows):
        return rows, ""
    nlp = load_spacy(disable=("lemmatizer",))
    samples = quality.get("samples", {})
    done = []
    for row in rows:
        sample = samples.get(row["set"]) if row["stage"] in ("training set", "reference (gold triples)") else None
        if "fragment" not in row and sample:
            row.update(wellformed.measures([r["question"] for r in sample], [r.get("answer", "") for r in sample],
                                           nlp))
            done.append(row["set"])
    return rows, ("this run predates the two checks: they are computed here from the "
                  f"{len(next(iter(samples.values()), []))} printed questions of "
                  + ", ".join(done) + ", and missing elsewhere") if done else ""


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
        held = by_construction(_architecture(generation)) if _architecture(generation) else frozenset()
        rows, from_samples = _with_wellformed(quality)
        table = [[r["set"], r["stage"], f"{r['questions']:,}",
                  *(_cell(k, r.get(k), k in held and r["set"] != REAL) for k, _ in MEASURES)] for r in rows]
        checked = sorted({r.get("checked") for r in rows if r.get("checked")})
        out.append(md_table(["set", "where", "questions", *(label for _, label in MEASURES)], table,
                            ["l", "l", "r"] + ["r"] * len(MEASURES)))
        out.append("Fragment: no finite verb, or unbalanced brackets or quotes; wh-type agrees: spaCy's entity label "
                   "of the answer read alone is one the question's wh-phrase asks for (among questions with a typed "
                   "wh-phrase); both on a random sample of each row"
                   + (f" ({' or '.join(map(str, checked))} questions)" if checked else "")
                   + (f"; {from_samples}" if from_samples else "") + " (`ecqg.qg.wellformed`).\n")
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


def what_varies(mixing: Mapping | None, shared: Mapping | None = None) -> str:
    """The sentence that says what differs between two runs of a synthetic arm, from stage 04's record of its sets
    (``mixing.json``: ``replicates`` names a set per seed where each run has its own), and what every run shares
    (``shared``: the other metrics, ``bias`` of stage 01 and ``filtering`` of stage 03, where given): the
    conditioning passages and their entity ranking, the reader and the hardness model are one for all replicates."""
    own = [name for name in (mixing or {}).get("replicates") or {} if name.startswith("s")]
    if len(own) > 1:
        text = (f"Between two runs of a synthetic arm its seed varies its sampled passages, its questions and the "
                f"filters' decisions on them ({len(own)} sets, each sampled, filtered and mixed with that seed), its "
                "pre-training and its fine-tuning.")
    elif own or mixing:
        text = ("Between two runs of a synthetic arm its pre-training and fine-tuning vary; its synthetic questions "
                "do not (one set" + (", sampled once" if not own else "") + ", read by every run).")
    else:
        return ""
    common = _shared_inputs(shared or {})
    return text + (f" Shared by every run: {common}." if common and len(own) > 1 else "")


def _shared_inputs(metrics: Mapping) -> str:
    """What the replicates of a synthetic arm all read (one model or one set for all of them)."""
    parts = []
    bias = metrics.get("bias") or {}
    conditioning = (bias.get("conditioning") or {}).get("passages")
    if conditioning:
        parts.append(f"the {conditioning:,} conditioning passages and their entities' attention ranking (stage 01, "
                     "from the first DPR run, one of the evaluated runs)")
    filtering = metrics.get("filtering") or {}
    if filtering.get("stage1_rule") not in (None, "none"):
        parts.append("the reader of the round trip (trained once)")
    model = (filtering.get("hardness") or {}).get("model")
    if model:
        parts.append(f"the hardness model ({model.split(' ')[0]})")
    return ", ".join(parts)
