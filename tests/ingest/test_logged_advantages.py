"""Advantages the trainer logged are kept beside what trajlens recomputes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import trajlens
from trajlens.errors import InputError
from trajlens.ingest.verl import load_verl
from trajlens.schema import SCHEMAS, conform

PROMPT = "system\nYou can run bash.\nuser\nCount the lines of a.txt.\nassistant\n"


def dump(path: Path, *records: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    base = {"input": PROMPT, "output": "\\boxed{1}", "gts": "1", "score": 1.0, "step": 3}
    path.write_text("".join(json.dumps({**base, **r}) + "\n" for r in records))
    return path


def test_a_verl_dump_keeps_logged_advantages_and_not_as_reward_channels(tmp_path):
    path = dump(tmp_path / "3.jsonl",
                {"advantage": 0.5, "advantages": [0.5, 0.5, 0.5], "acc": 1.0},
                {"score": 0.0, "advantage": -0.5, "advantages": [-0.5, -0.5], "response_mask": [1, 0], "acc": 0.0},
                {"score": 0.5, "acc": 0.5})
    run = load_verl([path])
    assert run.trajectories.column("logged_advantage").to_pylist() == [0.5, -0.5, None]
    channels = [[c["name"] for c in row] for row in run.trajectories.column("reward_channels").to_pylist()]
    assert channels == [["acc"], ["acc"], ["acc"]]
    tokens = run.tokens.to_pylist()
    assert [t["trajectory_id"] for t in tokens] == ["3-0", "3-1"]
    assert tokens[0]["logged_advantages"] == [0.5, 0.5, 0.5] and tokens[0]["response_mask"] == [True] * 3
    assert tokens[1]["logged_advantages"] == [-0.5, -0.5] and tokens[1]["response_mask"] == [True, False]


@pytest.mark.parametrize("record, field", [
    ({"advantage": "high"}, "advantage"),
    ({"advantages": [0.1, "x"]}, "tokens.logged_advantages"),
    ({"advantages": [0.1], "response_mask": [1, 1]}, "response_mask"),
    ({"advantages": [1e39]}, "tokens.logged_advantages"),
])
def test_bad_logged_advantages_are_named(tmp_path, record, field):
    with pytest.raises(InputError) as caught:
        load_verl([dump(tmp_path / "3.jsonl", record)])
    assert caught.value.field == field


def test_a_parquet_run_keeps_its_logged_advantages(tmp_path, tiny):
    from trajlens.store.layout import RunDirWriter

    advantages = pa.array([[0.25] * 7 for _ in range(tiny.tokens.num_rows)], pa.list_(pa.float32()))
    index = tiny.tokens.schema.get_field_index("logged_advantages")
    tiny.tokens = tiny.tokens.set_column(index, SCHEMAS["tokens"].field("logged_advantages"), advantages)
    per_trajectory = pa.array([0.5] * tiny.trajectories.num_rows, pa.float64())
    index = tiny.trajectories.schema.get_field_index("logged_advantage")
    tiny.trajectories = tiny.trajectories.set_column(index, SCHEMAS["trajectories"].field("logged_advantage"),
                                                     per_trajectory)
    run_dir = tmp_path / "tiny-run"
    with RunDirWriter(run_dir, tiny.runs) as writer:
        writer.write_run(tiny)
    trajlens.ingest([run_dir], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    assert store.sql("SELECT DISTINCT logged_advantage FROM trajectories").item() == 0.5
    assert store.tokens.collect().get_column("logged_advantages").to_list()[0] == [0.25] * 7


def test_a_run_written_before_the_columns_existed_reads_them_as_null(tiny):
    old = tiny.trajectories.drop_columns(["logged_advantage"])
    table = conform(old, "trajectories", "old run")
    assert table.schema.equals(SCHEMAS["trajectories"])
    assert table.column("logged_advantage").null_count == table.num_rows
