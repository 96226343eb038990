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
def timed_stage(name: str, profile: str, device_setting: str) -> Iterator[dict]:
    """Time the body; yield a dict the stage fills with figures; write it with the wall time on success, under
    ``profile``'s results. ``device_setting``: the ``device`` of params.yaml, made this process's policy."""
    setup_logging()
    policy = device.configure(device_setting)
    figures: dict = {}
    start = time.perf_counter()
    log.info("stage %s: start (profile %s, device %s)", name, profile, policy)
    yield figures
    wall = time.perf_counter() - start
    record = {"stage": name, "profile": profile, "wall_time_s": round(wall, 1),
              "finished": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
              "machine": f"{platform.machine()} {platform.system()}", "host": device.host(), **figures}
    write_json(paths.stage_metrics(name, profile), record)
    log.info("stage %s: done in %.1f s", name, wall)
