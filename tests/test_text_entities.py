"""spaCy entities and sentences (``ecqg.data.text.analyze``) on real sentences with the bundled en_core_web_sm."""

from ecqg.data.text import ENTITY_TYPES, Entity, analyze, entity_key

TEXT = ("Angela Merkel flew from Berlin to Paris on Monday. In Paris, she met Emmanuel Macron at the Élysée Palace. "
        "Both leaders later returned to Berlin.")


def test_entities_are_restricted_deduplicated_and_located():
    (result,) = analyze([TEXT])
    by_text = {e.text: e for e in result.entities}
    assert "Monday" not in by_text                      # DATE is not one of the paper's types
    assert all(e.label in ENTITY_TYPES for e in result.entities)
    for e in result.entities:                           # first occurrence kept, spans point into the text
        assert TEXT[e.start_char:e.end_char] == e.text
        assert (e.start_char, e.end_char) == e.occurrences[0]
    berlin = by_text["Berlin"]
    assert len(berlin.occurrences) == 2 and [TEXT[s:t] for s, t in berlin.occurrences] == ["Berlin", "Berlin"]
    assert berlin.occurrences[1][0] > 100
    assert len([e for e in result.entities if entity_key(e.text) == "paris"]) == 1
    assert by_text["Angela Merkel"].label == "PERSON"


def test_sentence_spans_cover_the_sentences():
    (result,) = analyze([TEXT])
    assert len(result.sentences) == 3
    assert TEXT[slice(*result.sentences[0])] == "Angela Merkel flew from Berlin to Paris on Monday."
    assert result.sentences[-1][1] == len(TEXT)


def test_batch_keeps_order_and_custom_types():
    texts = ["Zoë Saldaña visited München.", "", TEXT]
    results = analyze(texts, batch_size=2, types=("PERSON",))
    assert len(results) == 3
    assert results[1].entities == () and results[1].sentences == ()
    assert {e.text for e in results[2].entities} == {"Angela Merkel", "Emmanuel Macron"}
    assert all(isinstance(e, Entity) and e.label == "PERSON" for r in results for e in r.entities)


def test_entity_key_normalises_case_space_and_unicode():
    assert entity_key("  New\u00a0York ") == entity_key("new york") == "new york"
    assert entity_key("Cafe\u0301") == entity_key("Café")
