"""A run's configuration history: read from config.json, kept on ingest, bad files named precisely."""

from __future__ import annotations

import json

import pytest

from trajlens.errors import InputError
from trajlens.ingest.config_history import copy_history, read_config_file, read_history


def _write(tmp_path, document) -> object:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_history_is_read_in_step_order_and_copied(tmp_path):
    entries = [{"from_step": 1, "config": {"critic": {"optim": {"lr": 5e-6}}}},
               {"from_step": 41, "config": {"critic": {"optim": {"lr": 2.5e-6}}}}]
    _write(tmp_path, {"configured": entries[-1]["config"], "history": entries})
    assert read_history(tmp_path) == [(1, entries[0]["config"]), (41, entries[1]["config"])]
    target = tmp_path / "stored"
    assert copy_history(tmp_path, target)
    assert read_history(target) == read_history(tmp_path)


def test_no_history_is_no_history(tmp_path):
    assert read_history(tmp_path) == []
    _write(tmp_path, {"configured": {}})
    assert read_history(tmp_path) == [] and not copy_history(tmp_path, tmp_path / "stored")


@pytest.mark.parametrize("document, words", [
    ("{not json", "not JSON (Expecting property name enclosed in double quotes)"),
    ('{"history": [{"from_step": 1, "config": {"seed": ' + "9" * 5000 + "}}]}",
     "field 'history.0.config.seed': expected an integer of at most 4300 digits, found 5,000 digits"),
    ("[" * 300 + "]" * 300, "expected JSON nested at most 200 levels (raise it with --limit depth=...), found 300 levels"),
    ({"history": {"from_step": 1}}, "field 'history': expected a list of {from_step, config}"),
    ({"history": [{"from_step": "1", "config": {}}]}, "record history[0]: field 'from_step': expected a step number"),
    ({"history": [{"from_step": 1, "config": []}]}, "record history[0]: field 'config': expected a JSON object"),
    ({"history": [{"from_step": 41, "config": {}}, {"from_step": 1, "config": {}}]},
     "field 'history': expected entries in increasing from_step order, found [41, 1]"),
])
def test_a_bad_config_file_is_one_line_naming_record_and_field(tmp_path, document, words):
    path = _write(tmp_path, document)
    with pytest.raises(InputError) as caught:
        read_config_file(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and words in message and "\n" not in message
