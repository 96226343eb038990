"""One logging set-up for stages, notebooks and command-line tools: progress and throughput lines with a time."""

from __future__ import annotations

import logging


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", force=True)
