"""Which stages are stale against the tree (ecqg.report.staleness): the lock's hashes against the files' now, computed
as DVC computes them, checked against DVC itself on a real pipeline; and the DAG writer's lock pruning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from ecqg.report.staleness import stale_stages, tree_hash

REPO = Path(__file__).resolve().parents[1]


def _dvc(args, cwd):
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "DVC_NO_ANALYTICS": "1"})


def _pipeline(tmp_path: Path) -> Path:
    """A two-stage DVC project: a 'code' file and folder, params, an output the second stage reads."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.py").write_text("A = 1\n")
    (tmp_path / "code.py").write_text("print(1)\n")
    (tmp_path / "params.yaml").write_text("k: 1\nm: {n: 2}\n")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "one": {"cmd": "cat code.py > out.txt", "deps": ["code.py", "lib"], "params": ["k"], "outs": ["out.txt"]},
        "two": {"cmd": "cat out.txt > out2.txt", "deps": ["out.txt"], "params": ["m.n"], "outs": ["out2.txt"]}}}))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert _dvc(["init", "-q"], tmp_path).returncode == 0
    assert _dvc(["repro", "-q"], tmp_path).returncode == 0
    return tmp_path


def _stale(root: Path) -> dict:
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    return stale_stages(lock, yaml.safe_load((root / "params.yaml").read_text()), {"one", "two"}, root)


def test_hashes_are_dvcs_and_the_list_follows_edits_of_code_folders_and_params(tmp_path):
    root = _pipeline(tmp_path)
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    deps = {d["path"]: d["md5"] for d in lock["stages"]["one"]["deps"]}
    assert tree_hash("code.py", str(root)) == deps["code.py"] and tree_hash("lib", str(root)) == deps["lib"]
    assert _stale(root) == {}
    (root / "lib" / "b.py").write_text("B = 2\n")            # a new module in a folder dependency
    (root / "params.yaml").write_text("k: 1\nm: {n: 3}\n")
    tree_hash.cache_clear()
    assert _stale(root) == {"one": ["lib"], "two": ["params m.n"]}
    status = _dvc(["status", "--json"], root)                # DVC itself agrees
    assert {"one", "two"} <= set(yaml.safe_load(status.stdout)), status.stdout
    assert _dvc(["repro", "-q"], root).returncode == 0
    tree_hash.cache_clear()
    assert _stale(root) == {}


def test_a_stage_that_left_the_dag_is_listed_and_pruned(tmp_path):
    from ecqg.tooling.dag import prune_lock

    root = _pipeline(tmp_path)
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    assert stale_stages(lock, {"k": 1, "m": {"n": 2}}, {"one"}, root) == {"two": ["left the DAG"]}
    dag = yaml.safe_load((root / "dvc.yaml").read_text())
    del dag["stages"]["two"]
    (root / "dvc.yaml").write_text(yaml.safe_dump(dag))
    assert prune_lock(root / "dvc.lock") == ["two"]
    assert set(yaml.safe_load((root / "dvc.lock").read_text())["stages"]) == {"one"}
    assert prune_lock(root / "dvc.lock") == []


def test_the_lock_is_read_in_yaml_1_2_as_dvc_writes_it(tmp_path):
    """DVC records ``lr: 5e-05`` and ``mixed_precision: no``; PyYAML would read them back as a string and False,
    params.yaml's ``5.0e-5`` and ``"no"`` as a float and a string: the same values, not a change (mini's page listed
    17 stages stale for the float on 2 Dec; the study's float32 preset would have listed every training stage)."""
    from ecqg.report.staleness import read_lock

    (tmp_path / "dvc.lock").write_text("stages:\n  s:\n    cmd: x\n    params:\n      params.yaml:\n        lr: 5e-05\n"
                                       "        mixed_precision: no\n        k: 3\n")
    lock = read_lock(tmp_path / "dvc.lock")
    current = {"lr": 5.0e-5, "mixed_precision": "no", "k": 3}
    assert stale_stages(lock, current) == {}
    assert stale_stages(yaml.safe_load((tmp_path / "dvc.lock").read_text()), current) == {
        "s": ["params lr", "params mixed_precision"]}                                  # what PyYAML would say
    assert stale_stages(lock, {**current, "lr": 1.0e-4}) == {"s": ["params lr"]}
    assert stale_stages(lock, {**current, "mixed_precision": "auto"}) == {"s": ["params mixed_precision"]}
