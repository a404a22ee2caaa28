"""The checks measure the split the report measures: a run's training trajectories, or the split
a run without training trajectories has (:mod:`trajlens.run.splits`)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import trajlens
from trajlens.checks.evaluate import check_run
from trajlens.checks.report import shipped_checks
from trajlens.checks.spec import parse_checks
from trajlens.engine.classify import classify_run
from trajlens.run.splits import chosen_split, ordered_splits

SANDBOX = Path(__file__).resolve().parents[1] / "data" / "verl" / "grpo-sandbox"  # validation at step 2
RUN = "grpo-sandbox"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("split") / "store"
    trajlens.ingest([SANDBOX], path)
    classify_run(trajlens.open(path), RUN)
    return path


def _values(result, check: str) -> dict[str, dict[int, float]]:
    outcomes = next(r for r in result.results if r.name == check).outcomes
    return {o.measure: dict(zip(o.values["step"], o.values["value"])) for o in outcomes}


def test_check_measures_the_training_trajectories_only(store_path):
    trajectories = trajlens.open(store_path).trajectories.collect()
    assert set(trajectories.filter(pl.col("step") == 2)["split"]) == {"train", "val"}
    train = trajectories.filter(pl.col("split") == "train")
    turns = dict(train.group_by("step").agg(pl.col("num_turns").mean()).iter_rows())
    every = trajectories.filter(pl.col("step") == 2)["num_turns"].mean()
    assert turns[2] != pytest.approx(every)  # the validation trajectories would move it

    checked = check_run(store_path, run_id=RUN)
    assert _values(checked, "turns_inflation")["mean:num_turns"] == pytest.approx(turns)
    train_channels = set(train.explode("reward_channels")["reward_channels"].struct.field("name").drop_nulls())
    # each step on its own: the run is shorter than the shipped check's 5-step window
    (per_step,) = parse_checks({"checks": {"rel_gain": {"measure": "rel_gain:*", "condition": "threshold", "below": 0.1}}},
                               "test")
    by_step = check_run(store_path, [per_step], run_id=RUN)
    assert {m.removeprefix("rel_gain:") for m in _values(by_step, "rel_gain")} == train_channels
    shipped = next(r for r in checked.results if r.name == "reward_channel_rel_gain")
    assert shipped.status == "skip" and "no window of 5 steps" in shipped.reason


def test_the_reports_checks_and_the_check_command_agree(store_path):
    store = trajlens.open(store_path)
    measures = classify_run(store, RUN).measures  # every split's trajectories, as saved
    in_report = shipped_checks(store, RUN, measures)
    alone = check_run(store_path, run_id=RUN)
    for name in ("turns_inflation", "suite_rate_floor", "reward_channel_rel_gain", "think_share"):
        assert _values(in_report, name) == _values(alone, name), name


def test_a_run_without_training_trajectories_is_measured_on_the_split_it_has():
    assert ordered_splits(["val", None, "train", "val"]) == ["train", "val"]
    assert chosen_split(["train", "val"]) == "train"
    assert chosen_split(["val"]) == "val"
    assert chosen_split(["train", "val"], "val") == "val"
    assert chosen_split([]) == "train"


def test_nan_rewards_are_left_out_of_the_reward_measure_and_the_dead_groups():
    """As the saved queries and the report's trend leave them out (a run folder checked before
    ingest can hold them)."""
    import math

    import polars as pl

    from trajlens.checks.step_measures import outcome_stats
    from trajlens.report.summary import _dead_groups

    nan = float("nan")
    trajectories = pl.DataFrame({"step": [1, 1, 1, 1], "group_id": ["a", "a", "b", "b"],
                                 "reward": [nan, 1.0, 0.5, 0.5], "resolved": [False, True, False, False]})
    reward = outcome_stats(trajectories).filter(pl.col("measure") == "reward").row(0, named=True)
    assert not math.isnan(reward["x"]) and reward["x"] / reward["n"] == pytest.approx(2 / 3)
    dead = _dead_groups(trajectories).frame.row(0, named=True)
    assert (dead["groups"], dead["dead_groups"]) == (1, 1)  # group a is one rewarded trajectory: no group


def test_stages_are_the_run_s_not_those_of_the_steps_a_measure_has(samples_store_path):
    """causal-r6 verifies first later and later: the check's Q1 and Q4 are the stage report's
    (the run's steps cut in four), also for a measure some steps lack."""
    from trajlens.checks.spec import parse_checks
    from trajlens.classify import classify_calls, trajectory_measures
    from trajlens.classify.stages import assign_stages

    store = trajlens.open(samples_store_path)
    (check,) = parse_checks({"checks": {"first_verification_later": {
        "measure": "mean:first_verification_position", "condition": "stage_change", "stages": "quartiles",
        "compare": "first_to_last", "direction": "increase"}}}, "test")
    result = check_run(samples_store_path, [check], "causal-r6").results[0]
    chosen = (pl.col("run_id") == "causal-r6") & (pl.col("split") == "train")
    trajectories = store.trajectories.filter(chosen).collect()
    calls = store.tool_calls.filter(pl.col("run_id") == "causal-r6").collect()
    measures = trajectory_measures(classify_calls(calls), trajectories).join(
        assign_stages(trajectories.select("run_id", "trajectory_id", "step")).select("trajectory_id", "stage"),
        on="trajectory_id")
    means = dict(measures.group_by("stage").agg(pl.col("first_verification_position").mean()).iter_rows())
    steps = measures.group_by("stage").agg(pl.col("step").unique().sort())
    q4 = steps.filter(pl.col("stage") == "Q4")["step"][0].to_list()
    assert measures.filter(pl.col("stage") == "Q4")["first_verification_position"].null_count() > 0
    detail = result.evidence.detail
    assert f"Q1 {means['Q1']:.4f}" in detail and f"Q4 {means['Q4']:.4f}" in detail, detail
    assert result.fired_steps == tuple(q4)


def test_a_run_with_rewards_missing_and_a_validation_tail_is_staged_and_counted_as_the_report_does(tmp_path):
    """grpo-leg with a reward missing at every odd step up to 59 (GRPO has no batch there) and
    steps 76-80 relabelled validation: the advantage checks' quarters are the run's, not those of
    the steps with a batch, and the run counts its 75 measured steps."""
    from trajlens.classify.stages import assign_stages

    source, target = Path(__file__).resolve().parents[2] / "sample_data" / "grpo-leg", tmp_path / "gappy"
    for part in source.glob("*/**/*.parquet"):
        frame = pl.read_parquet(part)
        if part.parts[-3] == "trajectories":
            first = pl.col("trajectory_id") == pl.col("trajectory_id").min()
            gap = first & (pl.col("step") % 2 == 1) & (pl.col("step") < 60)
            frame = frame.with_columns(pl.when(gap).then(None).otherwise(pl.col("reward")).alias("reward"),
                                       pl.when(pl.col("step") > 75).then(pl.lit("val")).otherwise("split").alias("split"))
        (target / part.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(target / part.relative_to(source))
    trajlens.ingest([target], tmp_path / "store")
    checked = check_run(tmp_path / "store", run_id="grpo-leg")
    assert checked.steps == 75
    steps = assign_stages(pl.DataFrame({"run_id": ["grpo-leg"] * 75, "step": range(1, 76)}))
    q4_start = steps.filter(pl.col("stage") == "Q4")["step"].min()
    bimodal = next(r for r in checked.results if r.name == "advantage_bimodal")
    assert bimodal.status != "skip" and bimodal.evidence.step == q4_start, bimodal.evidence_text()
