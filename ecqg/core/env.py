"""Process-wide environment defaults, applied once on import of :mod:`ecqg`.

Why: the project machines have no model hub, pyserini builds an OpenAI client at import time, and DVC would otherwise
phone home. Every default can be overridden by setting the variable before running.
"""

import os
import sys
from pathlib import Path

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


def repository_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding both ``dvc.yaml`` and ``params.yaml``, or None."""
    for folder in (start, *start.parents):
        if (folder / "dvc.yaml").is_file() and (folder / "params.yaml").is_file():
            return folder
    return None


def move_to_repository_root() -> Path | None:
    """In a Jupyter kernel started below the repository root (Jupyter starts it in the notebook's folder,
    ``notebooks/``), change to the root: every path of the project (``params.yaml``, ``outputs/``, ``data/``) is
    relative to it, as in ``dvc repro``. Returns the new working directory, or None when nothing changed (not a
    kernel, already at the root, or not inside a checkout)."""
    if "ipykernel" not in sys.modules:
        return None
    here = Path.cwd()
    if (here / "params.yaml").is_file():
        return None
    root = repository_root(here)
    if root is None:
        return None
    os.chdir(root)
    print(f"ecqg: working directory set to the repository root {root} (the kernel started in {here})",
          file=sys.stderr)
    return root
