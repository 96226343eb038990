"""Process-wide environment defaults, applied once on import of :mod:`ecqg`.

Why: the project machines have no model hub, pyserini builds an OpenAI client at import time, and DVC would otherwise
phone home. Every default can be overridden by setting the variable before running.
"""

import os
import sys

DEFAULTS = {
    # Never try the network for models unless the user opts in (HF_HUB_OFFLINE=0).
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    # pyserini 0.25 constructs an OpenAI client on import; any value will do.
    "OPENAI_API_KEY": "unused-by-ecqg",
    "DVC_NO_ANALYTICS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def configure_environment() -> None:
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
    if not sys.stderr.isatty():
        # In logs (DVC, papermill, CI) a progress bar redrawn ten times a second buries everything else.
        os.environ.setdefault("TQDM_MININTERVAL", "10")
