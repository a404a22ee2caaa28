"""Rows of the nebius/SWE-agent-trajectories dataset, as Parquet shards or JSONL."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from swe_agent_dataset_fixture import ROWS, write_jsonl, write_parquet  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "swe_agent_dataset" / "train-00000-of-00001.parquet"


def _summary(run):
    rows = [(r["trajectory_id"], r["group_id"], r["reward"], r["resolved"], r["num_turns"], r["exit_status"])
            for r in run.trajectories.to_pylist()]
    calls = [(c["turn"], c["tool_name"], c["command"], c["format_error"], c["observation"])
             for c in run.tool_calls.to_pylist()]
    return rows, calls


def test_parquet_and_jsonl_rows_load_the_same(tmp_path):
    assert [s.format.name for s in formats.plan(SHIPPED)] == ["swe-agent-dataset"]
    parquet_run = load(SHIPPED)
    jsonl_run = load(write_jsonl(tmp_path / "rows.jsonl"))
    assert _summary(parquet_run) == _summary(jsonl_run)
    rows, calls = _summary(parquet_run)
    assert rows == [
        ("astropy__astropy-12907/swe-agent-llama-70b/0", "astropy__astropy-12907", 1.0, True, 4, "submitted"),
        ("astropy__astropy-12907/swe-agent-llama-8b/1", "astropy__astropy-12907", 0.0, False, 2, "exit_cost"),
    ]
    assert [c[1] for c in calls] == ["find_file", "open", "bash", "submit", "bash", "search_dir"]
    assert calls[0][4].startswith("Found 1 matches")
    assert calls[4] == (0, "bash", None, True, "Your output was not formatted correctly.")


def test_a_folder_of_shards_is_one_run(tmp_path):
    write_parquet(tmp_path / "data" / "train-00000-of-00002.parquet")
    write_parquet(tmp_path / "data" / "train-00001-of-00002.parquet")
    sources = formats.plan(tmp_path / "data")
    assert [(s.format.name, s.paths) for s in sources] == [("swe-agent-dataset", [tmp_path / "data"])]
    run = load(tmp_path / "data")
    assert run.trajectories.num_rows == 4 and run.run_id == "data"


@pytest.mark.parametrize("change, field", [
    (lambda r: r.__setitem__("target", "yes"), "target"),
    (lambda r: r["trajectory"][2].__setitem__("role", ["ai"]), "role"),
    (lambda r: r.__setitem__("trajectory", {"a": 1}), "trajectory"),
    (lambda r: r["trajectory"][2].__setitem__("text", "```\nls \ud800\n```"), "text"),
])
def test_bad_rows_are_named(tmp_path, change, field):
    rows = json.loads(json.dumps(ROWS))
    change(rows[0])
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError) as caught:
        load(path)
    assert field in caught.value.field
    assert load(path, strict=False).trajectories.num_rows == 1
