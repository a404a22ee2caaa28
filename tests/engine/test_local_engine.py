"""The per-step functions give the rows of the whole-run functions (local engine, no cluster).

Floats agree to a few ulp (tests/_tolerance.py): a step alone and the whole run are reduced in
different orders.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import polars as pl
import pyarrow as pa
import pytest

import trajlens
from trajlens.engine import LocalEngine, StoreLocation, open_engine
from trajlens.errors import ConfigError, MissingDependencyError

from _tolerance import assert_frame_close_ulp
from engine_helpers import REPO, RUN_ID


def _tables(store_path, names):
    store = trajlens.open(store_path)
    return {name: store.table(name).collect() for name in names}


def test_classify_steps_equal_the_whole_run(store_copy):
    from trajlens.classify import classify_calls, trajectory_measures, unknown_tools
    from trajlens.classify import RULES_VERSION
    from trajlens.classify.per_trajectory import RULES_COLUMN
    from trajlens.classify.calls import CALL_CLASS_COLUMNS
    from trajlens.classify.tool_map import ToolMap, only
    from trajlens.engine.classify import classify_run_on

    store = trajlens.open(store_copy)
    # an empty map alone leaves every tool unmapped, so unknown_tools has rows to compare
    for tool_map in (None, only(ToolMap((), ()))):
        calls = classify_calls(store.tool_calls.filter(pl.col("run_id") == RUN_ID), tool_map, explain=True)
        trajectories = store.trajectories.filter(pl.col("run_id") == RUN_ID).collect()
        # the saved measures say which rules classified them
        measured = trajectory_measures(calls, trajectories).with_columns(pl.lit(RULES_VERSION).alias(RULES_COLUMN))
        expected = {"call_classes": calls.select(CALL_CLASS_COLUMNS),
                    "trajectory_measures": measured,
                    "unknown_tools": unknown_tools(calls, tool_map)}
        stepped = classify_run_on(LocalEngine(), StoreLocation.of(store_copy), RUN_ID, tool_map, store=store)
        found = _tables(store_copy, expected)
        for name, frame in expected.items():
            assert found[name].height == frame.height > 0 or name == "unknown_tools"
            assert_frame_close_ulp(found[name], frame)
        assert_frame_close_ulp(stepped.measures, expected["trajectory_measures"].drop(RULES_COLUMN))
    assert expected["unknown_tools"].height > 0


@pytest.mark.parametrize(("estimator", "options"), [("gae", {}), ("gae", {"whiten": False}), ("grpo", {}),
                                                    ("reinforce", {})])
def test_recompute_steps_equal_the_whole_run(engine_store, estimator, options):
    from trajlens.engine.advantages import recompute_diagnostics_on
    from trajlens.run.stepwise import labelled_diagnostics

    expected = labelled_diagnostics(trajlens.open(engine_store), RUN_ID, estimator, "label", **options)
    found = recompute_diagnostics_on(LocalEngine(), StoreLocation.of(engine_store), RUN_ID, estimator, "label", options)
    assert found.height == 6
    assert_frame_close_ulp(found, expected)


def test_attribution_steps_equal_the_whole_run(store_copy, tmp_path):
    from trajlens.attribution import DriftConfig, attribute, attribution_markdown
    from trajlens.engine.attribution import attribute_on

    other = tmp_path / "other"
    shutil.copytree(store_copy, other)
    whole = attribute(trajlens.open(store_copy), RUN_ID, drift=DriftConfig(k=2))
    stepped = attribute_on(LocalEngine(), trajlens.open(other), RUN_ID, drift=DriftConfig(k=2))
    assert attribution_markdown(stepped) == attribution_markdown(whole)
    names = ("call_credit", "class_credit")
    expected, found = _tables(store_copy, names), _tables(other, names)
    for name in names:
        assert found[name].height == expected[name].height > 0
        assert_frame_close_ulp(found[name], expected[name])


def test_a_file_uri_reads_and_writes_through_pyarrow_fs(engine_store, tmp_path):
    """A store named by URI, and one this machine cannot lock: tables go through pyarrow.fs."""
    from trajlens.engine.advantages import recompute_diagnostics_on, save_advantage_batches_on

    copy = tmp_path / "uri store"
    shutil.copytree(engine_store, copy)
    location = StoreLocation.of(copy.as_uri())
    assert location.uri.startswith("file://") and location.local_path == copy
    assert location.run_ids() == [RUN_ID]
    assert location.steps(RUN_ID) == [1, 2, 3, 4, 5, 6]
    step = location.read_step(RUN_ID, "tokens", 3, ["trajectory_id", "values", "absent"])
    assert step.column_names == ["trajectory_id", "values"] and step.num_rows == 4
    assert location.read_step(RUN_ID, "tokens", 99) is None
    first = recompute_diagnostics_on(LocalEngine(), location, RUN_ID, "gae", "gae", {})
    save_advantage_batches_on(None, location, RUN_ID, first)
    second = recompute_diagnostics_on(LocalEngine(), location, RUN_ID, "grpo", "grpo", {})
    save_advantage_batches_on(None, location, RUN_ID, second)
    saved = pl.DataFrame(location.read_derived("advantage_batches", RUN_ID))
    assert sorted(saved["estimator"].unique()) == ["gae", "grpo"] and saved.height == 12
    # the store opens as usual afterwards and sees the table the URI route wrote
    assert trajlens.open(copy).sql("SELECT count(*) AS n FROM advantage_batches")["n"][0] == 12
    assert not list((copy / "derived" / "advantage_batches").glob(".*"))  # no partial file left


def test_write_derived_with_no_tables_writes_the_schema(tmp_path):
    (tmp_path / "runs").mkdir()
    location = StoreLocation.of(tmp_path)
    schema = pa.schema([("step", pa.int64())])
    location.write_derived("empty_table", "r", iter([]), schema)
    assert location.read_derived("empty_table", "r").schema == schema


@pytest.mark.parametrize("options", [{}, {"config": {"ema_alpha": 0.5, "temperature": 0.3,
                                                    "batch_normalisation": "sequence"}}])
def test_dynamic_gdpo_runs_step_by_step_with_the_weights_the_whole_run_carries(multireward_store, monkeypatch,
                                                                              options):
    """gdpo_dynamic's moving averages carry from step to step: two passes give the whole run's rows."""
    from trajlens.engine.advantages import carried_averages, recompute_diagnostics_on
    from trajlens.run.stepwise import labelled_diagnostics

    store = trajlens.open(multireward_store)
    run_id = store.run_ids()[0]
    expected = labelled_diagnostics(store, run_id, "gdpo_dynamic", "d", **options)
    found = recompute_diagnostics_on(LocalEngine(), StoreLocation.of(store.path), run_id, "gdpo_dynamic", "d",
                                     options)
    assert found.height == expected.height > 10
    assert_frame_close_ulp(found, expected)
    # the first step starts from nothing; the next from the first's std (its average after one step)
    first_steps = carried_averages({1: [0.5, 1.0], 2: [0.2, 1.0]}, {})
    assert list(first_steps) == [2] and first_steps[2] == pytest.approx([0.5, 1.0])
    # each step alone, without the averages carried in, gives other rows: the comparison can tell
    monkeypatch.setattr("trajlens.engine.advantages.carried_averages", lambda signals, opts: {})
    alone = recompute_diagnostics_on(LocalEngine(), StoreLocation.of(store.path), run_id, "gdpo_dynamic", "d", options)
    assert alone.height == expected.height
    with pytest.raises(AssertionError):
        assert_frame_close_ulp(alone, expected)


def test_unknown_engine_and_stray_address_are_config_errors():
    with pytest.raises(ConfigError, match="expected one of local, ray"):
        open_engine("spark")
    with pytest.raises(ConfigError, match="--ray-address needs --engine ray"):
        open_engine("local", "auto")


def test_ray_batches_carry_tables_and_errors_back_in_step_order(engine_store):
    """The map_batches function and its decoding, without a cluster (the cluster test runs them on Ray):
    a batch holds groups of steps, each reporting back in order; a group of several steps, which
    the step function takes at once (``RecomputeStep.steps``), under its last step, with the rows
    each of its steps gives alone."""
    from trajlens.engine.advantages import RecomputeStep
    from trajlens.engine.ray import RayStep, step_results

    location = StoreLocation.of(engine_store)
    function = RecomputeStep("grpo", "grpo")
    batches = [RayStep(function, location, RUN_ID)(pa.table({"steps": [group]})) for group in ([2, 3], [5])]
    results = list(step_results(batches))
    assert [result.step for result in results] == [3, 5]
    alone = [function(location, RUN_ID, step)["advantage_batches"] for step in (2, 3, 5)]
    assert [result.tables["advantage_batches"] for result in results] == [pa.concat_tables(alone[:2]), alone[2]]
    assert results[0].tables["advantage_batches"].column("step").to_pylist() == [2, 3]
    failing = RayStep(RecomputeStep("gdpo_trl", "g"), location, RUN_ID)(pa.table({"steps": [[1, 2]]}))
    assert failing.column("step").to_pylist() == [2]  # the first step's error ends the group
    with pytest.raises(ConfigError, match="gdpo_trl needs two or more reward channels"):
        list(step_results([failing]))


def test_missing_ray_names_the_extra(monkeypatch):
    from trajlens.engine.ray import RayEngine

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(MissingDependencyError) as raised:
        RayEngine()
    assert str(raised.value) == "--engine ray needs 'trajlens[ray]': install it with `pip install 'trajlens[ray]'`"


def test_importing_trajlens_and_its_engines_does_not_import_ray():
    code = "import sys, trajlens, trajlens.engine, trajlens.engine.ray; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
