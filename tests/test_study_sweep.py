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

from ecqg.data.dpr import write_dpr_retriever_json  # noqa: E402


def test_plan_puts_pretraining_first_and_fine_tunings_after_what_they_need():
    jobs = study_sweep.plan([2022, 2023], poly=True)
    names = [j["name"] for j in jobs]
    # every replicate pre-trains on its own, as stage 05 does
    assert names[:4] == ["uncon-pre-2022", "mixed-pre-2022", "uncon-pre-2023", "mixed-pre-2023"]
    assert names[4:7] == ["uncon-2022", "mixed-2022", "baseline-2022"]
    needs = {j["name"]: j["needs"] for j in jobs}
    assert needs["mixed-2023"] == ["mixed-pre-2023"] and needs["baseline-2023"] == []
    assert needs["poly_mixed-2022"] == ["poly_mixed-pre-2022"] and needs["poly_baseline-2022"] == []
    assert "poly_mixed-2023" not in names          # Poly-DPR at the first seed only
    assert not any(n.startswith("poly") for n in (j["name"] for j in study_sweep.plan([2022], poly=False)))


def test_select_jobs_adds_the_pretrainings_and_refuses_unknown_names():
    jobs = study_sweep.plan([2022, 2024], poly=False)
    chosen = [j["name"] for j in study_sweep.select_jobs(jobs, ["mixed-2024", "baseline-2022"])]
    assert chosen == ["mixed-pre-2024", "baseline-2022", "mixed-2024"]
    with pytest.raises(ValueError, match="no such job: mixed-2030"):
        study_sweep.select_jobs(jobs, ["mixed-2030"])


def test_no_curve_turns_off_the_curve_runs_and_nothing_that_trains(tmp_path):
    from ecqg.core import config, settings

    def train_config(params, phase, seed):          # what stage 05 gives the trainer (stages.dpr_training)
        s = settings.of(params)
        return getattr(s.dpr, phase).train_config(seed, s.collective_timeout_minutes)

    assert config.preset("study")["dpr"]["finetune"]["curve_runs"] is True
    spec = study_sweep.plan([2022], poly=False)[2]
    assert spec["phase"] == "finetune"
    with_curve = study_sweep.job_params(config.preset("study"), {**spec, "curve_runs": True}, tmp_path, 256)
    without = study_sweep.job_params(config.preset("study"), {**spec, "curve_runs": False}, tmp_path, 256)
    assert with_curve["dpr"]["finetune"]["curve_runs"] is True and without["dpr"]["finetune"]["curve_runs"] is False
    assert without["dpr"]["base_model"] == str(tmp_path / "model") and without["dpr"]["encode"]["batch_size"] == 256
    assert train_config(with_curve, "finetune", 2022) == train_config(without, "finetune", 2022)


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
    assert float(row[9]) < 0.01                          # over questions
    assert row[10] == "None"                             # one seed: no interval over runs, no verdict about training


def test_merged_sweeps_keep_the_first_copy_and_refuse_another_study():
    a = {"question_ids": {"nq": ["1"]}, "seeds": [1], "sets": ["nq"], "profile": "study",
         "jobs": {"x-1": {"from": "a"}}}
    b = {**a, "jobs": {"x-1": {"from": "b"}, "y-1": {"from": "b"}}}
    both = study_sweep.merged([a, b])["jobs"]
    assert both == {"x-1": {"from": "a"}, "y-1": {"from": "b"}}
    with pytest.raises(ValueError, match="differ in seeds"):
        study_sweep.merged([a, {**b, "seeds": [2]}])


def test_sweeps_that_trained_on_other_data_are_not_merged(tmp_path, capsys):
    for name in study_sweep.DATA_FILES:              # outputs/data/questions is a folder, the rest are files
        path = tmp_path / name / "nq.jsonl" if name.endswith("questions") else tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{name}\n", encoding="utf-8")
    before = study_sweep.input_digests(tmp_path)
    (tmp_path / "outputs" / "data" / "questions" / "wq.jsonl").write_text("more\n", encoding="utf-8")
    (tmp_path / "outputs" / "synthetic" / "mixed.json").write_text("other\n", encoding="utf-8")
    after = study_sweep.input_digests(tmp_path)
    assert [f for f in before if before[f] != after[f]] == ["outputs/data/questions", "outputs/synthetic/mixed.json"]

    a = {"question_ids": {"nq": ["1"]}, "seeds": [1], "sets": ["nq"], "profile": "study", "inputs": before,
         "jobs": {"x-1": {}}}
    with pytest.raises(ValueError, match="different data .outputs/data/questions, outputs/synthetic/mixed.json"):
        study_sweep.merged([a, {**a, "inputs": after}])
    assert study_sweep.merged([a, {**a, "inputs": before}])["jobs"] == {"x-1": {}}
    assert "note" not in capsys.readouterr().out
    study_sweep.merged([{**a, "inputs": None}, a])   # a sweep from before the digests: merged, and said so
    assert "sweep file(s) 1 of 2 record no input digests" in capsys.readouterr().out


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
        write_dpr_retriever_json(tmp_path / "outputs" / "synthetic" / f"{variant}.json", records)   # as stage 04
    (tmp_path / "params.yaml").write_text((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    monkeypatch.chdir(tmp_path)

    study_sweep.export_sets(tmp_path / "sets.json.gz")
    exported = json.loads(gzip.decompress((tmp_path / "sets.json.gz").read_bytes()))
    assert "first passage" not in json.dumps(exported)            # texts dropped, titles and ids kept
    assert exported["sets"]["mixed"][0]["positive_ctxs"][0] == {"title": "T p3", "text": None, "passage_id": "p3",
                                                                 "score": 3.5}
    rebuilt = study_sweep.rebuilt_sets(tmp_path / "sets.json.gz")
    assert rebuilt == {f"outputs/synthetic/{v}.json": (tmp_path / "outputs" / "synthetic" / f"{v}.json").read_bytes()
                       for v in sets}                              # byte for byte

    # a passage whose text differs from the pool's cannot be dropped; one missing from the pool cannot be rebuilt
    sets["uncon"][0]["hard_negative_ctxs"][0]["text"] = "edited"
    (tmp_path / "outputs" / "synthetic" / "uncon.json").write_text(json.dumps(sets["uncon"]), encoding="utf-8")
    with pytest.raises(SystemExit, match="uncon.json: record 0, hard_negative_ctxs: passage 'p3'"):
        study_sweep.export_sets(tmp_path / "other.json.gz")
    assert not (tmp_path / "other.json.gz").exists()
    (tmp_path / "outputs" / "data" / "pool_extra.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(Exception, match="set uncon, record 0.*passage 'p3' is not in this checkout's pool"):
        study_sweep.rebuilt_sets(tmp_path / "sets.json.gz")


def _slices_checkout(root: Path, profile: str) -> None:
    """Six NQ questions whose answers sit in sentence 1, 2 or 3 of their gold passage (two each)."""
    texts = ["Paris is big. It has a river. The tower is tall.", "Rome is old. The pope lives there. It has hills.",
             "Oslo is cold. Boats sail there. Trolls are a myth."]
    answers = [["Paris"], ["pope"], ["Trolls"], ["Rome"], ["Boats"], ["tower"]]
    data = root / "outputs" / "data"
    (data / "questions").mkdir(parents=True)
    corpus = [{"id": f"g{i}", "title": "t", "text": texts[i], "source": "bundle"} for i in range(3)]
    (data / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    gold = ["g0", "g1", "g2", "g1", "g2", "g0"]
    rows = [{"id": f"q{i}", "question": f"question {i}?", "answers": a, "gold_ids": [g]}
            for i, (a, g) in enumerate(zip(answers, gold))]
    (data / "questions" / "nq.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    params = (Path(__file__).resolve().parents[1] / "params.yaml").read_text()
    (root / "params.yaml").write_text(params.replace("profile: mini", f"profile: {profile}", 1))


def _sweep(question_ids: list[str], ranks: dict[str, list[int]], profile: str = "mini") -> dict:
    jobs = {name: {"name": name, "phase": "finetune", "variant": name.split("-")[0], "curve": {},
                   "ranks": {"nq": r}} for name, r in ranks.items()}
    return {"profile": profile, "seeds": [2023], "sets": ["nq"], "question_ids": {"nq": question_ids},
            "jobs": jobs}


def test_slices_split_the_sweep_ranks_by_answer_sentence_and_pair_them(tmp_path, monkeypatch):
    _slices_checkout(tmp_path, "mini")
    monkeypatch.chdir(tmp_path)
    ids = [f"q{i}" for i in range(6)]
    # answers in sentence 1, 2, 3, 1, 2, 3 of their gold passages (spaCy's sentences)
    ranks = {"baseline-2023": [1, 1, 0, 1, 1, 0], "mixed-2023": [1, 1, 1, 1, 1, 3]}
    (tmp_path / "sweep.json").write_text(json.dumps(_sweep(ids, ranks)), encoding="utf-8")
    figures = study_sweep.slices([tmp_path / "sweep.json"], entity_model=False)
    acc = figures["accuracy"].set_index(["bucket", "system"])
    assert list(acc.loc["sentence 3+"].top1) == [0.0, 50.0] and list(acc.loc["sentence 3+"].top5) == [0.0, 100.0]
    assert acc.loc[("sentence 1", "mixed"), "top1"] == 100.0 and set(acc.seeds) == {1}
    late = figures["paired"].set_index(["bucket", "k"]).loc[("sentence 3+", 5)]
    assert late.pair == "mixed - baseline" and late.difference == 100.0 and late.seeds == 1
    psi = figures["psi"]
    assert psi[(psi.kind == "system") & (psi.k == 1)].set_index("system").psi.to_dict() == {"mixed": 0.5,
                                                                                             "baseline": 1.0}

    (tmp_path / "sweep.json").write_text(json.dumps(_sweep(ids[::-1], ranks)), encoding="utf-8")
    with pytest.raises(SystemExit, match="not the ones the sweep scored"):
        study_sweep.slices([tmp_path / "sweep.json"], entity_model=False)
    (tmp_path / "sweep.json").write_text(json.dumps(_sweep(ids, ranks, profile="study")), encoding="utf-8")
    with pytest.raises(SystemExit, match="the sweep ran 'study'"):
        study_sweep.slices([tmp_path / "sweep.json"], entity_model=False)


def test_slice_figures_follow_the_first_seed_curve():
    masks = {"position": {"sentence 1": np.array([True, False]), "sentence 2": np.array([False, True])}}
    job = {"phase": "finetune", "variant": "baseline", "ranks": {"nq": [1, 2]},
           "curve": {"25": {"nq": [1, 0]}, "180": {"nq": [2, 1]}}}
    figures = study_sweep.slice_figures({"seeds": [2022], "question_ids": {"nq": ["q1", "q2"]},
                                          "jobs": {"baseline-2022": job}}, masks)
    curve = figures["curve"].set_index("step")
    assert list(curve.index) == [25, 180]
    assert curve.loc[25, "nq@1 sentence 1"] == 100.0 and curve.loc[25, "psi@1"] == 1.0
    assert curve.loc[180, "psi@1"] == 1.0 and curve.loc[180, "psi@5"] == 0.0
    assert figures["paired"].empty                      # nothing to pair with DPR alone


def test_the_dose_curve_pre_trains_every_seed_and_is_compared_dose_by_dose():
    jobs = study_sweep.plan([1, 2], poly=False, doses=[100, 200])
    names = [j["name"] for j in jobs]
    assert {"uncon_d100-pre-1", "mixed_d100-pre-2", "mixed_d200-pre-1"} <= set(names)
    assert not any(n.startswith(("uncon_d", "mixed_d")) and not n.split("-")[1] == "pre" for n in names)
    done = {n: {"name": n} for n in ("mixed_d100-pre-1", "mixed_d100-pre-2", "uncon_d100-pre-1", "uncon_d100-pre-2",
                                     "baseline-1")}
    runs = study_sweep.seeded_runs({"jobs": done, "seeds": [1, 2]})
    assert set(runs["mixed_d100-pre"]) == {1, 2}
    assert ("mixed_d100-pre", "uncon_d100-pre", {1, 2}) in study_sweep.compared_pairs(runs)


def test_the_sweep_rebuilds_stage_04s_dose_sets(tmp_path):
    """The pack carries the full sets; the dose sets are cut from them with stage 04's own function."""
    from ecqg.filtering import mixing
    from ecqg.data.dpr import read_dpr_retriever_json
    from ecqg.core.variants import SETS, dose_set

    def example(i, generator):
        return {"id": f"{generator}{i}", "generator": generator, "question": f"q {generator} {i}?", "answers": ["a"],
                "positive_ctxs": [{"title": "t", "text": f"text {i}", "passage_id": f"p{i}"}],
                "negative_ctxs": [], "hard_negative_ctxs": []}
    uncon = [example(i, "uncon") for i in range(8)]
    mixed = [example(i, "uncon") for i in range(4)] + [example(i, "con") for i in range(4)]
    for name, records in (("uncon", uncon), ("mixed", mixed)):
        (tmp_path / SETS[name].path).parent.mkdir(parents=True, exist_ok=True)
        write_dpr_retriever_json(tmp_path / SETS[name].path, records)
    from ecqg.core import settings

    doses = settings.Mixing(total=8, require_total=False, doses=[4])
    written = study_sweep.write_dose_sets(tmp_path, doses, 3)
    assert written == [str(dose_set("uncon", 4).path), str(dose_set("mixed", 4).path)]
    expected = mixing.dose_sets(uncon, mixed, [4], 3)[4]
    for records, name in zip(expected, ("uncon", "mixed")):
        got = list(read_dpr_retriever_json(tmp_path / dose_set(name, 4).path))
        assert [r["id"] for r in got] == [r["id"] for r in records]
