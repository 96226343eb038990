"""Variants are declared once (ecqg.core.variants.TABLE): a toy one, one table entry, follows through to the DAG's stages,
Table 3's rows and labels, the comparisons and the per-replicate runs; and the docs' code layout names every module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ecqg.core import config, settings, variants

REPO = Path(__file__).resolve().parents[1]
TOY = variants.Variant("toy", "Toy-DPR", kind="polydpr", pretrain=("uncon", "tempqg"), seeds=variants.PAPER,
                       against=("mixed",), pre_against=("untrained",))


@pytest.fixture
def with_toy(monkeypatch):
    monkeypatch.setattr(variants, "TABLE", (*variants.TABLE, TOY))
    return config.preset("mini", REPO / "params")


def test_a_toy_variant_is_one_table_entry(with_toy):
    from ecqg.tooling import dag
    from ecqg.stages import dpr_training as dense, results

    params = {**with_toy, "dpr": {**with_toy["dpr"], "seeds": [1, 2]}}
    typed = settings.of(params)
    rows = (typed.dpr, typed.mixing, typed.hybrid)
    text = dag.render(typed)
    pre, fine = text.split("\n  pretrain_toy:")[1], text.split("\n  finetune_toy:")[1]
    # its replicate's own UnCon set (qg.generate.per_replicate), TempQG's one set
    assert "deps: [notebooks/05_dpr_training.ipynb, 'outputs/synthetic/s${item.seed}/uncon.json', " \
           "outputs/tempqg/tempqg.json," in pre
    assert "polydpr]" in pre and "-p phase pretrain" in pre
    assert "outputs/models/dpr_toy_pre_s${item.seed}" in fine.split("outs:")[0]   # fine-tunes its own replicate's
    assert variants.pretrain_stage("toy", 2) == "pretrain_toy@2"
    assert variants.stage_name("retrieve", "toy", 2) == "retrieve_dense@toy-2"
    assert "dpr_toy" in results.table3_systems(*rows) and "dpr_toy_pre" in results.table3_systems(*rows)
    assert results.system_labels()["dpr_toy"] == "Toy-DPR (ours)"
    assert results.system_labels()["dpr_toy_pre"] == "Toy, pre-training only (ours)"
    assert ("dpr_toy", "dpr_mixed") in results.comparison_pairs(*rows)
    assert ("dpr_toy_pre", "minilm_untrained") in results.comparison_pairs(*rows)
    assert dense.seed_runs(typed.dpr, typed.mixing)["dpr_toy_pre"] == ["dpr_toy_pre_s1", "dpr_toy_pre_s2"]
    assert "dpr_toy" not in results.attention_systems(typed.dpr)      # a Poly-DPR: no one [CLS] vector to analyse


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown dense variant 'nope'; known: baseline, uncon"):
        variants.get("nope")
    assert variants.get("mixed_d10000").pretrain == ("mixed_d10000",)
    assert variants.synthetic_set("mixed_d10000").path == Path("outputs/synthetic/doses/mixed_d10000.json")
    assert variants.synthetic_set("mixed_d10000").at(7) == Path("outputs/synthetic/s7/doses/mixed_d10000.json")
    assert variants.SETS["etm"].at(7) == variants.SETS["etm"].path        # the related system's: one set


def test_sets_are_per_replicate_exactly_where_params_say():
    params = config.preset("mini", REPO / "params")
    params = {**params, "dpr": {**params["dpr"], "seeds": [3, 4]}}
    per_replicate = settings.of(params).qg.generate.per_replicate
    assert per_replicate
    assert variants.generation_seeds(settings.of(params).dpr, per_replicate) == [3, 4]
    assert variants.set_path("uncon", 4, per_replicate) == Path("outputs/synthetic/s4/uncon.json")
    shared = {**params, "qg": {**params["qg"], "generate": {**params["qg"]["generate"], "per_replicate": False}}}
    shared_replicates = settings.of(shared).qg.generate.per_replicate
    assert variants.generation_seeds(settings.of(shared).dpr, shared_replicates) == [None]
    assert variants.set_path("uncon", 4, shared_replicates) == Path("outputs/synthetic/uncon.json")


def test_the_papers_orderings_come_from_the_table():
    assert variants.paper_pairs() == [("dpr_uncon", "dpr_baseline"), ("dpr_mixed", "dpr_uncon"),
                                      ("dpr_mixed", "dpr_baseline")]


def test_docs_code_layout_names_every_module():
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    layout = text.split("## Code layout")[1].split("```")[1]
    words = set(re.findall(r"\w+", layout))
    missing = [str(p.relative_to(REPO)) for p in sorted((REPO / "ecqg").rglob("*.py"))
               if p.stem not in ("__init__", "__main__") and p.stem not in words]
    assert not missing, f"docs/design.md's code layout does not name: {missing}"
