"""Encode one shard of a corpus with a trained passage encoder: the unit of work for a 21M-passage corpus.

Run one process per shard (on as many machines as you have), then merge and index::

    python -m ecqg.retrieval.encode_shard --model outputs/models/dpr_baseline_s2022 \\
        --corpus downloads/data/wikipedia_split/psgs_w100.tsv --total 21015324 --shard $I 50 --out embeddings/
    python -c "from ecqg.retrieval import dense; dense.merge_shards('embeddings/', 'embeddings/merged')"

The device and autocast follow the project's policy (``device`` and ``dpr.encode.autocast`` in params.yaml, or
``--device`` / ``--autocast``): fp16 or bf16 on a GPU. Each worker streams only its contiguous slice; ``--total``
(count once with ``dense.count_passages``) spares every worker a counting pass. The shard directory appears
atomically, so a killed worker leaves nothing that looks done.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ecqg.core import cli, device
from ecqg.core.config import PARAMS_FILE, load
from ecqg.data.records import read_corpus
from ecqg.retrieval import dense
from ecqg.core.logs import setup_logging
from ecqg.retrieval.retriever import load_retriever


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.retrieval.encode_shard", __doc__)
    parser.add_argument("--model", required=True, help="a trained retriever's directory (outputs/models/<run>)")
    parser.add_argument("--corpus", required=True, help="bundle jsonl, psgs_w100.tsv or a pyserini JsonCollection")
    parser.add_argument("--shard", nargs=2, type=int, required=True, metavar=("I", "N"), help="shard I of N (0-based)")
    parser.add_argument("--total", type=int, help="number of passages in the corpus (counted if omitted)")
    parser.add_argument("--out", required=True, help="directory that receives shard-0000I-of-0000N/")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--dtype", choices=dense.DTYPES, default="float32")
    parser.add_argument("--device", help="auto | cpu | cuda | cuda:N (default: params.yaml's device, else auto)")
    parser.add_argument("--autocast", choices=("auto", "bfloat16", "float16", "none"),
                        help="inference autocast (default: params.yaml's dpr.encode.autocast, else auto)")
    parser.add_argument("--params", default=str(PARAMS_FILE), help="params file the defaults come from")
    args = parser.parse_args(argv)
    setup_logging()
    i, n = args.shard
    if not 0 <= i < n:
        parser.error(f"--shard {i} {n}: need 0 <= I < N")
    params = load(args.params) if Path(args.params).is_file() else {}
    device.configure(args.device or params.get("device", "auto"))
    autocast = args.autocast or params.get("dpr", {}).get("encode", {}).get("autocast", "auto")
    autocast = device.autocast_dtype(None if autocast == "none" else autocast, device.resolve().type)
    model = load_retriever(args.model)
    total = args.total if args.total is not None else dense.count_passages(args.corpus)
    target = dense.write_shard(model, read_corpus(args.corpus), args.out, shard=(i, n), total=total,
                               batch_size=args.batch_size, dtype=args.dtype, autocast=autocast)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
