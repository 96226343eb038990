"""Tests for ecqg.retrieval.evaluation: DPR has_answer hits, top-k accuracy, bootstrap, TREC run files.

Expected values are known by hand (accent folding, tokenisation, toy accuracy table) or come from pyserini's own
``has_answers`` / ``TrecRun``, so these tests fail if the fast paths drift from DPR's semantics.
"""

from __future__ import annotations

import itertools
import json
import logging
import unicodedata

import numpy as np
import pytest

import ecqg  # noqa: F401  (sets OPENAI_API_KEY before pyserini is imported)
from ecqg.core.errors import DataFormatError
from ecqg.analysis.stats import bootstrap_ci
from ecqg.analysis.tables import accuracy_table, evaluate_run, paired_bootstrap, paired_table, table_records
from ecqg.retrieval.evaluation import HitCache, hit_matrix, hits_at_k, passage_texts, subset_masks
from ecqg.retrieval.run_files import RunError, read_trec_run, write_trec_run
from ecqg.data.text import dpr_tokens
from pyserini.eval.evaluate_dpr_retrieval import SimpleTokenizer, has_answers

NFC_RONTGEN = unicodedata.normalize("NFC", "Röntgen")
NFD_RONTGEN = unicodedata.normalize("NFD", "Röntgen")

TRICKY_TEXTS = [
    f"Wilhelm Conrad {NFC_RONTGEN} discovered X-rays in 1895.",
    f"Wilhelm Conrad {NFD_RONTGEN} discovered X-rays in 1895.",
    "Rontgen is a common misspelling.",
    "The final was played on May 18, 2018 in Lyon.",
    "The final was played on May 18 , 2018 in Lyon.",
    "It aired 18 May 2018.",
    "Obamacare was passed in 2010.",
    "Barack Obama's policy; the Obama-era rules.",
    "The U.S. president and the US Senate.",
    "A café in Paris", "A cafe in Paris",
    "ﬁnance ministry",  # compatibility ligature: NFD keeps it, so 'finance' does not match
    "about 3.5 million people, or 3,500,000", "It cost $100 (USD).",
    "ΣΟΦΟΣ ΑΝΘΡΩΠΟΣ", "İstanbul is large", "It was 5 \u212a outside",
    "New\u00a0York\tCity\nis big", "", "Jean-Paul Sartre said ain't so",
    "北京大学 is in 北京", "AT&T and C++ and e-mail", "zero\u200bwidth space",
    "BARACK OBAMA won", "obama",
]
TRICKY_ANSWERS = [
    NFC_RONTGEN, NFD_RONTGEN, "Rontgen", "May 18, 2018", "May 18 , 2018", "Obama", "obama", "Barack Obama",
    "U.S.", "US", "café", "cafe", "finance", "3.5", "$100", "100", "ΣΟΦΟΣ", "σοφος", "istanbul", "İstanbul",
    "5 K", "New York", "Jean-Paul", "Jean Paul", "ain't", "北京", "AT&T", "C++", "?", "18", "Obamacare",
    "zero width",
]


def _one_question_run(texts, answers, answer_type="text"):
    """One question whose run ranks every text in order: row 0 of the hit matrix is has_answer per text."""
    corpus = {f"p{i}": t for i, t in enumerate(texts)}
    run = {"q": [(pid, -float(i)) for i, pid in enumerate(corpus)]}
    question = {"id": "q", "answers": list(answers), "subsets": [], "answer_type": answer_type}
    return hit_matrix(run, [question], corpus, k_max=len(texts))[0]


def _reference(text, answers, regex=False):
    """pyserini's DPR has_answers, minus answers with no token at all (DPR would match those everywhere)."""
    if not regex:
        answers = [a for a in answers if SimpleTokenizer().tokenize(unicodedata.normalize("NFD", a)).words()]
    return bool(answers) and has_answers(text, answers, SimpleTokenizer(), regex=regex)


def _drqa_tokens(text):
    """DrQA's own tokenizer, through pyserini: what ecqg.data.text.dpr_tokens must reproduce."""
    return SimpleTokenizer().tokenize(unicodedata.normalize("NFD", text)).words(uncased=True)


# --------------------------------------------------------------------------------------------- has_answer semantics
def test_fast_tokens_equal_drqa_tokens():
    for text in TRICKY_TEXTS + TRICKY_ANSWERS:
        assert dpr_tokens(text) == _drqa_tokens(text), text


def test_hit_matrix_agrees_with_pyserini_has_answers():
    answer_sets = [[a] for a in TRICKY_ANSWERS] + [list(p) for p in itertools.combinations(TRICKY_ANSWERS[:8], 2)]
    answer_sets += [["", "Obama"], ["", "   "], ["?", "US"]]
    n_pairs = n_hits = 0
    for answers in answer_sets:
        got = _one_question_run(TRICKY_TEXTS, answers)
        want = [_reference(t, answers) for t in TRICKY_TEXTS]
        assert got.tolist() == want, answers
        n_pairs += len(want)
        n_hits += sum(want)
    assert n_pairs > 1000 and 50 < n_hits < n_pairs - 50  # a real mix of matches and misses was compared


@pytest.mark.parametrize(
    "text, answer, expected",
    [
        (f"by {NFC_RONTGEN} in 1895", NFD_RONTGEN, True),
        (f"by {NFD_RONTGEN} in 1895", NFC_RONTGEN, True),
        (f"by {NFC_RONTGEN} in 1895", "Rontgen", False),
        ("by Rontgen in 1895", NFC_RONTGEN, False),
        ("on May 18, 2018 at", "May 18 , 2018", True),
        ("on May 18 , 2018 at", "May 18, 2018", True),
        ("on 18 May 2018", "May 18, 2018", False),
        ("Obamacare was passed", "Obama", False),
        ("Barack Obama's policy", "Obama", True),
        ("BARACK OBAMA won", "barack obama", True),
        ("the U.S. president", "U.S.", True),
        ("the U.S. president", "US", False),
        ("Jean-Paul Sartre", "Jean Paul", False),
        ("Jean-Paul Sartre", "Jean-Paul", True),
        ("Dates: 1918", "18", False),
    ],
)
def test_known_matches(text, answer, expected):
    assert _one_question_run([text], [answer])[0] == expected


def test_regex_mode_matches_curated_trec_patterns_like_dpr():
    texts = ["William Jefferson Clinton was president", "Bill  Clinton", "Hillary Clinton", "in 1997",
             f"by {NFC_RONTGEN}", "(unbalanced"]
    patterns = [[r"Bill\s+Clinton|William\s+Jefferson\s+Clinton"], [r"(?:19|20)\d\d"], [NFD_RONTGEN],
                [r"r\w+ntgen"], ["("], ["CLINTON"]]
    for pats in patterns:
        got = _one_question_run(texts, pats, answer_type="regex")
        assert got.tolist() == [_reference(t, pats, regex=True) for t in texts], pats
    assert _one_question_run(texts, patterns[0], "regex").tolist() == [True, True, False, False, False, False]
    assert not _one_question_run(texts, ["("], "regex").any()  # an invalid pattern never matches, as in DPR
    # the regex is applied to the raw text, so text-mode tokenisation does not apply
    assert _one_question_run(["Obamacare"], ["Obama"], "regex")[0]


def test_empty_answers_never_match_and_are_reported(caplog):
    texts = ["Paris is nice", "anything"]
    with caplog.at_level(logging.WARNING, logger="ecqg.retrieval.evaluation"):
        assert not _one_question_run(texts, []).any()
        assert not _one_question_run(texts, ["", " "]).any()
        assert not _one_question_run(texts, ["", "  "], answer_type="regex").any()  # "" would match anything
    assert "no usable answer" in caplog.text
    assert _one_question_run(texts, ["", "paris"]).tolist() == [True, False]


def test_title_is_not_matched():
    corpus = passage_texts([{"id": "p1", "title": "Paris", "text": "The capital of France.", "source": "x"}])
    run = {"q": [("p1", 1.0)]}
    q = {"id": "q", "answers": ["Paris"], "subsets": [], "answer_type": "text"}
    assert not hit_matrix(run, [q], corpus, k_max=1).any()


def test_missing_ranks_are_false_and_missing_questions_or_passages_raise():
    corpus = {"a": "Paris", "b": "Rome"}
    qs = [{"id": "q1", "answers": ["Rome"], "subsets": []}, {"id": "q2", "answers": ["Paris"], "subsets": []}]
    hits = hit_matrix({"q1": [("a", 2.0), ("b", 1.0)], "q2": []}, qs, corpus, k_max=4)
    assert hits.tolist() == [[False, True, False, False], [False] * 4]
    with pytest.raises(RunError, match="'q2'"):
        hit_matrix({"q1": [("a", 1.0)]}, qs, corpus, k_max=4)
    with pytest.raises(RunError, match="'zz'"):
        hit_matrix({"q1": [("zz", 1.0)], "q2": []}, qs, corpus, k_max=4)
    with pytest.raises(DataFormatError, match="duplicate"):
        hit_matrix({"q1": []}, [qs[0], qs[0]], corpus)
    with pytest.raises(DataFormatError, match="answers"):
        hit_matrix({"q1": [("a", 1.0)]}, [dict(qs[0], answers="Rome")], corpus)
    with pytest.raises(DataFormatError, match="answer_type"):
        hit_matrix({"q1": [("a", 1.0)]}, [dict(qs[0], answer_type="exact")], corpus)



def test_a_shared_hit_cache_gives_the_same_hits_and_reads_each_passage_once():
    texts = {"a": "Paris is in France", "b": "Rome is in Italy", "c": "Berlin, Germany", "d": "Rome again"}
    reads = []

    def text_of(pid):
        reads.append(pid)
        return texts[pid]

    qs = [{"id": "q1", "answers": ["Rome"], "subsets": []}, {"id": "q2", "answers": ["Paris", "Berlin"], "subsets": []},
          {"id": "q3", "answers": ["\u00a0"], "subsets": []}]        # no token: never matches
    runs = [{"q1": [("a", 3.0), ("b", 2.0), ("d", 1.0)], "q2": [("c", 1.0)], "q3": [("a", 1.0)]},
            {"q1": [("d", 3.0), ("a", 2.0)], "q2": [("b", 2.0), ("a", 1.0)], "q3": []}]
    cache = HitCache(text_of)
    shared = [hit_matrix(run, qs, text_of, k_max=3, cache=cache) for run in runs]
    fresh = [hit_matrix(run, qs, texts, k_max=3) for run in runs]
    for s, f in zip(shared, fresh):
        assert s.tolist() == f.tolist()
    assert shared[0].tolist() == [[False, True, True], [True, False, False], [False] * 3]
    assert sorted(reads) == ["a", "b", "c", "d"]           # each passage read and tokenised once over both runs

# ---------------------------------------------------------------------------------------------------- accuracy
TOY_CORPUS = {"paris": "Paris is the capital of France.", "berlin": "Berlin is the capital of Germany.",
              "rome": "Rome is in Italy.", "misc": "Nothing relevant here.", "a": "Alpha.", "b": "Beta."}
TOY_QUESTIONS = [
    {"id": "q1", "answers": ["Paris"], "subsets": ["no_answer_overlap"], "answer_type": "text"},
    {"id": "q2", "answers": ["Berlin"], "subsets": ["no_answer_overlap", "no_question_overlap"]},
    {"id": "q3", "answers": ["Rome"], "subsets": []},
    {"id": "q4", "answers": ["Madrid"], "subsets": []},
]
TOY_RUN = {
    "q1": [("paris", 9.0), ("berlin", 8.0)],
    "q2": [("misc", 5.0), ("rome", 4.0), ("berlin", 3.0)],
    "q3": [("misc", 5.0), ("paris", 4.0), ("berlin", 3.0), ("a", 2.0), ("rome", 1.0), ("b", 0.0)],
    "q4": [("paris", 1.0), ("rome", 0.5)],
}


def test_hand_computed_toy_table():
    hits, table = evaluate_run(TOY_RUN, TOY_QUESTIONS, TOY_CORPUS, ks=(1, 3, 5), n_boot=200, seed=3,
                               system="toy", dataset="nq")
    assert hits.shape == (4, 5)
    assert hits.nonzero()[1].tolist() == [0, 2, 4]  # first (only) hit ranks of q1, q2, q3
    got = {(r.subset, r.k): (r.n, r.accuracy) for r in table.itertuples()}
    assert got == {
        ("all", 1): (4, 0.25), ("all", 3): (4, 0.5), ("all", 5): (4, 0.75),
        ("no_answer_overlap", 1): (2, 0.5), ("no_answer_overlap", 3): (2, 1.0), ("no_answer_overlap", 5): (2, 1.0),
        ("no_question_overlap", 1): (1, 0.0), ("no_question_overlap", 3): (1, 1.0),
        ("no_question_overlap", 5): (1, 1.0),
    }
    assert set(table.system) == {"toy"} and set(table.dataset) == {"nq"}
    one = table[table.subset == "no_question_overlap"]
    assert (one.ci_low == one.accuracy).all() and (one.ci_high == one.accuracy).all()  # n=1: no spread
    json.dumps(table_records(table))  # serialisable as is


def test_top_k_is_monotone_in_k():
    rng = np.random.default_rng(0)
    hits = rng.random((300, 100)) < 0.02
    at_k = hits_at_k(hits, range(1, 101))
    assert (np.diff(at_k.astype(int), axis=1) >= 0).all()
    table = accuracy_table(hits, [{"id": str(i)} for i in range(300)], n_boot=50)
    assert table.accuracy.is_monotonic_increasing and table.accuracy.iloc[0] < table.accuracy.iloc[-1]
    with pytest.raises(ValueError, match="k=101"):
        hits_at_k(hits, [101])


def test_bootstrap_ci_contains_estimate_narrows_with_n_and_is_seeded():
    rng = np.random.default_rng(1)
    widths = []
    for n in (100, 2000):
        x = (rng.random(n) < 0.4).astype(float)[:, None]
        low, high = bootstrap_ci(x, n_boot=1000, seed=7)
        assert low[0] <= x.mean() <= high[0]
        # the percentile CI is close to the normal approximation +-1.96 sqrt(p(1-p)/n)
        assert high[0] - low[0] == pytest.approx(2 * 1.96 * np.sqrt(0.24 / n), rel=0.2)
        widths.append(high[0] - low[0])
    assert widths[1] < widths[0] / 3
    x = rng.random((500, 1))  # continuous values, so different resamples give different quantiles
    assert np.array_equal(bootstrap_ci(x, 300, seed=5), bootstrap_ci(x, 300, seed=5))
    assert not np.array_equal(bootstrap_ci(x, 300, seed=5), bootstrap_ci(x, 300, seed=6))


def test_paired_bootstrap():
    rng = np.random.default_rng(2)
    a = rng.random((400, 20)) < 0.05
    same = paired_bootstrap(a, a.copy(), k=5, n_boot=500, seed=0)
    assert (same["difference"], same["ci_low"], same["ci_high"], same["p_value"]) == (0.0, 0.0, 0.0, 1.0)
    better = a.copy()
    better[:120, 0] = True  # system "better" gets 120 extra top-1 hits on the same questions
    res = paired_bootstrap(better, a, k=1, n_boot=2000, seed=0)
    assert res["difference"] == pytest.approx(better[:, 0].mean() - a[:, 0].mean())
    assert 0 < res["ci_low"] <= res["difference"] <= res["ci_high"] and res["p_value"] < 0.01
    flipped = paired_bootstrap(a, better, k=1, n_boot=2000, seed=0)
    assert flipped["difference"] == -res["difference"] and flipped["p_value"] == res["p_value"]
    noise = paired_bootstrap(rng.random((400, 5)) < 0.5, rng.random((400, 5)) < 0.5, k=1, n_boot=2000, seed=0)
    assert noise["p_value"] > 0.05 or abs(noise["difference"]) > 0.05
    table = paired_table(better, a, [{"id": str(i), "subsets": ["s"] if i % 2 else []} for i in range(400)],
                         ks=(1, 5), n_boot=100, system_a="B", system_b="A")
    assert list(table.subset) == ["all", "all", "s", "s"] and (table.n == [400, 400, 200, 200]).all()
    with pytest.raises(ValueError, match="same questions"):
        paired_bootstrap(a, a[:10], k=1)


def test_seed_stack_gives_seed_means_their_spread_and_paired_seed_means():
    """Three seeds of one model: accuracy = mean over seeds, sd / min / max over seeds, CI over questions."""
    rng = np.random.default_rng(4)
    stack = rng.random((300, 3, 20)) < 0.06                                   # questions x seeds x ranks
    questions = [{"id": str(i), "subsets": ["s"] if i % 3 == 0 else []} for i in range(300)]
    table = accuracy_table(stack, questions, ks=(1, 5), n_boot=300, seed=1)
    per_seed = [accuracy_table(stack[:, s], questions, ks=(1, 5), n_boot=300, seed=1) for s in range(3)]
    for i, row in enumerate(table.itertuples()):
        accs = [t.accuracy.iloc[i] for t in per_seed]
        assert row.seeds == 3 and row.accuracy == pytest.approx(np.mean(accs))
        assert row.seed_sd == pytest.approx(np.std(accs, ddof=1)) and row.seed_sd > 0
        assert (row.seed_min, row.seed_max) == (pytest.approx(min(accs)), pytest.approx(max(accs)))
        assert row.ci_low <= row.accuracy <= row.ci_high
    single = accuracy_table(stack[:, 0], questions, ks=(1, 5), n_boot=300, seed=1)
    assert (single.seeds == 1).all() and single.seed_sd.isna().all() and single.hits.dtype.kind == "i"
    assert (single.seed_min == single.accuracy).all()
    # A one-seed stack is the run itself.
    one = accuracy_table(stack[:, :1], questions, ks=(1, 5), n_boot=300, seed=1)
    assert np.allclose(one[["accuracy", "ci_low", "ci_high"]], single[["accuracy", "ci_low", "ci_high"]])
    # Paired: the seed-means are compared question by question.
    other = rng.random((300, 3, 20)) < 0.03
    res = paired_bootstrap(stack, other, k=5, n_boot=500, seed=0)
    expected = hits_at_k(stack, [5])[:, 0].mean() - hits_at_k(other, [5])[:, 0].mean()
    assert res["difference"] == pytest.approx(expected) and res["ci_low"] <= expected <= res["ci_high"]
    assert paired_table(stack, other, questions, ks=(5,), n_boot=100).n.tolist() == [300, 100]


def test_subset_masks_reject_reserved_name():
    assert list(subset_masks(TOY_QUESTIONS)) == ["all", "no_answer_overlap", "no_question_overlap"]
    with pytest.raises(DataFormatError, match="reserved"):
        subset_masks([{"id": "x", "subsets": ["all"]}])


# --------------------------------------------------------------------------------------------------- run files
def test_trec_run_roundtrip_and_pyserini_reads_it(tmp_path):
    from pyserini.trectools import TrecRun

    run = {"q1": [("d3", 2.5), ("d1", 2.5), ("d2", 2.5), ("d9", -1e-05)],  # ties keep the given order
           "q2": [("d7", 0.1 + 0.2)], "q3": []}
    path = write_trec_run(tmp_path / "runs" / "bm25.trec", run, tag="bm25")
    assert [p.name for p in path.parent.iterdir()] == ["bm25.trec"]  # no temporary left behind
    assert path.read_text().splitlines()[0] == "q1 Q0 d3 1 2.5 bm25"
    assert read_trec_run(path) == {k: v for k, v in run.items() if v}  # bit-identical scores, same order
    frame = TrecRun(str(path)).run_data
    for qid, ranking in run.items():
        rows = frame[frame.topic.astype(str) == qid].sort_values("rank")
        assert list(zip(rows.docid, rows.score)) == ranking
    with pytest.raises(RunError, match="whitespace"):
        write_trec_run(tmp_path / "bad.trec", {"q 1": [("d", 1.0)]})
    with pytest.raises(RunError, match="best first"):
        write_trec_run(tmp_path / "bad.trec", {"q": [("d", 1.0), ("e", 2.0)]})
    assert not (tmp_path / "bad.trec").exists()


@pytest.mark.parametrize(
    "lines, line_no, field",
    [
        (["q1 Q0 d1 1 2.0 t", "q1 Q0 d2 2 1.0"], 2, None),
        (["q1 Q1 d1 1 2.0 t"], 1, "Q0"),
        (["q1 Q0 d1 one 2.0 t"], 1, "rank"),
        (["q1 Q0 d1 0 2.0 t"], 1, "rank"),
        (["q1 Q0 d1 1 high t"], 1, "score"),
        (["q1 Q0 d1 1 2.0 t", "q1 Q0 d2 3 1.0 t"], 2, "rank"),
        (["q1 Q0 d1 1 2.0 t", "q1 Q0 d2 1 1.0 t"], 2, "rank"),
        (["q1 Q0 d1 1 2.0 t", "q1 Q0 d1 2 1.0 t"], 2, "docid"),
        (["q1 Q0 d1 1 1.0 t", "q1 Q0 d2 2 2.0 t"], 2, "score"),
    ],
)
def test_read_trec_run_names_file_line_and_field(tmp_path, lines, line_no, field):
    path = tmp_path / "bad.trec"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError) as err:
        read_trec_run(path)
    assert str(path) in str(err.value) and f"line {line_no}" in str(err.value)
    assert err.value.field == field


def test_read_trec_run_accepts_lines_out_of_order(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q2 Q0 x 1 3 t\nq1 Q0 b 2 1.5 t\n\nq1 Q0 a 1 2 t\n")
    assert read_trec_run(path) == {"q2": [("x", 3.0)], "q1": [("a", 2.0), ("b", 1.5)]}


def test_empty_rankings_survive_the_run_files(tmp_path):
    from ecqg.retrieval.run_files import empty_rankings_file, read_run, write_run

    path = tmp_path / "runs" / "nq.trec"
    run = {"q1": [("p1", 2.0), ("p2", 1.0)], "q2": []}
    write_run(path, run, tag="bm25")
    assert read_run(path) == run
    assert json.loads(empty_rankings_file(path).read_text()) == ["q2"]
    empty_rankings_file(path).unlink()
    with pytest.raises(RunError, match="missing"):
        read_run(path)
