"""TempQG's templates: specific entities blanked by document frequency, near duplicates clustered at a threshold,
the shortest (or second shortest) member as the cluster's template."""

import pytest

from ecqg.tempqg.templates import (BLANK, assign, blank_entities, cluster_templates, entity_document_frequency,
                               extract_templates, template_statistics)

PASSAGES = ["The river Rhone flows through Lyon.", "A river runs through Paris, the French capital.",
            "The river Seine is long.", "Steve Jobs founded Apple in a garage.", "Lyon has two rivers."]


def test_document_frequency_counts_passages_with_the_whole_word_sequence():
    df = entity_document_frequency(["river", "Lyon", "Steve Jobs", "Jobs Steve", "Rhone flows", "Rho", "x " * 9],
                                   PASSAGES)
    # "river" is in 3 passages ("rivers" is another word); a multi-word entity counts only in that order
    assert df == {"river": 3, "Lyon": 2, "Steve Jobs": 1, "Jobs Steve": 0, "Rhone flows": 1, "Rho": 0,
                  "x " * 9: 0}


def test_blanks_replace_specific_spans_merge_and_keep_punctuation_tight():
    question = "Who founded the Denver Broncos in Colorado?"
    spans = [(16, 22), (23, 30), (34, 42)]
    assert blank_entities(question, spans, [True, True, True]) == "Who founded the _ in _?"
    assert blank_entities(question, spans, [True, True, False]) == "Who founded the _ in Colorado?"
    assert blank_entities("What is Apple's revenue?", [(8, 13)], [True]) == "What is _'s revenue?"
    assert blank_entities("Apple?", [(0, 5)], [False]) == "Apple?"


def test_extraction_keeps_frequent_entities_and_blanks_rare_ones():
    questions = ["Which river flows through Lyon?", "Who founded Apple?"]
    raw, df = extract_templates(questions, PASSAGES, min_df=2)
    assert df["Lyon"] == 2 and df["Apple"] == 1
    assert raw[1] == f"Who founded {BLANK}?"                     # DF 1 < 2: specific
    assert raw[0] == "Which river flows through Lyon?"           # DF 2: common enough to stay
    raw, _ = extract_templates(questions, PASSAGES, min_df=3)
    assert raw[0] == f"Which river flows through {BLANK}?"
    with pytest.raises(ValueError, match="min_df must be >= 1"):
        extract_templates(questions, PASSAGES, min_df=0)


RAW = ["When was _ founded?", "When was _ founded?", "When was _ established?", "When was _ born?",
       "When was the _ founded?", "Where is _?", "Who wrote _ and _ in _?"]


def test_clusters_form_at_the_threshold_and_not_below_it():
    # word-level Indel similarity: "when was _ founded" vs "when was _ born" = 1 - 2 / 8 = 0.75
    at = cluster_templates(RAW, threshold=0.75)
    assert at.of_question[0] == at.of_question[1] == at.of_question[2] == at.of_question[3] == at.of_question[4]
    assert len(set(at.of_question)) == 3
    above = cluster_templates(RAW, threshold=0.76)
    assert above.of_question[0] != above.of_question[3]          # 0.75 < 0.76: apart
    assert above.of_question[0] == above.of_question[4]          # "the" added: 1 - 1 / 9 = 0.89
    assert len(cluster_templates(RAW, threshold=1.0).representatives) == len(set(RAW))
    with pytest.raises(ValueError, match="threshold must be in"):
        cluster_templates(RAW, threshold=0)


def test_the_cluster_template_is_its_shortest_or_second_shortest_member():
    shortest = cluster_templates(RAW, threshold=0.75)
    c = shortest.of_question[0]
    assert shortest.representatives[c] == "When was _ born?"          # 4 words, fewer characters than "founded"
    assert set(shortest.members[c]) == {"When was _ founded?", "When was _ established?", "When was _ born?",
                                        "When was the _ founded?"}
    second = cluster_templates(RAW, threshold=0.75, representative="second_shortest")
    assert second.representatives[c] == "When was _ founded?"
    assert second.representatives[second.of_question[5]] == "Where is _?"   # one member: itself
    assert assign(shortest)[:2] == ["When was _ born?"] * 2
    assert cluster_templates(list(reversed(RAW)), 0.75).representatives == shortest.representatives  # order-free
    with pytest.raises(ValueError, match="representative must be one of"):
        cluster_templates(RAW, representative="longest")


def test_statistics_count_questions_blanks_and_cluster_sizes():
    stats = template_statistics(cluster_templates(RAW + ["How tall is Everest?"], 0.75), examples=2)
    assert stats["questions"] == 8 and stats["with_blank"] == 7 and stats["distinct_templates"] == 7
    assert stats["clusters"] == 4 and stats["singleton_clusters"] == 3 and stats["largest_cluster"] == 5
    assert stats["examples"][0] == {"template": "When was _ born?", "questions": 5,
                                    "members": ["When was _ founded?", "When was _ born?", "When was _ established?"]}


# ---------------------------------------------------------------------------------------------- the selector
def test_the_selector_trains_on_passage_template_pairs_and_saves_and_loads(tmp_path, monkeypatch):
    """A tiny Poly-DPR learns (passage -> template) pairs with the pipeline's own loop; the loaded selector picks
    what the trained one picks; accuracy counts a pair's own template among the top k, measured at the precision the
    pipeline chooses templates with."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from ecqg.runtime.models import resolve_model
    from ecqg.retrieval.polydpr import PolyConfig, PolyDPR
    from ecqg.retrieval.retriever import load_retriever
    from ecqg.retrieval.train import TrainConfig, train_biencoder
    from ecqg.tempqg import selector

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32,
                        vocab_size=tokenizer.vocab_size, max_position_embeddings=64)
    model = PolyDPR(BertModel(config), BertModel(config), tokenizer,
                    PolyConfig("tiny", codes=2, query_max_length=48, passage_max_length=16))
    passages = {str(i): {"id": str(i), "title": f"Town {i}", "text": p} for i, p in enumerate(PASSAGES)}
    questions = [{"id": f"q{i}", "passage_id": str(i), "question": q} for i, q in
                 enumerate(["Which river flows through _?", "What runs through _?", "How long is _?",
                            "Who founded _?", "How many rivers has _?"])]
    templates = cluster_templates([q["question"] for q in questions], 0.75)
    pairs = selector.training_pairs(questions, passages, templates)
    assert pairs[3]["question"] == "Town 3 Steve Jobs founded Apple in a garage."
    assert pairs[3]["positive_ctxs"][0]["text"] == "Who founded _?"
    with pytest.raises(ValueError, match="question 'x': passage 9 is not in the passages"):
        selector.training_pairs([{"id": "x", "passage_id": 9}] * 5, passages, templates)

    train_biencoder(model, pairs, None, TrainConfig(lr=1e-3, epochs=3, batch_size=2, hard_negatives=0,
                                                    max_steps=4, checkpoint_every=None, seed=0, warmup_steps=0),
                    tmp_path / "run", resume=False, progress=False)
    again = load_retriever(tmp_path / "run" / "model")
    assert isinstance(again, PolyDPR) and again.config.query_max_length == 48
    chosen = selector.select(model, list(passages.values()), templates.representatives, k=2)
    assert chosen.shape == (5, 2)
    np.testing.assert_array_equal(selector.select(again, list(passages.values()), templates.representatives, k=2),
                                  chosen)
    measured = selector.accuracy(again, pairs, templates.representatives, ks=(1, 2))
    top1 = float(np.mean(chosen[:, 0] == np.array(templates.of_question)))
    assert measured == {"n": 5, "templates": len(templates.representatives), "top1": round(top1, 4),
                        "top2": round(float(np.mean((chosen == np.array(templates.of_question)[:, None]).any(1))),
                                      4)}
    # the pipeline measures the selector at the precision it chooses templates with (dpr.encode.autocast)
    from ecqg.stages import tempqg as stage

    used, real_select = [], selector.select

    def spy(*args, **kwargs):
        used.append(kwargs.get("autocast"))
        return real_select(*args, **kwargs)

    monkeypatch.setattr(selector, "select", spy)
    from ecqg.core import settings

    encode = settings.Encode(batch_size=2, dtype="float32", autocast="bfloat16")
    quality = stage.selector_accuracy(again, pairs, templates.representatives, encode)
    picked = stage.choose_templates(again, list(passages.values()), templates.representatives, encode)
    assert used == ["bfloat16", "bfloat16"]
    own = [templates.representatives[c] for c in templates.of_question]
    assert quality["top1"] == round(float(np.mean([p == o for p, o in zip(picked, own)])), 4)
