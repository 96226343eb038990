"""Stale results are impossible: every stage depends (in dvc.yaml) on every project module it imports, and dvc.yaml
is what ``python -m ecqg.tooling.dag write`` makes of the variant table and the stages' code.

Why: DVC reruns a stage only when one of its declared dependencies changes. A module a stage imports but does not
declare (``text.py`` under question generation, say) can change what the stage computes while ``dvc status`` says
"up to date". ``ecqg.tooling.dag`` derives each stage's code dependencies from the code itself (the module its command runs,
and for notebook stages every import in the notebook's code cells, followed transitively, function-level imports
and package ``__init__`` files included); these tests check that dvc.yaml is that file, and, independently of how it
was written, that each module file a stage imports is covered by a dependency (the file or a folder above it).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pipeline import REPO, _expanded_stages  # noqa: E402

from ecqg.core import config  # noqa: E402
from ecqg.tooling import code_deps, dag

closure, stage_roots = code_deps.closure, (lambda stage: code_deps.command_roots(stage["cmd"]))


def missing_code_deps() -> dict[str, list[str]]:
    """Stage -> module files it imports but does not depend on (empty when every stage is covered)."""
    out = {}
    for name, stage in _expanded_stages():
        deps = [REPO / d for d in stage.get("deps", [])]
        missing = [str(f.relative_to(REPO)) for f in sorted(closure(stage_roots(stage)))
                   if not any(f == d or d in f.parents for d in deps)]
        if missing:
            out[name] = missing
    return out


def test_import_closure_helper_follows_function_level_and_relative_imports():
    files = {str(f.relative_to(REPO)) for f in closure({"ecqg.stages.retrieve_dense"})}
    # retrieve_all imports ecqg.retrieval.dense inside the function; ecqg/__init__ runs ecqg/core/env.py
    assert {"ecqg/retrieval/dense.py", "ecqg/stages/retrieve_dense.py", "ecqg/stages/dpr_training.py",
            "ecqg/__init__.py", "ecqg/core/env.py", "ecqg/stages/__init__.py"} <= files


def test_every_stage_depends_on_every_module_it_imports():
    missing = missing_code_deps()
    assert not missing, "stages import project modules that are not DVC dependencies (run `python -m ecqg.tooling.dag " \
        "write`):\n" + "\n".join(f"  {stage}: {', '.join(files)}" for stage, files in missing.items())


def test_dvc_yaml_is_what_the_dag_writer_makes():
    assert (REPO / "dvc.yaml").read_text(encoding="utf-8") == dag.render(config.load_settings(REPO / "params.yaml")), \
        "dvc.yaml is stale: run `python -m ecqg.tooling.dag write` (the variant table, dpr.variants or an import changed)"


def test_a_room_stands_for_all_its_modules_and_other_folders_only_when_whole(tmp_path):
    pkg = tmp_path / "ecqg"
    for rel in ("__init__.py", "a.py", "retrieval/__init__.py", "retrieval/x.py", "retrieval/y.py",
                "stages/__init__.py", "stages/p.py", "stages/q.py"):
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text("")
    files = {pkg / "a.py", pkg / "retrieval" / "x.py", pkg / "stages" / "p.py", pkg / "stages" / "__init__.py"}
    assert code_deps.minimal_cover(files, tmp_path) == ["ecqg/a.py", "ecqg/retrieval", "ecqg/stages/__init__.py",
                                                  "ecqg/stages/p.py"]
