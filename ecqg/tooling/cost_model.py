"""The cost model's numbers: what a profile's DAG costs on GPUs, as measured rates times counted work.

Why: the GPU-hours of docs/paper_profile.md were a hand count (issue 48, item 4) that missed stages and priced the
benchmark's conditions rather than the profile's. Here every figure is a measured rate (``bench/results/*.json``)
times a counted amount of work: the stages of the DAG written for the profile (ecqg.tooling.dag) expanded for its params
(:func:`ecqg.tooling.dvc_stages.expanded_stages`), the sizes in those params, and the sizes of the files they name (or
``--passages`` / ``--train-examples``). The corrections from the benchmark's conditions to the profile's are applied
and recorded with the model; GPU work no benchmark measured is listed, not guessed, so the totals are lower bounds.

The rates come from the newest committed device measurement of each kind (:func:`measurements`: the newest
``date`` among ``bench/results/gpu_check_*.json`` / ``gpu_feeding_*.json`` whose section measured it), so a new
``bench/gpu_check.py --out bench/results/gpu_check_<device>_<date>.json`` reprices the DAG with no edit here. GPU work
no benchmark measured is priced from its FLOPs at a stated share of the device's peak and marked *estimated*; the
CPU stages' hours come from the scale rehearsal (``bench/results/scale_rehearsal.json``, projected to 16 cores), so
the wall figure holds every stage. The printed account (tables, sources, MFU, the docs block) is
:mod:`ecqg.tooling.cost`.

Size: over 400 lines because every count and correction carries the sentence that says where it comes from; the
pieces (rates, sizes, the work per stage) are one idea, a priced DAG.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ecqg.core import config, settings, variants
from ecqg.qg.generators import is_rule_based
from ecqg.tooling import dag as dag_writer
from ecqg.tooling.dvc_stages import declared_paths, expanded_stages
from ecqg.tooling.rate_code import code_status
from ecqg.tooling.scale_projection import PAPER_PASSAGES, host_hours

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "paper_profile.md"
START, END = "<!-- cost:start -->", "<!-- cost:end -->"
# Where each measured rate may come from, in order of preference on a date tie: the encoding loop's own benchmark
# (gpu_feeding, the final loop) before the device check's encoding section; every other rate from the
# device check. The newest date wins; the files of that date and kind give the range.
SOURCES = {"encoding": ("gpu_feeding_*.json", "gpu_check_*.json"), "finetune": ("gpu_check_*.json",),
           "pretrain": ("gpu_check_*.json",), "sampling": ("gpu_check_*.json",), "reader": ("gpu_check_*.json",)}
# Committed device files that are not a rate of today's code (bench/results/README.md says why): never read.
SUPERSEDED = {"gpu_feeding_h100_2026-11-27_sweep1.json": "the encoding loop before its final code, threads swept"}
REHEARSAL_FILE = "scale_rehearsal.json"            # bench/scale_rehearsal.py: the CPU stages at growing corpus sizes
HOST_CORES = 16                                    # the host a GPU node gives the CPU stages
# Sizes of DPR's published files, so a profile naming them needs no --passages / --train-examples.
CORPORA = {"psgs_w100.tsv": PAPER_PASSAGES}      # passages of DPR's Wikipedia split
TRAIN_SETS = {"nq-train.json": 58_880}           # NQ train records with a positive: what the paper fine-tunes on
# Issue 48's audit of the benchmark against params/paper.yaml.
PASSAGE_TOKENS = {"psgs_w100.tsv": 142.5}        # mean WordPiece tokens per passage
HARD_NEGATIVE_TOKENS = 1.7                       # tokens per pre-training example with one hard negative / with none
# MFU = 6 x non-embedding parameters x tokens/s / peak (Kaplan et al.'s count: an embedding lookup is no matmul).
# bert-base, per layer: attention 4h^2 + 4h, feed-forward 2 h ff + h + ff, two LayerNorms 4h (h 768, ff 3072).
# 85.1M (110M with the embeddings).
BERT_BASE_PARAMS = 12 * (4 * 768**2 + 4 * 768 + 2 * 768 * 3072 + 768 + 3072 + 4 * 768)
H100_BF16_FLOPS = 989e12                         # dense bf16 peak of an H100 SXM
H100_FP32_FLOPS = 67e12                          # its float32 peak without tensor cores (FAISS's GEMMs)
QUERY_TOKENS = 32                                # assumed tokens per question
TRAINING_MFU_GOAL = 0.25                         # issue 48's goal for bert-base training on an H100 / H200
WHAT_IF_MFU = (TRAINING_MFU_GOAL, 0.40)          # the what-ifs printed: training at the goal, and at 40%
# The GPU work no benchmark measured, priced from its FLOPs at these shares of the peak (assumptions, said so):
ESTIMATE_MFU = 0.25                              # model forwards and trainings (bf16): the training goal
FAISS_EFFICIENCY = 0.5                           # FAISS's float32 GEMMs (IVF assignment, k-means) on the GPU
KMEANS_ITERATIONS = 25                           # faiss.ClusteringParameters().niter, the coarse quantizer's training
# BART-large (the paper's generator), non-embedding: encoder layers 4d^2+4d + 2 d ff+d+ff + 4d; decoder layers add
# cross-attention 4d^2+4d and a LayerNorm; the tied output projection (50,265 x 1,024) is a matmul per target token.
_D, _FF = 1024, 4096
BART_LARGE_ENCODER = 12 * (4 * _D**2 + 4 * _D + 2 * _D * _FF + _D + _FF + 4 * _D)
BART_LARGE_DECODER = 12 * (8 * _D**2 + 8 * _D + 2 * _D * _FF + _D + _FF + 6 * _D) + 50_265 * _D
GENERATOR_TARGET_TOKENS = 24                     # assumed: an answer and a question, BPE tokens
BPE_PER_WORDPIECE = 1.1                          # assumed: BART's byte-level BPE pieces per WordPiece of a passage
GPU_HOURS_GOALS = {"paper": 60, "paper_three": 24}   # issue 48's goals for one seed of each DAG
UNITS = {"encoding": "passages", "finetune": "examples", "pretrain": "examples", "sampling": "questions",
         "reader": "questions", "attention": "passages", "generator": "examples", "faiss": "passages"}
ROWS = {"corpus encoding (retrieve_*)": "encoding", "fine-tuning (finetune_*)": "finetune",
        "pre-training (pretrain_*)": "pretrain", "question sampling (02, tempqg)": "sampling",
        "round-trip reader (03, tempqg)": "reader", "hardness encoding (03, tempqg)": "encoding",
        "*estimated*: attention study (01)": "attention", "*estimated*: generator training (02)": "generator",
        "*estimated*: FAISS index (retrieve_*)": "faiss"}
ENC, FT, PT, SAMPLE, READ, HARD, ATTN, GEN, FAISS = ROWS
# The rates from FLOPs (:func:`estimated_rates`), not from a benchmark: each at (share, peak) of the device.
ESTIMATED = {"attention": (ESTIMATE_MFU, H100_BF16_FLOPS), "generator": (ESTIMATE_MFU, H100_BF16_FLOPS),
             "faiss": (FAISS_EFFICIENCY, H100_FP32_FLOPS)}
IVF_KINDS = ("ivf", "ivfpq")                     # the FAISS indexes that train k-means and assign every passage
CPU_STAGES = ("input_", "prepare", "index_", "tokenize_corpus", "retrieve@", "training_data", "mixing",
              "pseudo_queries", "hybrid@", "report")
UNMEASURED_STAGES = ("results", "mechanism")        # see unmeasured()
_VARIANT = re.compile(r"-p variant (\S+)")


@dataclass(frozen=True)
class Rate:
    """A throughput on one GPU (the range of the runs), where it was read (``files``, ``field``), and the factor
    that carries it to the profile's conditions."""

    key: str
    low: float
    high: float
    files: tuple[str, ...]
    field: str
    factor: float = 1.0
    date: str = ""
    code: str = ""                     # ecqg.tooling.rate_code: current, code changed since, code not recorded

    @property
    def corrected(self) -> tuple[float, float]:
        return self.low * self.factor, self.high * self.factor


@dataclass(frozen=True)
class Work:
    """One stage's GPU work at one rate: ``count`` units (``label`` names them in the table, ``how`` says how they
    were counted); ``splits``: spread over the ``processes: N`` workers (else one process)."""

    stage: str
    row: str
    count: float
    how: str
    label: str = ""
    splits: bool = True


@dataclass(frozen=True)
class Sizes:
    """What params cannot say: the corpus's passages and their mean tokens, the gold training records."""

    corpus: str
    passages: int
    train_examples: int
    passage_tokens: float | None = None      # None: the benchmark's own passages (the bundle's)


@dataclass
class Model:
    profile: str
    settings: settings.Params          # the profile's typed params
    dag: dict[str, dict]
    sizes: Sizes
    rates: dict[str, Rate]
    corrections: list[str]
    works: dict[str, list[Work]] = field(default_factory=dict)
    host_hours: float = 0.0            # the CPU stages at the corpus's size, 16 cores (the scale rehearsal)

    def hours(self, work: Work) -> tuple[float, float]:
        """GPU-hours on one GPU: count / corrected rate (the fewer hours from the higher rate)."""
        low, high = self.rates[ROWS[work.row]].corrected
        return work.count / high / 3600, work.count / low / 3600

    def wall(self, work: Work, gpus: int) -> tuple[float, float]:
        lo, hi = self.hours(work)
        return (lo / gpus, hi / gpus) if work.splits else (lo, hi)

    def stage_hours(self, name: str) -> tuple[float, float]:
        return _sum(self.hours(w) for w in self.works[name])


def _sum(pairs) -> tuple[float, float]:
    pairs = list(pairs)
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


# ------------------------------------------------------------------------------------------------ rates
def read_result(name: str) -> dict:
    """One benchmark file; a missing one is named, with the command that writes it."""
    path = RESULTS / name
    if not path.is_file():
        raise FileNotFoundError(f"rate file {path} is missing: ecqg.tooling.cost reads its measured rates there (written by "
                                f"`python bench/gpu_check.py --out bench/results/{name}` on a GPU)")
    return json.loads(path.read_text(encoding="utf-8"))


def _measured(figures: Mapping, key: str) -> bool:
    """Whether a device file holds ``key``'s section as a measurement (the device check's status ``ok``; files from
    before it wrote statuses: the section is there)."""
    status = figures.get("sections", {}).get(key, {}).get("status", "ok")
    return status == "ok" and bool(figures.get(key))


def measurements(key: str) -> tuple[str, ...]:
    """The committed device files that ``key``'s rate is read from: of the kinds :data:`SOURCES` allows, the newest
    ``date`` with the section measured, the preferred kind on a tie; all files of that date and kind (a range)."""
    found = []
    for rank, pattern in enumerate(SOURCES[key]):
        for path in sorted(RESULTS.glob(pattern)):
            if path.name in SUPERSEDED:
                continue
            figures = json.loads(path.read_text(encoding="utf-8"))
            if _measured(figures, key):
                found.append((str(figures.get("date", "")), -rank, path.name))
    if not found:
        raise FileNotFoundError(f"no device measurement of `{key}` in {RESULTS} ({' or '.join(SOURCES[key])}): "
                                "written by `python bench/gpu_check.py --out bench/results/gpu_check_<device>_<date>"
                                ".json` on a GPU")
    date, rank, _ = max(found)
    return tuple(name for d, r, name in found if (d, r) == (date, rank))


def _finetune_run(run: dict, name: str, chunk) -> dict:
    """The fine-tuning measurement at the profile's GradCache chunk (the benchmark ran with and without)."""
    for entry in run["finetune"]:
        if entry.get("grad_cache_chunk_size") == chunk and "examples_per_s" in entry:
            return entry
    raise ValueError(f"{RESULTS / name}: no fine-tuning rate at grad_cache_chunk_size {chunk}; measured at "
                     f"{[e.get('grad_cache_chunk_size') for e in run['finetune']]}")


def benchmark_tokens() -> float:
    """Mean WordPiece tokens of the passages the encoding rate was measured on."""
    return read_result(measurements("encoding")[0])["encoding"]["mean_tokens"]


def rates(dpr: settings.Dpr, qg: settings.Qg, tempqg: settings.TempQG, sizes: Sizes
          ) -> tuple[dict[str, Rate], list[str]]:
    """The measured rates, corrected to the profile, the estimated ones, and the corrections in words."""
    files = {key: measurements(key) for key in SOURCES}
    read = {key: [read_result(n) for n in names] for key, names in files.items()}
    bench_tokens = read["encoding"][0]["encoding"]["mean_tokens"]
    tokens = sizes.passage_tokens or bench_tokens
    longer = bench_tokens / tokens
    fine = [_finetune_run(r, n, dpr.finetune.grad_cache_chunk_size) for r, n in zip(read["finetune"],
                                                                                     files["finetune"])]
    pre = [r["pretrain"] for r in read["pretrain"]]
    negatives = dpr.pretrain.hard_negatives >= 1 and max(p["hard_negatives"] for p in pre) == 0
    sampling = [r["sampling"] for r in read["sampling"]]
    new_tokens, want_tokens = max(s["max_new_tokens"] for s in sampling), qg.generate.max_new_tokens
    decoder_steps = new_tokens / want_tokens

    def span(key, values, where, factor=1.0):
        dates = sorted({str(r.get("date", "")) for r in read[key]})
        return Rate(key, min(values), max(values), files[key], where, factor, ", ".join(dates),
                    code_status(key, read[key]))

    chunk = json.dumps(dpr.finetune.grad_cache_chunk_size)
    out = {"encoding": span("encoding", [r["encoding"]["steady_passages_per_s"] for r in read["encoding"]],
                            "encoding.steady_passages_per_s", longer),
           "finetune": span("finetune", [f["examples_per_s"] for f in fine],
                            f"finetune[grad_cache_chunk_size {chunk}].examples_per_s", longer),
           "pretrain": span("pretrain", [p["examples_per_s"] for p in pre], "pretrain.examples_per_s",
                            longer / (HARD_NEGATIVE_TOKENS if negatives else 1.0)),
           "sampling": span("sampling", [s["questions_per_s"] for s in sampling], "sampling.questions_per_s",
                            decoder_steps),
           "reader": span("reader", [r["reader"]["questions_per_s"] for r in read["reader"]],
                          "reader.questions_per_s", longer),
           **estimated_rates(dpr.index, qg, tokens)}
    batches = sorted({s["batch"] for s in sampling})
    notes = [f"**passage length**: the benchmark's passages average {bench_tokens} WordPiece tokens (`mean_tokens`, "
             f"`{files['encoding'][0]}`), `{sizes.corpus}`'s {tokens} "
             f"({'issue 48 audit' if sizes.passage_tokens else 'the benchmark read this corpus'}): the "
             f"passage-bound rates (encoding, training, reader) x {longer:.3f}",
             f"**sampling shapes**: measured at batch {', '.join(map(str, batches))} and {new_tokens} new tokens, "
             f"the profile samples at batch {qg.generate.batch_size} and {want_tokens}: the rate x "
             f"{new_tokens} / {want_tokens} = {decoder_steps:.3f} (a sampling's time is its decoder steps; the "
             "encoder's one pass over the passage and the batch are not corrected)"
             if decoder_steps != 1.0 else
             f"**sampling shapes**: measured at the profile's {want_tokens} new tokens (batch "
             f"{', '.join(map(str, batches))}; the profile's {qg.generate.batch_size})"]
    if negatives:
        notes.append(f"**pre-training hard negative**: the benchmark pre-trained without one (`hard_negatives: 0`), "
                     f"`dpr.pretrain.hard_negatives` is {dpr.pretrain.hard_negatives}: the rate / "
                     f"{HARD_NEGATIVE_TOKENS} (tokens per example, issue 48 audit)")
    notes.append("**one pass per set**: a pre-training on several sets (`poly_rsm_tempqg`: RSM, then TempQG) runs "
                 "`dpr.pretrain.epochs` over each; Poly-DPR trains and encodes at DPR's rates (one bert-base "
                 "forward per text; its passage vectors come from that pass)")
    notes.append(f"**TempQG** samples `tempqg.samples` ({tempqg.samples}) questions per UnCon passage, "
                 "and reads and hardness-scores them as stage 03 does")
    for phase, got in (("finetune", fine[0]), ("pretrain", pre[0])):
        want = {k: getattr(getattr(dpr, phase), k) for k in ("batch_size", "grad_cache_chunk_size")}
        have = {"batch_size": got.get("global_batch", got["batch"]),     # the device check's per-device runs
                "grad_cache_chunk_size": got["grad_cache_chunk_size"]}
        if want != have:
            notes.append(f"not corrected: `dpr.{phase}` trains with {want}, the benchmark measured {have}")
    return out, notes


def estimated_rates(index: settings.Index, qg: settings.Qg, passage_tokens: float) -> dict[str, Rate]:
    """The GPU work no benchmark measured, as rates from its FLOPs at an assumed share of the peak
    (:data:`ESTIMATE_MFU`, :data:`FAISS_EFFICIENCY`): a lower bound on its hours only as good as that assumption."""
    dim = 768                                                     # bert-base's vectors
    per_passage = {
        # 01: one bert-base forward per passage (2 FLOPs per parameter per token)
        "attention": 2 * BERT_BASE_PARAMS * passage_tokens,
        # 02: one generator training example: 6 FLOPs per parameter per token, the encoder over the passage, the
        # decoder (and the output projection) over the target
        "generator": 6 * (BART_LARGE_ENCODER * min(passage_tokens * BPE_PER_WORDPIECE,
                                                   qg.source_max_length)
                          + BART_LARGE_DECODER * GENERATOR_TARGET_TOKENS),
        # retrieve_*: IVF assignment of a passage to its nearest of nlist centroids (2 d nlist) and, for PQ, its
        # codes (2 d 2^nbits); a flat index only stores the vectors
        "faiss": 2 * dim * (index.params["nlist"] + 2 ** index.params["nbits"] * (index.kind == "ivfpq"))
                 if index.kind in IVF_KINDS else 0,
    }
    rate = {key: share * peak / per_passage[key] for key, (share, peak) in ESTIMATED.items() if per_passage[key]}
    return {key: Rate(key, r, r, (), f"{per_passage[key] / 1e9:,.2f} GFLOPs per {UNITS[key][:-1]}")
            for key, r in rate.items()}


# ------------------------------------------------------------------------------------------------ counts
def sizes(data: settings.Data, passages: int | None = None, train_examples: int | None = None,
          passage_tokens: float | None = None) -> Sizes:
    """The profile's corpus and training-set sizes: given, else known from the file names ``data`` gives."""
    corpus, gold = Path(data.corpus).name, Path(data.train_gold).name
    passages, train_examples = passages or CORPORA.get(corpus), train_examples or TRAIN_SETS.get(gold)
    if passages is None or train_examples is None:
        raise ValueError(f"give --passages (corpus `{corpus}`) and --train-examples (gold records, `{gold}`): "
                         f"sizes are known only for {sorted(CORPORA)} and {sorted(TRAIN_SETS)}")
    limit = data.max_corpus_passages or passages
    return Sizes(corpus, min(passages, limit), train_examples, passage_tokens or PASSAGE_TOKENS.get(corpus))


def stage1_yield(yields: settings.Yields, filtering: settings.Filtering) -> float:
    """The share of parsed questions stage 03's first filter (``filtering.stage1``) keeps (the measured
    ``yields``)."""
    return {"roundtrip": yields.roundtrip, "answer_in_passage": yields.answer_in_passage,
            "none": 1.0}[filtering.stage1]


def set_size(name: str, profile: settings.Params) -> float:
    """Questions in a pre-training set: a dose's size, else ``mixing.total`` (UnCon, Mixed; ETM / RSM have one per
    UnCon entry, TempQG at most one), capped by the expected pools unless ``mixing.require_total`` holds. The whole
    tree: the expected pools (:func:`ecqg.core.config.expected_pools`) read the flat params of five blocks
    (``attention``, ``qg``, ``filtering``, ``yields``, with ``mixing``)."""
    base, _, size = name.rpartition("_d")
    if base in variants.DOSED_SETS and size.isdigit():
        return int(size)
    total = profile.mixing.total
    if profile.mixing.require_total:
        return total
    pools = config.expected_pools(config._flatten(profile.as_dict()))
    uncon = min(total, pools["uncon"])
    return 2 * min(total / 2, pools["con"], uncon / 2) if name == "mixed" else uncon


def _epochs(records: float, train: settings.QgTrain | settings.DprFinetune | settings.DprPretrain
            ) -> tuple[float, str]:
    """Examples one training phase (its block: ``heldout``, ``epochs``, ``max_steps``, ``batch_size``) runs through:
    epochs x (records - held out), capped by ``max_steps``."""
    held = train.heldout
    held = round(held * records) if isinstance(held, float) else held
    n = train.epochs * (records - held)
    text = f"{train.epochs} epochs x ({records:,.0f} - {held:,} held out)"
    if train.max_steps:
        n = min(n, train.max_steps * train.batch_size)
        text += f", at most {train.max_steps:,} steps x {train.batch_size}"
    return n, text


def sampled(a: settings.Attention, g: settings.Generate, y: settings.Yields) -> dict[str, tuple[float, str, str]]:
    """(questions, label, how) stage 02 samples per input kind: the factors of :func:`ecqg.core.config.expected_pools`
    before the yields, and Table 1's probe (highest and lowest entity of each conditioning passage); ``a``: the
    ``attention`` block, ``g``: ``qg.generate``, ``y``: ``yields``."""
    passages = a.condition_passages or a.sample_passages
    rows = passages * y.entity_passages
    probes = min(a.probe_passages or rows, rows)
    return {"uncon": (g.uncon_passages * g.samples, "02 UnCon",
                      f"{g.uncon_passages:,} passages x {g.samples} samples"),
            "con": (rows * a.lowest_entities * g.samples, "02 conditioned",
                    f"{passages:,} passages x {y.entity_passages} with {a.min_entities}+ entities x "
                    f"{a.lowest_entities} entities x {g.samples} samples"),
            "probe": (probes * 2 * g.samples, "02 probe",
                      f"{probes:,.0f} passages x 2 entities (highest, lowest) x {g.samples} samples")}


def _filtered(stage: str, label: str, how: str, parsed: float, questions: float, yields: settings.Yields,
              filtering: settings.Filtering, hardness: bool = True) -> list[Work]:
    """Stage 03's work on sampled questions: the reader over the parsed ones; the baseline DPR's hardness score for
    the first filter's survivors (one passage each: an upper bound on the distinct ones; the short questions not
    counted; in one process)."""
    read, kept = questions * parsed, stage1_yield(yields, filtering)
    return [Work(stage, READ, read, f"{how} x {parsed} parsed", label)] + [
        Work(stage, HARD, read * kept, f"{how} x {parsed} parsed x {kept} kept by {filtering.stage1}",
             label, splits=False)] * hardness


def _faiss_work(name: str, index: settings.Index, sizes: Sizes) -> list[Work]:
    """An IVF index's (``dpr.index``) k-means (``train_size`` vectors assigned ``KMEANS_ITERATIONS`` times) and adding
    every passage (its nearest centroid, its PQ codes), on one GPU (``faiss_index`` moves the index to device 0)."""
    if index.kind not in IVF_KINDS:
        return []
    train = min(index.params.get("train_size") or sizes.passages, sizes.passages)
    return [Work(name, FAISS, sizes.passages + train * KMEANS_ITERATIONS,
                 f"{sizes.passages:,} passages added + {train:,} x {KMEANS_ITERATIONS} k-means assignments per stage "
                 f"({index.kind}, nlist {index.params['nlist']:,})", splits=False)]


def _generator_work(name: str, qg: settings.Qg, data: settings.Data, sizes: Sizes) -> list[Work]:
    """Stage 02's two generator trainings, where the generator is a model (not the rule-based cloze one)."""
    if is_rule_based(qg.architecture):
        return []
    records = min(sizes.train_examples, data.max_train_triples or sizes.train_examples)
    n, text = _epochs(records, qg.train)
    return [Work(name, GEN, n, text, label=kind, splits=False)
            for kind in ("UnCon", "Con")]


def stage_work(name: str, stage: Mapping, profile: settings.Params, sizes: Sizes) -> list[Work]:
    """The GPU work of one expanded stage; a stage no rule knows is an error (a new stage must be costed). The whole
    tree: the stages' rules read most of it (``dpr``, ``qg``, ``attention``, ``yields``, ``filtering``, ``tempqg``,
    ``data``, and :func:`set_size`'s)."""
    base, y = name.partition("@")[0], profile.yields
    if base.startswith("retrieve_"):
        return [Work(name, ENC, sizes.passages, f"`{sizes.corpus}` once per stage")] + _faiss_work(
            name, profile.dpr.index, sizes)
    if base == "attention_bias":
        a = profile.attention
        n = a.sample_passages + (a.condition_passages or 0)
        return [Work(name, ATTN, n, f"{a.sample_passages:,} studied + {a.condition_passages or 0:,} conditioning "
                                    "passages, one bert-base forward each", splits=False)]
    if base.startswith("finetune_"):
        limit = profile.dpr.finetune.max_examples or sizes.train_examples
        n, text = _epochs(min(sizes.train_examples, limit), profile.dpr.finetune)
        return [Work(name, FT, n, f"{text} per stage")]
    if base.startswith("pretrain_"):
        sets = variants.get(_VARIANT.search(stage["cmd"]).group(1)).pretrain
        return [Work(name, PT, n, f"{text} per pass, one pass per set of the stage (`mixing.total`, or the dose)")
                for n, text in (_epochs(set_size(s, profile), profile.dpr.pretrain) for s in sets)]
    samples = sampled(profile.attention, profile.qg.generate, y)
    if base == "question_generation":
        return ([Work(name, SAMPLE, n, how, label) for n, label, how in samples.values()]
                + _generator_work(name, profile.qg, profile.data, sizes))
    if base == "filtering":
        parsed = {"uncon": y.parsed_uncon, "con": y.parsed_con, "probe": y.parsed_con}
        return [w for kind, (n, label, how) in samples.items()     # Table 1's probes skip stage 2
                for w in _filtered(name, label, how, parsed[kind], n, y, profile.filtering,
                                   hardness=kind != "probe")]
    if base == "tempqg":
        pool, k = set_size("uncon", profile), profile.tempqg.samples
        how = f"{pool:,.0f} UnCon passages (at most: one per UnCon entry) x {k} samples"
        out = [Work(name, SAMPLE, pool * k, how, "tempqg")] + _filtered(name, "tempqg", how, y.parsed_uncon,
                                                                        pool * k, y, profile.filtering)
        return out if profile.filtering.stage1 == "roundtrip" else [w for w in out if w.row != READ]
    if base in UNMEASURED_STAGES or name.startswith(CPU_STAGES):
        return []
    raise ValueError(f"stage {name}: ecqg/tooling/cost.py has no cost rule for it; count its GPU work or list it as CPU-only")


def unmeasured(mrc: settings.Mrc, t: settings.TempQG) -> list[str]:
    """GPU work no benchmark measured: left out of the totals, named with its size (``t``: the ``tempqg`` block)."""
    return (["`filtering` (03): training the reader (`mrc.train_model`)"] if mrc.train_model else []) + [
            f"`tempqg`: its Poly-DPR template selector ({t.selector.train.epochs} epochs) and generator "
            f"({t.train.epochs} epoch)",
            "`results` (06), `mechanism` (07): attention, probes, Poly-DPR codes",
            "every `retrieve_*`: the test questions' encoding and the FAISS search (the index's k-means and adding "
            "are estimated above); every training: its validation encodings every `eval_every` steps"]


# ------------------------------------------------------------------------------------------------ the DAG
def build(profile: str, passages: int | None = None, train_examples: int | None = None,
          passage_tokens: float | None = None) -> Model:
    """The cost model of ``profile``: its expanded stages, sizes, rates and every stage's work."""
    tree = settings.of(config.preset(profile))
    # the DAG written for the profile's own dpr.variants (dvc.yaml holds params.yaml's)
    dag = dict(expanded_stages(yaml.safe_load(dag_writer.render(tree)), tree))
    size = sizes(tree.data, passages, train_examples, passage_tokens)
    model = Model(profile, tree, dag, size, *rates(tree.dpr, tree.qg, tree.tempqg, size))
    model.works = {name: stage_work(name, stage, tree, size) for name, stage in dag.items()}
    model.host_hours = host_hours(read_result(REHEARSAL_FILE), HOST_CORES) * size.passages / PAPER_PASSAGES
    return model


def upstream(dag: Mapping[str, Mapping]) -> dict[str, set[str]]:
    """Each stage's direct predecessors: the stages whose outputs hold (or are) one of its deps."""
    outs = [(path, name) for name, stage in dag.items() for key in ("outs", "metrics", "plots")
            for path in declared_paths(stage, key)]
    return {name: {other for dep in declared_paths(stage, "deps") for path, other in outs
                   if other != name and (dep == path or dep.startswith(path + "/") or path.startswith(dep + "/"))}
            for name, stage in dag.items()}


THREE_SYSTEMS = {"paper": "paper_three"}    # the preset that trains only the paper's three systems, per profile


def three_systems(model: Model) -> Model | None:
    """The cost model of the profile's three-system preset (``make profile P=paper_three``) at the same sizes, or
    None where there is none."""
    name = THREE_SYSTEMS.get(model.profile)
    if name is None:
        return None
    return build(name, model.sizes.passages, model.sizes.train_examples, model.sizes.passage_tokens)


def critical_path(model: Model, names: Sequence[str], end: int) -> float:
    """The longest chain of dependent stages, each on one GPU (``end`` 0: the low hours, 1: the high)."""
    before, done = upstream({n: model.dag[n] for n in names}), {}

    def finish(name: str) -> float:
        if name not in done:
            done[name] = model.stage_hours(name)[end] + max((finish(p) for p in before[name]), default=0.0)
        return done[name]
    return max((finish(n) for n in names), default=0.0)


# ------------------------------------------------------------------------------------------------ rendering
def example_tokens(model: Model, key: str) -> float:
    """Tokens per training example at the profile's settings: a question and (1 + hard negatives) passages."""
    passages = model.sizes.passage_tokens or benchmark_tokens()
    return QUERY_TOKENS + (1 + getattr(model.settings.dpr, key).hard_negatives) * passages


def at_training_goal(model: Model, mfu: float = TRAINING_MFU_GOAL) -> Model:
    """The same DAG with both trainings at ``mfu`` and every other rate as before: a what-if (nothing ran at that
    rate) that says whether the GPU-hour goals are within reach of training alone."""
    rates = dict(model.rates)
    for key in ("finetune", "pretrain"):
        goal = mfu * H100_BF16_FLOPS / (6 * BERT_BASE_PARAMS * example_tokens(model, key))
        rates[key] = replace(rates[key], low=goal, high=goal, factor=1.0)
    return replace(model, rates=rates)
