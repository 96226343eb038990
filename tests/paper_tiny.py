"""The paper profile's inputs in miniature: DPR's published file formats made from the committed bundle, and tiny
random models of the paper's architectures built from their configs, saved where the paper profile expects hub ids.

Why: the paper profile runs on GPUs with 21M passages, BART-large and a SQuAD 2.0 reader, none of which exist here.
``tests/test_paper_path.py`` runs ``dvc repro`` on ``params/paper.yaml`` with only the paths, the models and the
sizes replaced by :func:`paper_tiny_params` and the paper's three systems trained (as ``params/paper_three.yaml``), so
every stage goes through exactly the code a paper run takes:

* ``psgs_w100.tsv`` (header ``id\\ttext\\ttitle``, numeric ids, CSV-quoted text), ``nq-test.csv`` /
  ``trivia-test.csv`` / ``webq-test.csv`` / ``nq-dev.csv`` (``question\\t['answer', ...]``, no gold passage
  ids), ``nq-train.json`` (DPR retriever json with a positive and a hard negative per question);
* a BERT-architecture DPR base (the bundled WordPiece vocabulary, bert-base-uncased's), a BART-architecture
  generator carrying BART's shipped generation settings, and a RoBERTa-architecture extractive reader used as shipped
  (``mrc.train_model: false``), the last two with a byte-level BPE tokenizer trained here on the bundle's text.

The smoke DAG (``tests/test_pipeline.py``) runs on a tiny random BERT too (:func:`smoke_tiny_params`): its numbers
mean nothing either way, and the bundled MiniLM made it the suite's slowest half hour. ``tests/conftest.py`` builds
the models once per test session (fixture ``tiny_models``).
"""

from __future__ import annotations

import ast
import csv
import itertools
import json
import random
from pathlib import Path

from ecqg.core import config
from ecqg.core.io import read_jsonl
from ecqg.qg.format import SEPARATOR

PASSAGES, QUESTIONS, TRAIN, DEV = 400, 40, 200, 60
SMOKE_QG_STEPS = 150
DOWNLOADS = Path("downloads")


def _answers(record: dict) -> list[str]:
    value = record["answers"]
    return ast.literal_eval(value) if isinstance(value, str) else list(value)


def write_dpr_files(bundle: Path, out: Path) -> dict[str, Path]:
    """DPR-format files from the bundle under ``out``; returns the params path of each (relative to the repo)."""
    rng = random.Random(2022)
    corpus = [r for _, r in read_jsonl(bundle / "corpus.jsonl.gz")]
    nq = [r for _, r in read_jsonl(bundle / "nq_test.jsonl.gz")][:QUESTIONS]
    gold = {pid for q in nq for pid in q["gold_ids"]}
    triples = [r for _, r in read_jsonl(bundle / "train_gold.jsonl.gz")]
    by_id = {p["id"]: p for p in corpus}
    train = [t for t in triples if t["passage_id"] in by_id][:TRAIN]
    needed = gold | {t["passage_id"] for t in train}
    others = [p["id"] for p in corpus if p["id"] not in needed]
    keep = sorted(needed) + rng.sample(others, max(0, PASSAGES - len(needed)))
    number = {pid: str(i + 1) for i, pid in enumerate(keep)}       # psgs_w100's ids are numbers
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "psgs_w100.tsv", "w", encoding="utf-8", newline="") as handle:
        handle.write("id\ttext\ttitle\n")
        for pid in keep:           # as DPR's file: the text CSV-quoted, inner quotes doubled
            text = by_id[pid]["text"].replace('"', '""')
            handle.write(f'{number[pid]}\t"{text}"\t{by_id[pid]["title"]}\n')

    def qas(name: str, records: list[dict]) -> None:
        with open(out / name, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, delimiter="\t")
            for r in records:
                writer.writerow([r["question"], str(_answers(r))])

    qas("nq-test.csv", nq)
    qas("trivia-test.csv", [r for _, r in itertools.islice(read_jsonl(bundle / "tqa_test.jsonl.gz"), QUESTIONS)])
    qas("webq-test.csv", [r for _, r in itertools.islice(read_jsonl(bundle / "wq_test.jsonl.gz"), QUESTIONS)])
    qas("nq-dev.csv", [r for _, r in itertools.islice(read_jsonl(bundle / "nq_dev.jsonl.gz"), DEV)])

    def ctx(pid: str) -> dict:
        return {"title": by_id[pid]["title"], "text": by_id[pid]["text"], "passage_id": number[pid], "score": 1.0}

    records = [{"dataset": "nq_train_psgs_w100", "question": t["question"], "answers": [t["answer"]],
                "positive_ctxs": [ctx(t["passage_id"])],
                "negative_ctxs": [], "hard_negative_ctxs": [ctx(keep[(i * 7 + 3) % len(keep)])]}
               for i, t in enumerate(train)]
    (out / "nq-train.json").write_text(json.dumps(records), encoding="utf-8")
    rel = Path(out.name) if out.is_absolute() else out
    return {"corpus": rel / "psgs_w100.tsv", "nq": rel / "nq-test.csv", "tqa": rel / "trivia-test.csv",
            "wq": rel / "webq-test.csv", "train_gold": rel / "nq-train.json", "nq_dev": rel / "nq-dev.csv"}


# Which of write_dpr_files' files each of DPR's resources is (ecqg.tooling.inputs.PAPER names them).
RESOURCE_FILES = {"data.wikipedia_split.psgs_w100": "corpus", "data.retriever.nq-train": "train_gold",
                  "data.retriever.qas.nq-dev": "nq_dev", "data.retriever.qas.nq-test": "nq",
                  "data.retriever.qas.trivia-test": "tqa", "data.retriever.qas.webq-test": "wq"}


def write_dpr_mirror(bundle: Path, mirror: Path) -> Path:
    """A folder laid out as DPR's download host (``wikipedia_split/psgs_w100.tsv.gz``, ...; gzipped where the host
    serves gzip) holding write_dpr_files' tiny files: what ``python -m ecqg.tooling.inputs fetch --mirror`` reads."""
    import gzip
    import shutil

    from ecqg.tooling.inputs import PAPER

    files = write_dpr_files(bundle, mirror / "_plain")
    for resource in PAPER:
        source = mirror / "_plain" / files[RESOURCE_FILES[resource.name]].name
        target = mirror / resource.remote
        target.parent.mkdir(parents=True, exist_ok=True)
        if resource.compressed:
            with open(source, "rb") as raw, gzip.open(target, "wb") as packed:
                shutil.copyfileobj(raw, packed)
        else:
            shutil.copy(source, target)
    shutil.rmtree(mirror / "_plain")
    return mirror


def _bpe_tokenizer(texts: list[str], out: Path, cls_name: str):
    """A byte-level BPE tokenizer trained on ``texts`` (BART's / RoBERTa's special tokens and order), saved as the
    transformers class ``cls_name`` (``BartTokenizerFast`` / ``RobertaTokenizerFast``)."""
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=1200, min_frequency=2,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    raw = out / "bpe"
    raw.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(raw))
    tokenizer = getattr(transformers, cls_name)(vocab=str(raw / "vocab.json"), merges=str(raw / "merges.txt"))
    if len(tokenizer("the river", add_special_tokens=False)["input_ids"]) < 1:
        raise RuntimeError(f"the trained {cls_name} tokenises nothing (vocabulary of {len(tokenizer)})")
    return tokenizer


def write_tiny_bert(out: Path, width: int = 32) -> Path:
    """A tiny random BERT (2 layers, ``width`` wide) with the bundled WordPiece vocabulary (bert-base-uncased's),
    saved under ``out`` as an encoder checkpoint like the bundled MiniLM: the DPR base, the prefix-LM generator's warm
    start and the reader's encoder all load it."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from ecqg.runtime.models import resolve_model

    torch.manual_seed(0)
    wordpiece = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
    bert = BertModel(BertConfig(vocab_size=wordpiece.vocab_size, hidden_size=width, num_hidden_layers=2,
                                num_attention_heads=width // 16, intermediate_size=2 * width,
                                max_position_embeddings=512))
    bert.save_pretrained(out)
    wordpiece.save_pretrained(out)
    return out


def write_models(bundle: Path, out: Path) -> dict[str, Path]:
    """Tiny random models of the paper's architectures under ``out``; returns the params reference of each."""
    import shutil

    from transformers import BartConfig, BartForConditionalGeneration, RobertaConfig, RobertaForQuestionAnswering

    texts = [r["text"] for _, r in itertools.islice(read_jsonl(bundle / "corpus.jsonl.gz"), 3000)]
    write_tiny_bert(out / "bert-base-uncased")         # seeds torch: the models below continue its stream

    bart_tok = _bpe_tokenizer(texts, out / "bart-tokenizer", "BartTokenizerFast")
    bart_tok.add_tokens([SEPARATOR])   # one piece (not special: decoding keeps it), so a tiny model learns the format
    bart = BartForConditionalGeneration(BartConfig(
        vocab_size=len(bart_tok), d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=1024,
        pad_token_id=bart_tok.pad_token_id, bos_token_id=bart_tok.bos_token_id, eos_token_id=bart_tok.eos_token_id,
        decoder_start_token_id=bart_tok.eos_token_id, forced_bos_token_id=bart_tok.bos_token_id,
        forced_eos_token_id=bart_tok.eos_token_id))
    bart.generation_config.update(num_beams=4, no_repeat_ngram_size=3, early_stopping=True)   # as facebook/bart-large
    bart.save_pretrained(out / "bart-large")
    bart_tok.save_pretrained(out / "bart-large")

    roberta_tok = _bpe_tokenizer(texts, out / "roberta-tokenizer", "RobertaTokenizerFast")
    reader = RobertaForQuestionAnswering(RobertaConfig(
        vocab_size=len(roberta_tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=514, pad_token_id=roberta_tok.pad_token_id,
        bos_token_id=roberta_tok.bos_token_id, eos_token_id=roberta_tok.eos_token_id))
    reader.save_pretrained(out / "roberta-base-squad2")
    roberta_tok.save_pretrained(out / "roberta-base-squad2")
    for scratch in ("bart-tokenizer", "roberta-tokenizer"):
        shutil.rmtree(out / scratch)
    rel = Path(out.name) if out.is_absolute() else out
    return {"dpr": rel / "bert-base-uncased", "qg": rel / "bart-large", "mrc": rel / "roberta-base-squad2"}


def paper_tiny_params(repo: Path, files: dict[str, Path] | None, models: dict[str, Path]) -> dict:
    """params/paper.yaml with the smoke profile's sizes, the paper's three systems (``dpr.variants``, as
    params/paper_three.yaml), the files (None: the preset's own paths, DPR's layout under ``downloads/``) and models
    above, and an IVF-PQ index sized for 400 passages: the paper's code paths at a size that runs in minutes on a
    CPU."""
    presets = repo / "params"
    paper = config.preset("paper", presets)
    smoke = config._read_yaml(presets / "smoke.yaml")
    smoke.pop("profile")
    smoke["dpr"].pop("seeds")                                       # one training seed, as the paper
    params = config.deep_merge(paper, smoke)
    params["data"].update(max_questions_per_set=None, max_corpus_passages=None, max_nq_dev=None,
                          max_train_triples=None)
    if files is not None:
        params["data"].update(corpus=str(files["corpus"]), train_gold=str(files["train_gold"]),
                              nq_dev=str(files["nq_dev"]),
                              test_sets={"nq": str(files["nq"]), "wq": str(files["wq"]), "tqa": str(files["tqa"])})
    params["dpr"]["base_model"] = str(models["dpr"])
    # the paper's three systems, as `make profile P=paper_three`: Luo et al.'s retrievers, pseudo-queries and
    # TempQG run in the smoke DAG (on MiniLM and the prefix LM); a test run of both DAGs must fit CI's time
    params["dpr"]["variants"], params["hybrid"]["variants"] = ["baseline", "uncon", "mixed"], ["baseline", "mixed"]
    params["dpr"]["index"] = {"kind": "ivfpq", "params": {"nlist": 8, "m": 4, "nbits": 4, "nprobe": 8,
                                                          "train_size": None}}
    params["dpr"]["encode"]["batch_size"] = 32
    params["qg"]["model"] = str(models["qg"])
    # a random BART learns the target format (one <sep> piece) in 200 steps at this rate: ~90 of 360 unconditioned
    # samples parse (measured; 400 steps at 3e-3 gave as many, in twice the time); two checkpoints, not forty
    params["qg"]["train"].update(max_steps=200, lr=5.0e-3, checkpoint_every=100)
    # the paper conditions on a sample of its own (attention.condition_passages): 120 of the pool here, ~100
    # conditioned inputs (every eligible passage: ~370, the stage's longest step); the Table 1 probe on 40
    params["attention"].update(condition_passages=120, probe_passages=40)
    params["qg"]["generate"].update(batch_size=16, top_k=100, top_p=1.0, uncon_passages=120)  # a tiny generator
                                                                   # repeats itself: wider sampling, more passages
    params["qg"]["source_max_length"] = 96
    params["mixing"]["doses"] = []                                 # as params/paper.yaml: smoke's dose of 12 is
                                                                   # more than the 8 the paper's filters leave here
    params["mixing"]["require_total"] = False                      # ... so the sets shrink to them (logged), where
                                                                   # the paper profile's mixing stage refuses
    params["mrc"]["model"] = str(models["mrc"])
    params["bm25"]["threads"] = 2
    params["attention"]["batch_size"] = 16
    return config.validate(params, "paper_tiny")


def smoke_tiny_params(repo: Path, bert: Path) -> dict:
    """params/smoke.yaml with a tiny random BERT (:func:`write_tiny_bert`, 64 wide) as the DPR base, the generators'
    warm start and the reader (``bundled:minilm`` in the preset): every stage, variant and seed of the smoke DAG, on
    a model whose numbers mean nothing (as MiniLM's at smoke's sizes) and that trains in seconds."""
    params = config.preset("smoke", repo / "params")
    params["dpr"]["base_model"] = params["qg"]["model"] = params["mrc"]["model"] = str(bert)
    # MiniLM learns the target format (answer <sep> question?) in smoke's 50 steps; a random prefix LM needs more
    # and a higher rate: at 150 steps the 64-wide one writes ~80 parseable unconditioned questions of 360 samples
    # (measured, bf16 and float32 alike; 32 wide: ~20), where the filters and mixing.total need 48
    params["qg"]["train"].update(max_steps=SMOKE_QG_STEPS, lr=3.0e-3, checkpoint_every=SMOKE_QG_STEPS // 2)
    # the cloze UnCon has no weights: TempQG's prefix LM starts from this random BERT and trains the qg steps plus
    # its own (ecqg.stages.tempqg.train_generator), at the same rate
    params["tempqg"]["train"].update(lr=3.0e-3)
    return config.validate(params, "smoke on tiny models")
