"""Memory / disk estimates of the dense-index stages, and the refusal that names the setting to change."""

import faiss
import numpy as np
import pytest

from ecqg.core import config
from ecqg.core.paper import PASSAGES as PAPER_PASSAGES
from ecqg.retrieval import capacity
from ecqg.retrieval.faiss_index import build_index, save_index

GB = 1e9


def test_paper_sizes():
    """Flat over 21M x 768 is the 64.6 GB the design names; the paper profile's IVF-PQ fits a 128 GB host for
    DPR and for Poly-DPR's 6 vectors per passage; a flat Poly-DPR index is refused up front."""
    flat = capacity.estimate(PAPER_PASSAGES, 768, 1, "flat")
    assert flat.index_bytes / GB == pytest.approx(64.56, abs=0.01)
    paper = config.preset("paper", config.PRESETS_DIR)["dpr"]["index"]
    assert paper["kind"] == "ivfpq"
    host = 128 * GB
    for k in (1, 6):
        need = capacity.estimate(PAPER_PASSAGES, 768, k, paper["kind"], paper["params"])
        capacity.check_fits(need, "/", "paper", memory=host, disk=10_000 * GB)
        assert need.memory < 0.5 * host
    poly_flat = capacity.estimate(PAPER_PASSAGES, 768, 6, "flat")
    with pytest.raises(capacity.CapacityError, match=r"needs about 399\.3 GB of memory .*Set dpr.index.kind to ivfpq"):
        capacity.check_fits(poly_flat, "/", "Poly-DPR index", memory=host, disk=10_000 * GB)
    with pytest.raises(capacity.CapacityError, match=r"GB of disk under /x .*Free space there"):
        capacity.check_fits(flat, "/x", "DPR index", memory=host, disk=50 * GB)


@pytest.mark.parametrize("kind, params", [("flat", {}), ("hnsw", {"M": 8}),
                                          ("ivfpq", {"nlist": 16, "m": 8, "nbits": 4, "train_size": 2000})])
def test_the_index_estimate_bounds_what_faiss_writes(tmp_path, kind, params):
    """The estimate of an index is at least its size on disk (FAISS' serialised form, about its resident size)
    and not far above it (the IVF-PQ estimate also counts its k-means training sample)."""
    rows, dim = 4000, 32
    vectors = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
    index = build_index(vectors, kind=kind, progress=False, **params)
    save_index(index, [str(i) for i in range(rows)], tmp_path / "index")
    written = (tmp_path / "index" / "index.faiss").stat().st_size
    estimate = capacity.index_bytes(rows, dim, kind, params)
    extra = 2000 * dim * 4 if kind == "ivfpq" else 0
    assert 0.8 * written <= estimate <= 1.5 * written + extra, (written, estimate)
    assert faiss.read_index(str(tmp_path / "index" / "index.faiss")).ntotal == rows
