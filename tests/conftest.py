"""Session-wide checks that turn a machine problem into one clear message instead of dozens of failed tests."""

import shutil
import tempfile

import pytest

# Measured peak of the temporary directory during `make test` (sampled every 20 s, README "Two commands"): the smoke
# DAG's outputs, DVC cache (hardlinked) and checkpoints. Below this much free space a run dies of ENOSPC midway.
NEEDED_GB = 4.0


def pytest_report_header(config):
    free = shutil.disk_usage(tempfile.gettempdir()).free / 1e9
    return f"temporary directory {tempfile.gettempdir()}: {free:.1f} GB free (the suite needs about {NEEDED_GB:g} GB)"


def pytest_sessionstart(session):
    free = shutil.disk_usage(tempfile.gettempdir()).free / 1e9
    if free < NEEDED_GB and not session.config.option.collectonly:
        pytest.exit(f"only {free:.1f} GB free in {tempfile.gettempdir()}; the test suite writes up to about "
                    f"{NEEDED_GB:g} GB there (a smoke run of the whole pipeline). Free some space or point TMPDIR "
                    "at a larger disk.", returncode=3)


# ---------------------------------------------------------------------------------------------- shared fixtures
@pytest.fixture(scope="module")
def tokenizer():
    """The bundled MiniLM's WordPiece tokenizer (bert-base-uncased's vocabulary), for tiny random models."""
    from transformers import AutoTokenizer

    from ecqg.runtime.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models' ops take microseconds: intra-op threads only add contention on a shared 2-core box. A module
    opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
