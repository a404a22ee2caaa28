"""One measured split on every surface: the saved queries (the ``measured_splits`` view), the
Python API (``stage_report``), ``compare`` and ``sample`` measure a run's training split, or the
split a run without training data has, by one rule (:mod:`trajlens.run.splits`)."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest
from built_runs import VAL_COMMAND, built_run, write_store
from cli_run import run_cli as cli
from hypothesis import given, settings
from hypothesis import strategies as st

import trajlens
from trajlens.cli._app import main
from trajlens.compare import compare
from trajlens.run.splits import chosen_split, measured_split, ordered_splits
from trajlens.schema import in_measured_split
from trajlens.schema import VIEWS


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("splits")
    path = write_store(root, [built_run("valonly", split="val"), built_run("mixed", val_per_step=2),
                              built_run("trained")])
    assert main(["classify", str(path)]) == 0
    return trajlens.open(path)


SPLITS = st.sampled_from(["train", "val", "test", "eval", None])


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.lists(SPLITS, min_size=1, max_size=6), min_size=1))
def test_the_sql_view_and_the_polars_filter_choose_the_split_measured_split_chooses(runs):
    frame = pl.DataFrame([(run, split) for run, splits in runs.items() for split in splits],
                         schema={"run_id": pl.String, "split": pl.String}, orient="row")
    expected = {run: chosen_split(ordered_splits(splits)) for run, splits in runs.items()}
    kept = frame.filter(in_measured_split())
    assert {(run, split) for run, split in kept.iter_rows()} == {
        (run, split) for run, split in frame.iter_rows() if split is not None and split == expected[run]}
    connection = duckdb.connect()
    connection.register("trajectories", frame.to_arrow())
    viewed = dict(connection.sql(VIEWS["measured_splits"]).fetchall())
    assert {run: split for run, split in viewed.items() if split is not None} == {
        run: split for run, split in expected.items() if split in runs[run]}


def test_the_saved_queries_measure_a_validation_only_run_on_its_split(store):
    overview = {row["run_id"]: row for row in store.sql(_saved("runs_overview")).iter_rows(named=True)}
    assert (overview["valonly"]["split"], overview["valonly"]["trajectories"]) == ("val", 12)
    assert (overview["mixed"]["split"], overview["mixed"]["trajectories"]) == ("train", 12)
    for query in ("think_share_by_step", "reward_by_step", "verification_mix_by_step", "tool_names_by_step"):
        steps = store.sql(_saved(query), {"run_id": "valonly"})["step"].unique().sort().to_list()
        assert steps == [1, 2, 3], query


def test_the_saved_queries_leave_out_the_validation_trajectories_of_a_trained_run(store):
    train_calls = (store.table("call_classes").join(store.trajectories, on=["run_id", "trajectory_id"])
                   .filter((pl.col("run_id") == "mixed") & (pl.col("split") == "train")
                           & pl.col("primary_class").is_not_null()).collect())
    tools = store.sql(_saved("tool_names_by_step"), {"run_id": "mixed"})
    assert tools["calls"].sum() == train_calls.height
    think = store.sql(_saved("think_share_by_step"), {"run_id": "mixed"})
    assert think["think_calls"].sum() == (train_calls["primary_class"] == "think").sum()
    verification = store.sql(_saved("verification_mix_by_step"), {"run_id": "mixed"})
    measures = (store.table("trajectory_measures").join(store.trajectories, on=["run_id", "trajectory_id"])
                .filter((pl.col("run_id") == "mixed") & (pl.col("split") == "train")).collect())
    assert verification["verification_calls"].sum() == measures["n_verification"].sum()
    # the validation members all run `make check`, the whole suite: none of them is counted
    assert VAL_COMMAND == "make check"
    assert verification.sort("step")["suite_run_rate"].to_list() == (
        measures.group_by("step").agg(pl.col("ran_suite").cast(pl.Float64).mean().round(4)).sort("step")["ran_suite"].to_list())


def test_stage_report_and_compare_measure_a_validation_only_run(store):
    report = trajlens.stage_report(store, run_id="valonly", n=2, stages="early_late")
    assert report.stages["n_population"].sum() == 12
    mixed = trajlens.stage_report(store, run_id="mixed", n=2, stages="early_late")
    assert mixed.stages["n_population"].sum() == 12  # its 6 validation trajectories left out
    assert measured_split(store, "valonly") == "val"
    table = compare(store, "trained", "valonly", advantages=False)
    assert table["b"][0] == "valonly (val split)" and table.height > 10
    late = compare(store, "trained:late", "valonly:late", stages="early_late", advantages=False)
    assert late["b"][0] == "valonly (val split, late)"


def test_compare_on_the_command_line_names_the_split(store):
    done = cli("compare", store.path, "trained", "valonly", "--no-advantages")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "valonly (val split) against trained"


def _saved(name: str) -> str:
    from trajlens.cli.sql import read_query

    return read_query(name)
