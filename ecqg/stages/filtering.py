"""Stage ``filtering`` (notebook 03): the generated questions through the round trip (a reader must recover the
answer, stage 1) and then hardness (the first replicate's DPR must not rank the passage first, stage 2); the survivors
written per generator and replicate for stage ``mixing``.

Notebook 03 calls these around :mod:`ecqg.filtering`, which holds the methods; this module only knows where the
pipeline keeps things and which params steer them.
"""

from __future__ import annotations

import random
import time
from typing import Any, Mapping, Sequence

from ecqg.core import paths, settings
from ecqg.core.io import empty_directory, write_jsonl
from ecqg.core.schemes import of_stage
from ecqg.data.records import read_squad2_unanswerable
from ecqg.filtering import (answer_in_passage_filter, build_mrc_model, check_generated, dpr_hardness, hardness_filter,
                            mrc_examples, read_generated, roundtrip_filter, save_mrc, split_by_passage, train_mrc)
from ecqg.filtering.reader import predict_in_processes
from ecqg.retrieval.faiss_index import load_index
from ecqg.retrieval.retriever import load_retriever
from ecqg.stages.common import fingerprint, primary_seed
from ecqg.stages.common import passages_by_id  # noqa: F401  (notebooks 03 / 04 / 06 read passages through here)
from ecqg.stages.question_generation import gold_triples


def generated_questions(replicates: Sequence[int | None]) -> dict[str, list[dict]]:
    """Stage 02's sampled questions per generator (every replicate's set, ``replicates``:
    :func:`ecqg.core.variants.generation_seeds`; each record naming its ``replicate`` where they are per replicate),
    validated (errors name the file, line and field)."""
    return {g: [r for seed in replicates for r in read_generated(paths.generated_file(g, seed))]
            for g in of_stage()}


def probe_questions() -> list[dict]:
    """Stage 02's Table 1 probe questions (conditioned, about highest- and lowest-attended entities)."""
    return list(read_generated(paths.QG_PROBES))


# ------------------------------------------------------------------------------------------------ the MRC reader


def mrc_data(mrc: settings.Mrc, unanswerable_file: str, seed: int) -> tuple[list[dict], list[dict], dict]:
    """SQuAD2-style training and held-out examples from the gold triples and the SQuAD 2.0 unanswerables
    (``unanswerable_file``: ``data.mrc_unanswerable``), split by passage; the training part sub-sampled to
    ``mrc.train.max_examples`` and the held-out part to ``mrc.eval_examples`` (both seeded by ``seed``)."""
    triples, passages, _ = gold_triples()  # the bundle's triples, or the paper profile's DPR positives
    unanswerable = list(read_squad2_unanswerable(unanswerable_file))
    passages.update(passages_by_id({u["passage_id"] for u in unanswerable}))
    unanswerable = [u for u in unanswerable if u["passage_id"] in passages]  # profile may have cut the corpus
    examples = mrc_examples(triples, unanswerable, passages)
    train, heldout = split_by_passage(examples, mrc.heldout_fraction, seed, max_train=mrc.train.max_examples)
    if len(heldout) > mrc.eval_examples:
        heldout = random.Random(f"{seed}-mrc-eval").sample(heldout, mrc.eval_examples)
    counts = {"examples": len(examples), "answerable": sum(bool(e["answers"]) for e in examples),
              "train": len(train), "train_answerable": sum(bool(e["answers"]) for e in train),
              "heldout": len(heldout), "heldout_answerable": sum(bool(e["answers"]) for e in heldout)}
    return train, heldout, counts


def reader(mrc: settings.Mrc, seed: int, train: list[dict], progress: bool = True) -> tuple[Any, Any, dict | None]:
    """The MRC reader: ``mrc.model`` as is (``train_model: false``), or trained here on ``train`` (resumable);
    saved to ``outputs/filtering/mrc_model``, its checkpoints dropped once it is saved. Returns model, tokenizer,
    training figures (None when not trained)."""
    model, tokenizer = build_mrc_model(mrc.model, seed=seed)
    figures = None
    if mrc.train_model:
        named = {k: v for k, v in mrc.as_dict().items() if k not in ("eval_examples",)}
        run_dir = paths.MRC_CHECKPOINTS / fingerprint(named, seed, [e["id"] for e in train])
        figures = train_mrc(model, tokenizer, train, run_dir, mrc.train.as_dict(), seed=seed,
                            max_length=mrc.max_length, stride=mrc.stride,
                            answer_windows_only=mrc.answer_windows_only, progress=progress)
    save_mrc(model, tokenizer, paths.MRC_MODEL)
    empty_directory(paths.MRC_CHECKPOINTS)
    return model, tokenizer, figures


def read(model, tokenizer, questions: list[dict], passages: Mapping | None, mrc: settings.Mrc,
         progress: bool = True, *, processes: int | str = 1,
         launcher_args: Sequence[str] | None = None) -> tuple[dict, float]:
    """The reader's answers to ``questions`` (with striding) and the questions per second; with ``processes``
    above 1 split over torchrun workers (``launcher_args``: the params' own); ``mrc.predict_batch_size`` windows a
    forward pass, under ``mrc.autocast``."""
    start = time.perf_counter()
    predictions = predict_in_processes(model, tokenizer, questions, passages, progress=progress,
                                       processes=processes, launcher_args=launcher_args,
                                       max_length=mrc.max_length, stride=mrc.stride,
                                       max_answer_length=mrc.max_answer_length,
                                       null_threshold=mrc.null_threshold, batch_size=mrc.predict_batch_size,
                                       autocast=mrc.autocast)
    return predictions, len(questions) / max(time.perf_counter() - start, 1e-9)


# ------------------------------------------------------------------------------------------------ the two filters


def stage1(records: list[dict], predictions: Mapping, passages: Mapping, filtering: settings.Filtering
           ) -> tuple[list[dict], list[dict], dict]:
    """Stage 1 by ``filtering.stage1``: the MRC round trip, the answer-in-passage substitute, or ``none`` (stage 1
    skipped: every parsed question goes on to stage 2). The rule used is written into the metrics."""
    if filtering.stage1 == "roundtrip":
        return roundtrip_filter(records, predictions, filtering.min_confidence, filtering.require_overlap)
    if filtering.stage1 == "answer_in_passage":
        return answer_in_passage_filter(records, passages)
    kept = check_generated(records)
    return kept, [], {"in": len(kept), "kept": len(kept), "method": "none (stage 1 skipped)"}


def hardness_model(dpr: settings.Dpr) -> str:
    """The model stage 2 scores hardness with (the page states it): the first replicate's fine-tuned DPR."""
    return f"dpr_baseline_s{primary_seed(dpr)} (DPR fine-tuned on the gold data, the first replicate)"


def stage2(records: list[dict], passages: Mapping, filtering: settings.Filtering, dpr: settings.Dpr,
           progress: bool = True) -> tuple[list[dict], list[dict], dict, dict]:
    """Stage 2: the baseline DPR's score and own-passage rank for each survivor, then the hardness cut (the model of
    the primary seed, ``dpr.seeds[0]``)."""
    seed = primary_seed(dpr)
    model = load_retriever(paths.model_dir("baseline", seed))
    index, ids = load_index(paths.dense_index_dir("baseline", seed))
    scores = dpr_hardness(model, records, passages, index, ids, depth=filtering.depth,
                          batch_size=dpr.encode.batch_size, progress=progress, autocast=filtering.autocast)
    kept, rejected, stats = hardness_filter(records, scores, filtering.hardness, filtering.keep_fraction,
                                            filtering.max_rank)
    return kept, rejected, stats, scores


def write_kept(kept: list[dict], replicates: Sequence[int | None]) -> dict[str, int]:
    """Stage 03's survivors, a file per generator and replicate (``replicates``:
    :func:`ecqg.core.variants.generation_seeds`; ``paths.kept_file``); returns the counts."""
    counts = {}
    for seed in replicates:
        for g in of_stage():
            path = paths.kept_file(g, seed)
            counts[str(path)] = write_jsonl(path, [r for r in kept if r["generator"] == g
                                                   and r.get("replicate") == seed])
    return counts
