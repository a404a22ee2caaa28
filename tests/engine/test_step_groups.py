"""Both engines run the tiny steps of a packed file together, with the rows of one step at a time."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

import trajlens
from trajlens.engine import LocalEngine, StoreLocation
from trajlens.engine.classify import ClassifyStep, classify_run_on

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from built_runs import degenerate_store  # noqa: E402


def test_packed_steps_are_grouped_by_their_file(tmp_path):
    location = StoreLocation.of(degenerate_store(tmp_path / "store", 60, chunk=20))
    steps = location.steps("degenerate")
    groups = location.step_groups("degenerate", steps)
    assert [step for group in groups for step in group] == steps == list(range(1, 61))
    packed = location.partitions("degenerate", "trajectories").packed
    assert packed and len(groups) == len(packed) < len(steps)
    for group, (first, last, _) in zip(groups, packed):  # a group is the steps of one packed file
        assert (group[0], group[-1]) == (first, last)


def test_classifying_in_groups_gives_the_rows_of_classifying_step_by_step(tmp_path):
    path = degenerate_store(tmp_path / "store", 60, chunk=20)
    location = StoreLocation.of(path)
    function = ClassifyStep(None)
    steps = location.steps("degenerate")
    one_by_one = {name: pl.concat([pl.DataFrame(function(location, "degenerate", step)[name]) for step in steps])
                  for name in ("call_classes", "trajectory_measures")}
    found = classify_run_on(LocalEngine(), location, "degenerate", store=trajlens.open(path))
    store = trajlens.open(path)
    assert_frame_equal(store.table("call_classes").collect(), one_by_one["call_classes"], check_exact=True)
    assert_frame_equal(found.measures, one_by_one["trajectory_measures"], check_exact=True)


def test_a_ray_task_runs_a_packed_group_as_the_local_engine_does(tmp_path):
    """The Ray engine's map function (without a cluster) is handed the local engine's groups and
    gives its results: a function with a ``steps`` method, one result per group under its last step."""
    import pyarrow as pa

    from trajlens.engine.ray import RayStep, step_results

    location = StoreLocation.of(degenerate_store(tmp_path / "store", 60, chunk=20))
    function = ClassifyStep(None)
    steps = location.steps("degenerate")
    groups = location.step_groups("degenerate", steps)
    assert len(groups) < len(steps)
    local = list(LocalEngine().map_steps(function, location, "degenerate", steps))
    on_ray = list(step_results(RayStep(function, location, "degenerate")(pa.table({"steps": [group]})) for group in groups))
    assert [result.step for result in on_ray] == [result.step for result in local] == [group[-1] for group in groups]
    for ray_result, local_result in zip(on_ray, local):
        assert ray_result.tables.keys() == local_result.tables.keys()
        for name, table in local_result.tables.items():
            assert ray_result.tables[name].equals(table), name


def _token_heavy_store(store: Path, *, empty_from: int | None = None) -> Path:
    """A run of 18 steps whose token arrays fill a packed file every few steps while its
    trajectories all fit in one; from step ``empty_from`` on, the response masks are empty."""
    from built_runs import built_run

    from trajlens.store.writer import StoreWriter

    def part(first: int, steps: int, mask: str):
        return built_run("heavy", steps=steps, per_step=4, calls=6, tokens_per_call=1500, first_step=first, mask=mask)

    chunks = [(1, 18, "normal")] if empty_from is None else [(1, empty_from - 1, "normal"), (empty_from, 19 - empty_from, "empty")]
    with StoreWriter(store) as writer:
        first = part(*chunks[0])
        with writer.stage("heavy", first.runs, "generated:heavy") as stage:
            stage.write_run(first)
            for chunk in chunks[1:]:
                stage.write_run(part(*chunk))
        writer.publish()
    return store


def test_recomputing_in_groups_gives_the_rows_of_recomputing_step_by_step(tmp_path):
    """A group of packed steps is recomputed at once, its token arrays read a file of them at a
    time, with the rows each step gives alone, bit for bit (the same kernels on the same batches)."""
    from trajlens.engine.advantages import RecomputeStep, recompute_diagnostics_on

    location = StoreLocation.of(_token_heavy_store(tmp_path / "store"))
    steps = location.steps("heavy")
    groups, token_groups = location.step_groups("heavy", steps), location.step_groups("heavy", steps, "tokens")
    assert len(groups) == 1 < len(token_groups) < len(steps)  # the token files hold a few steps each
    for estimator, options in (("gae", {}), ("gae", {"whiten": True}), ("grpo", {}), ("rloo", {})):
        function = RecomputeStep(estimator, estimator, options)
        one_by_one = pl.concat([pl.DataFrame(function(location, "heavy", step)["advantage_batches"]) for step in steps])
        grouped = pl.DataFrame(function.steps(location, "heavy", steps)["advantage_batches"])
        assert grouped["step"].to_list() == steps
        assert_frame_equal(grouped, one_by_one, check_exact=True)
        found = recompute_diagnostics_on(LocalEngine(), location, "heavy", estimator, estimator, options)
        assert_frame_equal(found, one_by_one, check_exact=True)


def test_a_step_of_a_group_that_lacks_an_input_stops_it_as_it_stops_a_step_alone(tmp_path):
    import pytest

    from trajlens.engine.advantages import RecomputeStep, recompute_diagnostics_on
    from trajlens.errors import ConfigError

    location = StoreLocation.of(_token_heavy_store(tmp_path / "store", empty_from=13))
    function = RecomputeStep("gae", "gae")
    assert function(location, "heavy", 12)  # the last step with token arrays
    with pytest.raises(ConfigError) as alone:
        function(location, "heavy", 13)
    with pytest.raises(ConfigError) as grouped:
        function.steps(location, "heavy", location.steps("heavy"))
    with pytest.raises(ConfigError) as engine:
        recompute_diagnostics_on(LocalEngine(), location, "heavy", "gae", "gae", {})
    assert str(grouped.value) == str(engine.value) == str(alone.value)
    assert "token arrays" in str(alone.value)
