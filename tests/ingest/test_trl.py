"""TRL GRPOTrainer output folders, trainer_state.json, and verl's file-logger metrics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from trl_fixture import EPS, PROMPTS, advantages, expected_rows, write_trl_output  # noqa: E402

import trajlens  # noqa: E402
from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402
from trajlens.ingest.metrics import detect as detect_metrics  # noqa: E402
from trajlens.ingest.metrics import load_metrics  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "trl" / "grpo-run"


def test_the_shipped_fixture_is_what_the_writer_writes(tmp_path):
    fresh = write_trl_output(tmp_path / "grpo-run")
    for name in ("completions/completions_00001.parquet", "completions/completions_00002.parquet"):
        fresh_table, shipped = pq.read_table(fresh / name), pq.read_table(SHIPPED / name)
        assert fresh_table.schema.equals(shipped.schema)
        assert json.dumps(fresh_table.to_pylist()) == json.dumps(shipped.to_pylist())  # NaN == NaN here
    assert (fresh / "trainer_state.json").read_text() == (SHIPPED / "trainer_state.json").read_text()


def test_an_output_folder_is_one_run_with_groups_rewards_advantages_and_metrics():
    assert [source.format.name for source in formats.plan(SHIPPED)] == ["trl"]
    run = load(SHIPPED)
    assert run.run_id == "grpo-run" and run.problems == []
    rows = run.trajectories.to_pylist()
    assert len(rows) == 12
    # Groups: the 3 completions of one prompt within one step.
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["group_id"], []).append(row)
    assert sorted(len(g) for g in groups.values()) == [3, 3, 3, 3]
    first = [r for r in rows if r["step"] == 1][:3]
    # accuracy [1, 0, 1] + format [1, NaN, 1], summed as TRL's nansum does: [2, 0, 2].
    assert [r["reward"] for r in first] == [2.0, 0.0, 2.0]
    assert first[1]["reward_channels"] == [{"name": "accuracy", "value": 0.0}, {"name": "format", "value": None}]
    expected = advantages([2.0, 0.0, 2.0])
    assert [r["logged_advantage"] for r in first] == pytest.approx(expected)
    assert expected[1] == pytest.approx(-2 / (2 * 3 ** -0.5 * 2 + EPS), rel=1e-9) or expected[1] < 0
    # Tool calls read from the completion text.
    calls = run.tool_calls.to_pylist()
    assert {c["command"] for c in calls} == {"wc -l a.txt", "pytest -q"}
    # Metrics from trainer_state.json: step 2 merges the training log and the final summary.
    metrics = {(m["step"], m["name"]): m["value"] for m in run.step_metrics.to_pylist()}
    assert metrics[(1, "learning_rate")] == 1e-06 and metrics[(2, "train_runtime")] == 12.5
    assert len(metrics) == 9 + 14


def test_a_trl_output_folder_ingests_into_a_store(tmp_path):
    result = trajlens.ingest([SHIPPED], tmp_path / "store")
    assert result.run_ids == ["grpo-run"]
    store = trajlens.open(tmp_path / "store")
    assert store.sql("SELECT count(*) FROM trajectories WHERE logged_advantage IS NOT NULL").item() == 12


def test_groups_of_unequal_size_are_said_so(tmp_path):
    output = write_trl_output(tmp_path / "run")
    path = output / "completions" / "completions_00001.parquet"
    rows = expected_rows(1)[:5]
    pq.write_table(pa.Table.from_pylist(rows), path)
    run = load(output)
    unequal = [p for p in run.problems if "num_generations cannot be recovered" in p.message]
    assert [p.kind for p in unequal] == ["note"]  # every row is kept: nothing was skipped
    assert run.trajectories.num_rows == 5 + 6


@pytest.mark.parametrize("column, value, field", [
    ("step", "two", "step"), ("prompt", None, "prompt"), ("advantage", "high", "advantage"),
    ("step", str(10**20), "step"), ("completion", "ls \ud800", "completion"),
    ("step", "5", "step"),  # not the step of its file's name
])
def test_bad_rows_are_named(tmp_path, column, value, field):
    output = write_trl_output(tmp_path / "run")
    rows = expected_rows(1)
    if column == "advantage":  # a column of text where numbers belong
        for row in rows:
            row[column] = str(row[column])
    rows[2][column] = value
    table = pa.Table.from_pylist(rows) if "\ud800" not in str(value) else _with_raw_text(rows, column)
    pq.write_table(table, output / "completions" / "completions_00001.parquet")
    with pytest.raises(InputError) as caught:
        load(output)
    assert caught.value.field == field
    assert caught.value.record == (0 if column == "advantage" else 2)
    run = load(output, strict=False)
    assert run.trajectories.num_rows == (6 if column in ("advantage", "completion") else 11)


def _with_raw_text(rows, column):
    """A table whose ``column`` holds bytes that are not UTF-8 (a lone surrogate, CESU-encoded)."""
    values = [row[column].encode("utf-8", "surrogatepass") for row in rows]
    table = pa.Table.from_pylist([{**row, column: "x"} for row in rows])
    index = table.schema.get_field_index(column)
    return table.set_column(index, column, pa.array(values, pa.binary()).view(pa.string()))


def test_a_reward_column_written_as_text_is_said_so(tmp_path):
    """A reward function's column of text is no channel: the reward is summed without it, and
    the run's problems say which column of which file was not read."""
    output = write_trl_output(tmp_path / "run")
    path = output / "completions" / "completions_00001.parquet"
    table = pq.read_table(path)
    channel = next(name for name in table.column_names if name not in ("step", "prompt", "completion", "advantage"))
    index = table.schema.get_field_index(channel)
    pq.write_table(table.set_column(index, channel, table.column(channel).cast(pa.string())), path)
    run = load(output)
    notes = [(p.kind, p.file, p.field) for p in run.problems if "not read as a reward channel" in p.message]
    assert notes == [("note", str(path), channel)]


def test_a_log_history_of_the_wrong_kind_is_named_as_what_it_is(tmp_path):
    state = write_trl_output(tmp_path / "run") / "trainer_state.json"
    for history, found in (({"step": 1}, "an object"), (None, "null")):
        state.write_text(json.dumps({**json.loads(state.read_text()), "log_history": history}))
        with pytest.raises(InputError, match=f"field 'log_history': expected a list of logged dicts, found {found}$"):
            load_metrics(state, run_id="r")


def test_trainer_state_alone_is_step_metrics(tmp_path):
    state = write_trl_output(tmp_path / "run") / "trainer_state.json"
    assert detect_metrics(state)
    loaded = load_metrics(state, run_id="r")
    assert loaded.table.num_rows == 23


def test_verl_file_logger_lines_are_step_metrics(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s, "data": {"critic/vf_explained_var": 0.1 * s, "actor/lr": 1e-6}})
                            + "\n" for s in (1, 2)))
    assert detect_metrics(path)
    rows = load_metrics(path, run_id="r").table.to_pylist()
    assert [(r["step"], r["name"], r["value"]) for r in rows] == [
        (1, "actor/lr", 1e-6), (1, "critic/vf_explained_var", 0.1), (2, "actor/lr", 1e-6),
        (2, "critic/vf_explained_var", 0.2)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"step": 1, "data": {"actor/lr": 0.1}}) + "\n"
                   + json.dumps({"step": "2", "data": {"actor/lr": 0.1}}) + "\n")
    with pytest.raises(InputError, match="record 2: field 'step'"):
        load_metrics(bad, run_id="r")


def test_prompts_differ():
    assert len(set(PROMPTS)) == 2


def test_rewards_are_summed_in_float32_as_trl_sums_them_so_its_ties_break_as_trls_did(tmp_path):
    """Channels 0.1 + 0.1 + 0.7 and 0.1 + 0.7 + 0.1 tie in decimals but not in float32: TRL's
    rewards differ by one float32 step and its eps 1e-4 turns that into advantages near 6e-4. The
    ingested reward is TRL's sum, so the run's own estimator (GRPO, TRL's scale_rewards=group)
    gives them, as GRPO on the summed channels does."""
    import torch

    from trajlens.estimators import recompute

    channels = [(0.1, 0.1, 0.7), (0.1, 0.7, 0.1)] * 2
    completions = tmp_path / "run" / "completions"
    completions.mkdir(parents=True)
    rows = [{"step": "1", "prompt": PROMPTS[0], "completion": "done", "a": a, "b": b, "c": c, "advantage": 0.0}
            for a, b, c in channels]
    pq.write_table(pa.Table.from_pylist(rows), completions / "completions_00001.parquet")
    trajectories = load(tmp_path / "run").trajectories
    rewards = torch.tensor(channels, dtype=torch.float32).nansum(dim=1)  # TRL: rewards_per_func.nansum(dim=1)
    assert trajectories.column("reward").to_pylist() == rewards.tolist()
    expected = (rewards - rewards.mean()) / (rewards.std() + EPS)  # TRL's scale_rewards="group", in float32
    frame = pl.from_arrow(trajectories)
    own = recompute(frame, None, "grpo", convention="trl")["advantage"].to_list()
    assert own == pytest.approx(expected.tolist(), abs=1e-9) and max(own) > 5e-4
    summed = recompute(frame, None, "sum_then_normalize")["advantage"].to_list()
    assert own == summed
