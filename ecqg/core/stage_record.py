"""The record every stage leaves: its wall time, the day it finished (UTC), the host, and whatever figures it
wants to keep, in ``results/<profile>/stage_<name>.json``. In the core because stages and the notebook runner
(``ecqg.tooling.notebook``) both write it."""

from __future__ import annotations

import contextlib
import datetime
import logging
import platform
import time
from typing import Iterator

from ecqg.core import device, paths
from ecqg.core.io import write_json
from ecqg.core.logs import setup_logging

log = logging.getLogger("ecqg")


@contextlib.contextmanager
def timed_stage(name: str, params: dict) -> Iterator[dict]:
    """Time the body; yield a dict the stage fills with figures; write it with the wall time on success."""
    setup_logging()
    policy = device.configure(params)
    figures: dict = {}
    start = time.perf_counter()
    log.info("stage %s: start (profile %s, device %s)", name, params.get("profile"), policy)
    yield figures
    wall = time.perf_counter() - start
    record = {"stage": name, "profile": params["profile"], "wall_time_s": round(wall, 1),
              "finished": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
              "machine": f"{platform.machine()} {platform.system()}", "host": device.host(), **figures}
    write_json(paths.stage_metrics(name, params["profile"]), record)
    log.info("stage %s: done in %.1f s", name, wall)
