"""inspect_ai logs (``.eval`` zip, ``.json``), written by inspect_ai itself with its mock model."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402
from trajlens.ingest.inspect_ai import score_value  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "inspect_ai"
EVAL, JSON, ZSTD = DATA / "tiny.eval", DATA / "tiny.json", DATA / "zstd" / "tiny.eval"


def _sorted(run):
    rows = sorted((r["trajectory_id"], r["group_id"], r["reward"], r["resolved"], r["exit_status"], r["num_turns"],
                   r["model_tokens"], r["response_text"]) for r in run.trajectories.to_pylist())
    calls = sorted((c["trajectory_id"], c["call_index"], c["turn"], c["tool_name"], c["arguments"], c["command"],
                    c["observation"], c["assistant_text"]) for c in run.tool_calls.to_pylist())
    return rows, calls


def test_the_eval_zip_and_the_json_log_read_alike():
    assert [s.format.name for s in formats.plan(EVAL)] == ["inspect-ai"]
    assert [s.format.name for s in formats.plan(JSON)] == ["inspect-ai"]
    zipped, plain = load(EVAL), load(JSON)
    assert _sorted(zipped) == _sorted(plain)
    rows, calls = _sorted(zipped)
    assert [r[:6] for r in rows] == [
        ("capital/epoch1", "capital", 0.0, False, "stop", 3), ("capital/epoch2", "capital", 0.0, False, "stop", 3),
        ("multiply/epoch1", "multiply", 1.0, True, "stop", 3), ("multiply/epoch2", "multiply", 0.0, False, "stop", 3)]
    assert dict((r[0], r[7]) for r in rows)["multiply/epoch1"] == "The answer is 42."
    assert sorted(r[6] for r in rows) == [33, 42, 51, 60]  # output tokens the mock model reported
    first = calls[0]
    assert first == ("capital/epoch1", 0, 0, "bash", '{"cmd": "false && ls"}', "false && ls", "exit status 1",
                     "Let me look.")  # a ToolError's message is the observation
    assert [c[3] for c in calls] == ["bash", "python"] * 4
    assert calls[1][7] == "tool call for tool python" and calls[1][5] is None
    run = load(EVAL)
    config = json.loads(run.runs.column("config")[0].as_py())
    assert config["task"] == "tiny" and config["model"] == "mockllm/model"
    assert [s["solver"] for s in config["plan"]["steps"]] == ["system_message", "use_tools", "generate"]
    channels = {r["trajectory_id"]: r["reward_channels"] for r in run.trajectories.to_pylist()}
    assert channels["multiply/epoch1"] == [{"name": "includes", "value": 1.0}]


def test_a_folder_of_logs_is_one_run_with_ids_by_file(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(EVAL, folder)
    shutil.copy(JSON, folder)
    (source,) = formats.plan(folder)
    assert source.format.name == "inspect-ai"
    run = load(folder)
    assert run.trajectories.num_rows == 8
    assert "tiny.eval:multiply/epoch1" in run.trajectories.column("trajectory_id").to_pylist()


def test_zstd_members_need_zstandard_and_read_alike_with_it():
    try:
        import zstandard  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match=r"record header.json: expected the zstandard package .*pip install zstandard"):
            load(ZSTD)
        return
    assert _sorted(load(ZSTD)) == _sorted(load(EVAL))


@pytest.mark.parametrize("value, expected", [
    ("C", 1.0), ("I", 0.0), ("P", 0.5), ("N", 0.0), ("yes", 1.0), ("False", 0.0), ("0.25", 0.25), (True, 1.0),
    (3, 3.0), ("maybe", None), ([1], None),
])
def test_score_values_read_as_inspect_reads_them(value, expected):
    assert score_value(value) == expected


def test_a_bad_sample_is_named_and_lenient_skips_it(tmp_path):
    log = json.loads(JSON.read_text())
    log["samples"][1]["messages"][2]["tool_calls"][0]["function"] = ["bash"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(log))
    with pytest.raises(InputError) as caught:
        load(path)
    assert "sample 1" in str(caught.value) and caught.value.field == "function"
    assert load(path, strict=False).trajectories.num_rows == 3


def test_a_zip_member_past_the_record_limit_is_refused_before_it_is_inflated(tmp_path):
    from trajlens.limits import Limits

    path = tmp_path / "big.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", "{}")
        archive.writestr("samples/a_epoch_1.json", " " * 3_000_000)
    with pytest.raises(InputError, match="a member of at most"):
        load(path, limits=Limits(record_mb=1))


def test_inspect_logs_ingest_classify_report_and_check(tmp_path):
    _, classes = through_every_surface(EVAL, tmp_path)
    assert sorted(set(classes.rows())) == [("bash", "search"), ("bash", "test_suite"), ("python", "quick_check")]
