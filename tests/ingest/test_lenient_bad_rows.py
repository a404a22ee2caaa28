"""A Parquet run with a bad row: strict ingest stops at the first with one line naming file,
record and field; lenient ingest leaves out exactly the bad rows (a bad trajectory with its calls
and tokens), keeps the rest of the file, and names each row it left out."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import run_cli

import trajlens
from trajlens.synth import generate

STEP = "step=000001"


@pytest.fixture
def run(tmp_path) -> Path:
    """A one-step sao-r7 run of five trajectories that logs its advantages."""
    return generate("sao-r7", tmp_path / "run", steps=1, batch=5, tokens_per_trajectory=200,
                    tool_calls_per_trajectory=6, log_advantages=True).directory


def _change_rows(path: Path, column: str, change: dict[int, object]) -> None:
    """Rewrite ``path`` with ``column``'s value at each row of ``change`` made by its function."""
    table = pq.read_table(path)
    values = table.column(column).to_pylist()
    for row, make in change.items():
        values[row] = make(values[row])
    index = table.schema.get_field_index(column)
    pq.write_table(table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type)),
                   path)


def _counts(store: Path) -> tuple[int, ...]:
    found = trajlens.open(store).sql("SELECT (SELECT count(*) FROM trajectories), (SELECT count(*) FROM tool_calls), "
                                     "(SELECT count(*) FROM tokens)")
    return tuple(found.row(0))


def _skipped(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("skipped: ")]


def test_lenient_leaves_out_only_the_token_row_whose_array_is_short(run, tmp_path):
    tokens = run / "tokens" / STEP / "part-0.parquet"
    _change_rows(tokens, "logged_advantages", {2: lambda values: values[:-5]})
    line = f"{tokens}: record s0001-t0002: field 'logged_advantages': expected "

    strict = run_cli("ingest", run, "--store", tmp_path / "strict")
    assert strict.returncode == 1 and strict.stderr.startswith(f"error: {line}") and strict.stderr.count("\n") == 1
    assert "(the response_mask length), found " in strict.stderr

    lenient = run_cli("ingest", run, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    assert "; skipped 1 (each named above)" in lenient.stdout
    assert [s.startswith(f"skipped: {line}") for s in _skipped(lenient.stderr)] == [True]
    calls = pq.read_table(run / "tool_calls" / STEP / "part-0.parquet").num_rows
    assert _counts(tmp_path / "store") == (5, calls, 4)
    kept = trajlens.open(tmp_path / "store").sql("SELECT trajectory_id FROM tokens ORDER BY trajectory_id")
    assert kept["trajectory_id"].to_list() == ["s0001-t0000", "s0001-t0001", "s0001-t0003", "s0001-t0004"]


def test_lenient_names_every_bad_token_row_once(run, tmp_path):
    tokens = run / "tokens" / STEP / "part-0.parquet"
    _change_rows(tokens, "values", {1: lambda values: values[:-1], 3: lambda values: [math.nan, *values[1:]]})
    _change_rows(tokens, "logged_advantages", {1: lambda values: [math.inf, *values[1:]]})  # a second fault of row 1

    strict = run_cli("ingest", run, "--store", tmp_path / "strict")
    assert strict.returncode == 1
    assert strict.stderr.startswith(f"error: {tokens}: record s0001-t0001: field 'values': expected ")

    lenient = run_cli("ingest", run, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    assert "; skipped 2 (each named above)" in lenient.stdout
    skipped = _skipped(lenient.stderr)
    assert skipped[0].startswith(f"skipped: {tokens}: record s0001-t0001: field 'values': expected ")
    assert skipped[1] == f"skipped: {tokens}: record s0001-t0003: field 'values': expected finite numbers, found nan"
    assert _counts(tmp_path / "store")[2] == 3


def test_lenient_leaves_out_a_trajectory_whose_reward_is_not_finite_with_its_calls_and_tokens(run, tmp_path):
    trajectories = run / "trajectories" / STEP / "part-0.parquet"
    _change_rows(trajectories, "reward", {4: lambda _: math.inf})

    strict = run_cli("ingest", run, "--store", tmp_path / "strict")
    assert strict.returncode == 1
    assert strict.stderr == (f"error: {trajectories}: record s0001-t0004: field 'reward': "
                             "expected a finite number, found inf\n")

    lenient = run_cli("ingest", run, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    skipped = _skipped(lenient.stderr)
    assert skipped[0] == f"skipped: {trajectories}: record s0001-t0004: field 'reward': expected a finite number, found inf"
    assert skipped[1].startswith(f"skipped: {run / 'tool_calls' / STEP / 'part-0.parquet'}: ")
    assert skipped[1].endswith("rows left out: their trajectories were skipped as bad records")
    assert skipped[2] == (f"skipped: {run / 'tokens' / STEP / 'part-0.parquet'}: 1 rows left out: "
                          "their trajectories were skipped as bad records")
    calls = pq.read_table(run / "tool_calls" / STEP / "part-0.parquet").column("trajectory_id").to_pylist()
    assert _counts(tmp_path / "store") == (4, sum(c != "s0001-t0004" for c in calls), 4)


def test_lenient_leaves_out_rows_whose_step_cannot_be_stored_and_keeps_the_rest_of_the_file(run, tmp_path):
    """A negative step, or a step other than its folder's, is a fault of one row: lenient ingest
    leaves out that row (a trajectory with its calls and tokens) and names it; strict refuses."""
    trajectories = run / "trajectories" / STEP / "part-0.parquet"
    calls_file = run / "tool_calls" / STEP / "part-0.parquet"
    _change_rows(trajectories, "step", {3: lambda _: 7})
    _change_rows(calls_file, "step", {0: lambda _: -2})

    strict = run_cli("ingest", run, "--store", tmp_path / "strict")
    assert strict.returncode == 1
    assert strict.stderr == (f"error: {trajectories}: record s0001-t0003: field 'step': "
                             f"expected 1 (the step of its folder {STEP}), found 7\n")

    lenient = run_cli("ingest", run, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    skipped = _skipped(lenient.stderr)
    assert skipped[0] == (f"skipped: {trajectories}: record s0001-t0003: field 'step': "
                          f"expected 1 (the step of its folder {STEP}), found 7")
    assert skipped[1] == f"skipped: {calls_file}: record 0: field 'step': expected a step of 0 or more, found -2"
    assert skipped[2].startswith(f"skipped: {calls_file}: ")
    assert skipped[2].endswith("rows left out: their trajectories were skipped as bad records")
    calls = pq.read_table(calls_file).column("trajectory_id").to_pylist()
    kept_calls = sum(c != "s0001-t0003" for c in calls[1:])
    assert _counts(tmp_path / "store") == (4, kept_calls, 4)


def test_a_channel_named_twice_in_one_trajectory_is_a_bad_row(tmp_path):
    """Which of the two values would be the channel's? The channel table would average both and
    the estimators take the first: ingest refuses the row (strict) or leaves it out (lenient)."""
    run = generate("multireward", tmp_path / "mr", steps=1, batch=8, tokens_per_trajectory=60,
                   tool_calls_per_trajectory=3).directory
    trajectories = run / "trajectories" / STEP / "part-0.parquet"
    _change_rows(trajectories, "reward_channels", {1: lambda channels: [*channels, dict(channels[0], value=0.0)]})
    name = pq.read_table(trajectories).column("reward_channels")[1][0]["name"].as_py()
    line = (f"{trajectories}: record s0001-t0001: field 'reward_channels.name': expected each channel once, "
            f"found {name!r} more than once")

    strict = run_cli("ingest", run, "--store", tmp_path / "strict")
    assert strict.returncode == 1 and strict.stderr == f"error: {line}\n"
    lenient = run_cli("ingest", run, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    assert _skipped(lenient.stderr)[0] == f"skipped: {line}"
    assert _counts(tmp_path / "store")[0] == 7
