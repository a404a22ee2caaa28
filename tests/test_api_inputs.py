"""The Python API on the wrong input: a clear error naming what is wrong (the frame and its
column, the argument and its type, the run), never an error from inside a query plan, a silently
wrong result, or tables written for runs that do not exist."""

from __future__ import annotations

import math

import polars as pl
import pytest

import trajlens
from trajlens.errors import ConfigError, FrameError
from trajlens.estimators import EstimatorInputError, recompute
from trajlens.synth import generate


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A small multireward run (two reward channels) and a small sao-r6 run with tool calls."""
    root = tmp_path_factory.mktemp("api")
    runs = [generate("multireward", root / "mr", steps=2, batch=8, tokens_per_trajectory=60, tool_calls_per_trajectory=4),
            generate("sao-r6", root / "r6", steps=4, batch=8, tokens_per_trajectory=60, tool_calls_per_trajectory=6)]
    trajlens.ingest([run.directory for run in runs], root / "store")
    return trajlens.open(root / "store")


def _frames(store, run_id):
    trajectories = store.trajectories.filter(pl.col("run_id") == run_id).collect()
    calls = store.tool_calls.filter(pl.col("run_id") == run_id).collect()
    return trajectories, calls


@pytest.mark.parametrize("dropped", ["num_turns", "model_tokens", "step"])
def test_trajectory_measures_name_a_missing_trajectory_column(store, dropped):
    trajectories, calls = _frames(store, "sao-r6")
    with pytest.raises(FrameError, match=f"trajectory_measures: the trajectories frame has no column '{dropped}'"):
        trajlens.trajectory_measures(trajlens.classify_calls(calls), trajectories.drop(dropped))


@pytest.mark.parametrize("dropped", ["is_edit", "paths", "call_index"])
def test_trajectory_measures_name_a_missing_call_column(store, dropped):
    trajectories, calls = _frames(store, "sao-r6")
    with pytest.raises(FrameError, match=f"the classified_calls frame has no column '{dropped}'"):
        trajlens.trajectory_measures(trajlens.classify_calls(calls).drop(dropped), trajectories)


def test_stage_report_and_assign_stages_name_what_is_wrong(store):
    trajectories, calls = _frames(store, "sao-r6")
    with pytest.raises(FrameError, match="stage_report: the trajectories frame has no column 'split'"):
        trajlens.stage_report((trajectories.drop("split"), calls), run_id="sao-r6")
    with pytest.raises(TypeError, match="tool_calls: expected a Polars DataFrame"):
        trajlens.stage_report((trajectories, None), run_id="sao-r6")
    with pytest.raises(ConfigError, match="run_id: expected a run id"):
        trajlens.stage_report(store, run_id=6)
    with pytest.raises(FrameError, match="assign_stages: the trajectories frame has no column 'step'"):
        trajlens.assign_stages(trajectories.drop("step"), "quartiles")


def test_classify_calls_refuses_a_text_format_error_and_a_tool_map_of_no_kind(store):
    _, calls = _frames(store, "sao-r6")
    with pytest.raises(TypeError, match="'format_error' must hold booleans, found String"):
        trajlens.classify_calls(calls.with_columns(pl.lit("yes").alias("format_error")))
    with pytest.raises(TypeError, match="tool_map: expected a tool-map file, a ToolMap or None, got int"):
        trajlens.classify_calls(calls, tool_map=5)
    with pytest.raises(TypeError, match="sql: expected the query as text, got int"):
        store.sql(5)


def test_recompute_takes_lazy_and_arrow_frames_as_it_takes_a_dataframe(store):
    trajectories, _ = _frames(store, "multireward")
    expected = recompute(trajectories, None, "grpo")
    for given in (trajectories.lazy(), trajectories.to_arrow()):
        assert recompute(given, None, "grpo").equals(expected)
    with pytest.raises(TypeError, match="recompute: trajectories: expected a Polars DataFrame"):
        recompute(None, None, "grpo")


def _with_format_channel(trajectories: pl.DataFrame, value: float) -> pl.DataFrame:
    channels = trajectories["reward_channels"].to_list()
    channels[0] = [dict(c, value=value) if c["name"] == "format" else c for c in channels[0]]
    return trajectories.with_columns(pl.Series("reward_channels", channels, dtype=trajectories.schema["reward_channels"]))


@pytest.mark.parametrize("value", [math.inf, -math.inf, 1e39, math.nan])
@pytest.mark.parametrize("estimator", ["sum_then_normalize", "gdpo_trl"])
def test_a_channel_value_that_is_no_finite_float32_is_refused(store, estimator, value):
    trajectories, _ = _frames(store, "multireward")
    first = trajectories["trajectory_id"][0]
    with pytest.raises(EstimatorInputError, match=f"trajectory '{first}': reward channel 'format' must be a finite"):
        recompute(_with_format_channel(trajectories, value), None, estimator)


def test_weights_naming_an_unknown_channel_are_refused(store):
    trajectories, _ = _frames(store, "multireward")
    with pytest.raises(EstimatorInputError, match="weights name channel\\(s\\) 'Format', not among the channels used"):
        recompute(trajectories, None, "gdpo_trl", weights={"Format": 2.0})
    weighted = recompute(trajectories, None, "gdpo_trl", weights={"format": 2.0})
    assert not weighted["advantage"].equals(recompute(trajectories, None, "gdpo_trl")["advantage"])


def test_classify_and_report_refuse_unknown_runs_before_writing(store, tmp_path):
    with pytest.raises(ConfigError, match="run 'nope' is not in the store"):
        trajlens.classify_store(store, ["nope"])
    with pytest.raises(TypeError, match=r"run_ids: expected a list of run ids, got the text 'r6' \(pass \['r6'\]\)"):
        trajlens.classify_store(store, "r6")
    with pytest.raises(ConfigError, match="run 'nope' is not in the store"):
        trajlens.report_store(store, tmp_path / "out", run_ids=["nope"])
    assert not (tmp_path / "out").exists()
    assert not (store.path / "derived").exists() or not any((store.path / "derived").rglob("nope*"))


@pytest.mark.parametrize("value", [math.inf, -math.inf, 1e39])
@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_a_reward_that_is_no_finite_float32_is_named_with_its_trajectory(store, estimator, value):
    trajectories, _ = _frames(store, "multireward")
    third = trajectories["trajectory_id"][3]
    changed = trajectories.with_columns(
        pl.when(pl.int_range(pl.len()) == 3).then(value).otherwise(pl.col("reward")).alias("reward"))
    with pytest.raises(EstimatorInputError,
                       match=f"trajectory '{third}': reward must be a finite number within float32's range"):
        recompute(changed, None, estimator)


def test_a_trajectory_given_twice_is_refused(store):
    trajectories, _ = _frames(store, "multireward")
    doubled = pl.concat([trajectories, trajectories.head(1)])
    with pytest.raises(EstimatorInputError, match=f"trajectory '{trajectories['trajectory_id'][0]}' of run "
                                                  "'multireward' has more than one row in trajectories"):
        recompute(doubled, None, "grpo")


def test_one_text_where_a_list_is_expected_is_named(store, tmp_path):
    from trajlens.errors import InputError, QueryError

    with pytest.raises(InputError, match=r"^ingest: field 'sources': expected a list of paths, found the path "
                                         r"'sample_data/sao-r6' \(pass \['sample_data/sao-r6'\]\)$"):
        trajlens.ingest("sample_data/sao-r6", tmp_path / "store")
    assert not (tmp_path / "store").exists()
    with pytest.raises(ConfigError, match=r"^run_ids: expected a list of run ids, got the text 'sao-r6'"):
        store.require_runs("sao-r6")
    with pytest.raises(QueryError, match=r"^params: expected a mapping or a list of values, got the text 'sao-r6'"):
        store.sql("SELECT count(*) FROM trajectories WHERE run_id = ?", "sao-r6")
    assert store.sql("SELECT count(*) FROM trajectories WHERE run_id = ?", ["sao-r6"]).item() == 32


def test_a_store_given_as_its_path_is_opened(store):
    classified = trajlens.classify_store(str(store.path), ["sao-r6"])
    assert list(classified) == ["sao-r6"]
    assert classified["sao-r6"].equals(trajlens.open(store.path).table("trajectory_measures").collect()
                                       .filter(pl.col("run_id") == "sao-r6").select(classified["sao-r6"].columns))


def test_a_run_s_tables_are_named_by_the_store_s_table_names(store):
    from trajlens.rows import RunData
    from trajlens.schema import SCHEMAS, TABLES

    run = RunData(**{name: SCHEMAS[name].empty_table() for name in TABLES})
    assert run.table("tokens").schema == SCHEMAS["tokens"]
    for name in ("validate", "nope"):
        with pytest.raises(ConfigError, match=rf"^no table '{name}' \(tables: runs, trajectories, tool_calls"):
            run.table(name)


@pytest.mark.parametrize(("arguments", "message"), [
    ({"comparisons": [("sao-r6", "nope")]}, r"^run 'nope' is not in the store"),
    ({"comparisons": [("sao-r6:Q9", "sao-r6:Q1")]}, r"^side 'sao-r6:Q9': 'Q9' is neither a stage of run 'sao-r6'"),
    ({"n": 0}, r"^n: expected a positive number of trajectories per stage, found 0$"),
    ({"stages": "halves"}, r"^stages: expected one of quartiles, early_late, NAME:FIRST-LAST,... or a list"),
    ({"stages": [("a", 3, 1)]}, r"^stages: "),
])
def test_a_report_s_wrong_arguments_are_refused_before_it_writes(store, tmp_path, arguments, message):
    with pytest.raises(ConfigError, match=message):
        trajlens.report_store(store, tmp_path / "report", run_ids=["sao-r6"], **arguments)
    assert not (tmp_path / "report").exists()


def test_a_report_is_not_written_over_a_file_or_among_the_store_s_own(store, tmp_path):
    (tmp_path / "file").write_text("mine")
    with pytest.raises(ConfigError, match=rf"^out {tmp_path / 'file'}: is a file; expected a folder$"):
        trajlens.report_store(store, tmp_path / "file", run_ids=["sao-r6"])
    assert (tmp_path / "file").read_text() == "mine"
    before = sorted(path.name for path in (store.path / "runs").iterdir())
    with pytest.raises(ConfigError, match=rf"^out {store.path / 'runs'}: among the files of the store {store.path}"):
        trajlens.report_store(store, store.path / "runs", run_ids=["sao-r6"])
    assert sorted(path.name for path in (store.path / "runs").iterdir()) == before
