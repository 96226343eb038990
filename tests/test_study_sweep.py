"""bench/study_sweep.py's bookkeeping: the job plan, choosing a cut run's rest, ranks <-> hits, and the summary's
pairing over the seeds two systems share (the GPU work itself runs only on a device machine)."""

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import study_sweep  # noqa: E402


def test_plan_puts_pretraining_first_and_fine_tunings_after_what_they_need():
    jobs = study_sweep.plan([2022, 2023], poly=True)
    names = [j["name"] for j in jobs]
    assert names[:2] == ["uncon-pre", "mixed-pre"]
    assert names[2:5] == ["uncon-2022", "mixed-2022", "baseline-2022"]
    needs = {j["name"]: j["needs"] for j in jobs}
    assert needs["mixed-2023"] == ["mixed-pre"] and needs["baseline-2023"] == []
    assert needs["poly_mixed-2022"] == ["poly_mixed-pre"] and needs["poly_baseline-2022"] == []
    assert "poly_mixed-2023" not in names          # Poly-DPR at the first seed only
    assert not any(n.startswith("poly") for n in (j["name"] for j in study_sweep.plan([2022], poly=False)))


def test_select_jobs_adds_the_pretrainings_and_refuses_unknown_names():
    jobs = study_sweep.plan([2022, 2024], poly=False)
    chosen = [j["name"] for j in study_sweep.select_jobs(jobs, ["mixed-2024", "baseline-2022"])]
    assert chosen == ["mixed-pre", "baseline-2022", "mixed-2024"]
    with pytest.raises(ValueError, match="no such job: mixed-2030"):
        study_sweep.select_jobs(jobs, ["mixed-2030"])


def test_as_hits_keeps_top_k_of_first_hit_ranks():
    hits = study_sweep.as_hits([0, 1, 5, 20])
    assert hits.shape == (4, study_sweep.K_MAX) and hits.sum() == 3
    top5 = np.logical_or.accumulate(hits, axis=1)[:, 4]
    assert top5.tolist() == [False, True, True, False]


def _job(variant, seed, ranks, phase="finetune"):
    return {"variant": variant, "phase": phase, "seed": seed, "train_s": 1.0, "examples_per_s_median": 1.0,
            "summary": {"steps": 1}, "ranks": {"nq": ranks}, "curve": {}}


def test_summary_pairs_over_the_seeds_both_systems_have(tmp_path, capsys):
    n = 400
    base = [1] * (n // 2) + [0] * (n // 2)              # Top-1 50% at both seeds
    better = [1] * (n // 2 + 40) + [0] * (n // 2 - 40)  # +10 points, at seed 2023 only
    sweep = {"device": "cpu", "torch": "x", "date": "d", "skipped": [], "failed": {}, "elapsed_s": 1, "sets": ["nq"],
             "seeds": [2022, 2023], "jobs": {"baseline-2022": _job("baseline", 2022, base),
                                            "baseline-2023": _job("baseline", 2023, base),
                                            "uncon-2023": _job("uncon", 2023, better)}}
    path = tmp_path / "sweep.json.gz"
    path.write_bytes(gzip.compress(json.dumps(sweep).encode()))
    study_sweep.summarize([path])
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if "uncon - baseline" in line and line.split()[4] == "1")
    assert row[5] == "1" and float(row[6]) == 10.0      # one shared seed, +10.0 points at Top-1
    assert float(row[-1]) < 0.01


def test_merged_sweeps_keep_the_first_copy_and_refuse_another_study():
    a = {"question_ids": {"nq": ["1"]}, "seeds": [1], "sets": ["nq"], "profile": "study",
         "jobs": {"x-1": {"from": "a"}}}
    b = {**a, "jobs": {"x-1": {"from": "b"}, "y-1": {"from": "b"}}}
    both = study_sweep.merged([a, b])["jobs"]
    assert both == {"x-1": {"from": "a"}, "y-1": {"from": "b"}}
    with pytest.raises(ValueError, match="differ in seeds"):
        study_sweep.merged([a, {**b, "seeds": [2]}])


def _pool(root: Path, passages: dict[str, str]) -> None:
    data = root / "outputs" / "data"
    data.mkdir(parents=True)
    rows = [{"id": pid, "title": f"T {pid}", "text": text, "source": "bundle"} for pid, text in passages.items()]
    (data / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]), encoding="utf-8")
    (data / "pool_extra.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[2:]), encoding="utf-8")


def _example(qid: str, positive: str, negative: str, texts: dict[str, str]) -> dict:
    ctx = lambda pid: {"title": f"T {pid}", "text": texts[pid], "passage_id": pid}  # noqa: E731
    return {"id": qid, "question": f"question {qid}?", "answers": ["a"], "positive_ctxs": [{**ctx(positive),
            "score": 3.5}], "negative_ctxs": [], "hard_negative_ctxs": [ctx(negative)], "generator": "uncon"}


def test_exported_sets_drop_the_texts_and_rebuild_exactly(tmp_path, monkeypatch):
    texts = {"p1": "first passage", "p2": "second passage", "p3": "an extra pool passage"}
    _pool(tmp_path, texts)
    sets = {"uncon": [_example("u1", "p1", "p3", texts)], "mixed": [_example("m1", "p3", "p2", texts),
                                                                    _example("m2", "p2", "p1", texts)]}
    (tmp_path / "outputs" / "synthetic").mkdir()
    for variant, records in sets.items():
        (tmp_path / "outputs" / "synthetic" / f"{variant}.json").write_text(json.dumps(records), encoding="utf-8")
    (tmp_path / "params.yaml").write_text((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    monkeypatch.chdir(tmp_path)

    study_sweep.export_sets(tmp_path / "sets.json.gz")
    exported = json.loads(gzip.decompress((tmp_path / "sets.json.gz").read_bytes()))
    assert "first passage" not in json.dumps(exported)            # texts dropped, titles and ids kept
    assert exported["sets"]["mixed"][0]["positive_ctxs"][0] == {"title": "T p3", "passage_id": "p3", "score": 3.5}
    rebuilt = study_sweep.rebuilt_sets(tmp_path / "sets.json.gz")
    assert {k: json.loads(v) for k, v in rebuilt.items()} == {f"outputs/synthetic/{v}.json": r for v, r in
                                                                sets.items()}

    # a passage whose text differs from the pool's cannot be dropped; one missing from the pool cannot be rebuilt
    sets["uncon"][0]["hard_negative_ctxs"][0]["text"] = "edited"
    (tmp_path / "outputs" / "synthetic" / "uncon.json").write_text(json.dumps(sets["uncon"]), encoding="utf-8")
    with pytest.raises(SystemExit, match="uncon.json: record 0, hard_negative_ctxs: passage 'p3'"):
        study_sweep.export_sets(tmp_path / "other.json.gz")
    assert not (tmp_path / "other.json.gz").exists()
    (tmp_path / "outputs" / "data" / "pool_extra.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(Exception, match="set uncon, record 0.*passage 'p3' is not in this checkout's pool"):
        study_sweep.rebuilt_sets(tmp_path / "sets.json.gz")
