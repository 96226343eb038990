"""Poly-DPR's codes: attention per code sums to one over the passage, the mean code's measures, wins per code, and
code similarity that shows a collapse."""

import math

import numpy as np
import pytest
import torch

from ecqg.analysis import poly_codes
from tests.test_polydpr import PASSAGES, tiny


def _with_sentences(passages):
    out = []
    for p in passages:
        cut = p["text"].index(",") + 1
        out.append({**p, "sentences": [(0, cut), (cut + 1, len(p["text"]))]})
    return out


def test_each_code_attends_over_the_passage_and_the_mean_is_reported():
    model = tiny(3)
    passages = _with_sentences(PASSAGES[:4])
    attention = poly_codes.code_attention(model, passages, batch_size=3)
    assert len(attention) == 4
    for attn, offsets, seq_ids in attention:
        assert attn.shape[0] == 3 and attn.shape[1] == len(offsets) == len(seq_ids)
        np.testing.assert_allclose(attn.sum(axis=1), 1.0, atol=1e-5)
    table = poly_codes.code_attention_table(model, passages, batch_size=3)
    assert len(table) == 4 * (3 + 1) and set(table.code) == {0, 1, 2, "mean"}
    assert table.entropy.between(0, math.log(64)).all() and table.later_sentence_share.between(0, 1).all()
    no_sentences = poly_codes.code_attention_table(model, PASSAGES[:2])
    assert no_sentences.later_sentence_share.isna().all() and no_sentences.entropy.notna().all()


def test_wins_count_the_best_code_of_each_question():
    model = tiny(4)
    questions = [f"which river runs through {p['title']}?" for p in PASSAGES]
    wins = poly_codes.code_wins(model, questions, PASSAGES, batch_size=3)
    assert wins.shape == (4,) and wins.sum() == len(PASSAGES)
    with pytest.raises(ValueError, match="pair them one to one"):
        poly_codes.code_wins(model, questions[:2], PASSAGES)


def test_collapsed_codes_are_seen_as_such():
    model = tiny(3)
    distinct = poly_codes.code_similarity(model, PASSAGES)
    assert distinct["codes"] < 0.9
    with torch.no_grad():
        model.codes[:] = model.codes[0]            # all codes equal: every pooled vector is the same
    collapsed = poly_codes.code_similarity(model, PASSAGES)
    assert collapsed["codes"] == pytest.approx(1.0, abs=1e-5)
    assert collapsed["passage_vectors"] == pytest.approx(1.0, abs=1e-4)
    assert math.isnan(poly_codes.code_similarity(tiny(1), PASSAGES)["codes"])
