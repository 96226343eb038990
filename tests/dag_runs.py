"""The suite's two DAG runs, the smoke profile's and the paper profile's at test size, each a ``dvc repro`` in a copy
of the tree, started in the background as soon as pytest has collected a test that reads one (``tests/conftest.py``
then runs those tests last), so that they run beside the quick tests instead of after them.

Why: each run is a chain of 30 to 60 DVC stages, each a fresh Python process (imports, a notebook kernel, DVC
re-reading and rewriting its lock): one core busy for minutes while the other idles. Run one after the other, the DAG
tests and the ~530 quick ones added up to the suite's time; beside each other they share the two cores. While a run
is in the background, every torch process of the suite (the runs' stages, the quick tests) computes on one thread:
two processes with two threads each on two cores slow each other 5-10 times (docs/timings.md).

Also here: the helpers the DAG tests share (a copy of the working tree, a profile written into it, DVC run in it) and
the tiny random models both runs use, built once per session (``tests/paper_tiny.py``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
THREADS_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# --------------------------------------------------------------------------------------------------- the helpers
def repo_copy(target: Path) -> Path:
    """The working tree as git sees it (tracked + untracked, not ignored), in a fresh git repository."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            dst = target / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    return target


def use_profile(repo: Path, profile: str | None = None, params: dict | None = None) -> Path:
    """params.yaml from a preset (or ``params``) in ``repo``, and dvc.yaml written for its ``dpr.variants``, as
    ``make profile`` does. The committed dvc.lock (mini's run) is removed: this profile's run writes its own, and
    DVC re-reads and rewrites the whole lock after every stage (~8 s a stage for mini's 530 KB on 2 cores)."""
    import yaml

    from ecqg.core import config
    from ecqg.tooling import dag

    (repo / "dvc.lock").unlink(missing_ok=True)
    if params is None:
        config.write_profile(profile, repo / "params.yaml", repo / "params")
    else:
        (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    (repo / "dvc.yaml").write_text(dag.render(config.load_settings(repo / "params.yaml")), encoding="utf-8")
    return repo


def dvc_env(cwd: Path) -> dict:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1", "PYTHONPATH": str(cwd)}
    return {**env, **THREADS_ENV} if _one_thread else env


def dvc(args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, env=dvc_env(cwd), capture_output=True,
                          text=True)


# ------------------------------------------------------------------------------------------------ tiny models
_models: dict | None = None
_models_lock = threading.Lock()


def tiny_models(root: Path) -> dict[str, Path]:
    """Tiny random models, built once per session under ``root`` (``tests/paper_tiny.py``), as absolute
    directories: the paper DAG's ``dpr`` (a 32-wide BERT with the bundled WordPiece vocabulary), ``qg`` (a BART
    generator) and ``mrc`` (a RoBERTa reader), and ``smoke``, a 64-wide BERT of the same vocabulary: the smoke
    DAG's DPR base, generator warm start and reader."""
    global _models
    with _models_lock:
        if _models is None:
            from paper_tiny import write_models, write_tiny_bert

            out = root / "tiny_models"
            out.mkdir(parents=True, exist_ok=True)
            models = {key: out / rel.name for key, rel in write_models(REPO / "data", out).items()}
            _models = {**models, "smoke": write_tiny_bert(out / "smoke-bert", width=64)}
        return _models


def _smoke(root: Path) -> Path:
    from paper_tiny import smoke_tiny_params

    models = tiny_models(root)
    repo = repo_copy(root / "smoke" / "repo")
    return use_profile(repo, params=smoke_tiny_params(repo, models["smoke"]))


def _paper(root: Path) -> Path:
    """The lab rehearsal (docs/paper_profile.md's walk at test size): DPR's files served by a local mirror and fetched
    into DPR's layout by ``python -m ecqg.tooling.inputs fetch``, the environment doctor, then ``make repro`` (its
    checks: params, inputs, hub models; dvc.yaml written) with every step that splits over processes on two gloo
    processes."""
    from paper_tiny import paper_tiny_params, write_dpr_mirror

    models = tiny_models(root)
    repo = repo_copy(root / "paper" / "repo")
    mirror = write_dpr_mirror(REPO / "data", root / "paper" / "mirror")
    with open(root / "paper.setup.log", "w", encoding="utf-8") as log:
        for command in (["-m", "ecqg.tooling.inputs", "fetch", "--mirror", str(mirror)],
                        ["-m", "ecqg.tooling.doctor", "--machine"]):
            done = subprocess.run([sys.executable, *command], cwd=repo, env=dvc_env(repo), stdout=log,
                                  stderr=subprocess.STDOUT)
            if done.returncode:
                raise RuntimeError(f"python {' '.join(command)} exited {done.returncode}: {root / 'paper.setup.log'}")
    params = paper_tiny_params(repo, None, models)
    params["processes"] = 2
    return use_profile(repo, params=params)   # params.yaml, dvc.yaml for its variants


PREPARE: dict[str, Callable[[Path], Path]] = {"smoke": _smoke, "paper": _paper}
# The paper run goes through the Makefile as a lab would (`make repro`, with this interpreter's environment, which
# `make test` has installed: -o keeps make from reinstalling it); the smoke run is DVC alone.
_VENV = Path(sys.prefix)
COMMANDS = {"smoke": [sys.executable, "-m", "dvc", "repro"],
            "paper": ["make", "-o", str(_VENV / ".ecqg-installed"), "repro", f"VENV={_VENV}"]}
FIXTURES = {"smoke_repo": "smoke", "paper_repo": "paper"}     # the fixture a test reads a run through -> the run
ORDER = ("paper", "smoke")                                      # the shorter first: its tests wait less


# --------------------------------------------------------------------------------------------------- the runs
class DagRun:
    """``dvc repro`` of one prepared copy, in a thread of its own; :meth:`result` waits for it."""

    def __init__(self, name: str, root: Path):
        self.name, self.root = name, root
        self.repo: Path | None = None
        self.log = root / f"{name}.dvc-repro.log"
        self.proc: subprocess.Popen | None = None
        self.error: BaseException | None = None
        self.returncode: int | None = None
        self._stopped = False
        self.thread = threading.Thread(target=self._run, name=f"dag-{name}", daemon=True)

    def _run(self) -> None:
        try:
            self.repo = PREPARE[self.name](self.root)
            with open(self.log, "w", encoding="utf-8") as log:
                if self._stopped:
                    return
                self.proc = subprocess.Popen(COMMANDS[self.name], cwd=self.repo,
                                             env=dvc_env(self.repo), stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
                self.returncode = self.proc.wait()
        except BaseException as exc:        # raised again in the test that reads the run
            self.error = exc

    def result(self) -> Path:
        """The repository once its ``dvc repro`` has finished; fails with the end of its output if it failed."""
        self.thread.join()
        if self.error is not None:
            raise self.error
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.is_file() else ""
        assert self.returncode == 0, f"dvc repro of the {self.name} DAG exited {self.returncode}:\n{text[-6000:]}"
        return self.repo

    def stop(self) -> None:
        self._stopped = True
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


_runs: dict[str, DagRun] = {}
_one_thread = False
_ROOT = pytest.StashKey[Path]()


def root(config) -> Path:
    """One temporary folder for the session's DAG runs and their models (pytest's ``config``)."""
    if _ROOT not in config.stash:
        config.stash[_ROOT] = config._tmp_path_factory.mktemp("dag_runs")
    return config.stash[_ROOT]


def _stop_on(signum, frame) -> None:
    """A terminated pytest (``timeout``, a CI cancel) takes its runs along: each is a session of its own (so that
    :meth:`DagRun.stop` ends its stages too), which a signal to pytest's process group does not reach."""
    stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def start(names, root: Path, background: bool = True) -> None:
    """Start the runs ``names`` (``smoke``, ``paper``) under ``root``; ``background``: beside the other tests, so
    every torch process of the suite goes to one thread from here on. Called from pytest's main thread."""
    global _one_thread
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, _stop_on)
    if background and not _one_thread:
        _one_thread = True
        os.environ.update(THREADS_ENV)             # the subprocesses the quick tests start
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
    for name in names:
        if name not in _runs:
            _runs[name] = DagRun(name, root)
            _runs[name].thread.start()


def run(name: str, config) -> DagRun:
    """The run ``name``: the one started at collection, else one started now (nothing else then runs beside it)."""
    if name not in _runs:
        start([name], root(config), background=False)
    return _runs[name]


def stop_all() -> None:
    for r in _runs.values():
        r.stop()
