"""bench/gpu_check.py, the one script a lent GPU runs: its tiny size on the CPU, so that it does not rot between
loans (the figures themselves come only from a GPU)."""

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import gpu_check  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_passages_are_cut_to_100_words_like_psgs_w100():
    bundle = [{"title": f"t{i}", "text": " ".join(f"w{i}_{j}" for j in range(70))} for i in range(5)]
    cut = gpu_check.psgs_w100_like(bundle, 9)          # 350 words: 3 windows, then the stream again, shifted
    assert len(cut) == 9 and all(len(p["text"].split()) == 100 for p in cut)
    assert cut[0]["title"] == "t0" and cut[1]["title"] == "t1" and cut[1]["text"].startswith("w1_30 ")
    assert cut[3]["text"].split()[0] == "w0_37"
    assert len({p["id"] for p in cut}) == 9


def test_tiny_training_sections_run_with_the_paper_settings(tmp_path):
    out = tmp_path / "check.json"
    done = subprocess.run([sys.executable, "bench/gpu_check.py", "--size", "tiny", "--sections", "finetune,pretrain",
                           "--peak-tflops", "1", "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["passages"] == "psgs_w100" and figures["peak_tflops"] == 1
    pre = figures["pretrain"]
    assert pre["hard_negatives"] == 1 and pre["length_bucket_size"] == 16        # params/paper.yaml's phase
    assert pre["grad_cache_chunk_size"] is None and len(figures["pretrain_chunks"]) == 1   # the whole batch fits
    assert all(0 < f["mfu"] < 1 for f in figures["finetune"]) and pre["tokens_per_example"] > 100
    assert "MFU (peak 1 TFLOP/s)" in done.stdout
