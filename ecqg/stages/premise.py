"""The paper's premise measured on the current profile's gold-only DPR runs and its untrained base (issue 67):
``python -m ecqg.stages.premise`` writes ``results/premise/<base>.json`` (``naive`` for ``bundled:naive``, a
folder's name for a path) and rewrites ``results/premise/README.md`` from every base measured so far.

Run it after the profile's ``retrieve_dense@baseline-<seed>`` stages (``dvc repro retrieve_dense@baseline-2022``
...): it reads their models and NQ runs. What is measured, and why with the entity attention both summed and averaged
over word pieces: ``ecqg.stages.premise``. ``--page-only`` rewrites the page from the committed files alone.

The page, ``results/premise/README.md``, puts every measured base side by side. A premise row *holds* on a base when
its DPR's interval over training runs lies entirely on the paper's side of no effect (above 50% of passages, above a
zero probe gap, below a zero Top-k gap); *reversed* when it lies entirely on the other side; otherwise *not shown*.
The untrained base is one model: its interval is over units only.

Size: the measures and their page in one module, because the page's verdicts read the measures' own table
(:data:`MEASURES`: the paper's figure, the value of no effect, the paper's side).

The paper's premise, measured on a profile's gold-only DPR runs before any remedy is built on it (issue 67).

The method acts on one object: the [CLS] attention of a DPR passage encoder. The paper finds it biased (the
highest-attended entity in the first half of the passage 65% of the time, the lowest-attended in the second half
60%; Section 3) and the retriever worse on questions about the entities it attends to least (Table 1). This module
measures the same things on every training run of ``dpr_baseline`` and on the untrained base, each with the entity
attention aggregated two ways over an entity's word pieces:

* ``sum`` (the paper's and the pipeline's): the entity's attention is the sum over its pieces, so an entity of many
  pieces collects more; "least attended" can then mean "shortest";
* ``mean``: the mean over its pieces, which does not grow with the entity's length.

Measures, per model and aggregation: the two position shares (stage 01's passages); the pieces of the three
least-attended entities against all eligible ones; the Table 1 probe (cloze questions about each passage's highest-
and lowest-attended entity, scored against the passage by the model); and NQ Top-1 / 5 / 20 on the test questions
whose answer entity lies in the least- vs the most-attended third of its gold passage's entities, from the run's own
ranking. Over the runs: the t-interval of the runs' values with the units' noise added (``stats.one_sample_interval``).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ecqg.analysis.attention import cls_attention, entity_scores, select_entities
from ecqg.analysis.encoder_comparison import probe_scores
from ecqg.analysis.mechanism import answer_entity, attention_third
from ecqg.analysis.stats import one_sample_interval
from ecqg.core import cli, config, paths, settings, variants
from ecqg.core import paper as reported
from ecqg.core.bases import base_name, describe
from ecqg.core.device import host
from ecqg.core.io import write_json, write_text
from ecqg.core.logs import setup_logging
from ecqg.data.text import analyze
from ecqg.report.markdown import md_table, num
from ecqg.retrieval.evaluation import _answers_of, hit_matrix
from ecqg.retrieval.run_files import read_run
from ecqg.stages import dpr_training as dense
from ecqg.stages import located
from ecqg.stages.attention_bias import sample_passages
from ecqg.stages.results import load_passage_texts

log = logging.getLogger(__name__)

# How an entity's attention is taken over its word pieces, and how the page titles each.
AGGREGATIONS = {"sum": "summed over the entity's word pieces (the paper's, and what the pipeline conditions on)",
                "mean": "averaged over the entity's word pieces (an entity's length does not add to it)"}
KS = (1, 5, 20)
LEAST, MOST = "least attended", "most attended"


def aggregated(entities: pd.DataFrame, how: str) -> pd.DataFrame:
    """The entity table with ``attention`` as the sum over the entity's pieces (as measured) or their mean."""
    if how not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {tuple(AGGREGATIONS)}, not {how!r}")
    if how == "sum":
        return entities
    return entities.assign(attention=entities.attention / entities.n_pieces.clip(lower=1))


def _entity_frame(model, passages: Sequence[Mapping], analyses, batch_size: int) -> pd.DataFrame:
    attention = cls_attention(model, [p.get("title") or "" for p in passages], [p["text"] for p in passages],
                              batch_size)
    rows = [{"passage_id": p["id"], **row} for p, pa, an in zip(passages, attention, analyses)
            for row in entity_scores(pa, an.entities, len(p["text"]))]
    return pd.DataFrame(rows)


def position_units(selection: pd.DataFrame) -> pd.DataFrame:
    """Per passage with enough entities: its highest-attended entity in the first half, its (rank-1)
    lowest-attended entity in the second half (0/1), the way stage 01's ``position_bias`` counts them."""
    high = selection[selection.role == "highest"].set_index("passage_id").relative_position
    low = selection[(selection.role == "lowest") & (selection["rank"] == 1)].set_index("passage_id").relative_position
    return pd.DataFrame({"highest_first_half": (high < 0.5).astype(float),
                         "lowest_second_half": (low.reindex(high.index) >= 0.5).astype(float)})


def length_profile(entities: pd.DataFrame, selection: pd.DataFrame) -> dict:
    """Word pieces of the three least-attended entities against all eligible ones (passages with enough)."""
    chosen = set(selection.passage_id)
    eligible = entities[entities.eligible & entities.passage_id.isin(chosen)]
    lowest = selection[selection.role == "lowest"]
    return {"lowest3_pieces": float(lowest.n_pieces.mean()), "lowest3_single_piece": float((lowest.n_pieces == 1)
                                                                                           .mean()),
            "eligible_pieces": float(eligible.n_pieces.mean()),
            "eligible_single_piece": float((eligible.n_pieces == 1).mean())}


def lowest_sets_agree(sum_selection: pd.DataFrame, mean_selection: pd.DataFrame) -> float:
    """Share of passages whose three lowest-attended entities are the same set under both aggregations."""
    def sets(selection):
        low = selection[selection.role == "lowest"]
        return {pid: frozenset(g.entity) for pid, g in low.groupby("passage_id")}

    a, b = sets(sum_selection), sets(mean_selection)
    shared = a.keys() & b.keys()
    return float(np.mean([a[p] == b[p] for p in shared])) if shared else math.nan


def probe_gaps(model, selection: pd.DataFrame, passages: Mapping[str, Mapping], batch_size: int) -> np.ndarray:
    """Per passage with a question about both: the model's score of the question about its highest-attended entity
    minus that about its (rank-1) lowest-attended one; questions written by the cloze generator about each entity
    (one sample, seeded per passage and entity, as stage 02's probes)."""
    from ecqg.qg.cloze import Cloze  # transformers: kept out of --help

    picked = selection[(selection.role == "highest") | ((selection.role == "lowest") & (selection["rank"] == 1))]
    inputs = [{"passage_id": r.passage_id, "title": passages[r.passage_id].get("title") or "",
               "text": passages[r.passage_id]["text"], "entity": r.entity, "entity_start": int(r.start_char),
               "entity_label": r.label, "role": r.role} for r in picked.itertuples()]
    records, _ = Cloze.sample_records(Cloze.build(), inputs, seed=0, samples=1, conditioned=True, progress=False)
    role = {(i["passage_id"], i["entity"]): i["role"] for i in inputs}
    probes = [{**r, "role": role[(r["passage_id"], r["entity"])]} for r in records]
    if not probes:
        return np.zeros(0)
    scores = probe_scores({"m": model}, probes, list(passages.values()), batch_size)
    wide = scores.pivot_table(index="passage_id", columns="role", values="score", aggfunc="first").dropna()
    return (wide["highest"] - wide["lowest"]).to_numpy() if {"highest", "lowest"} <= set(wide) else np.zeros(0)


def answer_thirds(model, questions: Sequence[Mapping], locations: pd.DataFrame, analyses: Mapping,
                  passages: Mapping[str, Mapping], batch_size: int, min_entities: int) -> dict[str, list]:
    """Per aggregation, per question: the third (most / middle / least attended) of its gold passage's entities that
    its answer entity falls in under ``model``'s [CLS] attention, None where it has no such entity."""
    where = [i for i, r in enumerate(locations.itertuples()) if r.status == "ok"]
    matched = {i: answer_entity(analyses[locations.passage_id.iloc[i]], _answers_of(questions[i])) for i in where}
    todo = [i for i in where if matched[i] is not None]
    pids = [locations.passage_id.iloc[i] for i in todo]
    attention = cls_attention(model, [passages[p].get("title") or "" for p in pids],
                              [passages[p]["text"] for p in pids], batch_size)
    out = {how: [None] * len(questions) for how in AGGREGATIONS}
    for i, pid, pa in zip(todo, pids, attention):
        scores = entity_scores(pa, analyses[pid].entities, len(passages[pid]["text"]))
        for how in AGGREGATIONS:
            value = (lambda e: e["attention"]) if how == "sum" else (lambda e: e["attention"] / max(e["n_pieces"], 1))
            eligible = [j for j, e in enumerate(scores) if e["eligible"] and not math.isnan(e["attention"])]
            if matched[i] not in eligible or len(eligible) < min_entities:
                continue
            order = sorted(eligible, key=lambda j: (-value(scores[j]), scores[j]["start_char"]))
            out[how][i] = attention_third(order.index(matched[i]), len(eligible))
    return out


def _hits(system: str, questions: Sequence[Mapping], text_of: Mapping[str, str]) -> np.ndarray:
    hits = hit_matrix(read_run(paths.run_file(system, located.TEST_SET)), questions, text_of, max(KS))
    return np.stack([hits[:, :k].any(axis=1) for k in KS], axis=1).astype(float)


def slice_units(hits: np.ndarray, thirds: Sequence[str | None]) -> dict[str, np.ndarray]:
    """The Top-k hits (questions x k) of the questions in the least- and the most-attended third."""
    return {name: hits[[t == name for t in thirds]] for name in (LEAST, MOST)}


def measure_model(model, system: str, attention: settings.Attention, min_entities: int, study: Mapping,
                  nq: Mapping) -> dict:
    """Every unit-level value of one model (a run, or the untrained base), per aggregation. ``min_entities``:
    ``evaluation.mechanism.min_entities`` (07's entity-attention slices)."""
    batch = attention.batch_size
    entities = _entity_frame(model, study["passages"], study["analyses"], batch)
    out: dict = {"aggregations": {}}
    selections = {}
    for how in AGGREGATIONS:
        selection = select_entities(aggregated(entities, how), attention.lowest_entities, attention.min_entities)
        selections[how] = selection
        out["aggregations"][how] = {"position": position_units(selection),
                                    "lengths": length_profile(entities, selection),
                                    "probe": probe_gaps(model, selection, study["by_id"], batch)}
    out["lowest_sets_agree"] = lowest_sets_agree(selections["sum"], selections["mean"])
    thirds = answer_thirds(model, nq["questions"], nq["locations"], nq["analyses"], nq["passages"], batch,
                           min_entities)
    hits = _hits(system, nq["questions"], nq["text_of"])
    out["top_k"] = hits.mean(axis=0)
    for how in AGGREGATIONS:
        out["aggregations"][how]["slices"] = slice_units(hits, thirds[how])
    return out


def _mean_se(values: np.ndarray) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return (float(values.mean()) if len(values) else math.nan), math.nan
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values)))


def unit_value(kind: str, node: Mapping, k_index: int = 1) -> tuple[float, float, int]:
    """(value, its SE over units, units) of one model's measure ``kind``."""
    if kind in ("highest_first_half", "lowest_second_half"):
        column = node["position"][kind]
        return (*_mean_se(100 * column.to_numpy()), len(column))
    if kind == "probe":
        return (*_mean_se(node["probe"]), len(node["probe"]))
    least, most = (100 * node["slices"][s][:, k_index] for s in (LEAST, MOST))
    (a, sa), (b, sb) = _mean_se(least), _mean_se(most)
    return a - b, math.hypot(sa, sb), len(least) + len(most)


class Measure(NamedTuple):
    """One premise measure: its key, its label, the paper's figure, the value of no effect and the paper's
    direction (+1: the paper's effect lies above ``null``; -1: below)."""
    key: str
    label: str
    paper: str
    null: float
    direction: float


_PROBE = reported.ATTENTION["table1_probe"]["dpr_baseline"]
MEASURES = {m.key: m for m in (
    Measure("highest_first_half", "highest-attended entity in the first half, % of passages",
            f"{100 * reported.POSITION_BIAS['highest_first_half']:.0f}", 50.0, 1.0),
    Measure("lowest_second_half", "lowest-attended entity in the second half, % of passages",
            f"{100 * reported.POSITION_BIAS['lowest_second_half']:.0f}", 50.0, 1.0),
    Measure("probe", "Table 1 probe: score of the highest- minus the lowest-entity question",
            f"{_PROBE['highest'] - _PROBE['lowest']:+.1f}", 0.0, 1.0),
    *(Measure(f"top{k}_least_minus_most", f"NQ Top-{k}: least- minus most-attended answer entity, points", "< 0",
              0.0, -1.0) for k in KS))}


def summarise(per_model: Mapping[str, Sequence[Mapping]]) -> dict:
    """Per system (``untrained``: one model; ``dpr_baseline``: its runs) and aggregation, each measure: its value,
    the runs' values and the interval over runs (units' noise added), or for one model its bootstrap CI over
    units; the length profile and the share of passages whose least-attended sets agree."""
    out: dict = {}
    for system, runs in per_model.items():
        if not runs:
            continue
        node: dict = {"runs": len(runs),
                      "top_k": {f"top{k}": round(100 * float(np.mean([r["top_k"][i] for r in runs])), 2)
                                for i, k in enumerate(KS)},
                      "lowest_sets_agree": round(float(np.mean([r["lowest_sets_agree"] for r in runs])), 4)}
        for how in AGGREGATIONS:
            agg: dict = {"lengths": {k: round(float(np.mean([r["aggregations"][how]["lengths"][k] for r in runs])), 4)
                                     for k in runs[0]["aggregations"][how]["lengths"]}}
            for measure in MEASURES:
                kind, k_index = (measure, 1) if not measure.startswith("top") else \
                    ("slice", KS.index(int(measure[3:].split("_")[0])))
                values = [unit_value(kind, r["aggregations"][how], k_index) for r in runs]
                entry = {"value": round(float(np.mean([v for v, _, _ in values])), 4),
                         "runs": [round(v, 4) for v, _, _ in values], "units": values[0][2]}
                if len(runs) > 1:                 # p: against the measure's value of no effect (50% for shares)
                    null = MEASURES[measure].null
                    interval = one_sample_interval([v - null for v, _, _ in values],
                                                   float(np.nanmean([s for _, s, _ in values])))
                    entry.update(low=round(interval.low + null, 4), high=round(interval.high + null, 4),
                                 p=interval.p, null=null, method="t over runs + units")
                else:
                    value, se, _ = values[0]
                    entry.update(low=round(value - 1.96 * se, 4), high=round(value + 1.96 * se, 4),
                                 method="one model: normal over units")
                agg[measure] = entry
            node[how] = agg
        out[system] = node
    return out


def studied(attention: settings.Attention, test_sets: Mapping[str, str], seed: int) -> dict:
    """Stage 01's passages and their spaCy analyses (shared by every model measured)."""
    passages, sampling = sample_passages(attention, test_sets, seed)
    return {"passages": passages, "analyses": analyze([p["text"] for p in passages]),
            "by_id": {p["id"]: p for p in passages}, "sampling": sampling}


def nq_slices(data: settings.Data, retrieval: settings.Retrieval) -> dict:
    """NQ test questions with their gold passages located (07's inputs), and the corpus texts for the hits."""
    questions = located.nq_questions(data, retrieval)
    passages = located.gold_passage_records(questions)
    locations, analyses = located.locate(questions, passages)
    return {"questions": questions, "passages": passages, "locations": locations, "analyses": analyses,
            "text_of": load_passage_texts()}


def measure(s: settings.Params, seeds: Sequence[int] | None = None) -> dict:
    """The premise of a profile: the untrained base and every ``dpr_baseline`` run it has trained. Takes the whole
    tree: it runs stage 01's sample, 07's NQ slices and the dense models on one profile."""
    seeds = list(s.dpr.seeds if seeds is None else seeds)
    study, nq = studied(s.attention, s.data.test_sets, s.seed), nq_slices(s.data, s.retrieval)
    min_entities = s.evaluation.mechanism.min_entities
    per_model: dict[str, list] = {"untrained": [], "dpr_baseline": []}
    base = dense.base_retriever(s.dpr, kind_settings=dense.kind_block(s, s.dpr.model), attn_implementation="eager")
    per_model["untrained"].append(measure_model(base, variants.UNTRAINED_SYSTEM, s.attention, min_entities,
                                                study, nq))
    del base
    for seed in seeds:
        log.info("premise: DPR run of seed %d", seed)
        model = dense.load_model("baseline", s.dpr, seed, attn_implementation="eager")
        per_model["dpr_baseline"].append(measure_model(model, dense.system_name("baseline", seed), s.attention,
                                                       min_entities, study, nq))
        del model
    return {"setting": {"profile": s.profile, "base_model": s.dpr.base_model, "seeds": seeds,
                        "studied_passages": study["sampling"], "nq_questions": len(nq["questions"]),
                        "n_lowest": s.attention.lowest_entities, "min_entities": s.attention.min_entities},
            "systems": summarise(per_model)}


FOLDER = Path("results") / "premise"


# ======================================================================================== the page

def verdict(entry: Mapping, null: float, direction: float) -> str:
    low, high = entry.get("low"), entry.get("high")
    if low is None or high is None:
        return "–"
    if (low - null) * direction > 0 and (high - null) * direction > 0:
        return "holds"
    if (low - null) * direction < 0 and (high - null) * direction < 0:
        return "reversed"
    return "not shown"


def _cell(entry: Mapping | None, digits: int = 1) -> str:
    if not entry:
        return "–"
    return f"{num(entry['value'], digits)} [{num(entry['low'], digits)}, {num(entry['high'], digits)}]"


def load(folder: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(Path(folder).glob("*.json"))}


def render_page(folder: Path) -> str:
    results = load(folder)
    out = ["# The paper's premise, measured first\n",
           "_Generated by `python -m ecqg.stages.premise` from `results/premise/*.json`; do not edit by hand._\n",
           "The method remedies one thing: a DPR passage encoder's [CLS] attention that favours a few early entities, "
           "so that questions about the others are retrieved worse. Before a remedy is tested on a base, that must be "
           "measured on the base's own DPR. Each column is one base: its untrained checkpoint (one model: interval "
           "over units) and its DPR fine-tuned on the gold records to convergence (interval over training runs, the "
           "units' noise added; verdict: holds / reversed when that interval lies wholly on one side of no effect). "
           "Top-k rows use each run's own ranking of NQ test questions whose answer is a named entity of its gold "
           "passage, split by the thirds of that passage's entities ordered by the run's attention.\n"]
    if not results:
        return "\n".join(out) + "\nNo base measured yet.\n"
    out.append(md_table(["", *(f"`{name}`" for name in results)],
                        [["base", *(base_name(r["setting"]["base_model"]) for r in results.values())],
                         ["learned retrieval before", *(_learned(r) for r in results.values())],
                         ["DPR runs (seeds)", *(", ".join(map(str, r["setting"]["seeds"])) for r in results.values())],
                         ["NQ Top-1 / 5 / 20: untrained", *(_levels(r, "untrained") for r in results.values())],
                         ["NQ Top-1 / 5 / 20: DPR", *(_levels(r, "dpr_baseline") for r in results.values())],
                         ["passages studied", *(str(r["setting"]["studied_passages"]["sampled"])
                                               for r in results.values())],
                         ["host", *(r["setting"].get("host", {}).get("cpu", "?") for r in results.values())]],
                        ["l", *("r" for _ in results)]))
    for how, what in AGGREGATIONS.items():
        out.append(f"\n## Entity attention {what}\n")
        header = ["measure", "paper"]
        for name in results:
            header += [f"`{name}` untrained", f"`{name}` DPR", "verdict"]
        rows = []
        for key, label, paper, null, direction in MEASURES.values():
            row = [label, paper]
            for r in results.values():
                untrained = r["systems"]["untrained"][how].get(key)
                dpr = r["systems"]["dpr_baseline"][how].get(key)
                digits = 2 if key == "probe" else 1
                row += [_cell(untrained, digits), _cell(dpr, digits), verdict(dpr, null, direction) if dpr else "–"]
            rows.append(row)
        out.append(md_table(header, rows, ["l", "r"] + ["r", "r", "l"] * len(results)))
        lengths = []
        for name, r in results.items():
            for system in ("untrained", "dpr_baseline"):
                node = r["systems"][system][how]["lengths"]
                lengths.append([f"`{name}` {'untrained' if system == 'untrained' else 'DPR'}",
                                num(node["lowest3_pieces"], 2), f"{100 * node['lowest3_single_piece']:.0f}%",
                                num(node["eligible_pieces"], 2), f"{100 * node['eligible_single_piece']:.0f}%"])
        out.append("\nWhat \"least attended\" picks: word pieces of the three least-attended entities of a passage "
                   "against all its eligible entities:\n")
        out.append(md_table(["model", "least-attended 3: pieces", "single-piece", "all eligible: pieces",
                             "single-piece"], lengths))
    agree = [[f"`{name}`", *(f"{100 * r['systems'][s]['lowest_sets_agree']:.0f}%"
                             for s in ("untrained", "dpr_baseline"))] for name, r in results.items()]
    out.append("\nPassages whose three least-attended entities are the same under both aggregations:\n")
    out.append(md_table(["base", "untrained", "DPR (mean over runs)"], agree))
    return "\n".join(out).rstrip() + "\n"


def _learned(result: Mapping) -> str:
    base = describe(result["setting"]["base_model"])
    return "?" if base is None else ("yes" if base.learned_retrieval else "no")


def _levels(result: Mapping, system: str) -> str:
    top = result["systems"][system]["top_k"]
    return " / ".join(num(top[f"top{k}"]) for k in (1, 5, 20))


def base_slug(ref: str) -> str:
    """``bundled:naive`` -> ``naive``; a hub id or a path -> its last part."""
    return ref.rstrip("/").replace(":", "/").rsplit("/", 1)[-1]


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.stages.premise", __doc__, paragraphs=2)
    parser.add_argument("--seeds", type=int, nargs="*", help="the runs to measure (default: dpr.seeds)")
    parser.add_argument("--page-only", action="store_true", help="only rewrite README.md from the JSON files")
    args = parser.parse_args(argv)
    setup_logging()
    if not args.page_only:
        # the module's own measure, not __main__'s: its log lines name ecqg.stages.premise
        from ecqg.stages.premise import measure

        s = settings.of(config.load())
        result = measure(s, args.seeds)
        result["setting"]["host"] = host()
        write_json(FOLDER / f"{base_slug(s.dpr.base_model)}.json", result)
    write_text(FOLDER / "README.md", render_page(FOLDER))
    print(f"{FOLDER / 'README.md'} written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
