"""Intake refuses, never repairs in silence (issue 50, item 1): each fault found in a malformed copy of a DPR-format
file is an error naming the input file (the path the user gave), the line or record and the field, raised before
`prepare` writes anything; what a valid file holds parses exactly as before.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import sys
from pathlib import Path

import pytest
import yaml

from ecqg.core import config
from ecqg.data import wiki
from ecqg.data.records import read_corpus
from ecqg.core.errors import ConfigError
from ecqg.core.io import read_jsonl, read_tsv_rows
from ecqg.stages import prepare

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_data_loaders import expect_error  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "data"

# (id, text, title) as DPR's psgs_w100.tsv holds them: numeric ids, quotes inside the text, a title with quotes.
PASSAGES = [
    ("11", 'Does He Love You "Does He Love You" is a song by Reba McEntire', "Does He Love You"),
    ("12", "Red Sandy Spika dress worn at the 1993 awards", "Red Sandy Spika dress of Reba McEntire"),
    ("13", 'Al said: "I\'m ""Weird"" Al" and left', '"Weird Al" Yankovic'),
    ("14", "Shoot for the Moon is the third album", "Shoot for the Moon (album)"),
]


def psgs_line(pid: str, text: str, title: str) -> str:
    """One passage line the way DPR's file (and tests/paper_tiny.py) writes it: text CSV-quoted, quotes doubled."""
    return f'{pid}\t"{text.replace(chr(34), chr(34) * 2)}"\t{title}\n'


def write_psgs(path: Path, passages=PASSAGES, newline: str = "\n") -> Path:
    text = "id\ttext\ttitle\n" + "".join(psgs_line(*p) for p in passages)
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


def lenient_rows(path: Path) -> list[list[str]]:
    """What the reader returned before issue 50: DPR's own ``csv.reader(delimiter="\\t")`` over the file."""
    with open(path, encoding="utf-8") as handle:
        return [row for row in csv.reader(handle, delimiter="\t") if row]




# ------------------------------------------------------------------------------------------------ valid files


def test_a_valid_psgs_w100_with_doubled_quotes_parses_exactly_as_before(tmp_path):
    bundle = [r for _, r in itertools.islice(read_jsonl(REPO / "data" / "corpus.jsonl.gz"), 3000)]
    quoted = [(str(i + 100), r["text"], r["title"]) for i, r in enumerate(bundle) if '"' in r["text"]][:200]
    assert len(quoted) > 20                                  # real passages with quotes inside
    passages = PASSAGES + quoted
    for newline in ("\n", "\r\n"):
        path = write_psgs(tmp_path / "psgs_w100.tsv", passages, newline)
        got = list(wiki.read_psgs_w100(path))
        before = lenient_rows(path)
        assert [[p["id"], p["text"], p["title"]] for p in got] == before[1:]
        assert [p["text"] for p in got] == [text for _, text, _ in passages]   # the doubled quotes undone
        assert got[2]["title"] == "Weird Al Yankovic"                           # lenient inside a line, as before
    gz = tmp_path / "psgs_w100.tsv.gz"
    gz.write_bytes(gzip.compress(write_psgs(tmp_path / "plain.tsv", passages).read_bytes()))
    assert list(wiki.read_psgs_w100(gz)) == list(wiki.read_psgs_w100(tmp_path / "plain.tsv"))
    sample = FIXTURES / "psgs_w100.sample.tsv"
    assert [[p["id"], p["text"], p["title"]] for p in wiki.read_psgs_w100(sample)] == lenient_rows(sample)[1:]


def test_the_last_row_needs_no_newline_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "rows.tsv"
    path.write_text('a\t"b ""c"""\n\n\t\nd\te', encoding="utf-8")
    assert list(read_tsv_rows(path)) == [("line 1", ["a", 'b "c"']), ("line 3", ["", ""]), ("line 4", ["d", "e"])]


# ------------------------------------------------------------------------------- fault 1: an unclosed quote


def test_an_unclosed_quote_in_psgs_w100_is_refused_not_merged(tmp_path):
    path = write_psgs(tmp_path / "psgs_w100.tsv")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2].replace('dress worn at the 1993 awards"', "dress worn at the 1993 awards")  # line 3
    path.write_text("".join(lines), encoding="utf-8")
    assert len(lenient_rows(path)) == 4                      # before: lines 3 and 4 became one passage, silently
    message = expect_error(lambda: list(wiki.read_psgs_w100(path)), str(path), "line 3", "field 'text'", "line 4")
    assert "quote" in message

    lines = write_psgs(tmp_path / "psgs_w100.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[-1] = lines[-1].replace('third album"', "third album")          # the last line: open to the end
    path.write_text("".join(lines), encoding="utf-8")
    expect_error(lambda: list(wiki.read_psgs_w100(path)), str(path), "line 5", "field 'text'", "end of the file")
    path.write_text("".join(lines).rstrip("\n"), encoding="utf-8")        # no final newline either
    expect_error(lambda: list(wiki.read_psgs_w100(path)), str(path), "line 5", "field 'text'", "end of the file")


def test_an_unclosed_quote_in_a_qas_file_names_the_question(tmp_path):
    from ecqg.data.dpr import read_qas

    path = tmp_path / "nq-test.csv"
    path.write_text("q1\t['a']\n\"q2 unclosed\t['b']\nq3\t['c']\n", encoding="utf-8")
    expect_error(lambda: list(read_qas(path)), str(path), "line 2", "field 'question'")


# ------------------------------------------------------------------------------------- `prepare` on fixtures


@pytest.fixture
def stage(tmp_path, monkeypatch):
    """A working directory whose params point at small DPR-format inputs; ``stage(corpus=..., train=...)`` writes
    them (a corpus text, a list of retriever-json records) and returns the params' data block."""
    inputs = tmp_path / "downloads"
    inputs.mkdir()
    monkeypatch.chdir(tmp_path)

    def make(corpus: str | None = None, train: list | None = None, **data) -> dict:
        corpus_path = write_psgs(inputs / "psgs_w100.tsv")
        if corpus is not None:
            corpus_path.write_text(corpus, encoding="utf-8")
        records = train if train is not None else [dpr_record(pid) for pid, _, _ in PASSAGES]
        (inputs / "nq-train.json").write_text(json.dumps(records), encoding="utf-8")
        (inputs / "nq-test.csv").write_text("who sings does he love me with reba\t['Linda Davis']\n", encoding="utf-8")
        (inputs / "nq-dev.csv").write_text("who wrote hamlet\t['William Shakespeare']\n", encoding="utf-8")
        params = config.preset("paper", REPO / "params")
        params["data"].update(corpus=str(corpus_path), test_sets={"nq": str(inputs / "nq-test.csv")},
                              train_gold=str(inputs / "nq-train.json"), nq_dev=str(inputs / "nq-dev.csv"))
        params["data"].update(data)
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
        return params["data"]

    return make


def dpr_record(pid: str, **positive) -> dict:
    text, title = next((t, ti) for p, t, ti in PASSAGES if p == pid)
    ctx = {"title": title, "text": text, "passage_id": pid, **positive}
    return {"question": f"question about {pid}", "answers": ["x"], "positive_ctxs": [ctx], "negative_ctxs": [],
            "hard_negative_ctxs": []}


def nothing_written(workdir: Path) -> bool:
    return not (workdir / "outputs").exists() and not (workdir / "results").exists()


def test_prepare_refuses_an_unclosed_quote_and_writes_nothing(stage, tmp_path):
    corpus = write_psgs(tmp_path / "valid.tsv").read_text(encoding="utf-8")
    data = stage(corpus=corpus.replace('1993 awards"', "1993 awards"))
    expect_error(prepare.main, data["corpus"], "line 3", "field 'text'")
    assert "outputs" not in data["corpus"] and nothing_written(tmp_path)


# ---------------------------------------------------------------------------------- fault 2: passage ids


@pytest.mark.parametrize("bad_id, problem", [("12", "duplicate id '12'"), ("1 2", "whitespace"),
                                             (" 13", "whitespace"), ("", "empty id")])
def test_prepare_refuses_a_duplicate_empty_or_spaced_passage_id(stage, tmp_path, bad_id, problem):
    passages = PASSAGES[:2] + [(bad_id, "A third passage", "Third")] + PASSAGES[2:]
    data = stage(corpus=write_psgs(tmp_path / "bad.tsv", passages).read_text(encoding="utf-8"))
    expect_error(prepare.main, data["corpus"], "line 4", "field 'id'", problem)
    assert nothing_written(tmp_path)


def test_json_collection_ids_are_checked_too(tmp_path):
    path = tmp_path / "wiki18.jsonl"
    path.write_text('{"id": "1", "contents": "T\\nx"}\n{"id": "2", "contents": "T\\ny"}\n'
                    '{"id": "1", "contents": "T\\nz"}\n', encoding="utf-8")
    expect_error(lambda: list(read_corpus(path)), str(path), "line 3", "field 'id'", "duplicate")


def test_seen_ids_keep_decimal_and_other_ids_apart():
    from ecqg.data.fields import SeenIds

    seen = SeenIds(["1", "21015324", "doc-7"])
    assert "1" in seen and "21015324" in seen and "doc-7" in seen
    assert "01" not in seen and "2" not in seen and 1 not in seen
    assert seen.add("01") and seen.add("0") and not seen.add("1") and len(seen) == 5


# --------------------------------------------------------------------- fault 3: DPR retriever-json positives


@pytest.mark.parametrize("edit, field", [
    (lambda r: r.update(positive_ctxs=[]), "field 'positive_ctxs'"),
    (lambda r: r["positive_ctxs"][0].update(text="  "), "field 'positive_ctxs[0].text'"),
    (lambda r: r["positive_ctxs"][0].update(passage_id="999"), "field 'positive_ctxs[0].passage_id'"),
])
def test_prepare_refuses_a_training_record_without_a_usable_positive(stage, tmp_path, edit, field):
    records = [dpr_record(pid) for pid, _, _ in PASSAGES]
    edit(records[2])
    data = stage(train=records)
    message = expect_error(prepare.main, data["train_gold"], "record 3", field)
    if "passage_id" in field:
        assert "'999'" in message and data["corpus"] in message
    assert nothing_written(tmp_path)


def test_positives_outside_the_kept_corpus_are_counted_not_expect_error(stage, tmp_path):
    stage(max_corpus_passages=2)
    assert prepare.main() == 0
    kept = [r["id"] for _, r in read_jsonl(tmp_path / "outputs" / "data" / "corpus.jsonl")]
    figures = json.loads((tmp_path / "results" / "paper" / "stage_prepare.json").read_text())
    assert len(kept) == 2 and figures["corpus_passages_read"] == 4 and figures["train_records_read"] == 4
    assert figures["train_positives"] == {"in_kept_corpus": 2, "outside_kept_corpus": 2}
    written = json.loads((tmp_path / "outputs" / "data" / "train_gold_dpr.json").read_text())
    assert len(written) == 4                                 # the records keep their text: nothing dropped


# ------------------------------------------------------------------------ fault 4: an input that is a folder


def test_config_inputs_lists_every_missing_or_wrong_input(stage, tmp_path, capsys):
    data = stage()
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    Path(data["corpus"]).unlink()
    Path(data["corpus"]).mkdir()                             # data.corpus names a folder
    params["data"]["nq_dev"] = "downloads/absent.csv"
    params["data"]["mrc_unanswerable"] = "downloads/absent.jsonl"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")

    assert config.main(["inputs"]) == 2
    err = capsys.readouterr().err
    assert "3 inputs are missing or wrong" in err
    assert f"'data.corpus' names {data['corpus']}, which is a folder" in err
    assert "'data.nq_dev' names downloads/absent.csv, which does not exist" in err
    assert "'data.mrc_unanswerable' names downloads/absent.jsonl, which does not exist" in err

    assert config.main(["check"]) == 2                       # missing is "not yet"; a folder is wrong
    out, err = capsys.readouterr()
    assert "not present yet" in out and "downloads/absent.csv" in out and "absent.jsonl" in out
    assert f"'data.corpus' names {data['corpus']}, which is a folder" in err


def test_prepare_stops_at_a_corpus_folder_before_reading_or_writing(stage, tmp_path):
    data = stage()
    Path(data["corpus"]).unlink()
    Path(data["corpus"]).mkdir()
    with pytest.raises(ConfigError, match=r"'data\.corpus' names .*psgs_w100\.tsv, which is a folder"):
        prepare.main()
    assert nothing_written(tmp_path)


def test_an_input_that_is_not_what_its_name_says_is_wrong(tmp_path, monkeypatch):
    params = config.preset("mini", REPO / "params")
    monkeypatch.chdir(tmp_path)
    inputs = [config._flatten(params)[key] for key in config.INPUT_KEYS] + list(params["data"]["test_sets"].values())
    for path in inputs:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(gzip.compress(b"{}\n") if path.endswith(".gz") else b"{}\n")
    assert config.check_inputs(params) is params
    corpus = params["data"]["corpus"]
    assert corpus.endswith(".gz")
    (tmp_path / corpus).write_text("not gzip")
    with pytest.raises(ConfigError, match=f"'data.corpus' names {corpus}, which ends in .gz but is not gzip data"):
        config.check_inputs(params)
