"""Stage `retrieve_dense@<variant>-<seed>`: encode the corpus with a bi-encoder, index it with FAISS, search every
test set.

``python -m ecqg.stages.retrieve_dense untrained`` uses the base checkpoint as is (Table 3's "not fine-tuned" row);
``python -m ecqg.stages.retrieve_dense baseline --seed 2022`` (or any variant stage 05 trains, or one of them right
after pre-training: ``mixed_pre``) uses the model notebook 05 trained with that seed. Runs go to
``outputs/runs/<system>/<set>.trec``, the index to ``outputs/indexes/dense/<variant>[_s<seed>]/``.

Stage ``retrieve_dense``: encode the corpus with a trained (or the untrained) dense model, index it with FAISS,
search every test set; memory bounded by a chunk and checked against the machine before encoding.
"""

from __future__ import annotations

import time
from pathlib import Path

from ecqg.core import cli, config, device, paths, settings, variants
from ecqg.core.io import read_jsonl, remove_directory
from ecqg.core.stage_record import timed_stage
from ecqg.core.variants import UNTRAINED
from ecqg.retrieval import capacity
from ecqg.retrieval.run_files import write_run
from ecqg.runtime import parallel
from ecqg.stages.dpr_training import kind_block, load_model, system_name


def retrieve_all(variant: str, s: settings.Params, seed: int | None = None, progress: bool = True,
                 tokenized: Path | None = paths.TOKENIZED_CORPUS) -> dict:
    """Encode the corpus (tokenised once for all of them, stage ``tokenize_corpus``) with the passage encoder of
    ``variant`` trained with ``seed`` (``untrained``: the base checkpoint, no seed), index it with FAISS, search
    every test set. ``tokenized=None`` encodes from the corpus text (a machine without ``datasets``: the GPU sweep).

    Memory stays bounded by a chunk at any corpus size: the vectors stream to a memmap beside the index
    (``<index dir>.embeddings/``, removed once the index is saved) and FAISS adds them from there chunk by chunk.
    With ``processes`` above 1 the encoding is split over torchrun workers (:mod:`ecqg.runtime.parallel`).
    Before encoding, the memory and disk the index needs are estimated from the corpus size and the stage refuses,
    naming the setting, when they would not fit (:mod:`ecqg.retrieval.capacity`).

    Takes the whole tree: ``dpr`` (the model, its encoding and index), the untrained kind's own block, ``processes``,
    ``launcher_args``, ``seed`` (the index's), ``data.test_sets`` and ``retrieval.depth``."""
    # FAISS: kept out of --help
    from ecqg.retrieval import dense, faiss_index

    if (variant == UNTRAINED) != (seed is None):
        raise ValueError(f"variant '{variant}' {'takes no' if variant == UNTRAINED else 'needs a'} seed")
    dpr = s.dpr
    model = load_model(variant, dpr, seed, kind_settings=kind_block(s, dpr.model))
    index_dir = paths.dense_index_dir(variant, seed)
    scratch = index_dir.with_name(index_dir.name + ".embeddings")
    n_passages = dense.count_passages(paths.CORPUS)
    need = capacity.estimate(n_passages, model.dim, model.vectors_per_passage, dpr.index.kind,
                             dpr.index.params, dtype=dpr.encode.dtype)
    capacity.check_fits(need, scratch, f"dense index of {system_name(variant, seed)}")
    autocast = device.autocast_dtype(dpr.encode.autocast, device.resolve().type)
    if scratch.is_dir():
        remove_directory(scratch)
    start = time.perf_counter()
    processes = parallel.processes(s.processes)
    ids, vectors = dense.encode_corpus(model, paths.CORPUS, scratch, n_passages, processes=processes,
                                       launcher_args=s.launcher_args, batch_size=dpr.encode.batch_size,
                                       dtype=dpr.encode.dtype, progress=progress, autocast=autocast,
                                       tokenized=tokenized)
    encode_s = time.perf_counter() - start
    ids, vectors = faiss_index.index_rows(ids, vectors)   # K rows per passage for a multi-vector model
    index = faiss_index.build_index(vectors, kind=dpr.index.kind, seed=s.seed,
                                    progress=progress, **dpr.index.params)
    faiss_index.save_index(index, ids, index_dir)
    del vectors
    remove_directory(scratch)
    figures = {"passages": n_passages, "encode_s": round(encode_s, 1), "autocast": autocast,
               "passages_per_s": round(n_passages / max(encode_s, 1e-9), 1), "device": device.describe(),
               "processes": processes, "estimated_need": need.as_dict()}
    if len(ids) != n_passages:
        figures["index_rows"] = len(ids)
    for name in s.data.test_sets:
        questions = [q for _, q in read_jsonl(paths.questions_file(name))]
        vectors_q = dense.encode_queries(model, [q["question"] for q in questions],
                                         batch_size=dpr.encode.batch_size, progress=progress,
                                         autocast=autocast)
        run = faiss_index.search(index, ids, vectors_q, k=s.retrieval.depth,
                                 qids=[q["id"] for q in questions], progress=progress)
        system = system_name(variant, seed)
        write_run(paths.run_file(system, name), run, tag=system)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.stages.retrieve_dense", __doc__, paragraphs=2)
    parser.add_argument("variant", help=" | ".join([UNTRAINED, *(v.name for v in variants.TABLE)])
                        + " (a variant's pre-trained model: <variant>_pre; a dose: <set>_d<size>_pre)")
    parser.add_argument("--seed", type=int, help="training seed of the model (not for untrained)")
    args = parser.parse_args(argv)
    s = settings.of(config.load())
    name = args.variant if args.seed is None else f"{args.variant}-{args.seed}"
    with timed_stage(f"retrieve_dense_{name}", s.profile, s.device) as figures:
        figures.update(retrieve_all(args.variant, s, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
