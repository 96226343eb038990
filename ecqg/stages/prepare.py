"""Stage `prepare`: the bundle (or the paper's published files) -> one schema under ``outputs/data/``.

Reads every input through the validating loaders of :mod:`ecqg.data` (bad input stops here, with the file, record and
field named, before any output is written: intake refuses, it never repairs), applies the profile's sub-sampling
deterministically from the seed, and writes:
``corpus.jsonl`` (id, title, text, source), ``questions/<set>.jsonl``, ``train_gold.jsonl`` (triples with their
passage inlined, so training does not depend on the corpus sample) and ``nq_dev.jsonl``.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Iterable, Iterator

from ecqg.core import cli, config, paths, settings
from ecqg.data import records
from ecqg.data.dpr import check_positives, read_dpr_retriever_json, read_qas, write_dpr_retriever_json
from ecqg.data.fields import SeenIds
from ecqg.core.errors import DataFormatError
from ecqg.core.io import read_jsonl, write_jsonl
from ecqg.core.stage_record import log, timed_stage

REGEX_SETS = {"trec"}  # CuratedTREC answers are regular expressions (DPR's convention)


def sample_indices(n: int, limit: int | None, seed: str) -> list[int]:
    """Sorted indices of a seeded sample of ``limit`` out of ``n`` (all of them when limit is None or >= n)."""
    if limit is None or limit >= n:
        return list(range(n))
    return sorted(random.Random(seed).sample(range(n), limit))


def _is_bundle_jsonl(path: Path) -> bool:
    if not path.name.endswith((".jsonl", ".jsonl.gz")):
        return False
    for _, record in read_jsonl(path):
        return "id" in record
    return False


def load_test_set(name: str, path: str | Path) -> list[dict[str, Any]]:
    """A test set in the bundle schema, from the bundle's jsonl or a DPR qas csv/tsv / anserini topics file."""
    path = Path(path)
    if _is_bundle_jsonl(path):
        return list(records.read_test_questions(path))
    answer_type = "regex" if name in REGEX_SETS else "text"
    return [{"id": f"{name}-{i:05d}", "question": q["question"], "answers": q["answers"], "gold_ids": [],
             "subsets": [], "answer_type": answer_type} for i, q in enumerate(read_qas(path))]


def load_train_gold(path: str | Path, passages: dict[str, dict]) -> list[dict[str, Any]]:
    """Gold triples with title and text of their passage inlined (offsets re-checked against that text)."""
    out = []
    for i, triple in enumerate(records.read_train_gold(path)):
        passage = passages.get(triple["passage_id"])
        if passage is None:
            raise DataFormatError(path, i, "passage_id", f"{triple['passage_id']!r} is not in the corpus")
        records.check_answer_offset(triple, passage["text"], path, i)
        out.append({**triple, "title": passage["title"], "text": passage["text"]})
    return out


def scan_corpus(path: str | Path, wanted: set[str]) -> tuple[list[str], dict[str, dict]]:
    """One streaming pass: every passage id in order, and the full records of the ``wanted`` ids.

    Why two passes over the corpus instead of loading it: the paper profile's psgs_w100 has 21M passages.
    """
    ids, found = [], {}
    for passage in records.read_corpus(path):
        ids.append(passage["id"])
        if passage["id"] in wanted:
            found[passage["id"]] = passage
    return ids, found


def corpus_sample(ids: list[str], required: set[str], limit: int | None, seed: str) -> set[str] | None:
    """The ids to keep: every required one plus a seeded sample of the others, ``limit`` in all (None = all)."""
    if limit is None or limit >= len(ids):
        return None
    others = [pid for pid in ids if pid not in required]
    room = max(0, limit - (len(ids) - len(others)))
    return required | {others[i] for i in sample_indices(len(others), room, seed)}


def load_dpr_training(path: str | Path, corpus_path: str | Path, in_corpus: SeenIds) -> list[dict[str, Any]]:
    """DPR retriever-json training records, each with a positive passage that has text and, where it names a
    ``passage_id``, is a passage of the input corpus: one the corpus lacks means the file was built for another
    corpus. (Outside the kept sample is fine: the record carries the text; :func:`positive_places` counts them.)"""
    examples = []
    for i, example in enumerate(read_dpr_retriever_json(path)):
        check_positives(example, path, i)
        for j, ctx in enumerate(example["positive_ctxs"]):
            pid = ctx.get("passage_id")
            if pid is not None and pid not in in_corpus:
                raise DataFormatError(path, i, f"positive_ctxs[{j}].passage_id",
                                      f"passage {pid!r} is not in the corpus {corpus_path}")
        examples.append(example)
    return examples


def positive_places(triples: list[dict[str, Any]], keep: set[str] | None, dpr_input: bool) -> dict[str, int]:
    """Where the kept training records' positive passages are: in the kept corpus, outside it (legitimate when
    max_corpus_passages cut the corpus: each record carries its passage's text) or unnamed (a ctx without id)."""
    places: Counter = Counter()
    for triple in triples:
        pids = [c.get("passage_id") for c in triple["positive_ctxs"]] if dpr_input else [triple["passage_id"]]
        for pid in pids:
            place = ("without_passage_id" if pid is None
                     else "in_kept_corpus" if keep is None or pid in keep else "outside_kept_corpus")
            places[place] += 1
    return dict(sorted(places.items()))


def is_dpr_retriever_json(path: str | Path) -> bool:
    """DPR's training files (``nq-train.json``) are one JSON list; the bundle's triples are jsonl."""
    return Path(path).name.endswith((".json", ".json.gz"))


def load_nq_dev(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if _is_bundle_jsonl(path):
        return list(records.read_nq_dev(path))
    return [{"id": f"nq-dev-{i:05d}", "question": q["question"], "answers": q["answers"]}
            for i, q in enumerate(read_qas(path))]


def _counted(items: Iterable[dict], counter: Counter, key: str) -> Iterator[dict]:
    """Pass items through while counting them by ``item[key]`` (the corpus is streamed, never held)."""
    for item in items:
        counter[item[key]] += 1
        yield item


def main(argv: Sequence[str] = ()) -> int:
    cli.parser("ecqg.stages.prepare", __doc__, paragraphs=2).parse_args(argv)
    s = settings.of(config.check_inputs(config.load(), keys=("data.corpus", "data.train_gold", "data.nq_dev")))
    data, seed = s.data, s.seed
    with timed_stage("prepare", s.profile, s.device) as figures:
        test_sets = {}
        for name, path in data.test_sets.items():
            questions = load_test_set(name, path)
            kept = [questions[i] for i in sample_indices(len(questions), data.max_questions_per_set,
                                                         f"{seed}-test-{name}")]
            test_sets[name] = kept
            log.info("test set %s: %d of %d questions", name, len(kept), len(questions))

        dpr_input = is_dpr_retriever_json(data.train_gold)
        triple_ids = set() if dpr_input else {t["passage_id"] for t in records.read_train_gold(data.train_gold)}
        ids, triple_passages = scan_corpus(data.corpus, triple_ids)
        in_corpus = SeenIds(ids)    # membership in the whole input corpus: 2.6 MB for psgs_w100, not a 2 GB set
        required = {pid for qs in test_sets.values() for q in qs for pid in q["gold_ids"]}
        missing = sorted(pid for pid in required if pid not in in_corpus)
        if missing:
            raise DataFormatError(data.corpus, None, "id", f"{len(missing)} gold passages of the test sets are "
                                  f"not in the corpus, e.g. {missing[:3]}")
        keep = corpus_sample(ids, required, data.max_corpus_passages, f"{seed}-corpus")
        corpus = (p for p in records.read_corpus(data.corpus) if keep is None or p["id"] in keep)
        pool_extra = (p for p in records.read_corpus(data.corpus)
                      if keep is not None and data.synthetic_pool == "all" and p["id"] not in keep)

        # Gold training data: annotated triples (bundle) or DPR retriever-json (paper: passages and BM25 hard
        # negatives are already inside each record, so they are passed through as they are).
        read = (load_dpr_training(data.train_gold, data.corpus, in_corpus) if dpr_input
                else load_train_gold(data.train_gold, triple_passages))
        triples = [read[i] for i in sample_indices(len(read), data.max_train_triples, f"{seed}-train")]
        nq_dev = load_nq_dev(data.nq_dev)
        nq_dev = [nq_dev[i] for i in sample_indices(len(nq_dev), data.max_nq_dev, f"{seed}-nq-dev")]

        by_source: Counter = Counter()
        write_jsonl(paths.CORPUS, _counted(corpus, by_source, "source"))
        pool_extra_count = write_jsonl(paths.POOL_EXTRA, pool_extra)   # always written (DVC tracks it); empty unless
                                                                       # the pool is "all" and the corpus was cut
        for name, questions in test_sets.items():
            write_jsonl(paths.questions_file(name), questions)
        # Both files always exist (DVC tracks both); the one that does not apply is empty.
        write_dpr_retriever_json(paths.TRAIN_GOLD_DPR, triples if dpr_input else [])
        write_jsonl(paths.TRAIN_GOLD, [] if dpr_input else triples)
        write_jsonl(paths.NQ_DEV, nq_dev)

        figures.update(
            corpus_passages_read=len(ids),
            corpus_passages=sum(by_source.values()),
            corpus_by_source=dict(sorted(by_source.items())),
            synthetic_pool=data.synthetic_pool,
            pool_extra_passages=pool_extra_count,
            questions={name: len(qs) for name, qs in test_sets.items()},
            nq_subsets=dict(sorted(Counter(s for q in test_sets.get("nq", []) for s in q["subsets"]).items())),
            train_records_read=len(read),
            train_triples=len(triples),
            train_positives=positive_places(triples, keep, dpr_input),
            train_format="dpr-retriever-json" if dpr_input else "triples",
            train_by_source=dict(sorted(Counter(t.get("source", t.get("dataset", "dpr")) for t in triples).items())),
            nq_dev_questions=len(nq_dev),
        )
        log.info("prepared %s", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
