"""Stage `retrieve_dense@<variant>`: encode the corpus with a bi-encoder, index it with FAISS, search every test set.

``python -m ecqg.stages.retrieve_dense untrained`` uses the base checkpoint as is (Table 3's "not fine-tuned" row);
``baseline`` (and later ``uncon``, ``mixed``) use the model trained by notebook 05. Runs go to
``outputs/runs/<system>/<set>.trec``, the index to ``outputs/indexes/dense/<variant>/``.
"""

from __future__ import annotations

import argparse

from ecqg import config
from ecqg.retrieval.pipeline import retrieve_all
from ecqg.stages import timed_stage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ecqg.stages.retrieve_dense")
    parser.add_argument("variant", help="untrained | baseline")
    variant = parser.parse_args(argv).variant
    params = config.load()
    with timed_stage(f"retrieve_dense_{variant}", params) as figures:
        figures.update(retrieve_all(variant, params))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
