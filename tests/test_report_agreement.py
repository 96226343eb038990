"""``python -m ecqg.report.agreement``: two runs of one profile compared, system by system and test by test."""

import json

import pytest

from ecqg.report import agreement


def _write(directory, name, tree):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps(tree), encoding="utf-8")


def _table3(bm25_top1, dpr_top1, tests):
    """A table3-shaped tree: two systems' Top-1 / Top-5 on NQ and paired tests ``name -> (diff, p)``."""
    return {"accuracy": {"bm25": {"nq": {"all": {"n": 10, "top1": bm25_top1, "top5": 80.0}}},
                         "dpr": {"nq": {"all": {"n": 10, "top1": dpr_top1, "top5": 85.0}}}},
            "paired": {name: {"nq": {"all": {"top1_diff": d, "top1_p": p, "top1_ci_low": d - 1}}}
                       for name, (d, p) in tests.items()}}


@pytest.fixture
def runs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, "table3.json", _table3(70.0, 72.5, {"same": (1.0, 0.5), "both": (2.0, 0.01), "a_only": (1.5, 0.02),
                                                  "b_only": (0.2, 0.3), "reversed": (1.0, 0.001),
                                                  "only_in_a": (1.0, 0.01)}))
    _write(b, "table3.json", _table3(70.0, 71.0, {"same": (1.0, 0.5), "both": (2.5, 0.001), "a_only": (0.5, 0.4),
                                                  "b_only": (1.2, 0.04), "reversed": (-0.8, 0.01)}))
    _write(a, "encoder_comparison.json", {"table1_probe": {"dpr": {"difference": 4.0, "difference_p": 0.001}}})
    _write(b, "encoder_comparison.json", {"table1_probe": {"dpr": {"difference": 3.0, "difference_p": 0.2}}})
    for run in (a, b):                                   # two runs of one design: the same dvc.lock
        (run / "dvc.lock").write_text(LOCK, encoding="utf-8")
    return a, b


LOCK = """schema: '2.0'
stages:
  results:
    cmd: python -m ecqg.tooling.notebook 06
    deps:
    - path: ecqg/report/claim.py
      hash: md5
      md5: 0123456789abcdef0123456789abcdef
    params:
      params.yaml:
        seed: 2022
"""


def test_two_designs_are_refused_unless_asked(runs, capsys):
    (runs[1] / "dvc.lock").write_text(LOCK.replace("seed: 2022", "seed: 7"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"two designs \(0 code files and 1 params differ, e.g. seed\)"):
        agreement.compare_runs(*runs)
    result = agreement.compare_runs(*runs, different_designs=True)
    assert result["same_design"] is False
    assert agreement.render(result).startswith("**Not one design** (0 code files and 1 params differ")
    (runs[1] / "dvc.lock").unlink()
    assert agreement.main([str(runs[0]), str(runs[1])]) == 2
    assert "not known to be one design" in capsys.readouterr().err


def test_verdicts_are_counted_by_how_they_compare(runs):
    result = agreement.compare_runs(*runs)
    counts = result["files"]["table3.json"]["counts"]
    assert counts == {"tests": 5, "identical": 1, "both_not_significant": 1, "both_significant_same_sign": 1,
                      "significant_in_a_only": 1, "significant_in_b_only": 1, "reversed": 1}
    kinds = {d["test"]: d["kind"] for d in result["files"]["table3.json"]["disagreeing"]}
    assert kinds == {"paired/a_only/nq/all/top1": "significant_in_a_only",
                     "paired/b_only/nq/all/top1": "significant_in_b_only",
                     "paired/reversed/nq/all/top1": "reversed"}
    # a test without a _diff sibling uses the plain value beside it (the Table 1 probe's "difference")
    assert result["files"]["encoder_comparison.json"]["counts"]["significant_in_a_only"] == 1
    assert result["files"]["mechanism.json"] == {"missing_in": [str(runs[0]), str(runs[1])]}


def test_alpha_moves_the_verdicts(runs):
    counts = agreement.compare_runs(*runs, alpha=0.015)["files"]["table3.json"]["counts"]
    # a_only (p 0.02) and b_only (p 0.04) are no longer significant in either run; 'both' (0.01, 0.001) still is
    assert counts["significant_in_a_only"] == 0 and counts["significant_in_b_only"] == 0
    assert counts["both_not_significant"] == 3 and counts["both_significant_same_sign"] == 1
    assert counts["reversed"] == 1


def test_systems_report_their_largest_top_k_difference(runs):
    systems = agreement.compare_runs(*runs)["files"]["table3.json"]["systems"]
    assert systems["bm25"] == {"max_abs_diff": 0.0, "where": None, "values": 2, "differ": 0}
    assert systems["dpr"] == {"max_abs_diff": 1.5, "where": "nq/all/top1", "values": 2, "differ": 1}


def test_the_command_prints_tables_and_fails_clearly(runs, tmp_path, capsys):
    assert agreement.main([str(runs[0]), str(runs[1])]) == 0
    out = capsys.readouterr().out
    assert "| dpr | 1 of 2 | 1.50 | nq/all/top1 |" in out
    assert "| table3.json | 5 | 1 | 1 | 1 | 1 | 1 | 1 |" in out
    assert "`paired/reversed/nq/all/top1`: A +1 (p 0.001), B -0.8 (p 0.01)" in out

    assert agreement.main([str(runs[0]), str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such metrics folder" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "dvc.lock").write_text(LOCK, encoding="utf-8")
    assert agreement.main([str(runs[0]), str(empty)]) == 2
    assert "share none of" in capsys.readouterr().err
    (runs[1] / "table3.json").write_text("{not json", encoding="utf-8")
    assert agreement.main([str(runs[0]), str(runs[1])]) == 2
    assert "b/table3.json: not valid JSON" in capsys.readouterr().err
