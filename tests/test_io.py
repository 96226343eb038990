"""File helpers: a directory is emptied without ever exposing a half-deleted child."""

from ecqg.io import empty_directory


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
