"""``make inputs``: the paper profile's files by DPR's resource names, into DPR's layout, resumed, checked."""

from __future__ import annotations

import functools
import gzip
import http.server
import threading
from pathlib import Path

import pytest
import yaml

from ecqg.tooling import inputs

ROOT = Path(__file__).resolve().parents[1]


def test_the_paper_profile_reads_what_the_command_fetches():
    paper = yaml.safe_load((ROOT / "params" / "paper.yaml").read_text())["data"]
    named = {paper["corpus"], paper["train_gold"], paper["nq_dev"], *paper["test_sets"].values()}
    assert named == {str(inputs.DOWNLOADS / r.path) for r in inputs.PAPER}
    assert str(inputs.DOWNLOADS / "data/retriever/qas/webq-test.csv") in named          # DPR's name, not ours


@pytest.fixture
def mirror(tmp_path):
    """DPR's host's relative paths, small files, gzipped where DPR's are, served over HTTP (range requests too)."""
    root = tmp_path / "host"
    for r in inputs.PAPER:
        path = root / r.remote
        path.parent.mkdir(parents=True, exist_ok=True)
        body = f"{r.name}\n".encode() * 2000
        path.write_bytes(gzip.compress(body, mtime=0) if r.compressed else body)
    handler = functools.partial(RangeHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        data = path.read_bytes() if path.is_file() else None
        if data is None:
            return self.send_error(404)
        start = int(self.headers.get("Range", "bytes=0-")[6:].split("-")[0] or 0)
        if start >= len(data):
            return self.send_error(416)
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])


def test_fetch_resumes_decompresses_and_checks(mirror, tmp_path, capsys):
    root, url = mirror
    out = tmp_path / "downloads"
    corpus = inputs.PAPER[0]
    part = out / corpus.path.with_name(corpus.path.name + ".gz.part")
    part.parent.mkdir(parents=True)
    part.write_bytes((root / corpus.remote).read_bytes()[:100])          # a cut download
    assert inputs.main(["fetch", "--out", str(out), "--mirror", url]) == 0
    for r in inputs.PAPER:
        assert (out / r.path).read_bytes() == f"{r.name}\n".encode() * 2000, r.name
    assert not list(out.rglob("*.part"))
    sums = inputs.read_sums(out / inputs.SUMS)
    assert set(sums) == {r.path.as_posix() for r in inputs.PAPER}
    assert inputs.main(["fetch", "--out", str(out), "--mirror", url]) == 0          # all present, all match
    assert "present" in capsys.readouterr().out
    (out / inputs.PAPER[3].path).write_text("changed\n")
    assert inputs.main(["verify", "--out", str(out)]) == 1
    assert "nq-test.csv: sha256" in capsys.readouterr().err


def test_a_dpr_tree_is_linked_and_a_node_without_a_source_is_told(tmp_path, capsys):
    tree = tmp_path / "dpr" / "downloads"
    for r in inputs.PAPER:
        (tree / r.path).parent.mkdir(parents=True, exist_ok=True)
        (tree / r.path).write_text(r.name)
    out = tmp_path / "downloads"
    assert inputs.main(["fetch", "--out", str(out), "--dpr-tree", str(tree)]) == 0
    assert all((out / r.path).is_symlink() for r in inputs.PAPER)
    assert inputs.main(["fetch", "--out", str(tmp_path / "empty"), "--mirror", str(tmp_path / "nothing")]) == 1
    assert "error: data.wikipedia_split.psgs_w100" in capsys.readouterr().err
