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
