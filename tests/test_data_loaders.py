"""Each loader on a tiny fixture in exactly the published format, and on malformed input (file, record, field named)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ecqg.data import dpr, nq_gold, nq_open, overlap, squad, wiki
from ecqg.data.records import (
    normalize_span,
    normalize_text,
    normalize_title,
    question_key,
    read_corpus,
    read_test_questions,
    read_train_gold,
    text_key,
)
from ecqg.core.errors import DataFormatError
from ecqg.core.io import write_jsonl

FIX = Path(__file__).parent / "fixtures" / "data"
RAW = FIX / "raw"


def expect_error(fn, *names: str) -> str:
    with pytest.raises(DataFormatError) as info:
        fn()
    msg = str(info.value)
    for name in names:
        assert name in msg, f"{name!r} not in error message {msg!r}"
    return msg


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------------------------- DPR


def test_dpr_retriever_json_read_write_roundtrip(tmp_path):
    src = RAW / "wiki-passages" / "haystack.dpr_sample.json"
    exs = list(dpr.read_dpr_retriever_json(src))
    assert len(exs) == 1
    ex = exs[0]
    assert ex["question"] == "who sings does he love me with reba"
    assert ex["answers"] == ["Linda Davis"]
    assert ex["positive_ctxs"][0]["passage_id"] == "11828866"
    assert ex["positive_ctxs"][0]["title"] == "Does He Love You"
    out = tmp_path / "out.json"
    assert dpr.write_dpr_retriever_json(out, exs) == 1
    again = list(dpr.read_dpr_retriever_json(out))
    assert again == exs
    # optional negatives default to []
    minimal = tmp_path / "min.json"
    minimal.write_text(json.dumps([{"question": "q", "answers": ["a"], "positive_ctxs": [{"title": "t", "text": "x"}]}]))
    (m,) = dpr.read_dpr_retriever_json(minimal)
    assert m["negative_ctxs"] == [] and m["hard_negative_ctxs"] == []


def test_dpr_retriever_json_malformed(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question": "q", "answers": ["a"], "positive_ctxs": []},
                               {"question": "q2", "answers": "a", "positive_ctxs": []}]))
    expect_error(lambda: list(dpr.read_dpr_retriever_json(bad)), "bad.json", "record 2", "'answers'")
    bad.write_text(json.dumps([{"question": "q", "answers": ["a"], "positive_ctxs": [{"title": "t"}]}]))
    expect_error(lambda: list(dpr.read_dpr_retriever_json(bad)), "record 1, positive_ctxs[0]", "'text'")
    bad.write_text(json.dumps([{"answers": ["a"], "positive_ctxs": []}]))
    expect_error(lambda: list(dpr.read_dpr_retriever_json(bad)), "record 1", "'question'", "missing")
    bad.write_text("[{")
    expect_error(lambda: list(dpr.read_dpr_retriever_json(bad)), "bad.json", "line 1", "not valid JSON")


def test_qas_tsv_with_csv_quoting():
    rows = list(dpr.read_qas(RAW / "anserini-topics" / "topics.dpr.trivia.test.txt"))
    assert len(rows) == 20
    assert rows[0] == {"question": "Who was the man behind The Chipmunks?", "answers": ["David Seville"]}
    # line 13: the answer column is CSV-quoted with doubled quotes inside
    assert rows[12]["question"] == "In which decade did stereo records first go on sale?"
    assert "'30s" in rows[12]["answers"] and "1930's" in rows[12]["answers"]
    # line 18: the question is CSV-quoted twice; one more un-quoting gives the plain question
    assert rows[17]["question"] == 'How many different animal shapes are there in the "Animal Crackers" cookie zoo?'
    nq = list(dpr.read_qas(RAW / "anserini-topics" / "topics.dpr.nq.test.txt"))
    assert nq[1]["answers"] == ["May 18 , 2018"]


def test_qas_tsv_malformed(tmp_path):
    bad = write(tmp_path / "topics.txt", "q1\t['a']\nq2\t['a', \n")
    expect_error(lambda: list(dpr.read_qas(bad)), "topics.txt", "line 2", "'answers'")
    bad = write(tmp_path / "topics.txt", "q1\t['a']\nq2\t__import__('os').system('echo pwned')\n")
    expect_error(lambda: list(dpr.read_qas(bad)), "line 2", "'answers'")
    bad = write(tmp_path / "topics.txt", "q1\t[1, 2]\n")
    expect_error(lambda: list(dpr.read_qas(bad)), "line 1", "list of strings")
    bad = write(tmp_path / "topics.txt", "q1\t['a']\tx\n")
    expect_error(lambda: list(dpr.read_qas(bad)), "line 1", "2 tab-separated columns")
    bad = write(tmp_path / "topics.txt", "q1\t[]\n")
    expect_error(lambda: list(dpr.read_qas(bad)), "line 1", "'answers'", "empty")


def test_topics_jsonl_wq_curated():
    wq = list(dpr.read_qas(RAW / "anserini-topics" / "topics.dpr.wq.test.txt"))
    assert wq[0] == {"question": "what does jamaican people speak?",
                     "answers": ["Jamaican Creole English Language", "Jamaican English"]}
    trec = list(dpr.read_qas(RAW / "anserini-topics" / "topics.dpr.curated.test.txt"))
    assert trec[2]["answers"] == ["China"] and "\\s" in trec[0]["answers"][0]


def test_topics_jsonl_malformed(tmp_path):
    bad = write(tmp_path / "t.jsonl", '{"question": "q", "answer": ["a"]}\n{"question": "q", "answer": "a"}\n')
    expect_error(lambda: list(dpr.read_qas(bad)), "t.jsonl", "line 2", "'answer'")
    bad = write(tmp_path / "t.jsonl", '{"question": "q", "answer": ["a"]}\n{"question": \n')
    expect_error(lambda: list(dpr.read_qas(bad)), "t.jsonl", "line 2", "not valid JSON")


# ------------------------------------------------------------------------------------------------- NQ-open, overlap


def test_nq_open():
    rows = list(nq_open.read_nq_open(RAW / "nq-open" / "NQ-open.dev.jsonl"))
    assert len(rows) == 8 and rows[0]["index"] == 0
    assert all(r["answers"] for r in rows)


def test_nq_open_malformed(tmp_path):
    bad = write(tmp_path / "nq.jsonl", '{"question": "q", "answer": ["a"]}\n{"question": "q2", "answer": [3]}\n')
    expect_error(lambda: list(nq_open.read_nq_open(bad)), "nq.jsonl", "line 2", "'answer'", "item 0")


def test_overlap_annotations_and_subsets():
    rows = list(overlap.read_overlap_annotations(RAW / "qa-overlap" / "nq-annotations.jsonl"))
    assert [r["id"] for r in rows] == list(range(8))
    assert overlap.subsets_of(["total", "no_answer_overlap", "no_question_overlap"]) == [
        "no_answer_overlap", "no_question_overlap"]
    members = overlap.subset_members(RAW / "qa-overlap" / "nq-annotations.jsonl")
    assert members["no_answer_overlap"] == {r["id"] for r in rows if "answer_overlap" not in r["labels"]}


def test_overlap_malformed(tmp_path):
    bad = write(tmp_path / "ann.jsonl", '{"id": 0, "labels": ["total", "answer_overlap"]}\n{"id": 5, "labels": []}\n')
    expect_error(lambda: list(overlap.read_overlap_annotations(bad)), "ann.jsonl", "line 2", "'id'")
    bad = write(tmp_path / "ann.jsonl", '{"id": 0, "labels": ["total", "answer_overlap", "no_answer_overlap"]}\n')
    expect_error(lambda: list(overlap.read_overlap_annotations(bad)), "line 1", "'labels'")
    bad = write(tmp_path / "ann.jsonl", '{"id": 0, "labels": ["total", "no_answer_overlap", "weird"]}\n')
    expect_error(lambda: list(overlap.read_overlap_annotations(bad)), "line 1", "'labels'", "weird")


# --------------------------------------------------------------------------------------------------------------- SQuAD


def test_squad_v2_and_v1():
    paras = list(squad.read_squad(RAW / "squad" / "squad-v2.0.dev.json"))
    assert len(paras) == 2 and paras[0]["title"] == "Normans"
    qas = [qa for p in paras for qa in p["qas"]]
    assert any(qa["is_impossible"] and qa["plausible_answers"] for qa in qas)
    for p in paras:
        for qa in p["qas"]:
            for a in qa["answers"] + qa["plausible_answers"]:
                assert p["context"][a["answer_start"]:a["answer_start"] + len(a["text"])] == a["text"]
    x = list(squad.read_squad(RAW / "squad" / "xquad.en.json"))
    assert x[0]["qas"] and not any(qa["is_impossible"] for qa in x[0]["qas"])


def test_squad_malformed(tmp_path):
    doc = json.loads((RAW / "squad" / "xquad.en.json").read_text())
    doc["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] += 3
    bad = tmp_path / "squad.json"
    bad.write_text(json.dumps(doc))
    expect_error(lambda: list(squad.read_squad(bad)), "squad.json", "data[0].paragraphs[0].qas[1], answers[0]",
                 "'answer_start'")
    doc = json.loads((RAW / "squad" / "xquad.en.json").read_text())
    del doc["data"][0]["paragraphs"][0]["qas"][0]["question"]
    bad.write_text(json.dumps(doc))
    expect_error(lambda: list(squad.read_squad(bad)), "data[0].paragraphs[0].qas[0]", "'question'")
    doc = json.loads((RAW / "squad" / "xquad.en.json").read_text())
    doc["data"][0]["paragraphs"][0]["qas"][0]["answers"] = []
    bad.write_text(json.dumps(doc))
    expect_error(lambda: list(squad.read_squad(bad)), "qas[0]", "'answers'", "without answers")


# ------------------------------------------------------------------------------------------------------------- wiki


def test_psgs_w100_tsv_and_read_corpus():
    rows = list(wiki.read_psgs_w100(FIX / "psgs_w100.sample.tsv"))
    assert [r["id"] for r in rows] == ["11828866", "15632586", "8870096", "7626265"]
    assert rows[0]["title"] == "Does He Love You"
    assert rows[0]["text"].startswith('Does He Love You "Does He Love You" is a song')  # CSV quotes undone
    corpus = list(read_corpus(FIX / "psgs_w100.sample.tsv"))
    assert corpus[0]["source"] == "psgs_w100" and corpus[0]["id"] == "11828866"


def test_psgs_w100_malformed(tmp_path):
    bad = write(tmp_path / "psgs.tsv", "id\ttitle\ttext\n1\tt\tx\n")
    expect_error(lambda: list(wiki.read_psgs_w100(bad)), "psgs.tsv", "line 1", "header")
    bad = write(tmp_path / "psgs.tsv", "id\ttext\ttitle\n1\tsome text\tT\n2\tonly two\n")
    expect_error(lambda: list(wiki.read_psgs_w100(bad)), "psgs.tsv", "line 3", "3 columns")
    bad = write(tmp_path / "psgs.tsv", "id\ttext\ttitle\n1\t\tT\n")
    expect_error(lambda: list(wiki.read_psgs_w100(bad)), "line 2", "'text'")


def test_json_collection_both_styles():
    flash = list(wiki.read_json_collection(RAW / "wiki-passages" / "flashrag.wiki18.sample_data.jsonl"))
    assert flash[0]["style"] == "newline" and flash[0]["title"] == '"Evan Morris"'
    assert normalize_title(flash[0]["title"]) == "Evan Morris"
    prime = list(wiki.read_json_collection(RAW / "wiki-passages" / "primeqa.psgs_w100_pyserini_100.jsonl"))
    assert prime[0] == {"id": "15094739", "title": "John Sawbridge", "style": "tab",
                        "text": prime[0]["text"]} and prime[0]["text"].startswith("London in 1775")
    assert wiki.split_contents("no title here") == ("", "no title here", "none")
    corpus = list(read_corpus(RAW / "wiki-passages" / "flashrag.wiki18.sample_data.jsonl"))
    assert corpus[0]["title"] == "Evan Morris" and corpus[0]["source"] == "jsoncollection"


def test_json_collection_malformed(tmp_path):
    bad = write(tmp_path / "c.jsonl", '{"id": "1", "contents": "T\\nx"}\n{"id": "2"}\n')
    expect_error(lambda: list(wiki.read_json_collection(bad)), "c.jsonl", "line 2", "'contents'")
    bad = write(tmp_path / "c.jsonl", '{"id": "1", "contents": "Title\\n  "}\n')
    expect_error(lambda: list(wiki.read_json_collection(bad)), "line 1", "'contents'")


def test_vital_articles_and_split():
    arts = wiki.read_vital_articles(RAW / "wiki-passages" / "ovos.vital-articles.summaries_en-us.json")
    assert len(arts) == 3 and arts[0]["title"] == "20th-century classical music"
    chunks = wiki.split_passages(arts[0]["extract"], 100)
    assert all(len(c.split()) <= 100 for c in chunks)
    assert " ".join(chunks).split() == arts[0]["extract"].split()
    assert wiki.split_passages("a b c d e", 2) == ["a b", "c d", "e"]


def test_vital_articles_malformed(tmp_path):
    bad = write(tmp_path / "v.json", json.dumps({"A": {"title": "A", "extract": "x"}, "B": {"title": "B"}}))
    expect_error(lambda: wiki.read_vital_articles(bad), "v.json", "article 'B'", "'extract'")


# ----------------------------------------------------------------------------------------------------------- NQ gold


def test_power_of_noise_and_lost_in_the_middle():
    pon = list(nq_gold.read_power_of_noise(RAW / "nq-gold-passages" / "power-of-noise.test_dataset.json"))
    litm = list(nq_gold.read_lost_in_the_middle(
        RAW / "nq-gold-passages" / "lost-in-the-middle.nq-open-oracle.jsonl.gz"))
    assert pon[0]["question"] == "who got the first nobel prize in physics"
    assert "Röntgen , of Germany" in pon[0]["text"]
    first = next(x for x in litm if x["question"] == pon[0]["question"])
    assert first["gold_title"] == "List of Nobel laureates in Physics"
    # same passage up to tokenization; the detokenizer reproduces the clean text
    assert text_key(pon[0]["text"]) == text_key(first["long_answer"])
    assert nq_gold.detokenize(pon[0]["text"]) == normalize_text(first["long_answer"])


def test_detokenize_rules():
    d = nq_gold.detokenize
    assert d("Röntgen , of Germany ( 1963 ) .") == "Röntgen, of Germany (1963)."
    assert d("1940 -- 1942 and twice -- in") == "1940\u20131942 and twice\u2014in"
    assert d("Maria Skłodowska - Curie") == "Maria Skłodowska-Curie"
    assert d("Rod Cameron 's show , do n't") == "Rod Cameron's show, don't"
    assert d('called " jukebox boys " here') == 'called "jukebox boys" here'
    assert d("the companies ' shares") == "the companies' shares"


def test_nq_gold_malformed(tmp_path):
    bad = tmp_path / "pon.json"
    bad.write_text(json.dumps([{"example_id": 1, "question": "q", "answers": ["a"], "text": "t",
                                "idx_gold_in_corpus": "12"}]))
    expect_error(lambda: list(nq_gold.read_power_of_noise(bad)), "pon.json", "record 1", "'idx_gold_in_corpus'")
    bad = tmp_path / "litm.jsonl.gz"
    rec = {"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "text": "x", "isgold": False}],
           "nq_annotated_gold": {"title": "t", "long_answer": "x"}}
    with gzip.open(bad, "wt") as h:
        h.write(json.dumps(rec) + "\n")
    expect_error(lambda: list(nq_gold.read_lost_in_the_middle(bad)), "litm.jsonl.gz", "line 1", "'ctxs'", "isgold")


# ----------------------------------------------------------------------------------------------- bundle record files


def test_text_style_helpers():
    assert normalize_text("  a \u00a0b\n\tc  ") == "a b c"
    assert normalize_text("Cafe\u0301") == "Caf\u00e9"
    assert normalize_title("Super_Bowl_50") == "Super Bowl 50"
    assert question_key("Who is the dog 's owner?") == question_key("who is the dog's owner")
    ctx = "  The  big\n dog   barks. "
    norm, start, ans = normalize_span(ctx, ctx.index("dog"), "dog   barks")
    assert norm == "The big dog barks." and norm[start:start + len(ans)] == ans == "dog barks"
    assert normalize_span(ctx, 0, "cat") is None


def test_bundle_record_readers_malformed(tmp_path):
    p = tmp_path / "corpus.jsonl.gz"
    write_jsonl(p, [{"id": "a", "title": "", "text": "x", "source": "s"}, {"id": "b", "title": "", "text": "y"}])
    expect_error(lambda: list(read_corpus(p)), "corpus.jsonl.gz", "line 2", "'source'")
    write_jsonl(p, [{"id": "a", "title": "", "text": "x", "source": "s"}, {"id": "a", "title": "", "text": "y",
                                                                        "source": "s"}])
    expect_error(lambda: list(read_corpus(p)), "line 2", "'id'", "duplicate")
    q = tmp_path / "q.jsonl"
    good = {"id": "q1", "question": "q?", "answers": ["a"], "gold_ids": [], "subsets": [], "answer_type": "text"}
    write_jsonl(q, [good, dict(good, id="q2", answer_type="fuzzy")])
    expect_error(lambda: list(read_test_questions(q)), "q.jsonl", "line 2", "'answer_type'")
    write_jsonl(q, [dict(good, answers=["(unclosed"], answer_type="regex")])
    expect_error(lambda: list(read_test_questions(q)), "line 1", "'answers'", "compile")
    t = tmp_path / "t.jsonl"
    write_jsonl(t, [{"id": "t", "question": "q", "answer": "a", "answer_start": "3", "passage_id": "p",
                     "source": "s"}])
    expect_error(lambda: list(read_train_gold(t)), "t.jsonl", "line 1", "'answer_start'")


# ------------------------------------------------------------------------------------------- a byte-order mark (BOM)

BOM = "\ufeff"

# Every reader of a published format, on its fixture: a copy with a UTF-8 BOM in front (as Excel or Notepad save a
# csv/tsv) must read exactly as the file without it, plain and gzipped, not keep "\ufeff" in the first field.
BOM_READERS = {
    "qas tsv (DPR nq)": (dpr.read_qas, RAW / "anserini-topics" / "topics.dpr.nq.test.txt"),
    "qas tsv (DPR trivia)": (dpr.read_qas, RAW / "anserini-topics" / "topics.dpr.trivia.test.txt"),
    "topics jsonl": (dpr.read_qas, RAW / "anserini-topics" / "topics.dpr.wq.test.txt"),
    "retriever json": (dpr.read_dpr_retriever_json, RAW / "wiki-passages" / "haystack.dpr_sample.json"),
    "nq-open jsonl": (nq_open.read_nq_open, RAW / "nq-open" / "NQ-open.dev.jsonl"),
    "overlap jsonl": (overlap.read_overlap_annotations, RAW / "qa-overlap" / "nq-annotations.jsonl"),
    "squad json": (squad.read_squad, RAW / "squad" / "squad-v2.0.dev.json"),
    "psgs_w100 tsv": (wiki.read_psgs_w100, FIX / "psgs_w100.sample.tsv"),
    "corpus tsv": (read_corpus, FIX / "psgs_w100.sample.tsv"),
    "json collection": (wiki.read_json_collection, RAW / "wiki-passages" / "flashrag.wiki18.sample_data.jsonl"),
    "vital articles json": (wiki.read_vital_articles, RAW / "wiki-passages" / "ovos.vital-articles.summaries_en-us.json"),
    "power of noise json": (nq_gold.read_power_of_noise, RAW / "nq-gold-passages" / "power-of-noise.test_dataset.json"),
    "lost in the middle jsonl.gz": (nq_gold.read_lost_in_the_middle,
                                    RAW / "nq-gold-passages" / "lost-in-the-middle.nq-open-oracle.jsonl.gz"),
}


def _text_of(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode("utf-8") if path.suffix == ".gz" else path.read_text("utf-8")


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("name", list(BOM_READERS))
def test_a_leading_bom_is_dropped_by_every_reader(name, gz, tmp_path):
    read, fixture = BOM_READERS[name]
    text = _text_of(fixture)
    assert not text.startswith(BOM)
    stem = fixture.name.removesuffix(".gz")
    copy = tmp_path / (stem + ".gz" if gz else stem)
    data = (BOM + text).encode("utf-8")
    copy.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    assert list(read(copy)) == list(read(fixture))


def test_a_bom_prefixed_qas_file_keeps_no_bom_in_the_first_question(tmp_path):
    for name in ("nq-test.qa.csv", "topics.tsv"):
        qas = tmp_path / name
        qas.write_bytes(("\ufeffwho was the brother of moses\t['Aaron']\nq2\t['a']\n").encode("utf-8"))
        assert list(dpr.read_qas(qas))[0] == {"question": "who was the brother of moses", "answers": ["Aaron"]}
    jsonl = write(tmp_path / "t.jsonl", BOM + '{"question": "who was the brother of moses", "answer": ["Aaron"]}\n')
    assert list(dpr.read_qas(jsonl)) == [{"question": "who was the brother of moses", "answers": ["Aaron"]}]
    assert list(nq_open.read_nq_open(jsonl))[0]["question"] == "who was the brother of moses"


def test_a_bom_after_the_start_of_a_file_is_text_not_stripped(tmp_path):
    qas = write(tmp_path / "topics.txt", "q1\t['a']\n" + BOM + "q2\t['b']\n")
    assert [r["question"] for r in dpr.read_qas(qas)] == ["q1", BOM + "q2"]
