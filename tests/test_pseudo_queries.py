"""ETM / RSM pseudo-queries: a passage's own highest tf-idf words (with its title, or from one of its sentences)."""

import pytest

from ecqg import pseudo_queries as pq

PASSAGES = {
    "a": {"title": "Danube", "text": "The Danube flows through Vienna. Barges carry grain downstream past Budapest."},
    "b": {"title": "Danube", "text": "The Danube delta hosts pelicans. Fishermen work the reed beds."},
    "c": {"title": "Rhine", "text": "The Rhine flows past Cologne. Castles line the gorge near Koblenz."},
}
SENTENCES = {pid: [s.strip() + "." for s in p["text"].split(".") if s.strip()] for pid, p in PASSAGES.items()}


@pytest.fixture(scope="module")
def weights():
    return pq.TermWeights([p["text"] for p in PASSAGES.values()])


def test_top_words_are_the_rarest_content_words_in_text_order(weights):
    words = weights.top_words(PASSAGES["a"]["text"], 3)
    assert len(words) == 3 and "the" not in words and "danube" not in words       # stop word; in 2 of 3 passages
    text = PASSAGES["a"]["text"].lower()
    assert words == sorted(words, key=text.index)


def test_etm_query_is_the_title_then_new_words(weights):
    query = pq.etm_query(PASSAGES["a"], weights, 4)
    assert query.startswith("Danube ") and query.lower().count("danube") == 1 and len(query.split()) == 5


def test_rsm_is_seeded_per_passage_and_skips_short_sentences(weights):
    records, counts = pq.build("rsm", ["a", "b", "c"], PASSAGES, weights, 3, seed=7, sentences=SENTENCES)
    again, _ = pq.build("rsm", ["a", "b", "c"], PASSAGES, weights, 3, seed=7, sentences=SENTENCES)
    assert records == again and counts["queries"] == 3
    for r in records:
        words = r["question"].split()
        assert len(words) == 3 and any(set(words) <= set(s.lower().replace(".", "").split())
                                       for s in SENTENCES[r["passage_id"]])
    none, counts = pq.build("rsm", ["a"], PASSAGES, weights, 20, seed=7, sentences=SENTENCES)
    assert none == [] and counts["no_usable_sentence"] == 1
    with pytest.raises(ValueError, match="etm"):
        pq.build("xyz", ["a"], PASSAGES, weights, 3, seed=0)


def test_same_title_passages_are_never_negatives():
    excluded = pq.same_title_guard(PASSAGES)
    assert excluded("a", "b") and not excluded("a", "c") and not excluded("c", "a")
