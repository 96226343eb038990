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


@pytest.fixture(scope="session")
def tiny_models(request):
    """Tiny random models, built once per session (``tests/dag_runs.py``): ``dpr``, ``qg``, ``mrc`` (the paper
    DAG's BERT, BART and RoBERTa) and ``smoke`` (the smoke DAG's BERT), as absolute directories."""
    import dag_runs

    return dag_runs.tiny_models(dag_runs.root(request.config))


# ------------------------------------------------------------------------------- the DAG runs in the background
@pytest.hookimpl(trylast=True)          # after -k / -m deselected: only the runs a selected test reads start
def pytest_collection_modifyitems(session, config, items):
    """Tests that read a DAG run (fixture ``smoke_repo`` or ``paper_repo``, ``tests/dag_runs.py``) go last, and
    their runs start now in the background: the quick tests run beside them."""
    import dag_runs

    def runs_of(item):
        return [run for fixture, run in dag_runs.FIXTURES.items() if fixture in getattr(item, "fixturenames", ())]

    later = [item for item in items if runs_of(item)]
    if not later or config.option.collectonly:
        return
    later.sort(key=lambda item: dag_runs.ORDER.index(runs_of(item)[0]))     # the shorter run's tests first
    items[:] = [item for item in items if not runs_of(item)] + later
    dag_runs.start(dict.fromkeys(run for item in later for run in runs_of(item)), dag_runs.root(config))


def pytest_sessionfinish(session):
    import dag_runs

    dag_runs.stop_all()
