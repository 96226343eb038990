"""Pipeline stages run by DVC. Each stage module has a ``main()``; notebooks run through :mod:`ecqg.tooling.notebook`.

Every stage records its wall time, the day it finished (UTC) and whatever figures it wants to keep in
``results/<profile>/stage_<name>.json`` (:mod:`ecqg.core.stage_record`).
"""

from ecqg.core.logs import setup_logging
from ecqg.core.stage_record import log, timed_stage

__all__ = ["log", "setup_logging", "timed_stage"]
