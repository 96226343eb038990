"""The premise measured before a remedy rests on it (issue 67): the two aggregations of entity attention, the
position units, what "least attended" picks, the slices, the interval over runs, and the page."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ecqg.analysis.attention import select_entities
from ecqg.stages import premise


def _entities():
    """Two passages of five entities: a long entity early (many pieces, much summed attention, little per piece)."""
    rows = []
    for pid in ("p1", "p2"):
        for i, (pieces, attention) in enumerate([(6, 0.30), (1, 0.10), (1, 0.02), (2, 0.05), (1, 0.08)]):
            rows.append({"passage_id": pid, "entity": f"{pid}-e{i}", "label": "ORG", "start_char": 10 * i,
                         "end_char": 10 * i + 5, "relative_position": i / 5, "attention": attention,
                         "n_pieces": pieces, "eligible": True, "truncated": False})
    return pd.DataFrame(rows)


def test_the_mean_over_pieces_undoes_the_length_advantage():
    entities = _entities()
    by_sum = select_entities(premise.aggregated(entities, "sum"), 3, 5)
    by_mean = select_entities(premise.aggregated(entities, "mean"), 3, 5)
    top = lambda sel: set(sel[sel.role == "highest"].entity)          # noqa: E731
    assert top(by_sum) == {"p1-e0", "p2-e0"}                          # 0.30 summed over 6 pieces
    assert top(by_mean) == {"p1-e1", "p2-e1"}                         # 0.10 in one piece beats 0.05 a piece
    assert premise.lowest_sets_agree(by_sum, by_mean) == 0.0          # {e2, e3, e4} vs {e0, e2, e3}
    units = premise.position_units(by_sum)
    assert list(units.highest_first_half) == [1.0, 1.0] and list(units.lowest_second_half) == [0.0, 0.0]
    lengths = premise.length_profile(entities, by_sum)
    assert lengths["lowest3_pieces"] == pytest.approx(4 / 3) and lengths["eligible_pieces"] == pytest.approx(11 / 5)
    with pytest.raises(ValueError, match="aggregation"):
        premise.aggregated(entities, "max")


def test_runs_give_an_interval_and_one_model_its_units():
    rng = np.random.default_rng(0)

    def run(shift):
        position = pd.DataFrame({"highest_first_half": (rng.random(80) < 0.7).astype(float),
                                 "lowest_second_half": (rng.random(80) < 0.5).astype(float)})
        hits = (rng.random((300, 3)) < 0.5).astype(float)
        thirds = [premise.LEAST if i % 3 == 0 else premise.MOST if i % 3 == 1 else None for i in range(300)]
        node = {"position": position, "lengths": {"lowest3_pieces": 1.5, "lowest3_single_piece": 0.6,
                                                  "eligible_pieces": 2.5, "eligible_single_piece": 0.3},
                "probe": rng.normal(shift, 1.0, 60), "slices": premise.slice_units(hits, thirds)}
        return {"aggregations": {how: node for how in premise.AGGREGATIONS}, "lowest_sets_agree": 0.6,
                "top_k": hits.mean(axis=0)}

    out = premise.summarise({"untrained": [run(0.0)], "dpr_baseline": [run(1.0), run(1.2), run(0.8)]})
    probe = out["dpr_baseline"]["sum"]["probe"]
    assert probe["method"] == "t over runs + units" and len(probe["runs"]) == 3 and probe["low"] > 0
    assert out["untrained"]["mean"]["probe"]["method"] == "one model: normal over units"
    assert 50 < out["dpr_baseline"]["sum"]["highest_first_half"]["value"] < 90
    assert set(out["dpr_baseline"]["sum"]) >= set(premise.MEASURES) | {"lengths"}
    coin = out["dpr_baseline"]["sum"]["lowest_second_half"]      # a fair coin per passage: p against 50%, not 0
    assert coin["null"] == 50.0 and coin["low"] < 50 < coin["high"] and coin["p"] > 0.05

    from ecqg.stages.premise import verdict

    assert verdict(probe, 0.0, 1.0) == "holds"
    assert verdict({"low": -3.0, "high": -1.0}, 0.0, -1.0) == "holds"
    assert verdict({"low": 40.0, "high": 55.0}, 50.0, 1.0) == "not shown"
    assert verdict({"low": 30.0, "high": 45.0}, 50.0, 1.0) == "reversed"


def test_the_page_is_written_from_the_committed_files(tmp_path, monkeypatch):
    from ecqg.stages import premise as stage

    entry = {"value": 60.0, "low": 55.0, "high": 65.0, "runs": [60.0], "units": 80}
    node = {how: {"lengths": {"lowest3_pieces": 1.6, "lowest3_single_piece": 0.66, "eligible_pieces": 2.56,
                              "eligible_single_piece": 0.355}, **{m: entry for m in premise.MEASURES}}
            for how in premise.AGGREGATIONS}
    system = {"runs": 1, "top_k": {"top1": 30.0, "top5": 50.0, "top20": 70.0}, "lowest_sets_agree": 0.61, **node}
    folder = tmp_path / "results" / "premise"
    folder.mkdir(parents=True)
    (folder / "naive.json").write_text(json.dumps({
        "setting": {"profile": "naive", "base_model": "bundled:naive", "seeds": [1, 2, 3],
                    "studied_passages": {"sampled": 900}, "host": {"cpu": "x"}},
        "systems": {"untrained": system, "dpr_baseline": system}}))
    monkeypatch.chdir(tmp_path)
    assert stage.main(["--page-only"]) == 0
    page = (folder / "README.md").read_text()
    assert "| base | naive base |" in page and "| learned retrieval before | no |" in page
    assert "## Entity attention summed" in page and "## Entity attention averaged" in page
    assert "| highest-attended entity in the first half, % of passages | 65 | 60.0 [55.0, 65.0] |" in page
    assert "| NQ Top-1 / 5 / 20: DPR | 30.0 / 50.0 / 70.0 |" in page and "61%" in page
