"""File helpers: a directory is emptied without ever exposing a half-deleted child."""

from ecqg.core.io import empty_directory


def test_empty_directory_keeps_the_directory_and_nothing_else(tmp_path):
    target = tmp_path / "checkpoints"
    (target / "run" / "checkpoint-10").mkdir(parents=True)
    (target / "run" / "checkpoint-10" / "trainer_state.json").write_text("{}")
    (target / "stale.txt").write_text("x")

    assert empty_directory(target) == target
    assert target.is_dir() and not list(target.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints"]  # no renamed leftovers

    missing = tmp_path / "new" / "dir"
    assert empty_directory(missing).is_dir()


def test_truncated_gzip_and_bad_bytes_name_the_file_and_line(tmp_path):
    import gzip

    import pytest

    from ecqg.core.errors import DataFormatError
    from ecqg.core.io import read_json, read_jsonl

    good = "".join(f'{{"id": {i}, "text": "{"x" * 50}"}}\n' for i in range(2000)).encode()
    truncated = tmp_path / "cut.jsonl.gz"
    truncated.write_bytes(gzip.compress(good)[:3000])
    with pytest.raises(DataFormatError, match=r"cut.jsonl.gz, line \d+: the gzip stream ends early"):
        list(read_jsonl(truncated))
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": 1}\n{"text": "caf\xe9"}\n')
    with pytest.raises(DataFormatError, match=r"latin.jsonl, line 2: not UTF-8 text \(byte b'\\xe9'"):
        list(read_jsonl(latin))
    not_gzip = tmp_path / "plain.json.gz"
    not_gzip.write_text("[1, 2]")
    with pytest.raises(DataFormatError, match="plain.json.gz: not a readable gzip file"):
        read_json(not_gzip, list, "a list")


def test_record_numbers_are_one_based_like_line_numbers():
    from ecqg.core.errors import DataFormatError

    assert str(DataFormatError("f.json", 0, "id", "missing")) == "f.json, record 1, field 'id': missing"


def test_atomic_path_removes_what_a_killed_writer_left(tmp_path):
    from ecqg.core.io import atomic_path, write_text

    stale = tmp_path / ".06.ipynb.abc123.tmp"
    stale.mkdir()
    (stale / "06.ipynb").write_text("half")
    other = tmp_path / ".07.ipynb.abc123.tmp"
    other.mkdir()
    write_text(tmp_path / "06.ipynb", "done")
    assert not stale.exists() and other.exists()            # only the leftovers of this path
    with atomic_path(tmp_path / "06.ipynb") as tmp:
        tmp.write_text("again")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".07.ipynb.abc123.tmp", "06.ipynb"]


def test_a_model_copy_cut_short_leaves_no_model_directory(tmp_path, monkeypatch):
    """Disk full in the middle of copying a saved model: the target must not exist half-written."""
    import errno
    import os
    import shutil

    import pytest

    from ecqg.core import io

    source = tmp_path / "run" / "model"
    (source / "query_encoder").mkdir(parents=True)
    (source / "bi_encoder.json").write_text("{}")
    (source / "query_encoder" / "model.safetensors").write_bytes(b"x" * 1000)
    real_copy = shutil.copyfile

    def full_disk(src, dst, *args, **kwargs):
        if os.fspath(src).endswith(".safetensors"):   # copytree passes DirEntry objects
            with open(dst, "wb") as handle:
                handle.write(b"x" * 10)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_copy(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", full_disk)
    target = tmp_path / "models" / "dpr_baseline_s1"
    with pytest.raises(shutil.Error):
        io.copy_directory(source, target, {"history.jsonl": [{"step": 1}]})
    assert not target.exists() and list((tmp_path / "models").iterdir()) == []
    monkeypatch.setattr(shutil, "copyfile", real_copy)
    io.copy_directory(source, target, {"history.jsonl": [{"step": 1}]})
    assert (target / "query_encoder" / "model.safetensors").stat().st_size == 1000
    assert (target / "history.jsonl").read_text() == '{"step":1}\n'
