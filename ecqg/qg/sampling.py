"""Sampling questions with top-k / top-p, seeded per batch (a batch gives the same samples wherever it sits in
the run); the sample score is the mean log-probability (under the model, before top-k/top-p) of the sampled
tokens.

A run given a ``journal`` folder appends each finished batch's records there and, started again, takes the batches
it finds instead of sampling them: because a batch's samples depend only on its inputs and seed, the resumed run's
records are the uncut run's, in the same order. Why: the study and paper profiles sample all their questions in one
long stage; a run cut by the end of a session or a preempted job would otherwise start its sampling again from the
first batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import torch
from tqdm.auto import tqdm

from ecqg.core.errors import DataFormatError
from ecqg.qg.architectures import load_generator, save_generator
from ecqg.qg.entities import mentions
from ecqg.qg.format import format_source, parse_target, relexicalise
from ecqg.qg.generators import generator_for
from ecqg.data.text import entity_key
from ecqg.runtime import parallel
from ecqg.runtime.models import inference
from ecqg.runtime.parallel import MODEL_DIR, block

log = logging.getLogger(__name__)



def _batch_seed(seed: int, keys: Iterable[str]) -> int:
    digest = hashlib.sha256(("\x00".join([str(seed), *keys])).encode()).digest()
    return int.from_bytes(digest[:8], "big") % (2**63)


def _input_key(inp: Mapping[str, Any]) -> str:
    return f"{inp['passage_id']}\x01{entity_key(inp['entity']) if inp.get('entity') else ''}"


def read_journal(folder: str | Path | None) -> dict[str, dict]:
    """The batches a cut sampling run finished: batch seed -> ``{"records", "drops"}``, from every ``*.jsonl`` in
    ``folder`` (one per process; a run with another process count reads them all: its batches are the same). Only
    a file's last line may be cut short (the process was killed while writing it); it is ignored."""
    done: dict[str, dict] = {}
    if folder is None or not Path(folder).is_dir():
        return done
    for path in sorted(Path(folder).glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").split("\n")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as err:
                if n == len(lines):  # the unterminated last line of a killed writer
                    continue
                raise DataFormatError(path, f"line {n}", None, f"not JSON ({err.msg}) in a sampling journal; "
                                      f"delete {folder} to sample this job again from the start") from None
            if not isinstance(entry, dict) or not {"batch", "records", "drops"} <= set(entry):
                raise DataFormatError(path, f"line {n}", None, "not a journal entry ({batch, records, drops}); "
                                      f"delete {folder} to sample this job again from the start")
            done[entry["batch"]] = entry
    return done


def _cut_to_whole_lines(path: Path) -> Path:
    """Drop a journal's unterminated last line (a killed writer's) before appending after it."""
    if path.is_file():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
    return path


def generate_questions(model, tokenizer, inputs: Sequence[Mapping[str, Any]], *, marking: str | None = None,
                       top_k: int = 10, top_p: float = 0.9, samples: int = 1, batch_size: int = 32,
                       max_new_tokens: int = 48, source_max_length: int = 256, window_words: int | None = None,
                       placeholder: str | None = None, require_entity: bool = False, seed: int = 0,
                       autocast: str | None = None, progress: bool = True, journal: str | Path | None = None,
                       rank: int = 0) -> tuple[list[dict], Counter]:
    """Sample ``samples`` (answer, question) pairs per input with top-k / top-p; returns ``(records, drop_counts)``.

    ``inputs``: ``{"passage_id", "title", "text", "entity", "entity_start", "entity_label"}``. The generator is
    ``con`` when ``marking`` is given (each input then needs an entity), else ``uncon``. Records:
    ``{"id", "passage_id", "entity", "entity_label", "question", "answer", "generator", "sample_score", "sample"}``;
    unparsable outputs are dropped and counted by reason (``drop_counts``; ``generated`` counts every sample).
    ``require_entity`` also drops con questions that do not mention their entity (``entity_not_mentioned``): off for
    evaluation (which reports the raw mention rate), on where the pipeline needs questions about the entity.
    ``placeholder`` (con): a generated placeholder is replaced by the input's entity (:func:`relexicalise`); con
    records then carry ``entity_via_placeholder``. ``autocast`` (``auto``, ``bfloat16``, ``float16`` or None for
    float32): the forward passes under autocast (:func:`ecqg.runtime.models.inference`); the sampling itself is float32.
    """
    generator = "con" if marking else "uncon"
    if samples < 1 or batch_size < 1:
        raise ValueError(f"samples and batch_size must be >= 1, got {samples} and {batch_size}")
    sources = []
    keys: dict[str, int] = {}
    for n, inp in enumerate(inputs):
        if marking and not inp.get("entity"):
            raise ValueError(f"input {n} (passage {inp.get('passage_id')!r}) has no entity for the con generator")
        if keys.setdefault(_input_key(inp), n) != n:
            raise ValueError(f"input {n} repeats input {keys[_input_key(inp)]} (passage {inp['passage_id']!r}, "
                             f"entity {inp.get('entity')!r}): ask for more samples instead")
        sources.append(format_source(inp.get("title", ""), inp["text"], inp.get("entity"), inp.get("entity_start"),
                                     marking, window_words=window_words))
    records: list[dict] = []
    drops: Counter = Counter()
    architecture = generator_for(model)
    pad = architecture.pad_id(model, tokenizer)
    bar = tqdm(total=len(inputs), desc=f"QG generate ({generator})", disable=not progress)
    done = read_journal(journal)
    if done:
        log.info("QG generate (%s): taking %d finished batches from %s", generator, len(done), journal)
    with ExitStack() as stack:
        log_file = None
        if journal is not None:
            Path(journal).mkdir(parents=True, exist_ok=True)
            log_file = stack.enter_context(open(_cut_to_whole_lines(Path(journal) / f"rank-{rank:05d}.jsonl"), "a",
                                                encoding="utf-8"))
        device = stack.enter_context(inference(model, autocast))
        for lo in range(0, len(inputs), batch_size):
            batch = inputs[lo : lo + batch_size]
            batch_seed = _batch_seed(seed, (_input_key(i) for i in batch))
            if str(batch_seed) in done:
                records.extend(done[str(batch_seed)]["records"])
                drops.update(done[str(batch_seed)]["drops"])
                bar.update(len(batch))
                continue
            first = len(records)
            counted = Counter(drops)
            enc = tokenizer(sources[lo : lo + batch_size], max_length=source_max_length, truncation=True,
                            padding=True, return_tensors="pt").to(device)
            enc.pop("token_type_ids", None)
            tokens, scores = architecture.sample(model, tokenizer, enc, batch_seed, top_k=top_k,
                                                 top_p=top_p, samples=samples, max_new_tokens=max_new_tokens)
            keep = (tokens != pad) & torch.isfinite(scores)
            mean_lp = (scores.masked_fill(~keep, 0).sum(1) / keep.sum(1).clamp(min=1)).tolist()
            texts = tokenizer.batch_decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=True)
            for j, text in enumerate(texts):
                inp, s = batch[j // samples], j % samples
                drops["generated"] += 1
                parsed, reason = parse_target(text)
                if parsed is None:
                    drops[reason] += 1
                    continue
                via_placeholder = None
                if placeholder and marking:
                    parsed["question"], via_placeholder = relexicalise(parsed["question"], inp["entity"], placeholder)
                    parsed["answer"] = relexicalise(parsed["answer"], inp["entity"], placeholder)[0]
                if require_entity and marking and not mentions(parsed["question"], inp["entity"]):
                    drops["entity_not_mentioned"] += 1
                    continue
                key = hashlib.sha1(_input_key(inp).encode()).hexdigest()[:10]
                records.append({"id": f"qg-{generator}-{key}-{s}", "passage_id": inp["passage_id"],
                                "entity": inp.get("entity"), "entity_label": inp.get("entity_label"),
                                "question": parsed["question"], "answer": parsed["answer"], "generator": generator,
                                "sample_score": round(float(mean_lp[j]), 6), "sample": s,
                                **({} if via_placeholder is None else {"entity_via_placeholder": via_placeholder})})
            if log_file is not None:
                log_file.write(json.dumps({"batch": str(batch_seed), "records": records[first:],
                                           "drops": dict(drops - counted)}) + "\n")
                log_file.flush()
                os.fsync(log_file.fileno())
            bar.update(len(batch))
    bar.close()
    return records, drops


def generate_in_processes(model, tokenizer, inputs: Sequence[Mapping[str, Any]], progress: bool = True, *,
                          processes: int | str = 1, launcher_args: Sequence[str] | None = None,
                          **sampling) -> tuple[list[dict], Counter]:
    """:func:`generate_questions` split over ``processes`` torchrun workers (:mod:`ecqg.runtime.parallel`; started
    with ``launcher_args``), whole batches each, so the samples are the single process's; with one process it is
    :func:`generate_questions` itself."""
    if parallel.processes(processes) <= 1:
        return generate_questions(model, tokenizer, inputs, progress=progress, **sampling)
    with parallel.job_directory("generate") as job_dir:
        save_generator(model, tokenizer, job_dir / parallel.MODEL_DIR)
        settings = {**sampling, "journal": None if sampling.get("journal") is None else str(sampling["journal"])}
        parts = parallel.run("generate", {"inputs": list(inputs), "settings": settings}, job_dir, processes,
                             launcher_args, progress)
    records = [r for part in parts for r in part["records"]]
    return records, sum((Counter(part["drops"]) for part in parts), Counter())


def generate_part(job: Mapping[str, Any], rank: int, world: int, job_dir) -> dict:
    """One torchrun worker of a split sampling run (:mod:`ecqg.runtime.parallel`): whole batches of its block, so each
    batch, and its seed, is the one a single process samples."""
    inputs, settings = job["inputs"], job["settings"]
    lo, hi = block(len(inputs), settings["batch_size"], rank, world)
    if lo == hi:
        return {"records": [], "drops": {}}
    model, tokenizer = load_generator(Path(job_dir) / MODEL_DIR)
    records, drops = generate_questions(model, tokenizer, inputs[lo:hi], **settings,
                                        progress=job["progress"] and rank == 0, rank=rank)
    return {"records": records, "drops": dict(drops)}
