"""Scale rehearsal of the paper DAG's host side: its CPU stages over synthetic DPR-format corpora of growing size,
wall time and peak memory per stage, the fitted growth, the projection to psgs_w100's 21,015,324 passages.

    .venv/bin/python bench/scale_rehearsal.py --sizes 10000,100000,1000000 --write-docs

Why: the paper profile's GPU stages have measured rates (bench/results/), its host side had only run on the bundle's
7,000-18,690 passages. Each size gets a workspace with DPR's file formats (``psgs_w100.tsv``, ``nq-train.json``,
the ``*-test.csv`` / ``nq-dev.csv`` question files) whose passage texts are drawn from the bundle's, a params.yaml
that is params/paper.yaml with those paths, and a synthetic "kept questions" file standing in for stages 02-03
(which run models on a GPU). Every step runs in a fresh process; its peak resident memory is the kernel's
``ru_maxrss`` of that process (``os.wait4``), which includes the JVM of pyserini's BM25.

Steps (what they run):

* ``prepare``, ``index_bm25``, ``index_tfidf``, ``retrieve_bm25``, ``retrieve_tfidf``, ``training_data``,
  ``pseudo_queries``: the DVC stages' own ``main()``;
* ``mixing``: notebook 04's host work (dedupe, the two sets, the pool's passages by id, BM25 hard negatives, the set
  statistics with spaCy answer types, writing the sets);
* ``tempqg_templates``: notebook 08's templates (spaCy NER of the training questions, the entities' document
  frequency over the corpus texts, clustering).

Question sets grow with the corpus as in the paper (1M synthetic questions per set for 21M passages: ``n / 21``
per set, at least 200); the test sets, NQ dev and the gold training set keep fixed sizes, as they do in the paper.
Not covered: the GPU stages (their rates are in bench/results/), notebook 01's and TempQG's model passes.

Texts repeat the bundle's, so vocabulary stops growing at the bundle's (a lower bound on BM25's postings and on the
pseudo-query document frequencies; TF-IDF is hashed, bounded by its feature count anyway).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

from ecqg.tooling.scale_projection import PAPER_PASSAGES, THREADED, fit, on_cores, parallel_share  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
PAPER_QUESTIONS_PER_SET = 1_000_000
TEST_QUESTIONS, NQ_DEV, TRAIN = 500, 500, 2000
FIGURES = "scale-rehearsal figures:"     # the line a step process prints its figures on
MARKERS = ("<!-- scale-rehearsal:start (bench/scale_rehearsal.py --write-docs writes this block) -->",
           "<!-- scale-rehearsal:end -->")
STEPS = ("prepare", "index_bm25", "index_tfidf", "retrieve_bm25", "retrieve_tfidf", "training_data", "mixing",
         "pseudo_queries", "tempqg_templates")


def questions_per_set(passages: int) -> int:
    return max(200, round(passages * PAPER_QUESTIONS_PER_SET / PAPER_PASSAGES))


# ------------------------------------------------------------------------------------------------------ inputs
def write_inputs(bundle: Path, work: Path, passages: int, seed: int = 2022) -> dict:
    """DPR-format inputs of ``passages`` passages drawn (with replacement) from the bundle, the question files, and
    ``kept.jsonl``: synthetic kept questions (uncon ``n/21``, con half that), each about a passage it names and
    with an answer span of that passage."""
    from ecqg.core.io import read_jsonl

    rng = random.Random(f"{seed}-{passages}")
    bundle_passages = [r for _, r in read_jsonl(bundle / "corpus.jsonl.gz")]
    questions = [r for _, r in read_jsonl(bundle / "nq_dev.jsonl.gz")]
    triples = [r for _, r in read_jsonl(bundle / "train_gold.jsonl.gz")]
    data = work / "downloads"
    data.mkdir(parents=True, exist_ok=True)
    drawn = [rng.randrange(len(bundle_passages)) for _ in range(passages)]
    with open(data / "psgs_w100.tsv", "w", encoding="utf-8", newline="") as handle:
        handle.write("id\ttext\ttitle\n")
        for i, j in enumerate(drawn):
            p = bundle_passages[j]
            handle.write(f'{i + 1}\t"{p["text"].replace(chr(34), chr(34) * 2)}"\t{p["title"]}\n')

    def qas(name: str, records: list[dict]) -> None:
        with open(data / name, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, delimiter="\t")
            for r in records:
                writer.writerow([r["question"], str(list(r["answers"]))])

    for name in ("nq-test.csv", "trivia-test.csv", "webquestions-test.csv"):
        qas(name, rng.sample(questions, min(TEST_QUESTIONS, len(questions))))
    qas("nq-dev.csv", rng.sample(questions, min(NQ_DEV, len(questions))))

    def ctx(i: int) -> dict:
        p = bundle_passages[drawn[i]]
        return {"title": p["title"], "text": p["text"], "passage_id": str(i + 1), "score": 1.0}

    train = [{"dataset": "nq_train_psgs_w100", "question": t["question"], "answers": [t["answer"]],
              "positive_ctxs": [ctx(rng.randrange(passages))], "negative_ctxs": [],
              "hard_negative_ctxs": [ctx(rng.randrange(passages))]}
             for t in (triples[rng.randrange(len(triples))] for _ in range(TRAIN))]
    (data / "nq-train.json").write_text(json.dumps(train), encoding="utf-8")

    per_set = questions_per_set(passages)
    kept = []
    for generator, count in (("con", per_set // 2), ("uncon", per_set)):
        for k in range(count):
            i = rng.randrange(passages)
            words = re.findall(r"[A-Z][\w-]+", bundle_passages[drawn[i]]["text"]) or ["it"]
            answer = rng.choice(words)
            base = questions[rng.randrange(len(questions))]["question"].rstrip("?")
            kept.append({"id": f"{generator}-{k}", "generator": generator, "passage_id": str(i + 1),
                         "question": f"{base} {answer.lower()} {k}?", "answer": answer,
                         "entity": answer if generator == "con" else None})
    with open(work / "kept.jsonl", "w", encoding="utf-8") as handle:
        for rec in kept:
            handle.write(json.dumps(rec) + "\n")
    return {"passages": passages, "questions_per_set": per_set, "kept": len(kept)}


def write_params(work: Path) -> None:
    """params/paper.yaml with the workspace's files and the host's thread count."""
    import yaml

    from ecqg.core import config

    params = config.preset("paper", REPO / "params")
    d = Path("downloads")
    params["data"].update(corpus=str(d / "psgs_w100.tsv"), train_gold=str(d / "nq-train.json"),
                          nq_dev=str(d / "nq-dev.csv"), max_questions_per_set=None, max_corpus_passages=None,
                          max_nq_dev=None, max_train_triples=None,
                          test_sets={"nq": str(d / "nq-test.csv"), "tqa": str(d / "trivia-test.csv"),
                                     "wq": str(d / "webquestions-test.csv")})
    params["bm25"]["threads"] = "auto"
    config.validate(params, "scale rehearsal")
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")


# ------------------------------------------------------------------------------------------------------- steps
def _mixing() -> dict:
    """Notebook 04's host side, as it runs there (cells 3-6), on the synthetic kept questions."""
    from ecqg.core import config, paths, variants
    from ecqg.filtering import mixing
    from ecqg.core.io import read_jsonl
    from ecqg.stages import mixing as sp
    from ecqg.retrieval.bm25 import BM25Searcher

    params = config.load()
    kept = [r for _, r in read_jsonl("kept.jsonl")]
    pool, _ = mixing.dedupe([r for r in kept if r["generator"] == "con"] +
                            [r for r in kept if r["generator"] == "uncon"],
                            sp.test_question_keys(params["data"]["test_sets"]))
    pools = {g: [r for r in pool if r["generator"] == g] for g in ("uncon", "con")}
    total = len(pools["uncon"]) - len(pools["uncon"]) % 2
    mixed, uncon, _ = mixing.build_sets(pools["uncon"], pools["con"], total, params["seed"])
    passages = sp.passages_by_id()
    searcher = BM25Searcher(paths.BM25_INDEX, k1=params["bm25"]["k1"], b=params["bm25"]["b"])
    examples, _ = mixing.dpr_examples(list({r["id"]: r for r in mixed + uncon}.values()), searcher, passages,
                                      threads=params["bm25"]["threads"], progress=False)
    mixing.mixing_statistics(uncon, [r for r in mixed if r["generator"] == "con"], passages)
    return {"mixed": mixing.write_set(variants.SETS["mixed"].path, mixed, examples),
            "uncon": mixing.write_set(variants.SETS["uncon"].path, uncon, examples)}


def _tempqg_templates() -> dict:
    """Notebook 08's templates: the gold training questions' NER, entity document frequency over the pool's texts,
    clustering."""
    from ecqg.core import config, paths
    from ecqg.data.dpr import read_dpr_retriever_json
    from ecqg.stages.tempqg import build_templates, corpus_texts

    s = config.load_settings()
    train = [{"question": r["question"]} for r in read_dpr_retriever_json(paths.TRAIN_GOLD_DPR)]
    templates, chosen = build_templates(s.tempqg, train, corpus_texts())
    return {"questions": len(train), "candidate_clusters": len(chosen)}


def jvm_heap_gb() -> float | None:
    """The heap the step's JVM (pyserini's Lucene) has committed by its end, None without one: the JVM grows its
    heap lazily up to a quarter of the host's RAM by default, so a JVM step's RSS says what it took, not what it
    needed; RSS minus this is about the Python side."""
    if "jnius" not in sys.modules:
        return None
    from jnius import autoclass

    return round(autoclass("java.lang.Runtime").getRuntime().totalMemory() / 1e9, 3)


def run_step(name: str) -> dict:
    """One step, in this process (the workspace is the working directory)."""
    if name == "mixing":
        return _mixing()
    if name == "tempqg_templates":
        return _tempqg_templates()
    if name.startswith("retrieve_"):
        from ecqg.stages import retrieve

        return {"rc": retrieve.main([name.removeprefix("retrieve_")])}
    module = __import__(f"ecqg.stages.{name}", fromlist=["main"])
    return {"rc": module.main()}


def measure(name: str, work: Path) -> dict:
    """Run a step in a fresh process; its wall time and peak RSS (the kernel's, from wait4)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    log = work / "logs" / f"{name}.log"
    log.parent.mkdir(exist_ok=True)
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "_step", name], cwd=work,
                                stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"step {name} failed (exit {code}) in {work}; the end of {log}:\n{tail}")
    last = json.loads([line for line in log.read_text(errors="replace").splitlines()
                       if line.startswith(FIGURES)][-1].removeprefix(FIGURES))     # the step's own figures
    return {"seconds": round(seconds, 2), "peak_rss_gb": round(usage.ru_maxrss / 1e6, 3),   # ru_maxrss is KiB
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),   # its threads and the workers it waited for
            "jvm_heap_gb": last["jvm_heap_gb"]}


def rehearse(bundle: Path, root: Path, sizes: list[int], steps=STEPS, progress=print) -> dict:
    """Every step at every size; ``{"sizes": [...], "steps": {step: [{"passages", "seconds", ...}]}}``."""
    from ecqg.core.config import host_cores
    from ecqg.core.device import cpu_name

    out: dict = {"cpu": cpu_name(), "cores": host_cores(), "date": datetime.date.today().isoformat(),
                 "sizes": sizes, "inputs": {}, "steps": {s: [] for s in steps}}
    for n in sizes:
        work = root / f"n{n}"
        work.mkdir(parents=True, exist_ok=True)
        out["inputs"][str(n)] = write_inputs(bundle, work, n)
        write_params(work)
        for step in steps:
            figures = measure(step, work)
            out["steps"][step].append({"passages": n, **figures})
            progress(f"{n:>10,} passages  {step:<17} {figures['seconds']:>9.1f} s  {figures['peak_rss_gb']:>7.2f} GB")
    return out


def table(result: dict) -> str:
    sizes, cores = result["sizes"], result["cores"]
    head = ("| step | " + " | ".join(f"{n:,}: s / GB" for n in sizes) +
            f" | time exponent | share parallel at {sizes[-1]:,} | GB per 1M passages | 21M: h on {cores} cores"
            f" | 21M: h on 16 cores | 21M: peak GB | JVM heap at {sizes[-1]:,}: GB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    total_here = total_16 = 0.0
    peak = 0.0
    for step, points in result["steps"].items():
        f = fit(points)
        cells = [f"{p['seconds']:,.1f} / {p['peak_rss_gb']:.2f}" for p in points]
        heap = points[-1].get("jvm_heap_gb")
        jvm = "-" if heap is None else f"{heap:.2f}"
        if f["exponent"] is None:
            lines.append(f"| {step} | " + " | ".join(cells) + f" | - | - | - | - | - | - | {jvm} |")
            continue
        hours = f["seconds_21m"] / 3600
        share = parallel_share(points[-1], cores, step)
        hours16 = on_cores(hours, share, cores, 16)
        total_here, total_16, peak = total_here + hours, total_16 + hours16, max(peak, f["rss_gb_21m"])
        measured = "cpu_seconds" in points[-1]
        lines.append(f"| {step} | " + " | ".join(cells) +
                     f" | {f['exponent']:.2f} | {share:.2f}{'' if measured else ' (assumed)'}"
                     f" | {f['bytes_per_passage'] / 1e3:,.2f} | {hours:,.1f} | {hours16:,.1f}"
                     f" | {f['rss_gb_21m']:,.1f} | {jvm} |")
    lines.append("| **all steps** | " + " | ".join("" for _ in sizes) +
                 f" | | | | **{total_here:,.1f}** | **{total_16:,.1f}** | max **{peak:,.1f}** | |")
    return "\n".join(lines)


def render(result: dict) -> str:
    return (f"Measured {result['date']} on {result['cpu']} ({result['cores']} cores) by `bench/scale_rehearsal.py`"
            f" over synthetic DPR-format corpora of {', '.join(f'{n:,}' for n in result['sizes'])} passages (texts"
            f" drawn from the bundle's; synthetic sets of n/21 questions, 1M at 21M passages). Each cell: wall seconds"
            f" / peak resident GB of the step's process. Where a step searches or indexes with pyserini, the JVM's"
            f" heap is part of that: the JVM grows it lazily up to a quarter of the host's RAM, so those steps' RSS,"
            f" and its projection, is what the JVM took, an upper bound on what it needed (the last column: the heap"
            f" it had committed at the end of the largest size). The projection to 21,015,324 passages extends the largest"
            f" size by the growth between the two largest (time exponent, memory per passage). The 16-core column"
            f" splits each step's projected time by the share that ran spread over the cores at the largest size,"
            f" measured from its CPU and wall seconds (Amdahl's model: wall = serial + parallel / {result['cores']},"
            f" CPU = serial + parallel), and divides that share by 16 / {result['cores']}: near-linear scaling of"
            f" the parallel part assumed, not measured; '(assumed)' marks a point measured without its CPU time,"
            f" counted as all parallel for {', '.join(sorted(THREADED))} and all serial otherwise."
            f"\n\n{table(result)}\n")


def merge(earlier: dict, later: dict) -> dict:
    """Sizes measured in two runs, as one result; refused across machines (their times would not compare)."""
    if (earlier["cpu"], earlier["cores"]) != (later["cpu"], later["cores"]):
        raise ValueError(f"cannot merge a run on {later['cpu']} ({later['cores']} cores) into one on "
                         f"{earlier['cpu']} ({earlier['cores']} cores): rerun every size here")
    out = {**later, "date": f"{earlier['date']} / {later['date']}" if earlier["date"] != later["date"] else later["date"],
           "inputs": {**earlier["inputs"], **later["inputs"]}, "steps": {}}
    out["sizes"] = sorted(set(earlier["sizes"]) | set(later["sizes"]))
    for step in later["steps"]:
        points = {p["passages"]: p for p in earlier["steps"].get(step, [])}
        points.update({p["passages"]: p for p in later["steps"][step]})
        out["steps"][step] = [points[n] for n in sorted(points)]
    return out


def write_docs(result: dict, doc: Path) -> None:
    """The table into ``doc`` between :data:`MARKERS` (docs/paper_profile.md has them), as the cost table is."""
    from ecqg.tooling.cost import write_doc

    write_doc(render(result), doc, MARKERS)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_step"]:
        figures = run_step(argv[1])
        print(FIGURES, json.dumps({**figures, "jvm_heap_gb": jvm_heap_gb()}), flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="corpus sizes, comma-separated")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--bundle", type=Path, default=REPO / "data")
    parser.add_argument("--root", type=Path, default=REPO / "outputs" / "scale_rehearsal")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "scale_rehearsal.json")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/paper_profile.md")
    parser.add_argument("--merge", action="store_true",
                        help="add these sizes to the ones already in --out (same machine: checked)")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    steps = tuple(s for s in args.steps.split(",") if s)
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown steps {unknown}; known: {', '.join(STEPS)}")
    result = rehearse(args.bundle, args.root, sizes, steps)
    if args.merge and args.out.is_file():
        result = merge(json.loads(args.out.read_text(encoding="utf-8")), result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(render(result))
    if args.write_docs:
        write_docs(result, REPO / "docs" / "paper_profile.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
