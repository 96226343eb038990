"""The notebook stages' metrics files are written and read through their types (ecqg.core.metrics_files)."""

import json
from pathlib import Path

import pytest

from ecqg.core import metrics_files
from ecqg.core.errors import DataFormatError

REPO = Path(__file__).resolve().parents[1]


def _tempqg(**over) -> metrics_files.TempQG:
    fields = dict(profile="mini", templates={"n": 3}, selector={"accuracy": 0.5}, generator={"steps": 2},
                  quality={"tempqg": {"kept": 1}}, set={"size": 4})
    return metrics_files.TempQG(**{**fields, **over})


def test_a_record_round_trips_in_the_files_order(tmp_path):
    path = _tempqg().write(tmp_path)
    assert list(json.loads(path.read_text())) == ["profile", "templates", "selector", "generator", "quality", "set"]
    assert metrics_files.TempQG.read(tmp_path) == _tempqg()


def test_a_missing_or_unknown_field_is_refused_naming_the_file_and_the_field(tmp_path):
    data = _tempqg().as_dict()
    (tmp_path / "tempqg.json").write_text(json.dumps({**data, "sett": {}}))
    with pytest.raises(DataFormatError, match=r"tempqg\.json, field 'sett': not a field of TempQG"):
        metrics_files.TempQG.read(tmp_path)
    del data["selector"]
    (tmp_path / "tempqg.json").write_text(json.dumps(data))
    with pytest.raises(DataFormatError, match=r"tempqg\.json, field 'selector': missing"):
        metrics_files.TempQG.read(tmp_path)


def test_a_field_older_records_lack_stays_out_and_a_stage_that_has_not_run_is_none(tmp_path):
    record = metrics_files.Filtering(profile="study", stage1_rule="roundtrip", mrc={}, funnel={}, probes={})
    assert "hardness" not in record.as_dict()
    assert metrics_files.Filtering.read(tmp_path) is None


@pytest.mark.parametrize("profile", ["mini", "replicates", "study"])
def test_every_committed_record_reads_through_its_type_unchanged(profile):
    folder = REPO / "results" / profile
    for name, record in metrics_files.RECORDS.items():
        if (folder / name).is_file():
            assert record.read(folder).as_dict() == json.loads((folder / name).read_text()), name


def test_a_stage_writes_every_field_and_a_missing_record_is_named(tmp_path):
    with pytest.raises(ValueError, match="'hardness' is None"):
        metrics_files.Filtering(profile="mini", stage1_rule="roundtrip", hardness=None, mrc={}, funnel={},
                                probes={}).write(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"question_generation\.json: no QuestionGeneration record"):
        metrics_files.QuestionGeneration.require(tmp_path)
