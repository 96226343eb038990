"""dvc.yaml, written from the variant table and from the code each stage runs: ``python -m ecqg.tooling.dag write``.

Why generated: the dense retrievers are one table (:mod:`ecqg.core.variants`), and each of them needs a pre-training, a
fine-tuning and two retrieval stages whose paths, parameters and dependencies follow from its entry; and every stage
must depend on every project module it imports (else DVC would call a stale result "up to date"), which only the
code itself can say. So both are derived here, and ``python -m ecqg.tooling.dag check`` (run by ``make test``) fails when
dvc.yaml is not what this module writes for params.yaml. Which variants get stages is ``dpr.variants`` (a profile
may train a subset: the smoke DAG, a three-system paper run), so the file is written for params.yaml's selection:
``make profile`` and ``make repro`` rewrite it. Seed lists and doses stay DVC ``matrix`` axes over params
(``${dpr.seeds}``), so ``dvc exp run -S 'dpr.seeds=[...]'`` works without rewriting the file.

Stage names (``ecqg.core.variants.block``): ``pretrain_<variant>@<seed>`` and ``finetune_<variant>@<seed>``, shared by
the variants of a group (``finetune_pseudo@etm-2022``); retrieval one block per seed list
(``retrieve_dense@mixed-2022``, ``retrieve_dense_related@tempqg-2022``; ``retrieve_pretrained@uncon-2022`` for a
model right after pre-training); the dose curve's ``pretrain_dose@uncon-10000-2022`` / ``retrieve_dose@...``.
Code dependencies: the import closure of the stage's module or notebook (function-level and relative imports
included, :mod:`ecqg.tooling.code_deps`), a library room standing for its modules.

Size: one module, because its bulk is the stage declarations, one function per part of the pipeline: the DAG in one
place.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from ecqg.core import cli, config, paths, schemes, settings, variants
from ecqg.core.settings import retrievers
from ecqg.core.io import write_text
from ecqg.tooling.code_deps import REPO
from ecqg.tooling.dag_file import (DVC_YAML, Stage, flow, hand_edited, prune_lock, render_stage, signed,
                                   untracked_code_files)

NOTEBOOK_05 = "05_dpr_training"
PROFILE = "${profile}"


# ================================================================================================ stages
def _nocache(path: str) -> dict:
    """An output DVC records but does not cache (metrics, plots, notebooks kept in git). Resumable training state
    (``outputs/checkpoints/<run>/<fingerprint>/``) is not an output at all: a ``persist: true`` output keeps a stage
    out of DVC's run cache, so switching back to an earlier experiment or profile would retrain; undeclared, and
    keyed by the fingerprint of what the run trains on, it is resumed only by the run it belongs to."""
    return {path: {"cache": False}}


def _metric(name: str) -> dict:
    return _nocache(f"results/{PROFILE}/{name}")




MODEL_PARAMS = ["dpr.model", "dpr.base_model", "dpr.shared_encoders", "dpr.pooling", "dpr.query_max_length",
                "dpr.passage_max_length"]
RETRIEVE_PARAMS = ["seed", "retrieval.depth", "dpr.encode", "dpr.index"]
FIRST_SEED = "${dpr.seeds[0]}"
ENCODED_CORPUS = [str(paths.CORPUS), str(paths.TOKENIZED_CORPUS)]   # the text (ids, count) and its word pieces


def _seed_axis(variant: variants.Variant) -> str:
    return "${dpr." + variants.SEED_LISTS[variant.seeds] + "}"     # SEED_LISTS: the field of the dpr block


def _axes(variant: variants.Variant, members: Sequence[variants.Variant], phase: str) -> tuple[dict, str, str]:
    """(matrix, the variant's name in the stage, the seed) of the block running ``phase`` for ``members``."""
    if variants.shares_block(phase, variant):
        return {"variant": [m.name for m in members], "seed": _seed_axis(variant)}, "${item.variant}", "${item.seed}"
    return {"seed": _seed_axis(variant)}, variant.name, "${item.seed}"


def _training_outs(run: str, tag: str) -> tuple[list, list]:
    """Outputs and metrics of one notebook-05 run (``run``: dpr_<variant>[_pre]_s<seed>)."""
    outs = [f"{paths.MODELS}/{run}", f"{paths.NOTEBOOKS_OUT}/{NOTEBOOK_05}.{tag}.ipynb",
            f"{paths.FIGURES}/05.{tag}",
            _nocache(f"results/{PROFILE}/plots/training/{run}.csv"),
            _nocache(f"results/{PROFILE}/plots/validation/{run}.csv")]
    return outs, [_metric(f"{run}_training.json"), _metric(f"stage_05_dpr_training.{tag}.json")]


def _set_deps(variant: variants.Variant, per_replicate: bool) -> list[str]:
    """The sets a pre-training block reads: replicate ``${item.seed}``'s own where stages 02-04 run per replicate
    (``qg.generate.per_replicate``)."""
    if variants.group(variant):                                     # one set per member, named like it
        dirs = {variants.SETS[s].path.parent for s in variant.pretrain}
        return [f"{d}/${{item.variant}}.json" for d in sorted(dirs)]
    return [str(variants.set_path(s, "${item.seed}", per_replicate)) for s in variant.pretrain]


def _kind_params(variant: variants.Variant) -> list[str]:
    block = retrievers.settings_block(variant.kind) if variant.kind else None
    return [block] if block else []


def pretrain_stage_block(variant: variants.Variant, members: Sequence[variants.Variant], per_replicate: bool
                         ) -> Stage:
    """The pre-training block of ``members`` (``per_replicate``: ``qg.generate.per_replicate``, which sets it reads)."""
    matrix, name, seed = _axes(variant, members, "pretrain")
    run = f"dpr_{name}_pre_s{seed}"
    tag = f"{name}-pre-{seed}"
    outs, metrics = _training_outs(run, tag)
    return Stage(variants.block("pretrain", variant),
                 f"python -m ecqg.tooling.notebook {NOTEBOOK_05} --tag {tag} -p variant {name} -p training_seed {seed} "
                 "-p phase pretrain",
                 [f"notebooks/{NOTEBOOK_05}.ipynb", *_set_deps(variant, per_replicate)],
                 ["seed", *MODEL_PARAMS, "dpr.pretrain", *_kind_params(variant)], outs, metrics, matrix,
                 comment=f"{', '.join(m.label for m in members)}: synthetic pre-training, one per replicate")


def finetune_stage_block(variant: variants.Variant, members: Sequence[variants.Variant]) -> Stage:
    matrix, name, seed = _axes(variant, members, "finetune")
    run = f"dpr_{name}_s{seed}"
    outs, metrics = _training_outs(run, f"{name}-{seed}")
    start = [f"{paths.MODELS}/dpr_{name}_pre_s{seed}"] if variant.pretrained else []
    return Stage(variants.block("finetune", variant), f"python -m ecqg.tooling.notebook {NOTEBOOK_05} --tag {name}-{seed} "
                 f"-p variant {name} -p training_seed {seed}",
                 [f"notebooks/{NOTEBOOK_05}.ipynb", *start, str(paths.GOLD_DPR), str(paths.NQ_DEV_DISTANT),
                  str(paths.CORPUS), str(paths.QUESTIONS), f"{paths.RUNS}/bm25"],
                 ["seed", *MODEL_PARAMS, "dpr.finetune", *_kind_params(variant)], outs, metrics, matrix,
                 comment=f"{', '.join(m.label for m in members)}: fine-tuned on the gold data"
                         + (" from its pre-trained model" if variant.pretrained else ""))


def retrieve_stage_block(variant: variants.Variant, members: Sequence[variants.Variant], pre: bool) -> Stage:
    matrix, name, seed = _axes(variant, members, "retrieve_pre" if pre else "retrieve")
    model = f"{name}{variants.PRE_SUFFIX}" if pre else name
    return Stage(variants.block("retrieve_pre" if pre else "retrieve", variant),
                 f"python -m ecqg.stages.retrieve_dense {model} --seed {seed}",
                 [f"{paths.MODELS}/dpr_{model}_s{seed}", *ENCODED_CORPUS, str(paths.QUESTIONS)], RETRIEVE_PARAMS,
                 [f"{paths.RUNS}/dpr_{model}_s{seed}", f"{paths.DENSE_INDEXES}/{model}_s{seed}"],
                 [_metric(f"stage_retrieve_dense_{model}-{seed}.json")], matrix,
                 comment=f"{', '.join(m.label for m in members)}"
                         + (" right after pre-training" if pre else "") + ": every test set searched")


def dose_stages(per_replicate: bool) -> list[Stage]:
    """The dose curve: UnCon and Mixed pre-trained on their sets cut to each size of ``mixing.doses`` (replicate
    ``${item.seed}``'s sets where they are per replicate: ``qg.generate.per_replicate``), and searched with right
    after pre-training (their fine-tuned rows are the main variants, at ``mixing.total``)."""
    matrix = {"set": list(variants.DOSED_SETS), "size": "${mixing.doses}", "seed": "${dpr.seeds}"}
    name, seed = "${item.set}_d${item.size}", "${item.seed}"
    run, tag = f"dpr_{name}_pre_s{seed}", f"{name}-pre-{seed}"
    outs, metrics = _training_outs(run, tag)
    model = f"{name}{variants.PRE_SUFFIX}"
    return [
        Stage("pretrain_dose", f"python -m ecqg.tooling.notebook {NOTEBOOK_05} --tag {tag} -p variant {name} "
              f"-p training_seed {seed} -p phase pretrain",
              [f"notebooks/{NOTEBOOK_05}.ipynb", str(variants.dose_set("${item.set}", "${item.size}").at(
                  seed if per_replicate else None))],
              ["seed", *MODEL_PARAMS, "dpr.pretrain"], outs, metrics, matrix,
              comment="the dose curve: UnCon / Mixed pre-trained on their sets cut to each of mixing.doses"),
        Stage("retrieve_dose", f"python -m ecqg.stages.retrieve_dense {model} --seed {seed}",
              [f"{paths.MODELS}/dpr_{model}_s{seed}", *ENCODED_CORPUS, str(paths.QUESTIONS)], RETRIEVE_PARAMS,
              [f"{paths.RUNS}/dpr_{model}_s{seed}", f"{paths.DENSE_INDEXES}/{model}_s{seed}"],
              [_metric(f"stage_retrieve_dense_{model}-{seed}.json")], matrix,
              comment="...and searched with right after pre-training"),
    ]


def dense_stages(dpr: settings.Dpr, qg: settings.Qg, table: Sequence[variants.Variant] | None = None) -> list[Stage]:
    """Every trained variant's training blocks in table order (``dpr.variants``), then the retrieval blocks (one per
    seed list), then the dose curve's (``qg.generate.per_replicate``: which sets they read)."""
    table = variants.trained(dpr, variants.TABLE if table is None else table)
    per_replicate = qg.generate.per_replicate
    def grouped(phase: str, members: Iterable[variants.Variant]) -> dict[str, list[variants.Variant]]:
        out: dict[str, list[variants.Variant]] = {}
        for v in members:
            out.setdefault(variants.block(phase, v), []).append(v)
        return out

    out = []
    for phase in ("pretrain", "finetune"):
        for members in grouped(phase, [v for v in table if phase != "pretrain" or v.pretrained]).values():
            block = (pretrain_stage_block(members[0], members, per_replicate) if phase == "pretrain" else
                     finetune_stage_block(members[0], members))
            out.append((table.index(members[0]), phase == "finetune", block))
    out = [stage for *_, stage in sorted(out, key=lambda x: (x[0], x[1]))]
    out.append(Stage("retrieve_untrained", "python -m ecqg.stages.retrieve_dense untrained",
                     [*ENCODED_CORPUS, str(paths.QUESTIONS)], [*RETRIEVE_PARAMS, *MODEL_PARAMS],
                     [f"{paths.RUNS}/{variants.UNTRAINED_SYSTEM}", f"{paths.DENSE_INDEXES}/{variants.UNTRAINED}"],
                     [_metric("stage_retrieve_dense_untrained.json")],
                     comment="the base checkpoint, not fine-tuned (Table 3's untrained row)"))
    for pre in (False, True):
        phase = "retrieve_pre" if pre else "retrieve"
        for members in grouped(phase, [v for v in table if v.pretrained or not pre]).values():
            out.append(retrieve_stage_block(members[0], members, pre))
    return out + dose_stages(per_replicate)


def _notebook(number: str, name: str, deps: list, param_keys: list, outs: list, metrics: list,
              comment: str = "") -> Stage:
    """A notebook's stage; ``param_keys``: the params keys DVC tracks for it."""
    nb = f"{number}_{name}"
    return Stage(name if number not in ("06", "07") else {"06": "results", "07": "mechanism"}[number],
                 f"python -m ecqg.tooling.notebook {nb}", [f"notebooks/{nb}.ipynb", *deps], param_keys,
                 [*outs, f"{paths.NOTEBOOKS_OUT}/{nb}.ipynb", f"{paths.FIGURES}/{number}",
                  _nocache(f"results/{PROFILE}/notebooks/{nb}.ipynb")],
                 [*(_metric(m) for m in metrics), _metric(f"stage_{nb}.json")], comment=comment)


BASELINE_MODEL = f"{paths.MODELS}/dpr_baseline_s{FIRST_SEED}"
BASELINE_INDEX = f"{paths.DENSE_INDEXES}/baseline_s{FIRST_SEED}"
CORPUS_AND_POOL = [str(paths.CORPUS), str(paths.POOL_EXTRA)]


def data_stages() -> list[Stage]:
    """What comes before the dense retrievers: intake, the sparse indexes and runs, the gold training data."""
    return [
        Stage("input_test_set", "python -m ecqg.stages.input_test_set ${item} outputs/inputs/test_set_${key}.json",
              ["${item}"], outs=["outputs/inputs/test_set_${key}.json"], foreach="${data.test_sets}",
              comment="input_test_set@nq, ...: every test set params names is a dependency, wherever it lives"),
        Stage("prepare", "python -m ecqg.stages.prepare",
              ["${data.corpus}", "${data.train_gold}", "${data.nq_dev}", str(paths.INPUTS)], ["seed", "data"],
              [str(paths.PREPARED)], [_metric("stage_prepare.json")],
              comment="the bundle (or DPR's files) in one schema, sub-sampled per profile"),
        Stage("index_bm25", "python -m ecqg.stages.index_bm25", [str(paths.CORPUS)], ["bm25.threads"],
              [str(paths.BM25_INDEX)], [_metric("stage_index_bm25.json")]),
        Stage("index_tfidf", "python -m ecqg.stages.index_tfidf", [str(paths.CORPUS)], ["tfidf"],
              [str(paths.TFIDF_INDEX)], [_metric("stage_index_tfidf.json")]),
        Stage("tokenize_corpus", "python -m ecqg.stages.tokenize_corpus", [str(paths.CORPUS)],
              ["dpr.base_model", "dpr.passage_max_length"], [str(paths.TOKENIZED_CORPUS)],
              [_metric("stage_tokenize_corpus.json")],
              comment="the corpus tokenised once for every dense encoding (Arrow, memory-mapped)"),
        Stage("retrieve", "python -m ecqg.stages.retrieve ${item}", ["outputs/indexes/${item}", str(paths.QUESTIONS)],
              ["${item}", "retrieval.depth"], [f"{paths.RUNS}/${{item}}"], [_metric("stage_retrieve_${item}.json")],
              foreach=["bm25", "tfidf"]),
        Stage("training_data", "python -m ecqg.stages.training_data",
              [str(paths.BM25_INDEX), str(paths.NQ_DEV), str(paths.TRAIN_GOLD), str(paths.TRAIN_GOLD_DPR),
               str(paths.CORPUS)], ["bm25", "distant"], [str(paths.GOLD_DPR), str(paths.NQ_DEV_DISTANT)],
              [_metric("stage_training_data.json")],
              comment="gold DPR training data: annotated triples and distantly supervised NQ dev, BM25 negatives"),
    ]


def _replicate_params(per_replicate: bool) -> list[str]:
    """Stages 02-04 run once per seed of ``dpr.seeds`` where sets are per replicate (``qg.generate.per_replicate``):
    the list is their parameter."""
    return ["dpr.seeds"] if per_replicate else []


def _generated_deps(per_replicate: bool) -> list[str]:
    """Stage 02's question files; where there is one per replicate, its whole output folder (the seed list is then
    the stages' parameter, and dvc.yaml stays the same whatever the seeds)."""
    if per_replicate:
        return [str(paths.QG)]
    return [str(paths.generated_file(g)) for g in schemes.of_stage()]


def _kept_deps(per_replicate: bool) -> list[str]:
    """Stage 03's survivors (as above: its output folder where they are per replicate)."""
    if per_replicate:
        return [str(paths.FILTERING)]
    return [str(paths.kept_file(g)) for g in schemes.of_stage()]


def synthetic_stages(dpr: settings.Dpr, qg: settings.Qg) -> list[Stage]:
    """The paper's synthetic data (01-04: per replicate or not, ``qg.generate.per_replicate``) and the related
    system's (pseudo-queries, TempQG: where a variant of ``dpr.variants`` pre-trains on their sets)."""
    per_replicate = qg.generate.per_replicate
    stages = [
        _notebook("01", "attention_bias", [BASELINE_MODEL, *CORPUS_AND_POOL, str(paths.QUESTIONS)],
                  ["seed", "attention", "dpr.model", "dpr.base_model", "dpr.pooling", "dpr.passage_max_length",
                   "evaluation.bootstrap_samples"], [str(paths.ATTENTION)], ["attention_bias.json"],
                  "the first replicate's DPR: which entities its [CLS] attends to, and where"),
        _notebook("02", "question_generation", [str(paths.TRAIN_GOLD), str(paths.TRAIN_GOLD_DPR), *CORPUS_AND_POOL,
                                                str(paths.QUESTIONS), str(paths.QG_ENTITIES)],
                  ["seed", "qg", "attention.exclude_test_gold", "attention.probe_passages",
                   *_replicate_params(per_replicate)],
                  [str(paths.QG)],
                  ["question_generation.json"], "the unconditioned and entity-conditioned generators"),
        _notebook("03", "filtering", ["${data.mrc_unanswerable}", *_generated_deps(per_replicate), str(paths.QG_PROBES),
                                      str(paths.TRAIN_GOLD), *CORPUS_AND_POOL, BASELINE_MODEL, BASELINE_INDEX],
                  ["seed", "data.mrc_unanswerable", "mrc", "filtering", "qg.generate.per_replicate",
                   *_replicate_params(per_replicate)], [str(paths.FILTERING)], ["filtering.json"],
                  "round trip through a reader, then the hard ones for the first replicate's DPR"),
        _notebook("04", "mixing", [*_kept_deps(per_replicate), str(paths.FILTER_DECISIONS), str(paths.TRAIN_GOLD),
                                   *CORPUS_AND_POOL, str(paths.QUESTIONS), str(paths.BM25_INDEX)],
                  ["seed", "mixing", "qg.generate.per_replicate", *_replicate_params(per_replicate)],
                  [str(paths.SYNTHETIC)],
                  ["mixing.json", "question_quality.json"],
                  "the UnCon and Mixed sets (and their doses), BM25 hard negatives"),
    ]
    if variants.builds("pseudo_queries", dpr):
        stages.append(Stage(
            "pseudo_queries", "python -m ecqg.stages.pseudo_queries",
            [str(variants.SETS["uncon"].path), *CORPUS_AND_POOL, str(paths.BM25_INDEX)],
            ["seed", "pseudo", "bm25.k1", "bm25.b"], [str(paths.PSEUDO)], [_metric("stage_pseudo_queries.json")],
            comment="ETM / RSM pseudo-queries (Luo et al. 2022, §5) over UnCon's passages"))
    if variants.builds("tempqg", dpr):
        stages.append(_notebook(
            "08", "tempqg",
            [str(paths.TRAIN_GOLD), str(paths.TRAIN_GOLD_DPR), *CORPUS_AND_POOL, str(paths.QUESTIONS),
             f"{paths.QG_MODELS}/uncon", str(variants.SETS["uncon"].path), str(paths.MRC_MODEL), BASELINE_MODEL,
             BASELINE_INDEX, str(paths.BM25_INDEX), f"results/{PROFILE}/question_generation.json"],
            ["seed", "qg", "tempqg", "polydpr", "dpr.base_model", "dpr.shared_encoders", "dpr.pooling",
             "dpr.query_max_length", "dpr.passage_max_length", "dpr.encode", "dpr.pretrain.heldout",
             "dpr.pretrain.batch_size", "mrc", "filtering", "bm25.k1", "bm25.b", "data.test_sets"],
            [str(paths.TEMPQG)], ["tempqg.json"],
            "TempQG (Luo et al. 2022, §4): templates, selector, template-conditioned questions"))
    return stages


# The per-run evidence files (ecqg.analysis.run_evidence) 06 and 07 commit, which the report's intervals read.
EVIDENCE_06 = ("evidence/ranks.parquet", "evidence/passages.parquet")
EVIDENCE_07 = ("evidence/mechanism.parquet", "evidence/slices.parquet")


def analysis_stages(dpr: settings.Dpr) -> list[Stage]:
    """Hybrids, 06 (Table 3, attention), 07 (mechanism) and the generated results page (which related-system files
    they read: the stages ``dpr.variants`` builds)."""
    pseudo = variants.builds("pseudo_queries", dpr)
    pseudo_deps = [str(paths.PSEUDO), f"results/{PROFILE}/stage_pseudo_queries.json"] if pseudo else []
    results = _notebook("06", "results_and_attention_entropy",
                        [str(paths.RUNS), str(paths.MODELS), str(paths.FILTERED_PROBES),
                         str(variants.SETS["uncon"].path), *pseudo_deps, str(paths.QUESTIONS), *CORPUS_AND_POOL],
                        ["evaluation.ks", "evaluation.bootstrap_samples", "evaluation.confidence", "seed", "attention",
                         "dpr.seeds", "dpr.related_seeds", "dpr.variants", "hybrid.variants", "pseudo",
                         "polydpr.codes", "mixing.doses"],
                        [_nocache(f"results/{PROFILE}/plots/topk"), *(_nocache(f"results/{PROFILE}/{name}")
                                                                    for name in EVIDENCE_06)],
                        ["table3.json", "encoder_comparison.json", "poly_codes.json", "finetune_curve.json"],
                        "Table 3 over every replicate, the dense models' attention, the Table 1 probe")
    # 07 closes with the whole claims table (the page's), so it reads what 01 and 06 wrote and runs after them
    claims_inputs = [f"results/{PROFILE}/{name}" for name in ("table3.json", "encoder_comparison.json",
                                                              "attention_bias.json", "mixing.json", "filtering.json",
                                                              *EVIDENCE_06)]
    mechanism = _notebook("07", "mechanism", [str(paths.RUNS), str(paths.MODELS), str(paths.QUESTIONS),
                                              str(paths.CORPUS), *claims_inputs],
                          ["seed", "evaluation", "retrieval.depth", "dpr.seeds", "dpr.related_seeds",
                           "dpr.variants", "hybrid.variants", "mixing.doses", "dpr.model", "dpr.base_model",
                           "dpr.passage_max_length", "dpr.encode", "attention.batch_size"],
                          [_nocache(f"results/{PROFILE}/plots/position_top5.csv"),
                           *(_nocache(f"results/{PROFILE}/{name}") for name in EVIDENCE_07)],
                          ["mechanism.json", "mechanism_curve.json"],
                          "NQ sliced by answer position and entity attention, the moved-sentence probe")
    related = ["stage_pseudo_queries.json"] if pseudo else []
    related += ["tempqg.json", "stage_08_tempqg.json"] if variants.builds("tempqg", dpr) else []
    report_deps = [f"results/{PROFILE}/{name}" for name in (
        f"dpr_baseline_s{FIRST_SEED}_training.json", f"dpr_mixed_s{FIRST_SEED}_training.json", "table3.json",
        "encoder_comparison.json", "poly_codes.json", *related, "attention_bias.json", "question_generation.json",
        "filtering.json", "mixing.json", "question_quality.json",
        "stage_prepare.json", "stage_index_bm25.json", "stage_index_tfidf.json", "stage_retrieve_bm25.json",
        "stage_retrieve_tfidf.json", "stage_training_data.json", f"stage_05_dpr_training.baseline-{FIRST_SEED}.json",
        f"stage_05_dpr_training.uncon-{FIRST_SEED}.json", f"stage_05_dpr_training.mixed-{FIRST_SEED}.json",
        "stage_retrieve_dense_untrained.json", f"stage_retrieve_dense_baseline-{FIRST_SEED}.json",
        f"stage_retrieve_dense_uncon-{FIRST_SEED}.json", f"stage_retrieve_dense_mixed-{FIRST_SEED}.json",
        "stage_01_attention_bias.json", "stage_02_question_generation.json", "stage_03_filtering.json",
        "stage_04_mixing.json", "stage_06_results_and_attention_entropy.json", "mechanism.json",
        "stage_07_mechanism.json", "finetune_curve.json", "mechanism_curve.json", *EVIDENCE_06, *EVIDENCE_07)]
    return [
        Stage("hybrid", "python -m ecqg.stages.hybrid ${item.variant} --seed ${item.seed}",
              [f"{paths.RUNS}/bm25", f"{paths.RUNS}/dpr_${{item.variant}}_s${{item.seed}}"],
              ["retrieval.depth", "data.test_sets", "hybrid.depth", "hybrid.rrf_k"],
              [f"{paths.RUNS}/hybrid_sum_${{item.variant}}_s${{item.seed}}",
               f"{paths.RUNS}/hybrid_rrf_${{item.variant}}_s${{item.seed}}"],
              [_metric("stage_hybrid_${item.variant}-${item.seed}.json")],
              matrix={"variant": "${hybrid.variants}", "seed": "${dpr.related_seeds}"},
              comment="BM25 fused with one trained dense model's runs (Luo et al. 2022, §3.3)"),
        results, mechanism,
        Stage("report", "python -m ecqg.stages.report", report_deps, ["profile"],
              [_nocache(f"results/{PROFILE}/README.md")], [_metric("headline.json")],
              comment="results/<profile>/README.md and, for the study, the README's claims table"),
    ]


def stages(dpr: settings.Dpr, qg: settings.Qg, table: Sequence[variants.Variant] | None = None) -> list[Stage]:
    """Every stage in pipeline order, for the variants ``dpr.variants`` trains (``qg.generate.per_replicate``: one
    synthetic set per replicate, or one for all)."""
    return [*data_stages(), *dense_stages(dpr, qg, table), *synthetic_stages(dpr, qg), *analysis_stages(dpr)]


def plotted_systems(dpr: settings.Dpr, mixing: settings.Mixing, hybrid: settings.Hybrid,
                    table: Sequence[variants.Variant] | None = None) -> list[str]:
    """The columns of the Top-k (06) and answer-position (07) plot data: Table 3's rows in its order (the sparse
    retrievers, the untrained encoder, each pre-trained variant right after pre-training, the dose curve's rows,
    every trained variant, the BM25 + dense hybrids). ``ecqg.stages.results.table3_systems`` says the same in the
    layer above, which this module may not import; tests/test_plots.py holds the two equal for every profile."""
    trained = variants.trained(dpr, table)
    doses = [variants.dose_variant(base, n, table) for n in variants.doses(mixing) for base in variants.DOSED_SETS]
    hybrids = [f"hybrid_{method}_{v}" for v in hybrid.variants for method in ("sum", "rrf")]
    return [*variants.SPARSE, variants.UNTRAINED_SYSTEM, *(v.pre_system for v in trained if v.pretrained),
            *(v.pre_system for v in doses), *(v.system for v in trained), *hybrids]


def render_plots(dpr: settings.Dpr, mixing: settings.Mixing, hybrid: settings.Hybrid,
                 table: Sequence[variants.Variant] | None = None) -> str:
    """DVC's plots (``dvc plots show``): a file per training run (loss; validation Top-k), and the Top-k (a file per
    test set) and answer-position data, a column per system. Each of those columns is named in ``y``: DVC draws one
    line per field named there, and only a file's last column when ``y`` is left out."""
    systems = plotted_systems(dpr, mixing, hybrid, table)
    return "\n".join([
        "plots:",
        "  - results/${profile}/plots/training:", "      x: step", "      y: loss",
        "  - results/${profile}/plots/validation:", "      x: step", "      y: [val_top1, val_top5, val_top20]",
        "  - results/${profile}/plots/topk:                 # Top-k against k, a file per test set",
        "      x: k", "      y_label: Top-k accuracy (%)", *flow("y", systems, "      "),
        "  - results/${profile}/plots/position_top5.csv:    # NQ Top-5 by the answer's sentence in its passage",
        "      x: answer_sentence", "      x_label: answer sentence (1, 2, 3 or later)",
        "      y_label: Top-5 accuracy (%)", *flow("y", systems, "      "),
    ]) + "\n"


# ================================================================================================ rendering
HEADER = """\
# Generated by `python -m ecqg.tooling.dag write` from ecqg/tooling/dag.py (the stages), ecqg/core/variants.py (the dense retrievers) and
# params.yaml's dpr.variants; do not edit by hand: `make profile` and `make repro` rewrite it, `make test` checks it.
# Each stage's code dependencies are the modules its command imports (a folder: all of that package's modules).
# docs/design.md, "Pipeline", reads it.
"""


def render(profile: settings.Params, table: Sequence[variants.Variant] | None = None, root: Path = REPO) -> str:
    """dvc.yaml for ``profile``. The whole typed tree, because the file is the profile's DAG: its stages name params
    keys of nearly every block, and which stages, deps and plot columns it has follow from ``dpr``, ``qg``,
    ``mixing`` and ``hybrid`` (the helpers take those blocks)."""
    body = "\n".join(render_stage(s, root) for s in stages(profile.dpr, profile.qg, table))
    chosen = profile.dpr.variants
    selection = (f"# Variants: dpr.variants is '{chosen}'" if chosen == variants.ALL else
                 f"# Variants: dpr.variants selects {', '.join(chosen)}") + " (params.yaml).\n"
    return signed(f"{HEADER}{selection}stages:\n{body}\n\n"
                  f"{render_plots(profile.dpr, profile.mixing, profile.hybrid, table)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.parser("ecqg.tooling.dag", __doc__)
    parser.add_argument("action", choices=("write", "check", "print", "prune-lock", "untracked"),
                        help="write dvc.yaml | check it is current | print it | prune-lock: drop dvc.lock's "
                             "entries of stages the DAG no longer has | untracked: refuse files git does not "
                             "track in the code folders dvc.lock hashes")
    parser.add_argument("--file", default=str(REPO / DVC_YAML))
    parser.add_argument("--params", default=None, help="the params file whose dpr.variants the DAG trains "
                        "(default: params.yaml beside --file)")
    parser.add_argument("--force", action="store_true", help="write: overwrite a hand-edited dvc.yaml, keeping "
                        "it as dvc.yaml.bak")
    args = parser.parse_args(argv)
    if args.action == "prune-lock":
        gone = prune_lock(Path(args.file).with_name("dvc.lock"))
        print(f"dvc.lock: {len(gone)} entries of stages no longer in the DAG removed" + (
            f" ({', '.join(gone[:5])}{', ...' if len(gone) > 5 else ''})" if gone else ""))
        return 0
    if args.action == "untracked":
        stray = untracked_code_files(Path(args.file).resolve().parent, Path(Path(args.file).name))
        if stray:
            print("files git does not track in the code folders the stages depend on (dvc.lock would hash them, "
                  "and a clean clone would call the stages stale): " + ", ".join(stray[:10])
                  + (" ..." if len(stray) > 10 else "") + "; commit, delete or .dvcignore them", file=sys.stderr)
            return 1
        print("code folders of the stages: every file is tracked by git")
        return 0
    path = Path(args.file)
    profile = config.load_settings(args.params or path.with_name(str(config.PARAMS_FILE)))
    text = render(profile)
    if args.action == "print":
        sys.stdout.write(text)
        return 0
    if args.action == "check":
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            print(f"{path}: not what `python -m ecqg.tooling.dag write` writes (the variant table, params.yaml's "
                  "dpr.variants or a stage's imports changed); run it and commit the file", file=sys.stderr)
            return 1
        print(f"{path} is up to date ({text.count(chr(10))} lines)")
        return 0
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    if old == text:
        print(f"{path} is up to date ({text.count(chr(10))} lines)")
        return 0
    if old is not None and hand_edited(old):
        if not args.force:
            print(f"{path} was edited by hand since `python -m ecqg.tooling.dag write` wrote it; its stages come from "
                  "ecqg/tooling/dag.py and ecqg/core/variants.py (edit those, or params.yaml's dpr.variants). "
                  "`make repro FORCE=1` (dag write --force) overwrites it and keeps yours as dvc.yaml.bak",
                  file=sys.stderr)
            return 2
        backup = path.with_name(path.name + ".bak")
        write_text(backup, old)
        print(f"{path}: the hand-edited file is kept as {backup}")
    write_text(path, text)
    print(f"{path} written ({text.count(chr(10))} lines; dpr.variants: {profile.dpr.variants})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
