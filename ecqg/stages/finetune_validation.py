"""Stage 05's validation for fine-tuning to convergence (``dpr.finetune.validation: corpus``), and the curve.

Why not DPR's pool validation here: on the study's small pool (held-out positives and their hard negatives) every
variant scores about the same Top-1, so it cannot tell models apart, let alone choose an epoch. Here each held-out
gold question is retrieved over the whole searched corpus plus the held-out questions' own positive passages (the
bundle's gold triples come from SQuAD / XQuAD passages that the searched corpus mostly lacks; without them those
questions could not be answered at all), and Top-1/5/20 count answer-string hits, as Table 3 does.

The curve (``dpr.finetune.curve_runs``, the first training seed): the same corpus encoding also searches every test
set, and the runs are kept per snapshot under ``<model>/curve/step-<step>/<set>.trec``; the snapshot also scores
notebook 07's moved-sentence probe (``moved_sentence.json``: each pair's front - end gap), since the snapshots'
weights are not kept. Notebook 06 turns the runs into Table 3 against fine-tuning steps, 07 the runs and the gaps
into its slices. Test questions never steer training: only the held-out figures reach the trainer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ecqg.core import device, paths, settings
from ecqg.core.io import read_jsonl, write_json
from ecqg.data.records import read_corpus
from ecqg.retrieval import evaluation
from ecqg.retrieval.probes import moved_sentence_scores
from ecqg.retrieval.run_files import write_run
from ecqg.stages.located import moved_pairs

log = logging.getLogger(__name__)

KS = (1, 5, 20)
CURVE_DIR = "curve"
MOVED_FILE = "moved_sentence.json"


def curve_step_dir(root: Path, step: int) -> Path:
    return Path(root) / f"step-{step:06d}"


def corpus_validator(dpr: settings.Dpr, data: settings.Data, retrieval: settings.Retrieval, probe_seed: int,
                     heldout: Sequence[Mapping], curve_dir: Path | None = None, progress: bool = False) -> Callable:
    """``validate(model, step) -> {val_top1, val_top5, val_top20, val_questions, val_passages}`` for
    :func:`ecqg.retrieval.train.train_biencoder`; with ``curve_dir``, also the test sets' runs of each snapshot and
    its moved-sentence gaps (``dpr.finetune.curve_probe_passages`` pairs drawn with ``probe_seed``, the profile's
    ``seed``)."""
    # torch, FAISS: kept out of finetune_curve's import (notebooks 06, 07)
    from ecqg.retrieval import dense, faiss_index

    passages = list(read_corpus(paths.CORPUS))
    n_corpus = len(passages)
    known = {p["id"] for p in passages}
    for record in heldout:
        ctx = record["positive_ctxs"][0]
        pid = str(ctx.get("passage_id") or f"heldout-positive-{len(known)}")
        if pid not in known:
            known.add(pid)
            passages.append({"id": pid, "title": ctx.get("title") or "", "text": ctx["text"]})
    text_of = {p["id"]: p["text"] for p in passages}
    questions = [{"id": f"heldout-{i}", "question": r["question"], "answers": list(r["answers"])}
                 for i, r in enumerate(heldout)]
    test_sets = ({name: [q for _, q in read_jsonl(paths.questions_file(name))] for name in data.test_sets}
                 if curve_dir is not None else {})
    encode = dpr.encode
    cache = evaluation.HitCache(text_of)
    depth = retrieval.depth
    probe = None                          # the moved-sentence pairs, built at the first snapshot of a curve

    def validate(model, step: int) -> dict:
        nonlocal probe
        autocast = device.autocast_dtype(encode.autocast, device.resolve().type)
        ids, vectors = dense.encode_passages(model, passages, batch_size=encode.batch_size, progress=progress,
                                             autocast=autocast)

        def search(rows: int, qs: Sequence[Mapping], k: int):
            """Search the first ``rows`` passages (the corpus, or the corpus and the held-out positives)."""
            row_ids, row_vectors = faiss_index.index_rows(ids[:rows], vectors[:rows])
            index = faiss_index.build_index(row_vectors, kind="flat", progress=False)
            q_vectors = dense.encode_queries(model, [q["question"] for q in qs], batch_size=encode.batch_size,
                                             progress=False, autocast=autocast)
            return faiss_index.search(index, row_ids, q_vectors, k=k, qids=[str(q["id"]) for q in qs],
                                      progress=False)

        run = search(len(passages), questions, max(KS))
        hits = evaluation.hit_matrix(run, questions, text_of, k_max=max(KS), cache=cache)
        out = {f"val_top{k}": float(hits[:, :k].any(axis=1).mean()) for k in KS}
        out.update(val_questions=len(questions), val_passages=len(passages))
        for name, qs in test_sets.items():     # the searched corpus only, as the retrieve_dense stages search it
            write_run(curve_step_dir(curve_dir, step) / f"{name}.trec", search(n_corpus, qs, depth),
                      tag=f"step-{step}")
        if curve_dir is not None:
            if probe is None:
                probe = moved_pairs(dpr, data, retrieval, probe_seed, dpr.finetune.curve_probe_passages)[0]
            front, end = moved_sentence_scores(model, probe, encode.batch_size, autocast)
            write_json(curve_step_dir(curve_dir, step) / MOVED_FILE,
                       {"question_ids": [p["question_id"] for p in probe],
                        "gaps": [round(float(g), 6) for g in front - end]})
        log.info("validation at step %d over %d passages: %s", step, len(passages),
                 {k: round(v, 4) for k, v in out.items() if k.startswith("val_top")})
        return out

    return validate
