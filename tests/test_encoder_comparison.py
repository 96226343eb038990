"""The three-model attention comparison and the Table 1 probe, on tiny random bi-encoders and hand-made frames."""

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from transformers import BertConfig, BertModel

from ecqg.analysis import encoder_comparison as ec
from ecqg.analysis import plots, seed_plots
from ecqg.analysis.labels import ENCODER_LABELS
from ecqg.core import paper
from ecqg.core.errors import DataFormatError
from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig

matplotlib.use("Agg")

PASSAGES = [
    {"id": "p1", "title": "Spain", "text": "Madrid is the capital of Spain. It lies on the Manzanares river."},
    {"id": "p2", "title": "Paris", "text": "Paris is in France. The Seine flows through it. It has many museums."},
    {"id": "p3", "title": "Nile", "text": "The Nile is a long river in Africa."},
    {"id": "p4", "title": "Berlin", "text": "Berlin hosts the Bundestag. Berlin was divided until 1990."},
]


def _tiny(tokenizer, seed: int) -> BiEncoder:
    config = BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                        vocab_size=tokenizer.vocab_size, max_position_embeddings=64)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    query, passage = BertModel(config), BertModel(config)
    return BiEncoder(query, passage, tokenizer, BiEncoderConfig("tiny-random", query_max_length=16,
                                                                passage_max_length=48))


@pytest.fixture(scope="module")
def models(tokenizer):
    return {"dpr_baseline": _tiny(tokenizer, 0), "dpr_mixed": _tiny(tokenizer, 1)}


@pytest.fixture(scope="module")
def frame(models):
    return ec.compare_attention(models, PASSAGES, batch_size=3)


def test_compare_attention_rows_and_ranges(frame):
    assert len(frame) == 2 * len(PASSAGES)
    assert list(frame.encoder.unique()) == ["dpr_baseline", "dpr_mixed"]
    for _, group in frame.groupby("encoder"):
        assert list(group.passage_id) == [p["id"] for p in PASSAGES]
    assert (frame.entropy >= 0).all() and (frame.entropy <= frame.max_entropy + 1e-9).all()
    assert np.allclose(frame.max_entropy, np.log(frame.n_text_tokens))
    assert ((frame.first_sentence_share >= 0) & (frame.first_sentence_share <= 1)).all()
    multi = frame.n_sentences >= 2
    assert np.allclose(frame.first_sentence_share[multi] + frame.later_sentence_share[multi], 1.0)
    # "The Nile is a long river in Africa." has one sentence: no later sentences to attend to.
    single = frame[frame.passage_id == "p3"]
    assert (single.n_sentences == 1).all() and single.later_sentence_share.isna().all()
    assert (frame.text_share > 0).all() and (frame.text_share <= 1).all()


def test_compare_attention_bad_input(models):
    with pytest.raises(DataFormatError, match="record 2.*text"):
        ec.compare_attention(models, [PASSAGES[0], {"id": "x", "text": " "}])
    with pytest.raises(ValueError, match="no models"):
        ec.compare_attention({}, PASSAGES)


def test_probe_scores_are_the_dot_product(models):
    probes = [{"passage_id": "p1", "role": "highest", "entity": "Madrid", "question": "what is the capital of spain"},
              {"passage_id": "p1", "role": "lowest", "entity": "Manzanares", "question": "which river is in madrid"},
              {"passage_id": "p4", "role": "highest", "entity": "Berlin", "question": "when was berlin divided"}]
    scores = ec.probe_scores(models, probes, PASSAGES, batch_size=2)
    assert len(scores) == 2 * len(probes)
    for key, model in models.items():
        model.eval()
        with torch.no_grad():
            q = model.encode_queries(model.tokenize_queries([p["question"] for p in probes]))
            by_id = {p["id"]: p for p in PASSAGES}
            pas = [by_id[p["passage_id"]] for p in probes]
            v = model.encode_passages(model.tokenize_passages([p["title"] for p in pas], [p["text"] for p in pas]))
        expected = (q * v).sum(-1).numpy()
        got = scores[scores.encoder == key].score.to_numpy()
        assert np.allclose(got, expected, atol=1e-4), key


def test_probe_scores_bad_input(models):
    with pytest.raises(DataFormatError, match="record 1.*role"):
        ec.probe_scores(models, [{"passage_id": "p1", "role": "middle", "question": "q"}], PASSAGES)
    with pytest.raises(DataFormatError, match="record 1.*passage_id.*nope"):
        ec.probe_scores(models, [{"passage_id": "nope", "role": "lowest", "question": "q"}], PASSAGES)
    with pytest.raises(DataFormatError, match="record 1.*question"):
        ec.probe_scores(models, [{"passage_id": "p1", "role": "lowest"}], PASSAGES)


def _hand_frame() -> pd.DataFrame:
    """Mixed puts exactly 2 points more of its attention on later sentences and 0.1 nats more entropy than DPR."""
    rows = []
    for i, (share, ent) in enumerate([(0.50, 4.0), (0.60, 3.9), (0.70, 4.2), (0.40, 4.1), (0.55, 3.8)]):
        for enc, extra in (("dpr_baseline", 0.0), ("dpr_mixed", 0.02), ("dpr_uncon", 0.01)):
            rows.append({"encoder": enc, "passage_id": f"p{i}", "entropy": ent + 5 * extra,
                         "later_sentence_share": share + extra, "first_sentence_mean": 0.02,
                         "later_sentence_mean": 0.01 + extra / 10})
    rows.append({"encoder": "dpr_baseline", "passage_id": "p9", "entropy": 4.0, "later_sentence_share": float("nan"),
                 "first_sentence_mean": 0.02, "later_sentence_mean": float("nan")})
    return pd.DataFrame(rows)


def test_attention_summary_numbers():
    s = ec.attention_summary(_hand_frame(), n_boot=500, seed=0)
    enc = s[(s.kind == "encoder") & (s.measure == "later_sentence_share")].set_index("encoder")
    # p9 lacks the other encoders (and a later share): left out, so all encoders average the same 5 passages.
    assert (enc.n == 5).all()
    assert enc.value["dpr_baseline"] == pytest.approx(100 * np.mean([0.5, 0.6, 0.7, 0.4, 0.55]))
    assert enc.ci_low["dpr_baseline"] <= enc.value["dpr_baseline"] <= enc.ci_high["dpr_baseline"]
    pair = s[(s.kind == "paired") & (s.measure == "later_sentence_share")].set_index(["encoder", "reference"])
    assert set(pair.index) == set(ec.DEFAULT_PAIRS)
    mixed_dpr = pair.loc[("dpr_mixed", "dpr_baseline")]
    assert mixed_dpr.value == pytest.approx(2.0) and mixed_dpr.unit == "points"
    assert mixed_dpr.ci_low == pytest.approx(2.0) and mixed_dpr.ci_high == pytest.approx(2.0)  # constant shift
    assert mixed_dpr.p_value < 0.01 and mixed_dpr.paper == 1.8
    assert pair.loc[("dpr_mixed", "dpr_uncon")].value == pytest.approx(1.0)
    ent = s[(s.kind == "encoder") & (s.measure == "entropy")].set_index("encoder")
    assert ent.loc["dpr_mixed", "value"] - ent.loc["dpr_baseline", "value"] == pytest.approx(0.1)
    assert ent.loc["dpr_baseline", "paper"] == 3.97
    only = ec.attention_summary(_hand_frame(), reference_pairs=[("dpr_mixed", "absent")], n_boot=50)
    assert (only.kind == "encoder").all()


def test_paired_mean_difference_zero_effect():
    res = ec.paired_mean_difference(np.array([1.0, -1.0, 0.5, -0.5]), n_boot=999, seed=0)
    assert res["difference"] == 0 and res["p_value"] == 1.0 and res["n"] == 4
    assert math.isnan(ec.paired_mean_difference(np.array([]), n_boot=10)["difference"])


def test_probe_summary_numbers():
    rows = []
    for pid, high, low in (("a", [10.0, 12.0], [9.0]), ("b", [8.0], [9.0]), ("c", [7.0], [5.0]), ("d", [6.0], [])):
        rows += [{"encoder": "dpr_baseline", "passage_id": pid, "role": "highest", "score": x} for x in high]
        rows += [{"encoder": "dpr_baseline", "passage_id": pid, "role": "lowest", "score": x} for x in low]
    out = ec.probe_summary(pd.DataFrame(rows), n_boot=500).iloc[0]
    # per-passage means first: a 11 vs 9, b 8 vs 9, c 7 vs 5; d has no lowest question and is left out
    assert out.n_passages == 3 and out.n_questions == 7
    assert out.highest == pytest.approx((11 + 8 + 7) / 3) and out.lowest == pytest.approx((9 + 9 + 5) / 3)
    assert out.difference == pytest.approx(1.0)
    assert out.highest_wins == pytest.approx(200 / 3)
    assert out.difference_ci_low <= out.difference <= out.difference_ci_high
    assert (out.paper_highest, out.paper_lowest) == (73.7, 72.1)


def test_metrics_tree_and_plots(tmp_path):
    summary = ec.attention_summary(_hand_frame(), n_boot=100)
    probe = ec.probe_summary(pd.DataFrame([
        {"encoder": e, "passage_id": p, "role": r, "score": s}
        for e in ("dpr_baseline", "dpr_mixed") for p, r, s in
        (("a", "highest", 3.0), ("a", "lowest", 2.0), ("b", "highest", 1.0), ("b", "lowest", 1.5))]), n_boot=100)
    path = ec.write_metrics(summary, probe, {"passages": 5, "n_boot": 100}, tmp_path / "encoder_comparison.json")
    import json
    tree = json.loads(path.read_text())
    assert tree["attention"]["encoders"]["dpr_mixed"]["later_sentence_share_n"] == 5
    assert tree["attention"]["paired"]["dpr_mixed_minus_dpr_baseline"]["later_sentence_share_diff"] == 2.0
    assert tree["table1_probe"]["dpr_baseline"]["difference"] == pytest.approx(0.25)
    assert tree["table1_probe"]["dpr_baseline"]["n_passages"] == 2
    labels = ENCODER_LABELS
    frame = _hand_frame()
    for fig in (plots.plot_entropy_violins({labels[k]: g.entropy for k, g in frame.groupby("encoder")},
                                           paper={labels[k]: v for k, v in paper.ATTENTION["entropy"].items()}),
                plots.plot_sentence_shares(summary, labels), plots.plot_probe_scores(probe, labels)):
        assert fig.axes
        matplotlib.pyplot.close(fig)


def _paired_summary(later: float, later_p: float, entropy: float) -> pd.DataFrame:
    """An attention_summary-shaped frame with one paired comparison (and a per-piece measure seeds ignore)."""
    row = dict(kind="paired", unit="points", encoder="dpr_mixed", reference="dpr_baseline", n=50, paper=None)
    return pd.DataFrame([
        {**row, "measure": "later_sentence_share", "value": later, "ci_low": later - 1, "ci_high": later + 1,
         "p_value": later_p},
        {**row, "measure": "entropy", "unit": "nats", "value": entropy, "ci_low": entropy - 0.01,
         "ci_high": entropy + 0.01, "p_value": 0.5},
        {**row, "measure": "first_sentence_mean", "value": 9.0, "ci_low": 8.0, "ci_high": 10.0, "p_value": 0.1},
        {**row, "kind": "encoder", "measure": "entropy", "value": 4.0, "reference": None, "p_value": float("nan")}])


def _probe_summary(gap: float, p: float) -> pd.DataFrame:
    return pd.DataFrame([{"encoder": "dpr_baseline", "n_passages": 30, "difference": gap,
                          "difference_ci_low": gap - 0.5, "difference_ci_high": gap + 0.5, "difference_p": p}])


def test_seed_rows_and_across_seeds_count_the_seeds_that_agree():
    rows = ec.seed_rows({2022: _paired_summary(2.0, 0.001, 0.02), 2023: _paired_summary(3.0, 0.2, -0.01),
                         2024: _paired_summary(-1.0, 0.01, 0.03)},
                        {2022: _probe_summary(1.0, 0.001), 2023: _probe_summary(2.0, 0.001),
                         2024: _probe_summary(0.5, 0.3)})
    assert len(rows) == 3 * 2 + 3             # two attention measures per seed (not the per-piece one), one gap
    assert set(rows.name) == {"dpr_mixed_minus_dpr_baseline", "dpr_baseline"}
    across = ec.across_seeds(rows).set_index(["kind", "measure"])
    later = across.loc[("attention", "later_sentence_share")]
    assert later["seeds"] == 3 and later["mean"] == pytest.approx(4 / 3)
    assert later["sd"] == pytest.approx(np.std([2.0, 3.0, -1.0], ddof=1))
    assert (later["min"], later["max"]) == (-1.0, 3.0)
    # two seeds share the mean's sign; of those only 2022 is significant (2023's p is 0.2; 2024 has the other sign)
    assert later["same_sign"] == 2 and later["significant_same_sign"] == 1
    gap = across.loc[("probe", "difference")]
    assert gap["same_sign"] == 3 and gap["significant_same_sign"] == 2
    one = ec.across_seeds(ec.seed_rows({2022: _paired_summary(2.0, 0.001, 0.02)}))
    assert one.seeds.eq(1).all() and one.sd.isna().all()


def test_seeds_node_of_the_metrics_reads_like_the_first_seeds(tmp_path):
    import json

    from ecqg.report import agreement
    from ecqg.report.sections import render_encoder_comparison

    rows = ec.seed_rows({2022: _paired_summary(2.0, 0.001, 0.02), 2023: _paired_summary(3.0, 0.2, -0.01)},
                        {2022: _probe_summary(1.0, 0.001), 2023: _probe_summary(-2.0, 0.001)})
    path = ec.write_metrics(None, None, {"passages": 50}, tmp_path / "encoder_comparison.json", seeds=rows)
    seeds = json.loads(path.read_text())["seeds"]
    assert (seeds["n_seeds"], seeds["seeds"]) == (2, "2022, 2023")
    node = seeds["attention_paired"]["dpr_mixed_minus_dpr_baseline"]
    assert node["s2023"]["later_sentence_share_diff"] == 3.0 and node["s2023"]["later_sentence_share_p"] == 0.2
    assert node["across"]["later_sentence_share_mean"] == 2.5 and node["across"]["entropy_same_sign"] == 1
    probe = seeds["table1_probe"]["dpr_baseline"]
    assert probe["s2022"]["difference_n"] == 30 and probe["across"]["difference_significant_same_sign"] == 1
    # every seed's paired test is one that `python -m ecqg.report.agreement` compares between two runs
    tests = agreement._tests(dict(agreement.flatten(json.loads(path.read_text()))))
    assert tests["seeds/attention_paired/dpr_mixed_minus_dpr_baseline/s2023/later_sentence_share"] == (0.2, 3.0)
    assert tests["seeds/table1_probe/dpr_baseline/s2022/difference"] == (0.001, 1.0)
    text = render_encoder_comparison(json.loads(path.read_text()))
    assert "| Mixed-DPR - DPR | later-sentence share (points) | 2022: +2.00 (p 0.001); 2023: +3.00 (p 0.200) " \
           "| +2.50 ± 0.71 | 2 / 2 | 1 / 2 |" in text
    assert "| DPR, Table 1 probe | probe gap | 2022: +1.00 (p 0.001); 2023: -2.00 (p 0.001) | -0.50 ± 2.12 " \
           "| 1 / 2 | 1 / 2 |" in text
    one = ec.write_metrics(None, None, {}, tmp_path / "one.json", seeds=ec.seed_rows({2022: _paired_summary(
        2.0, 0.001, 0.02)}))
    assert "training seeds" not in render_encoder_comparison(json.loads(one.read_text()))   # one seed: no table


def test_compare_attention_reuses_a_sentence_split_of_the_same_passages(models, frame):
    sentences = ec.sentence_split(PASSAGES)
    again = ec.compare_attention(models, PASSAGES, batch_size=3, sentences=sentences)
    pd.testing.assert_frame_equal(again, frame)
    with pytest.raises(ValueError, match="3 sentence splits for 4 passages"):
        ec.compare_attention(models, PASSAGES, sentences=sentences[:3])


def test_plot_seed_differences_has_a_panel_per_measure():
    rows = ec.seed_rows({2022: _paired_summary(2.0, 0.001, 0.02), 2023: _paired_summary(3.0, 0.2, -0.01)},
                        {2022: _probe_summary(1.0, 0.001)})
    fig = seed_plots.plot_seed_differences(rows, ENCODER_LABELS)
    assert len(fig.axes) == 3 and fig.axes[0].get_legend() is not None
    matplotlib.pyplot.close(fig)
