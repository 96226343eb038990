"""[CLS] attention aggregation and measures: hand-built tensors and offsets, then a tiny random BERT end to end."""

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from ecqg.analysis import attention as A
from ecqg.runtime.models import resolve_model
from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig
from ecqg.data.text import Entity

matplotlib.use("Agg")

# "[CLS] spain [SEP] zo ##e ' s cafe - bar , [SEP]" for title "Spain", text "Zoë's café-bar, ok", cut after ","
TEXT = "Zoë's café-bar, ok"
OFFSETS = np.array([(0, 0), (0, 5), (0, 0), (0, 2), (2, 3), (3, 4), (4, 5), (6, 10), (10, 11), (11, 14), (14, 15),
                    (0, 0)])
SEQ = [None, 0, None, 1, 1, 1, 1, 1, 1, 1, 1, None]
ATTN = np.array([0.10, 0.20, 0.05, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.29])
HAND = A.PassageAttention(ATTN, OFFSETS, A._seq_array(SEQ), np.array([-1, 0, -1, 0, 0, 1, 2, 3, 4, 5, 6, -1]), 16)


# ------------------------------------------------------------------------------------------------ span attention
def test_multi_piece_accented_word_and_title_segment():
    zoe = A.span_attention(ATTN, OFFSETS, SEQ, 0, 3)              # "Zoë": zo + ##e (accent stripped by the tokenizer)
    assert zoe.attention == pytest.approx(0.03) and zoe.n_pieces == 2 and not zoe.truncated
    # the title piece also has offsets (0, 5) but belongs to segment 0: it must not leak into text spans
    assert A.span_attention(ATTN, OFFSETS, SEQ, 0, 5).attention == pytest.approx(0.10)
    assert A.span_attention(ATTN, OFFSETS, SEQ, 0, 5, segment=A.TITLE).attention == pytest.approx(0.20)


def test_entity_crossing_punctuation_and_partial_overlap():
    assert A.span_attention(ATTN, OFFSETS, SEQ, 6, 14).attention == pytest.approx(0.18)    # café - bar
    assert A.span_attention(ATTN, OFFSETS, SEQ, 1, 2).n_pieces == 1                        # inside "zo"
    with pytest.raises(ValueError):
        A.span_attention(ATTN, OFFSETS, SEQ, 3, 3)


def test_truncated_span_keeps_surviving_pieces():
    cut = A.score_span(HAND, 14, 18)              # ", ok": "," survived, "ok" was cut at character 16
    assert cut.attention == pytest.approx(0.08) and cut.n_pieces == 1 and cut.truncated
    gone = A.score_span(HAND, 16, 18)
    assert gone == (0.0, 0, True)
    assert not A.score_span(HAND, 6, 14).truncated


def test_repeated_entity_takes_max_over_whole_occurrences():
    ents = [Entity("x", "ORG", 0, 3, ((0, 3), (6, 10), (16, 18))),   # 0.03, 0.05, truncated
            Entity("y", "GPE", 16, 18, ((16, 18),))]                # only truncated -> not eligible
    x, y = A.entity_scores(HAND, ents, len(TEXT))
    assert x["attention"] == pytest.approx(0.05) and x["start_char"] == 6
    assert x["attention_first"] == pytest.approx(0.03) and x["attention_sum"] == pytest.approx(0.08)
    assert x["relative_position"] == pytest.approx(6 / len(TEXT)) and x["eligible"] and x["n_occurrences"] == 3
    assert not y["eligible"] and math.isnan(y["attention"]) and y["truncated"]


def test_word_attention_sums_pieces_into_written_words():
    words = A.word_attention(HAND, TEXT)
    assert words.word.tolist() == ["Zoë's", "café-bar,"]              # "ok" is past the cut
    assert words.attention.tolist() == pytest.approx([0.10, 0.26])
    assert A.word_spans(words, [(6, 10), (0, 14)]) == [(1, 2), (0, 2)]


# ------------------------------------------------------------------------------------------------------ measures
def test_entropy_uniform_and_one_hot():
    n = 7
    attn = np.r_[0.3, np.full(n, 0.1), 0.0]                  # [CLS] mass and a [SEP] are excluded by the mask
    mask = np.r_[False, np.ones(n, bool), False]
    assert A.attention_entropy(attn, mask) == pytest.approx(math.log(n))
    one_hot = np.r_[0.5, 0.0, 0.5, 0.0, 0.0]
    assert A.attention_entropy(one_hot, [False, True, True, True, False]) == pytest.approx(0.0)
    assert math.isnan(A.attention_entropy(one_hot, [False] * 5))
    assert A.attention_entropy(HAND.attention, HAND.text_mask) < math.log(HAND.text_mask.sum())


def test_sentence_shares_on_known_distribution():
    # text "Aa bb. Cc dd ee." -> pieces Aa bb . | Cc dd ee . ; sentence 2 starts at char 7
    offsets = [(0, 0), (0, 2), (3, 5), (5, 6), (7, 9), (10, 12), (13, 15), (15, 16), (0, 0)]
    seq = [None, 1, 1, 1, 1, 1, 1, 1, None]
    attn = [0.3, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.2]
    s = A.sentence_shares(attn, offsets, seq, [(0, 6), (7, 16)])
    assert s.first_sentence_share == pytest.approx(0.6)
    assert s.first_sentence_mean == pytest.approx(0.2) and s.later_sentence_mean == pytest.approx(0.1)
    assert s.n_sentences == 2
    single = A.sentence_shares(attn, offsets, seq, [(0, 16)])
    assert single.first_sentence_share == pytest.approx(1.0) and math.isnan(single.later_sentence_mean)


# ----------------------------------------------------------------------------------------------------- selection
def _ents(scores, eligible=None):
    eligible = eligible or [True] * len(scores)
    return [{"entity": f"e{i}", "start_char": 10 * i, "attention": s, "eligible": ok}
            for i, (s, ok) in enumerate(zip(scores, eligible))]


def test_lowest_needs_more_than_four_eligible_entities():
    assert A.lowest_attended_entities(_ents([0.1, 0.2, 0.3, 0.4]), 3) is None
    assert A.lowest_attended_entities(_ents([0.1, 0.2, 0.3, 0.4, 0.5], [True] * 4 + [False]), 3) is None
    chosen = A.lowest_attended_entities(_ents([0.5, 0.1, 0.4, 0.2, 0.3]), 3)
    assert [e["entity"] for e in chosen["lowest"]] == ["e1", "e3", "e4"]
    assert chosen["highest"]["entity"] == "e0" and chosen["n_entities"] == 5
    with pytest.raises(ValueError):
        A.lowest_attended_entities(_ents([0.1] * 5), 5, min_entities=5)


def test_ties_go_to_the_earlier_entity():
    chosen = A.lowest_attended_entities(_ents([0.2, 0.1, 0.1, 0.3, 0.3, 0.1]), 2)
    assert [e["entity"] for e in chosen["lowest"]] == ["e1", "e2"]
    assert chosen["highest"]["entity"] == "e3"


def test_select_entities_and_position_bias_by_hand():
    rows = []
    # p0: highest at 0.1, lowest at 0.9 | p1: highest at 0.6, lowest at 0.2 | p2: highest at 0.0, lowest at 0.5
    for pid, positions, scores in [("p0", [0.1, 0.3, 0.5, 0.7, 0.9], [0.9, 0.5, 0.4, 0.3, 0.1]),
                                   ("p1", [0.2, 0.3, 0.4, 0.5, 0.6], [0.1, 0.2, 0.3, 0.4, 0.8]),
                                   ("p2", [0.0, 0.1, 0.2, 0.3, 0.5], [0.7, 0.6, 0.5, 0.4, 0.05]),
                                   ("p3", [0.0, 0.9], [0.1, 0.2])]:                     # too few entities
        for i, (pos, sc) in enumerate(zip(positions, scores)):
            rows.append({"passage_id": pid, "entity": f"{pid}-{i}", "start_char": i, "relative_position": pos,
                         "attention": sc, "eligible": True})
    selection = A.select_entities(pd.DataFrame(rows), n=3)
    assert sorted(selection.passage_id.unique()) == ["p0", "p1", "p2"]
    assert (selection.role == "lowest").sum() == 9 and (selection.role == "highest").sum() == 3
    bias = A.position_bias(selection, n_boot=200)
    assert bias["n_passages"] == 3
    assert bias["highest_first_half"] == pytest.approx(2 / 3)          # p0, p2 (0.5 is the second half)
    assert bias["lowest_second_half"] == pytest.approx(2 / 3)          # p0 (0.9), p2 (0.5)
    lo, hi = bias["highest_first_half_ci"]
    assert 0.0 <= lo <= 2 / 3 <= hi <= 1.0
    assert A.position_bias([])["n_passages"] == 0


# ---------------------------------------------------------------------------------------------- tiny random BERT
@pytest.fixture(scope="module")
def tiny():
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
    config = BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                        vocab_size=tokenizer.vocab_size, max_position_embeddings=64)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = BertModel(config)
    return BiEncoder(model, model, tokenizer, BiEncoderConfig("tiny-random", shared=True, passage_max_length=40))


PASSAGES = [
    {"id": "a", "title": "Berlin", "text": "Angela Merkel flew from Berlin to Paris on Monday. In Paris, she met "
                                            "Emmanuel Macron at the Élysée Palace. Both leaders later returned to "
                                            "Berlin, then to Hamburg and Munich with Olaf Scholz."},
    {"id": "b", "title": "", "text": "Zoë Saldaña visited São Paulo."},
    {"id": "c", "title": "Music", "text": "The Beatles were an English rock band formed in Liverpool in 1960."},
]


def test_cls_attention_rows_sum_to_one_and_batching_is_invisible(tiny):
    titles, texts = [p["title"] for p in PASSAGES], [p["text"] for p in PASSAGES]
    batched = A.cls_attention(tiny, titles, texts, batch_size=2)
    single = [A.cls_attention(tiny, [t], [x], batch_size=1)[0] for t, x in zip(titles, texts)]
    for b, s, text in zip(batched, single, texts):
        assert b.attention.sum() == pytest.approx(1.0, abs=1e-5)
        np.testing.assert_allclose(b.attention, s.attention, atol=1e-6)     # padding and order restore are exact
        assert len(b.attention) == len(b.offsets) == len(b.sequence_ids) <= 40
        assert b.sequence_ids[0] == A.SPECIAL and b.sequence_ids[-1] == A.SPECIAL
    assert batched[0].truncated and not batched[1].truncated
    assert texts[0][batched[0].cut_char - 1] == " " and batched[0].cut_char < len(texts[0])
    assert A.score_span(batched[1], 0, 3).n_pieces >= 1                    # "Zoë" maps back through its accent
    assert tiny.passage_encoder.training                                   # the caller's mode is restored


def test_analyze_passages_end_to_end(tiny):
    study = A.analyze_passages(tiny, PASSAGES, batch_size=2, progress=False)
    assert study.passages.passage_id.tolist() == ["a", "b", "c"]
    shares = study.passages[["text_share", "title_share", "special_share"]].sum(axis=1)
    np.testing.assert_allclose(shares, 1.0, atol=1e-5)
    assert (study.passages.entropy > 0).all()
    ents = study.entities
    assert {"Angela Merkel", "Berlin", "Liverpool"} <= set(ents.entity)
    assert not ents[ents.entity == "Olaf Scholz"].eligible.any()           # past the 40-token cut
    assert (ents[ents.eligible].n_pieces > 0).all()
    assert A.select_entities(ents, n=3).passage_id.unique().tolist() in ([], ["a"])


def test_model_without_attentions_fails_clearly(tiny):
    config = BertConfig.from_dict(tiny.passage_encoder.config.to_dict())
    config._attn_implementation = "sdpa"
    model = BertModel(config)
    with pytest.raises(A.AttentionUnavailableError, match="eager"):
        A.cls_attention(model, ["t"], ["some text"], tokenizer=tiny.tokenizer)
    with pytest.raises(ValueError, match="tokenizer"):
        A.cls_attention(model, ["t"], ["some text"])


def test_figures_build(tiny):
    study = A.analyze_passages(tiny, PASSAGES, progress=False)
    from ecqg.analysis import plots

    words = A.word_attention(study.attention[0], PASSAGES[0]["text"])
    spans = A.word_spans(words, [o for occ in study.entities.occurrences[study.entities.passage_id == "a"]
                                 for o in map(tuple, occ)])
    figs = [plots.plot_attention_heatmap(words.word.tolist(), words.attention, spans, title="a"),
            plots.plot_entity_position({"x": study.entities, "y": study.entities}, bins=4, n_boot=50),
            plots.plot_entropy_hist({"x": study.passages.entropy, "y": study.passages.entropy + 0.1})]
    assert abs(words.attention.sum() - study.passages.text_share[0]) < 1e-5
    for fig in figs:
        assert fig.axes
        matplotlib.pyplot.close(fig)
