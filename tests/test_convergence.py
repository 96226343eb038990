"""Fine-tuning to convergence: validated snapshots, the patience rule, the best epoch end kept, and a cut run that
decides exactly as an uninterrupted one (ecqg/retrieval/convergence.py, the trainer's use of it)."""

import json

import numpy as np
import pytest
import torch

from ecqg.retrieval import convergence
from ecqg.retrieval.train import TrainConfig, train_biencoder
from tests.test_train import config, records, tiny_biencoder

pytestmark = pytest.mark.usefixtures("one_thread")


def entry(step, score=None, epoch_end=True):
    out = {"step": step}
    if score is not None:
        out.update({"val_top20": score, convergence.SNAPSHOT: True, **({convergence.EPOCH_END: True} if epoch_end
                                                                         else {})})
    return out


def test_patience_counts_epoch_ends_since_the_best_and_ties_keep_the_earliest():
    history = [entry(3, 0.5), entry(4, 0.9, epoch_end=False), entry(6, 0.6), entry(9, 0.6), entry(12, 0.55)]
    assert convergence.epoch_end_scores(history, "val_top20") == [(3, 0.5), (6, 0.6), (9, 0.6), (12, 0.55)]
    assert convergence.stale_epochs(history, "val_top20") == 2          # the step-4 snapshot is not an epoch end
    assert convergence.selected_step(history, "val_top20") == 6          # 9 ties 6: the earlier one stays
    assert convergence.should_stop(history, "val_top20", 2) and not convergence.should_stop(history, "val_top20", 3)
    assert not convergence.should_stop(history, "val_top20", None)
    assert convergence.improves(history, 0.61, "val_top20") and not convergence.improves(history, 0.6, "val_top20")
    assert convergence.selected_step([], "val_top20") is None and convergence.stale_epochs([], "val_top20") == 0


def test_config_checks_the_new_settings():
    assert TrainConfig(snapshot_steps=[5, 2]).snapshot_steps == (5, 2)
    with pytest.raises(ValueError, match="snapshot_steps"):
        TrainConfig(snapshot_steps=[0])
    with pytest.raises(ValueError, match="patience"):
        TrainConfig(patience=0)
    with pytest.raises(ValueError, match="select_metric"):
        TrainConfig(select_metric="loss")


class Scripted:
    """A validation that returns scripted scores by call, and remembers the steps and weights it saw."""

    def __init__(self, scores):
        self.scores, self.steps, self.weights = list(scores), [], {}

    def __call__(self, model, step):
        self.steps.append(step)
        self.weights[step] = {k: v.clone() for k, v in model.state_dict().items()}
        return {"val_top1": 0.0, "val_top5": 0.0, "val_top20": self.scores[len(self.steps) - 1]}


def test_patience_stops_and_keeps_the_best_epoch_end(tokenizer, tmp_path):
    # 24 records, batch 8: 3 steps an epoch. Snapshots: step 2 (asked for) and every epoch end (3, 6, 9, ...).
    validate = Scripted([0.1, 0.5, 0.7, 0.6, 0.65, 0.9])          # step 2, then epoch ends 3, 6, 9, 12
    cfg = config(epochs=10, max_steps=None, patience=2, snapshot_steps=[2])
    model = tiny_biencoder(tokenizer, dropout=0.0)
    history = train_biencoder(model, records(), None, cfg, tmp_path / "run", progress=False, validate=validate)
    assert validate.steps == [2, 3, 6, 9, 12]                       # 6 best, then 9 and 12 worse: stop after 12
    assert history[-1]["step"] == 12 and history[-1]["epoch"] == 3
    assert history[-1]["stopped_by"] == "patience"                  # recorded, not worked out again by the report
    assert [h["step"] for h in history if h.get(convergence.BEST)] == [3, 6]
    assert convergence.selected_step(history, "val_top20") == 6
    for name, value in model.state_dict().items():                 # the model returned is the step-6 one
        assert torch.equal(value, validate.weights[6][name]), name
    saved = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    assert [h["step"] for h in saved if h.get(convergence.SNAPSHOT)] == [2, 3, 6, 9, 12]


def test_a_cut_run_decides_as_an_uninterrupted_one(tokenizer, tmp_path):
    scores = [0.5, 0.7, 0.6, 0.65, 0.9]
    cfg = config(epochs=10, max_steps=None, patience=2, checkpoint_every=4)
    whole = train_biencoder(tiny_biencoder(tokenizer, dropout=0.0), records(), None, cfg, tmp_path / "whole",
                            progress=False, validate=Scripted(scores))

    def cut(entry):
        if entry["step"] == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_biencoder(tiny_biencoder(tokenizer, dropout=0.0), records(), None, cfg, tmp_path / "cut",
                        progress=False, validate=Scripted(scores), callback=cut)
    # the epoch-6 end was checkpointed (every validated epoch end is): the resumed run validates 9 and 12 only
    assert whole[-1]["stopped_by"] == "patience"
    resumed_validation = Scripted(scores[2:])
    model = tiny_biencoder(tokenizer, dropout=0.0)
    again = train_biencoder(model, records(), None, cfg, tmp_path / "cut", progress=False,
                            validate=resumed_validation)
    assert resumed_validation.steps == [9, 12]
    strip = ("examples_per_s", "step_seconds")
    assert [{k: v for k, v in h.items() if k not in strip} for h in again] == \
        [{k: v for k, v in h.items() if k not in strip} for h in whole]


def test_corpus_validation_finds_held_out_answers_and_keeps_the_curve_runs(tokenizer, tmp_path, monkeypatch):
    """The pipeline's validation: held-out questions retrieved over the corpus plus their own positives (answer
    hits), and the test sets' runs of each snapshot over the corpus alone."""
    from ecqg.core.io import write_jsonl
    from ecqg.stages.finetune_validation import corpus_validator, curve_step_dir
    from ecqg.retrieval.run_files import read_run

    monkeypatch.chdir(tmp_path)
    corpus = [{"id": f"c{i}", "title": w, "text": f"The {w} is far away. Its water is very deep.", "source": "t"}
              for i, w in enumerate(["lake", "hill", "forest"])]
    write_jsonl(tmp_path / "outputs" / "data" / "corpus.jsonl", corpus)
    write_jsonl(tmp_path / "outputs" / "data" / "questions" / "nq.jsonl",
                [{"id": "t1", "question": "where is the lake", "answers": ["lake"], "gold_ids": ["c0"]},
                 {"id": "t2", "question": "how deep is the hill", "answers": ["very deep"], "gold_ids": ["c1"]}])
    from pathlib import Path

    from ecqg.core import config as params_config, settings

    mini = settings.of(params_config.preset("mini", Path(__file__).resolve().parents[1] / "params"))
    data, retrieval = mini.data.replace(test_sets={"nq": "unused"}), mini.retrieval.replace(depth=3)
    dpr = mini.dpr.replace(encode=mini.dpr.encode.replace(batch_size=4, autocast=None), base_model="bundled:minilm",
                           passage_max_length=64, finetune=mini.dpr.finetune.replace(curve_probe_passages=5))
    held = records(4)                                   # positives p0..p3: not in the corpus, added for validation
    from ecqg.core import paths
    from ecqg.stages.finetune_curve import curve_gaps
    from ecqg.stages.finetune_validation import CURVE_DIR

    curve = paths.model_dir("baseline", 0) / CURVE_DIR              # where stage 05 keeps the first seed's curve
    validate = corpus_validator(dpr, data, retrieval, 0, held, curve)
    figures = validate(tiny_biencoder(tokenizer, dropout=0.0), 7)
    assert figures["val_questions"] == 4 and figures["val_passages"] == 3 + 4
    assert 0 <= figures["val_top1"] <= figures["val_top5"] <= figures["val_top20"] == 1.0   # 7 passages, 20 deep
    run = read_run(curve_step_dir(curve, 7) / "nq.trec")
    assert {pid for pid, _ in run["t1"]} == {"c0", "c1", "c2"}      # the corpus only, as retrieve_dense searches
    # the moved-sentence probe of 07, scored at the snapshot: t2's answer is in sentence 2 (t1's in sentence 1)
    probe = json.loads((curve_step_dir(curve, 7) / "moved_sentence.json").read_text())
    assert probe["question_ids"] == ["t2"] and len(probe["gaps"]) == 1
    validate(tiny_biencoder(tokenizer, dropout=0.0), 9)
    from ecqg.stages.finetune_curve import gap_table

    read = curve_gaps(["baseline"], 0)                              # what notebook 07 reads back
    assert sorted(read) == ["dpr_baseline@7", "dpr_baseline@9"] and all(len(g) == 1 for g in read.values())

    gaps = {"dpr_baseline@9": np.array([0.2, -0.1, 0.3]), "dpr_mixed@9": np.array([0.1, 0.1, 0.1]),
            "dpr_mixed@12": np.array([0.0, 0.0, 0.1])}
    table = gap_table(gaps, n_boot=200, seed=0, confidence=0.95)
    paired = table[table.kind == "paired"]
    assert list(zip(paired.variant, paired.step, paired.reference)) == [("mixed", 9, "dpr_baseline@9")]
    assert paired.gap.iloc[0] == pytest.approx(0.1 - 0.4 / 3)           # no baseline at step 12: no pair there
