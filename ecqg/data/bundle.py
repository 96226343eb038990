"""Build the committed mini data bundle ("NQ-mini") from the raw public files.

    python -m ecqg.data.bundle --raw RAW --out data

Reads only the files named in :data:`RAW_FILES` (relative to ``--raw``; a directory with the same names, e.g. a tiny
test fixture, works the same) and writes, atomically and byte-deterministically (sorted/ordered output, gzip with
mtime 0, no timestamps):

corpus.jsonl.gz               passages {id, title, text, source}
nq_test.jsonl.gz              NQ test questions whose gold passage is in the corpus (gold_ids, Lewis subsets)
wq_test / tqa_test.jsonl.gz   WebQuestions / TriviaQA test questions whose answer occurs in the corpus (DPR has_answer)
trec_test.jsonl.gz            CuratedTREC test questions (regex answers) whose pattern matches somewhere in the corpus
train_gold.jsonl.gz           SQuAD 2.0 dev answerables + XQuAD + haystack squad_small triples
squad2_unanswerable.jsonl.gz  SQuAD 2.0 unanswerable questions (for the MRC filter)
nq_dev.jsonl.gz               NQ dev questions and answers (for distant supervision later)
manifest.json                 counts, drops with reasons, sha256 of every file, the build command

See ``data/README.md`` for sources, licences and the text style (:mod:`ecqg.data.records`).

Size: one module over 400 lines because it is one build script, its steps in the order they run; the formats it
reads are the other modules of :mod:`ecqg.data`.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import re
import sys
import time
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

from tqdm.auto import tqdm

from ecqg.core import cli
from ecqg.data import dpr, nq_gold, nq_open, overlap, squad, wiki
from ecqg.data.records import normalize_span, normalize_text, normalize_title, question_key, text_key
from ecqg.core.errors import DataFormatError
from ecqg.core.io import write_json, write_jsonl

log = logging.getLogger(__name__)

BUILD_COMMAND = "python -m ecqg.data.bundle --raw ../shared/data/raw --out data"   # the committed build's (manifest)

RAW_FILES = {
    "nq_open_test": "nq-open/NQ-open.dev.jsonl",
    "nq_dpr_test": "anserini-topics/topics.dpr.nq.test.txt",
    "nq_test_text": "anserini-topics/topics.nq.test.txt",
    "nq_overlap": "qa-overlap/nq-annotations.jsonl",
    "power_of_noise": "nq-gold-passages/power-of-noise.test_dataset.json",
    "lost_in_the_middle": "nq-gold-passages/lost-in-the-middle.nq-open-oracle.jsonl.gz",
    "wq_test": "anserini-topics/topics.dpr.wq.test.txt",
    "tqa_test": "anserini-topics/topics.dpr.trivia.test.txt",
    "trec_test": "anserini-topics/topics.dpr.curated.test.txt",
    "nq_dev": "anserini-topics/topics.nq.dev.txt",
    "haystack_dpr": "wiki-passages/haystack.dpr_sample.json",
    "primeqa": "wiki-passages/primeqa.psgs_w100_pyserini_100.jsonl",
    "flashrag": "wiki-passages/flashrag.wiki18.sample_data.jsonl",
    "vital_articles": "wiki-passages/ovos.vital-articles.summaries_en-us.json",
    "squad2_dev": "squad/squad-v2.0.dev.json",
    "xquad": "squad/xquad.en.json",
    "haystack_squad": "squad/haystack.squad_small.json",
}

OUTPUT_FILES = (
    "corpus.jsonl.gz", "nq_test.jsonl.gz", "wq_test.jsonl.gz", "tqa_test.jsonl.gz", "trec_test.jsonl.gz",
    "train_gold.jsonl.gz", "squad2_unanswerable.jsonl.gz", "nq_dev.jsonl.gz",
)

# a test question of any set may not be trained on; minimum share of DPR/NQ-open questions that must agree
MIN_NQ_ALIGNMENT = 0.95


def sha256_of(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _clean_answers(answers: Iterable[str]) -> list[str]:
    out: list[str] = []
    for a in answers:
        a = normalize_text(a)
        if a and a not in out:
            out.append(a)
    return out


# --------------------------------------------------------------------------------------------------------------------
# corpus


class Corpus:
    """Ordered passages with de-duplication by :func:`text_key` (the first source to add a text keeps it)."""

    def __init__(self) -> None:
        self.passages: dict[str, dict[str, str]] = {}
        self._by_key: dict[str, str] = {}
        self.added: Counter[str] = Counter()
        self.duplicates: Counter[str] = Counter()

    def add(self, pid: str, title: str, text: str, source: str) -> str:
        """Add a passage (already normalised); return the id under which its text is stored."""
        key = text_key(text)
        existing = self._by_key.get(key)
        if existing is not None:
            self.duplicates[source] += 1
            return existing
        if pid in self.passages:
            raise ValueError(f"passage id {pid!r} used twice for different texts")
        self.passages[pid] = {"id": pid, "title": title, "text": text, "source": source}
        self._by_key[key] = pid
        self.added[source] += 1
        return pid

    def lookup(self, text: str) -> str | None:
        return self._by_key.get(text_key(text))


def add_nq_gold(raw: Path, corpus: Corpus, nq_questions: list[dict[str, Any]], stats: dict) -> dict[int, list[str]]:
    """Add the NQ test gold passages; return ``{nq test index: [gold passage ids]}``.

    Per question (in NQ test order): the PoN passage, then LitM's gold ctx. A PoN text that is the same passage as a
    LitM text (of any question; :func:`text_key` equality) takes LitM's clean text and title; otherwise it is
    :func:`nq_gold.detokenize`-d and takes the title of the same question's LitM NQ document where there is one
    (both files take the passage from the question's NQ annotated document), else stays untitled.
    """
    index_of = {q["question"]: q["index"] for q in nq_questions}
    pon_path, litm_path = raw / RAW_FILES["power_of_noise"], raw / RAW_FILES["lost_in_the_middle"]
    pon: dict[int, dict] = {}
    for i, rec in enumerate(nq_gold.read_power_of_noise(pon_path)):
        if rec["question"] not in index_of:
            raise DataFormatError(pon_path, i, "question", "question is not among the NQ-open test questions")
        pon[index_of[rec["question"]]] = rec
    litm: dict[int, dict] = {}
    for i, rec in enumerate(nq_gold.read_lost_in_the_middle(litm_path), start=1):
        if rec["question"] not in index_of:
            raise DataFormatError(litm_path, f"line {i}", "question", "question is not among the NQ-open test questions")
        litm[index_of[rec["question"]]] = rec
    clean: dict[str, tuple[str, str]] = {}  # text_key -> (title, clean text) from LitM, first seen wins
    for idx in sorted(litm):
        rec = litm[idx]
        for title, text in ((rec["gold_title"], rec["gold_text"]), (rec["long_answer_title"], rec["long_answer"])):
            clean.setdefault(text_key(text), (normalize_title(title), normalize_text(text)))

    gold: dict[int, list[str]] = {}
    st = Counter()
    for idx in sorted(set(pon) | set(litm)):
        ids: list[str] = []
        if idx in pon:
            raw_text = pon[idx]["text"]
            twin = clean.get(text_key(raw_text))
            if twin is not None:
                title, text = twin
                st["pon_text_from_litm"] += 1
                detok = normalize_text(nq_gold.detokenize(raw_text))
                st["pon_detokenizer_checked"] += 1
                st["pon_detokenizer_exact"] += int(detok == text)
            else:
                text = normalize_text(nq_gold.detokenize(raw_text))
                title = normalize_title(litm[idx]["long_answer_title"]) if idx in litm else ""
                st["pon_text_detokenized"] += 1
                st["pon_title_from_same_question_litm" if title else "pon_untitled"] += 1
            ids.append(corpus.add(f"nqgold-{idx:04d}-pon", title, text, "nq-gold-pon"))
        if idx in litm:
            rec = litm[idx]
            pid = corpus.add(f"nqgold-{idx:04d}-litm", normalize_title(rec["gold_title"]),
                             normalize_text(rec["gold_text"]), "nq-gold-litm")
            if pid not in ids:
                ids.append(pid)
        gold[idx] = ids
    st["questions_pon"], st["questions_litm"] = len(pon), len(litm)
    st["questions_both"] = len(set(pon) & set(litm))
    stats["nq_gold"] = dict(sorted(st.items()))
    return gold


def add_wiki_passages(raw: Path, corpus: Corpus) -> None:
    """psgs_w100 passages: haystack's DPR sample ctxs, PrimeQA's 100, FlashRAG's 1,000 wiki-18 passages."""
    path = raw / RAW_FILES["haystack_dpr"]
    ctxs: dict[str, dict] = {}
    for ex in dpr.read_dpr_retriever_json(path):
        for name in dpr.CTX_LISTS:
            for ctx in ex[name]:
                if ctx.get("passage_id") is None:
                    raise DataFormatError(path, None, f"{name}.passage_id", "psgs_w100 passage without passage_id")
                ctxs.setdefault(ctx["passage_id"], ctx)
    for pid in sorted(ctxs, key=lambda p: (len(p), p)):
        ctx = ctxs[pid]
        corpus.add(f"psgs-{pid}", normalize_title(ctx["title"]), normalize_text(ctx["text"]), "psgs-haystack-dpr")
    prime = sorted(wiki.read_json_collection(raw / RAW_FILES["primeqa"]), key=lambda p: (len(p["id"]), p["id"]))
    for p in prime:
        corpus.add(f"psgs-{p['id']}", normalize_title(p["title"]), normalize_text(p["text"]), "psgs-primeqa")
    for p in wiki.read_json_collection(raw / RAW_FILES["flashrag"]):
        corpus.add(f"wiki18-flashrag-{int(p['id']):04d}" if p["id"].isdigit() else f"wiki18-flashrag-{p['id']}",
                   normalize_title(p["title"]), normalize_text(p["text"]), "wiki18-flashrag")


def add_vital_articles(raw: Path, corpus: Corpus, stats: dict) -> None:
    """Each Vital-Articles lead cut DPR-style into consecutive <=100-word passages; title = article title."""
    arts = wiki.read_vital_articles(raw / RAW_FILES["vital_articles"])
    empty = 0
    for k, art in enumerate(arts):
        chunks = wiki.split_passages(normalize_text(art["extract"]), 100)
        empty += not chunks
        for c, chunk in enumerate(chunks):
            corpus.add(f"vital-{k:05d}-{c:02d}", normalize_title(art["title"]), chunk, "vital-articles")
    stats["vital_articles"] = {"articles": len(arts), "empty_extracts": empty}


SQUAD_SOURCES = (("squad2_dev", "squad2-dev", "squad2dev"), ("xquad", "xquad", "xquad"),
                 ("haystack_squad", "haystack-squad-small", "hssquad"))


def add_squad(raw: Path, corpus: Corpus, test_keys: set[str], drops: Counter) -> tuple[list[dict], list[dict]]:
    """Add the SQuAD-format paragraphs (whole) and return (train triples, unanswerables), de-duplicated."""
    triples: list[dict] = []
    unanswerable: list[dict] = []
    seen_pairs: set[tuple[str, str]] = set()
    seen_ids: set[str] = set()
    for name, source, prefix in SQUAD_SOURCES:
        for para in squad.read_squad(raw / RAW_FILES[name]):
            text = normalize_text(para["context"])
            pid = corpus.add(f"{prefix}-{para['article']:02d}-{para['paragraph']:03d}", normalize_title(para["title"]),
                             text, source)
            stored = corpus.passages[pid]["text"]
            for qa in para["qas"]:
                question = normalize_text(qa["question"])
                qkey = question_key(question)
                rid = f"{source}-{qa['id']}"
                if rid in seen_ids:
                    drops[f"{source}: duplicate question id"] += 1
                    continue
                if qkey in test_keys:
                    drops[f"{source}: question equals a test question"] += 1
                    continue
                if (qkey, pid) in seen_pairs:
                    drops[f"{source}: duplicate (same question, same passage)"] += 1
                    continue
                if qa["is_impossible"]:
                    seen_pairs.add((qkey, pid))
                    seen_ids.add(rid)
                    unanswerable.append({"id": rid, "question": question, "passage_id": pid,
                                         "plausible_answers": _clean_answers(a["text"] for a in qa["plausible_answers"])})
                    continue
                ans = qa["answers"][0]
                span = normalize_span(para["context"], ans["answer_start"], ans["text"])
                if span is None or stored[span[1] : span[1] + len(span[2])] != span[2]:
                    drops[f"{source}: answer offset not reproducible after text normalisation"] += 1
                    continue
                seen_pairs.add((qkey, pid))
                seen_ids.add(rid)
                triples.append({"id": rid, "question": question, "answer": span[2], "answer_start": span[1],
                                "passage_id": pid, "source": source})
    return triples, unanswerable


# --------------------------------------------------------------------------------------------------------------------
# answer search over the corpus


class AnswerIndex:
    """Positional inverted index over DPR tokens of every passage: "does answer a occur anywhere?" in microseconds.

    Equivalent to ``any(has_answer(p, [a]) for p in passages)`` (DPR's token-sequence match); the anchor is the
    answer's rarest token, so common first words ("the") cost nothing.
    """

    def __init__(self, texts: Sequence[str], progress: bool = True) -> None:
        # data.text brings pyserini (DrQA's tokenizer): loaded when the index is built, not at import
        from ecqg.data.text import dpr_tokens

        self.tokens: list[list[str]] = []
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for d, text in enumerate(tqdm(texts, desc="tokenising corpus (DPR tokens)", disable=not progress,
                                      mininterval=2.0)):
            toks = dpr_tokens(text)
            self.tokens.append(toks)
            for pos, tok in enumerate(toks):
                self.postings[tok].append((d, pos))

    def find(self, answer_tokens: Sequence[str]) -> int | None:
        """Index of the first passage containing the token sequence, or None."""
        n = len(answer_tokens)
        if n == 0:
            return None
        lists = [self.postings.get(t) for t in answer_tokens]
        if any(lst is None for lst in lists):
            return None
        j = min(range(n), key=lambda i: len(lists[i]))
        target = list(answer_tokens)
        for d, pos in lists[j]:
            s = pos - j
            if s >= 0 and self.tokens[d][s : s + n] == target:
                return d
        return None


class RegexSearcher:
    """CuratedTREC matching over the corpus: one search of the concatenated NFD texts, each hit re-checked per passage
    with :func:`ecqg.data.text.answer_regex_match` (so a match across a passage boundary never counts)."""

    SEP = "\n"

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)
        parts, self.starts, pos = [], [], 0
        for t in self.texts:
            t = unicodedata.normalize("NFD", t)
            self.starts.append(pos)
            parts.append(t)
            pos += len(t) + len(self.SEP)
        self.blob = self.SEP.join(parts)

    def find(self, pattern: str) -> int | None:
        # pyserini, through data.text, loads on the first regex answer lookup
        from ecqg.data.text import answer_regex_match

        try:
            rx = re.compile(unicodedata.normalize("NFD", pattern), flags=re.IGNORECASE | re.UNICODE | re.MULTILINE)
        except re.error:
            return None
        hits = 0
        for m in rx.finditer(self.blob):
            d = bisect.bisect_right(self.starts, m.start()) - 1
            hits += 1
            if answer_regex_match(self.texts[d], pattern):
                return d
            if hits > 50:
                break
        if hits:  # rare: only boundary-crossing hits were seen; fall back to the exact per-passage check
            for d, t in enumerate(self.texts):
                if answer_regex_match(t, pattern):
                    return d
        return None


# --------------------------------------------------------------------------------------------------------------------
# the build


def _questions_in_corpus(name: str, qas: list[dict], index: AnswerIndex, prefix: str, width: int,
                         drops: Counter) -> list[dict]:
    # pyserini (through data.text) only once the build runs
    from ecqg.data.text import dpr_tokens

    out = []
    for i, qa in enumerate(tqdm(qas, desc=f"{name}: answers in corpus", mininterval=2.0)):
        answers = _clean_answers(qa["answers"])
        if not any(index.find(dpr_tokens(a)) is not None for a in answers):
            drops[f"{name}: no answer occurs in the corpus"] += 1
            continue
        out.append({"id": f"{prefix}-{i:0{width}d}", "question": normalize_text(qa["question"]), "answers": answers,
                    "gold_ids": [], "subsets": [], "answer_type": "text"})
    return out


def build_bundle(raw: str | Path, out: str | Path, progress: bool = True) -> dict[str, Any]:
    """Build every bundle file from ``raw`` into ``out``; return the manifest (also written to manifest.json)."""
    raw, out = Path(raw), Path(out)
    missing = [rel for rel in RAW_FILES.values() if not (raw / rel).is_file()]
    if missing:
        raise FileNotFoundError(f"raw directory {raw} lacks: {', '.join(missing)}")
    t0 = time.perf_counter()
    stats: dict[str, Any] = {}
    drops: Counter[str] = Counter()

    # ---- NQ test questions, aligned three ways. The order (and the index kept in the id) is DPR's
    # topics.dpr.nq.test.txt order, which the overlap annotations follow; topics.nq.test.txt has the same rows
    # untokenized, and its question strings are exactly NQ-open's, whose record (question, answers) is used.
    # NQ-open.dev.jsonl itself is in a different order.
    nq_open_path = raw / RAW_FILES["nq_open_test"]
    nq_open_by_q: dict[str, dict] = {}
    for rec in nq_open.read_nq_open(nq_open_path):
        if rec["question"] in nq_open_by_q:
            raise DataFormatError(nq_open_path, f"line {rec['index'] + 1}", "question", "duplicate question")
        nq_open_by_q[rec["question"]] = rec
    nq_dpr = list(dpr.read_qas(raw / RAW_FILES["nq_dpr_test"]))
    nq_text = list(dpr.read_qas(raw / RAW_FILES["nq_test_text"]))
    ann = list(overlap.read_overlap_annotations(raw / RAW_FILES["nq_overlap"]))
    if not (len(nq_open_by_q) == len(nq_dpr) == len(nq_text) == len(ann)):
        raise DataFormatError(raw / RAW_FILES["nq_dpr_test"], None, None,
                              f"NQ test files disagree in length: NQ-open {len(nq_open_by_q)}, DPR topics "
                              f"{len(nq_dpr)}, untokenized topics {len(nq_text)}, overlap {len(ann)}")
    agree = sum(question_key(a["question"]) == question_key(b["question"]) for a, b in zip(nq_text, nq_dpr))
    if nq_dpr and agree < MIN_NQ_ALIGNMENT * len(nq_dpr):
        raise DataFormatError(raw / RAW_FILES["nq_test_text"], None, "question",
                              f"only {agree}/{len(nq_dpr)} rows agree with topics.dpr.nq.test.txt: files not aligned")
    nq_qs = []
    for i, row in enumerate(nq_text):
        rec = nq_open_by_q.get(row["question"])
        if rec is None:
            raise DataFormatError(raw / RAW_FILES["nq_test_text"], f"line {i + 1}", "question",
                                  "question not found in NQ-open.dev.jsonl")
        nq_qs.append({"index": i, "question": rec["question"], "answers": rec["answers"]})
    stats["nq_test_alignment"] = {"questions": len(nq_qs), "dpr_tokenized_rows_same_question_key": agree,
                                  "untokenized_rows_found_in_nq_open": len(nq_qs)}

    # ---- corpus
    corpus = Corpus()
    gold = add_nq_gold(raw, corpus, nq_qs, stats)
    add_wiki_passages(raw, corpus)
    add_vital_articles(raw, corpus, stats)

    # ---- test sets
    nq_test = []
    for q in nq_qs:
        ids = gold.get(q["index"], [])
        if not ids:
            drops["nq_test: no gold passage in the corpus"] += 1
            continue
        nq_test.append({"id": f"nq-test-{q['index']:04d}", "question": normalize_text(q["question"]),
                        "answers": _clean_answers(q["answers"]), "gold_ids": ids,
                        "subsets": overlap.subsets_of(ann[q["index"]]["labels"]), "answer_type": "text"})
    wq_raw = list(dpr.read_qas(raw / RAW_FILES["wq_test"]))
    tqa_raw = list(dpr.read_qas(raw / RAW_FILES["tqa_test"]))
    trec_raw = list(dpr.read_qas(raw / RAW_FILES["trec_test"]))
    test_keys = {question_key(q["question"]) for qs in (nq_qs, nq_dpr, wq_raw, tqa_raw, trec_raw) for q in qs}

    # ---- SQuAD paragraphs into the corpus, gold triples out
    triples, unanswerable = add_squad(raw, corpus, test_keys, drops)

    passages = list(corpus.passages.values())
    texts = [p["text"] for p in passages]
    index = AnswerIndex(texts, progress=progress)
    wq_test = _questions_in_corpus("wq_test", wq_raw, index, "wq-test", 4, drops)
    tqa_test = _questions_in_corpus("tqa_test", tqa_raw, index, "tqa-test", 5, drops)
    searcher = RegexSearcher(texts)
    trec_test = []
    for i, qa in enumerate(tqdm(trec_raw, desc="trec_test: patterns in corpus", disable=not progress)):
        if not any(searcher.find(p) is not None for p in qa["answers"]):
            drops["trec_test: no pattern matches the corpus"] += 1
            continue
        trec_test.append({"id": f"trec-test-{i:03d}", "question": normalize_text(qa["question"]),
                          "answers": list(qa["answers"]), "gold_ids": [], "subsets": [], "answer_type": "regex"})

    gold_has_answer = 0
    text_of = {p["id"]: p["text"] for p in passages}
    # pyserini (through data.text) only once the build runs
    from ecqg.data.text import has_answer

    for q in nq_test:
        gold_has_answer += any(has_answer(text_of[g], q["answers"]) for g in q["gold_ids"])
    stats["nq_test_gold_contains_answer"] = gold_has_answer

    # ---- NQ dev
    nq_dev = []
    for i, qa in enumerate(dpr.read_qas(raw / RAW_FILES["nq_dev"])):
        question = normalize_text(qa["question"])
        if question_key(question) in test_keys:
            drops["nq_dev: question equals a test question"] += 1
            continue
        nq_dev.append({"id": f"nq-dev-{i:04d}", "question": question, "answers": _clean_answers(qa["answers"])})

    # ---- write
    outputs = {
        "corpus.jsonl.gz": passages, "nq_test.jsonl.gz": nq_test, "wq_test.jsonl.gz": wq_test,
        "tqa_test.jsonl.gz": tqa_test, "trec_test.jsonl.gz": trec_test, "train_gold.jsonl.gz": triples,
        "squad2_unanswerable.jsonl.gz": unanswerable, "nq_dev.jsonl.gz": nq_dev,
    }
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in OUTPUT_FILES:
        n = write_jsonl(out / name, outputs[name])
        files[name] = {"records": n, "sha256": sha256_of(out / name), "bytes": (out / name).stat().st_size}

    subsets = Counter(s for q in nq_test for s in q["subsets"])
    manifest = {
        "build_command": BUILD_COMMAND,
        "raw_files": {k: {"path": v, "sha256": sha256_of(raw / v)} for k, v in RAW_FILES.items()},
        "counts": {
            "corpus_by_source": dict(sorted(corpus.added.items())),
            "corpus_total": len(passages),
            "questions": {"nq_test": len(nq_test), "wq_test": len(wq_test), "tqa_test": len(tqa_test),
                          "trec_test": len(trec_test), "nq_dev": len(nq_dev)},
            "nq_test_subsets": dict(sorted(subsets.items())),
            "nq_test_raw": len(nq_qs), "wq_test_raw": len(wq_raw), "tqa_test_raw": len(tqa_raw),
            "trec_test_raw": len(trec_raw),
            "train_gold_by_source": dict(sorted(Counter(t["source"] for t in triples).items())),
            "squad2_unanswerable": len(unanswerable),
        },
        "duplicates_collapsed_by_source": dict(sorted(corpus.duplicates.items())),
        "drops": dict(sorted(drops.items())),
        "stats": stats,
        "files": files,
    }
    write_json(out / "manifest.json", manifest)
    log.info("bundle built in %.1fs: %d passages", time.perf_counter() - t0, len(passages))
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.data.bundle", __doc__)
    parser.add_argument("--raw", required=True,
                        help="directory of the raw public files named in RAW_FILES (see data/README.md)")
    parser.add_argument("--out", required=True, help="output directory (data)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    t0 = time.perf_counter()
    try:
        manifest = build_bundle(args.raw, args.out, progress=not args.quiet)
    except (DataFormatError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    c = manifest["counts"]
    print(f"corpus {c['corpus_total']} passages {c['corpus_by_source']}")
    print(f"questions {c['questions']}  NQ subsets {c['nq_test_subsets']}")
    print(f"train {c['train_gold_by_source']}  unanswerable {c['squad2_unanswerable']}")
    print(f"wall time {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
