"""Stages, the stage-sampled report, and the interval and test formulas behind it."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajlens.classify import assign_stages, stage_report
from trajlens.classify import _stats
from trajlens.errors import ConfigError
from trajlens.intervals import stage_p_value, stage_z, wilson


def trajectories(steps: list[int], run_id: str = "r") -> pl.DataFrame:
    return pl.DataFrame({"run_id": run_id, "step": steps, "trajectory_id": [f"{run_id}-{i}" for i in range(len(steps))]})


# -- stages ------------------------------------------------------------------------------------


def test_quartiles_of_distinct_steps():
    staged = assign_stages(trajectories([0, 0, 1, 2, 3, 4, 5, 6, 7, 7]))
    assert staged["stage"].to_list() == ["Q1", "Q1", "Q1", "Q2", "Q2", "Q3", "Q3", "Q4", "Q4", "Q4"]
    assert staged["stage_index"].to_list() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]


def test_each_run_is_staged_on_its_own_steps():
    staged = assign_stages(pl.concat([trajectories([0, 1, 2, 3], "a"), trajectories([10, 20], "b")]))
    assert staged["stage"].to_list() == ["Q1", "Q2", "Q3", "Q4", "Q1", "Q3"]


def test_fewer_steps_than_stages():
    assert assign_stages(trajectories([5, 5]))["stage"].to_list() == ["Q1", "Q1"]
    assert assign_stages(trajectories([1, 2, 3]))["stage"].to_list() == ["Q1", "Q2", "Q3"]


def test_early_late():
    staged = assign_stages(trajectories([0, 1, 2, 3, 4]), "early_late")
    assert staged["stage"].to_list() == ["early", "early", "early", "late", "late"]


@pytest.mark.parametrize("stages", ["quartiles", "early_late", [("a", 0, 3), ("b", 4, 7)]])
def test_staging_again_replaces_the_stages_a_table_holds(stages):
    """Part of a staged table staged again is staged on its own steps, as if never staged."""
    table = trajectories([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    part = assign_stages(table).filter(pl.col("step") <= 7)
    assert assign_stages(part, stages).equals(assign_stages(part.drop("stage", "stage_index"), stages))
    assert sorted(assign_stages(part, stages).columns) == ["run_id", "stage", "stage_index", "step", "trajectory_id"]


def test_explicit_ranges_are_inclusive_and_leave_gaps_null():
    staged = assign_stages(trajectories([0, 10, 49, 50, 99, 120]), [("warm-up", 0, 49), ("main", 50, 100)])
    assert staged["stage"].to_list() == ["warm-up", "warm-up", "warm-up", "main", "main", None]
    assert staged["stage_index"].to_list() == [0, 0, 0, 1, 1, None]


def test_bad_stage_specs_report_every_problem():
    with pytest.raises(ConfigError) as error:
        assign_stages(trajectories([0]), [("a", 0, 10), ("b", 5, 20), ("a", 30, 40), ("c", 9, 1), ("d",)])
    problems = error.value.problems
    assert any("'a' is named twice" in p for p in problems)
    assert any("overlaps" in p for p in problems)
    assert any("'c' ends" in p for p in problems)
    assert any("('d',)" in p for p in problems)
    with pytest.raises(ConfigError, match="quartiles"):
        assign_stages(trajectories([0]), "thirds")


def test_stages_out_of_step_order_are_refused_where_a_change_would_read_backwards(tmp_path):
    """A change runs from the first stage listed to the last: listed late before early, a
    decrease would be judged an increase. The report and the checks refuse them alike."""
    from trajlens.checks.spec import load_checks

    backwards = [("late", 61, 135), ("early", 1, 60)]
    message = "stages: 'early' (steps 1-60) comes after 'late' (steps 61-135); list the stages in step order"
    with pytest.raises(ConfigError) as error:
        assign_stages(trajectories([1, 70]), backwards)
    assert error.value.problems == [message]
    config = tmp_path / "checks.toml"
    config.write_text('[checks.suite]\nmeasure = "share:test_suite"\ncondition = "stage_change"\n'
                      'direction = "decrease"\nstages = [["late", 61, 135], ["early", 1, 60]]\n')
    with pytest.raises(ConfigError, match="list the stages in step order"):
        load_checks(config)


def test_two_stages_are_compared_first_to_last_as_well_as_neighbours(samples_store_path):
    """early_late (or any two ranges) has one pair, which is both: the report's "First stage to
    last" table and the stage_changes rows for it are there, with the neighbours' numbers."""
    import trajlens

    report = stage_report(trajlens.open(samples_store_path), run_id="sao-r7", stages="early_late")
    changes = report.changes.sort("metric")
    first_to_last = changes.filter(pl.col("comparison") == "first_to_last").drop("comparison")
    consecutive = changes.filter(pl.col("comparison") == "consecutive").drop("comparison")
    assert first_to_last.height > 0 and first_to_last.equals(consecutive)
    assert "## First stage to last" in report.to_markdown()



def test_a_run_that_fills_one_stage_says_there_is_no_change_to_test(samples_store_path):
    """One stage (a one-step run cut into quartiles or early_late makes one): the report says there is
    no change to test rather than leaving it out without a word; a run of two stages does not."""
    import trajlens

    store = trajlens.open(samples_store_path)
    text = stage_report(store, run_id="sao-r7", stages=[("early", 1, 1), ("late", 2, 2)]).to_markdown()
    assert "sao-r7 has one stage (steps 1–2)" not in text
    one = stage_report(store, run_id="sao-r7", stages=[("early", 1, 2)]).to_markdown()
    assert "\nsao-r7 has one stage (steps 1–2): no change from one stage to another to test.\n" in one
    assert "## First stage to last" not in one


# -- formulas ----------------------------------------------------------------------------------


def _scalar(expression: pl.Expr) -> float | None:
    return pl.select(expression).item()


@pytest.mark.parametrize(
    "x, n, low, high",
    [(5, 10, 0.236593, 0.763407), (0, 10, 0.0, 0.277540), (10, 10, 0.722460, 1.0), (37, 80, 0.357, 0.571)],
)
def test_wilson_interval_known_values(x, n, low, high):
    lo, hi = wilson(pl.lit(x), pl.lit(n))
    assert (_scalar(lo), _scalar(hi)) == (pytest.approx(low, abs=1e-3), pytest.approx(high, abs=1e-3))


def test_wilson_interval_is_null_without_trials():
    lo, hi = wilson(pl.lit(0), pl.lit(0))
    assert (_scalar(lo), _scalar(hi)) == (None, None)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_contains_the_estimate(pair):
    x, n = pair
    lo, hi = wilson(pl.lit(x), pl.lit(n))
    low, high = _scalar(lo), _scalar(hi)
    assert 0.0 <= low <= x / n <= high <= 1.0  # exactly: a plot draws value - low as an error bar


def test_two_proportion_test_and_cohens_h():
    z = stage_z({"value": 0.5, "n_effective": 100}, {"value": 0.6, "n_effective": 100}, proportion=True)
    assert z == pytest.approx(0.1 / math.sqrt(0.55 * 0.45 * 0.02))
    assert stage_p_value({"value": 0.5, "n_effective": 100}, {"value": 0.6, "n_effective": 100}, True) == pytest.approx(
        0.1568, abs=1e-4)  # on Student's t with 198 degrees of freedom; the normal would say 0.1552
    assert _scalar(_stats.cohens_h(pl.lit(0.5), pl.lit(0.6))) == pytest.approx(
        2 * math.asin(math.sqrt(0.6)) - 2 * math.asin(math.sqrt(0.5)))
    assert stage_z({"value": 0.0, "n_effective": 10}, {"value": 0.0, "n_effective": 10}, proportion=True) is None


# -- the report --------------------------------------------------------------------------------


def run_frames(per_step: int = 30, steps: int = 8, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A run whose late trajectories stop running the suite and think more: suite in every
    trajectory of steps 0-3, in every other one of steps 4-7; a think call in late ones."""
    trajectory_rows, call_rows = [], []
    for step in range(steps):
        for k in range(per_step):
            trajectory_id = f"s{step}-{k}"
            late = step >= steps // 2
            commands = ["cat src/a.py", "sed -i 's/x/y/' src/a.py"]
            if not late or k % 2 == 0:
                commands.append("python -m pytest")
            else:
                commands.append("python -c 'import a'")
            tools = [("bash", c) for c in commands] + ([("think", None)] if late else [])
            for index, (tool, command) in enumerate(tools):
                call_rows.append({"run_id": "r", "step": step, "trajectory_id": trajectory_id, "call_index": index,
                                  "tool_name": tool, "command": command, "format_error": False,
                                  "arguments": json.dumps({"command": command} if command else {"thought": "t"})})
            trajectory_rows.append({"run_id": "r", "step": step, "trajectory_id": trajectory_id, "split": "train",
                                    "num_turns": len(tools), "model_tokens": 1000, "reasoning_tokens": None})
    trajectory_rows.append({"run_id": "r", "step": 0, "trajectory_id": "val-0", "split": "val", "num_turns": 1,
                            "model_tokens": 1, "reasoning_tokens": None})
    return pl.DataFrame(trajectory_rows), pl.DataFrame(call_rows, schema_overrides={"command": pl.String})


@pytest.fixture(scope="module")
def frames():
    return run_frames()


def rate(report, metric: str, stage: str) -> dict:
    return report.rates.filter((pl.col("metric") == metric) & (pl.col("stage") == stage)).row(0, named=True)


def test_population_values_are_exact(frames):
    report = stage_report(frames, n=10, seed=0)
    assert report.stages["n_population"].to_list() == [60, 60, 60, 60]
    assert report.stages["n_sampled"].to_list() == [10, 10, 10, 10]
    assert rate(report, "ran_suite", "Q1")["population_value"] == 1.0
    assert rate(report, "ran_suite", "Q4")["population_value"] == 0.5
    assert rate(report, "share:think", "Q1")["population_value"] == 0.0
    assert rate(report, "share:think", "Q4")["population_value"] == pytest.approx(0.25)
    assert rate(report, "verification:quick_check", "Q4")["population_value"] == pytest.approx(0.5)
    assert rate(report, "mean:num_turns", "Q4")["population_value"] == pytest.approx(4.0)


def test_sample_of_a_small_stage_is_the_whole_stage(frames):
    report = stage_report(frames, n=1000, seed=0)
    assert report.stages["n_sampled"].to_list() == report.stages["n_population"].to_list()
    values = report.rates.select("value", "population_value").drop_nulls()
    assert values["value"].to_list() == pytest.approx(values["population_value"].to_list())
    change = report.changes.filter((pl.col("metric") == "ran_suite") & (pl.col("comparison") == "first_to_last"))
    assert change["difference"].to_list() == pytest.approx([-0.5])
    assert change["cohens_h"].to_list() == pytest.approx([2 * math.asin(math.sqrt(0.5)) - 2 * math.asin(1.0)])
    assert change["p_value"][0] < 1e-6


def test_the_sample_size_says_what_the_stages_gave(frames):
    assert stage_report(frames, n=10, seed=0).sample_size == "N=10 sampled per stage"
    assert stage_report(frames, n=1000, seed=0).sample_size == "N=60 sampled per stage (whole stages)"
    trajectories, calls = frames
    uneven = (trajectories.filter(~((pl.col("step") == 0) & (pl.col("trajectory_id") != "s0-0"))), calls)
    # Q1 (steps 0-1) keeps 31 trajectories; the others 60: 40 drawn from each
    assert stage_report(uneven, n=40, seed=0).sample_size == "N=31-40 sampled per stage (40 drawn, all of a stage with fewer)"


def test_draw_is_seeded_without_replacement_and_order_free(frames):
    trajectories, calls = frames
    first = stage_report(frames, n=7, seed=3).sample
    again = stage_report((trajectories.reverse(), calls.sample(fraction=1.0, shuffle=True, seed=1)), n=7, seed=3).sample
    other = stage_report(frames, n=7, seed=4).sample
    assert first.equals(again)
    assert not first.equals(other)
    assert first.height == 28 and first["trajectory_id"].n_unique() == 28


def test_draw_of_a_run_does_not_depend_on_other_runs(frames):
    trajectories, calls = frames
    other = (trajectories.with_columns(pl.lit("q").alias("run_id")), calls.with_columns(pl.lit("q").alias("run_id")))
    both = (pl.concat([trajectories, other[0]]), pl.concat([calls, other[1]]))
    alone = stage_report(frames, n=7, seed=3).sample
    together = stage_report(both, n=7, seed=3).sample
    assert together.filter(pl.col("run_id") == "r").equals(alone)
    assert set(stage_report(both, n=7, seed=3).tables()) == {"stage_rates", "stage_changes", "stages", "stage_sample"}


def test_a_stage_draws_the_same_trajectories_whatever_other_stages_are_asked_for(frames):
    steps = sorted(frames[0]["step"].unique().to_list())
    late = ("late", steps[-2], steps[-1])
    alone = stage_report(frames, n=7, seed=3, stages=[late]).sample
    beside = stage_report(frames, n=7, seed=3, stages=[("early", steps[0], steps[1]), late]).sample
    assert alone.height == 7
    assert beside.filter(pl.col("stage") == "late").equals(alone)


def test_changes_compare_consecutive_stages_and_first_to_last(frames):
    changes = stage_report(frames, n=20, seed=0).changes.filter(pl.col("metric") == "ran_suite")
    pairs = list(zip(changes["from_stage"], changes["to_stage"], changes["comparison"]))
    assert sorted(pairs) == [("Q1", "Q2", "consecutive"), ("Q1", "Q4", "first_to_last"),
                             ("Q2", "Q3", "consecutive"), ("Q3", "Q4", "consecutive")]


def test_validation_split_is_left_out_by_default(frames):
    report = stage_report(frames, n=5, stages="early_late")
    assert "val-0" not in report.measures["trajectory_id"].to_list()
    everything = stage_report(frames, n=5, stages="early_late", split=None)
    assert "val-0" in everything.measures["trajectory_id"].to_list()


def test_accepts_a_store_like_object(frames):
    class Store:
        def __init__(self, trajectories, tool_calls):
            self.trajectories, self.tool_calls = trajectories.lazy(), tool_calls.lazy()

    report = stage_report(Store(*frames), run_id="r", n=5, stages=[("early", 0, 3), ("late", 4, 7)])
    assert report.stages["stage"].to_list() == ["early", "late"]
    with pytest.raises(ConfigError, match="no trajectories for run 'nope'"):
        stage_report(Store(*frames), run_id="nope")


def test_bad_arguments(frames):
    with pytest.raises(ConfigError) as error:
        stage_report(frames, n=0, seed="x")
    assert len(error.value.problems) == 2
    with pytest.raises(TypeError, match="store"):
        stage_report("store-dir")


def test_markdown(frames):
    text = stage_report(frames, n=10, seed=0).to_markdown()
    assert text.startswith("# Stage report")
    for heading in ("## Stages", "## Rates: r", "## First stage to last"):
        assert heading in text
    assert "| `ran_suite` | 100.0% [" in text
    assert "pop 50.0%" in text


def test_measures_given_to_the_stage_report_are_read_as_any_frame_and_checked(samples_store_path):
    import trajlens
    from trajlens.classify import classify_calls, trajectory_measures
    from trajlens.errors import FrameError

    store = trajlens.open(samples_store_path)
    run = pl.col("run_id") == "sao-r6"
    measures = trajectory_measures(classify_calls(store.tool_calls.filter(run).collect()),
                                   store.trajectories.filter(run).collect())
    eager = stage_report(store, run_id="sao-r6", n=4, measures=measures)
    assert stage_report(store, run_id="sao-r6", n=4, measures=measures.lazy()).rates.equals(eager.rates)
    assert stage_report(store, run_id="sao-r6", n=4, measures=measures.to_arrow()).rates.equals(eager.rates)
    with pytest.raises(FrameError, match="^stage_report: the measures frame has no column 'n_calls'$"):
        stage_report(store, run_id="sao-r6", measures=measures.drop("n_calls"))


def test_a_stage_of_no_step_names_the_steps_the_run_has_with_their_gaps(samples_store_path):
    """A run logged at steps 1, 5 and 100 is not "steps 1-100": the error lists them."""
    import trajlens

    store = trajlens.open(samples_store_path)
    kept = pl.col("step").is_in([1, 5, 100]) & (pl.col("run_id") == "sao-r6")
    frames = (store.trajectories.filter(kept).collect(), store.tool_calls.filter(kept).collect())
    with pytest.raises(ConfigError) as raised:
        stage_report(frames, run_id="sao-r6", stages=[("a", 2, 4), ("b", 5, 100)])
    assert str(raised.value) == "stages: stage 'a' (steps 2-4) holds no training step (the run's steps are 1, 5, 100)"


def test_stages_given_as_the_command_line_writes_them_are_the_ranges():
    """The Python API takes ``--stages``'s text as the CLI does (it refused it), with the same errors."""
    table = trajectories([1, 5, 10, 20, 30])
    assert assign_stages(table, "early:1-10,late:20-30").equals(assign_stages(table, [("early", 1, 10), ("late", 20, 30)]))
    with pytest.raises(ConfigError) as error:
        assign_stages(table, "early:1-x,late:20-30")
    assert error.value.problems == ["stages 'early:1-x': expected quartiles, early_late, or NAME:FIRST-LAST parts, "
                                    "such as early:1-40"]
