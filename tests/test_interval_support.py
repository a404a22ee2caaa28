"""A mean's interval lies where the trajectories' values can: a mean of shares in [0, 1], a mean of
counts at 0 or more, on every surface that shows it (stage report, compare, checks)."""

from __future__ import annotations

import json

import polars as pl

from trajlens.checks.conditions import evaluate
from trajlens.checks.spec import parse_checks
from trajlens.checks.step_measures import trajectory_measure_stats
from trajlens.classify import stage_report, trajectory_measures
from trajlens.classify.per_trajectory import MEAN_SUPPORT
from trajlens.compare.table import estimates
from trajlens.intervals import pooled, sums
from trajlens.report.summary import _outcome_contrast

STEPS, PER_STEP = 4, 10


def _rare_readback_run() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every trajectory edits src/a.py; in one trajectory of each step, the edit is read back."""
    trajectories, calls = [], []
    for step in range(STEPS):
        for k in range(PER_STEP):
            trajectory_id = f"s{step}-{k}"
            commands = ["sed -i 's/x/y/' src/a.py", "cat src/a.py" if k == 0 else "ls", "python -m pytest"]
            for index, command in enumerate(commands):
                calls.append({"run_id": "r", "step": step, "trajectory_id": trajectory_id, "call_index": index,
                              "tool_name": "bash", "command": command, "format_error": False,
                              "arguments": json.dumps({"command": command})})
            trajectories.append({"run_id": "r", "step": step, "trajectory_id": trajectory_id, "split": "train",
                                 "num_turns": len(commands), "model_tokens": 1000, "reasoning_tokens": None})
    return pl.DataFrame(trajectories), pl.DataFrame(calls)


def test_every_mean_of_a_share_is_bounded_by_one_and_every_mean_by_zero():
    assert MEAN_SUPPORT["mean:readback_share"] == (0.0, 1.0)
    assert MEAN_SUPPORT["mean:first_verification_position"] == (0.0, 1.0)
    assert MEAN_SUPPORT["mean:num_turns"] == (0.0, None)
    assert all(low == 0.0 for low, _ in MEAN_SUPPORT.values())


def test_a_mean_interval_is_cut_to_the_support_and_only_where_it_is_declared():
    values = pl.DataFrame({"v": [0.0] * 29 + [1.0]})
    spec = [("mean:readback_share", pl.col("v"), pl.lit(1)), ("other", pl.col("v") - 0.5, pl.lit(1))]
    plain = {row["measure"]: row for row in pooled(sums(values, spec), False).iter_rows(named=True)}
    cut = {row["measure"]: row for row in pooled(sums(values, spec), False, MEAN_SUPPORT.get).iter_rows(named=True)}
    assert plain["mean:readback_share"]["low"] < 0  # the normal interval crosses the bound
    assert cut["mean:readback_share"]["low"] == 0.0
    assert cut["mean:readback_share"]["high"] == plain["mean:readback_share"]["high"]
    assert cut["mean:readback_share"]["value"] == plain["mean:readback_share"]["value"]
    assert cut["other"] == plain["other"]


def test_stage_report_compare_and_checks_give_one_interval_inside_the_support():
    trajectories, calls = _rare_readback_run()
    report = stage_report((trajectories, calls), n=STEPS * PER_STEP, seed=0, stages="early_late")  # every one
    rate = report.rates.filter((pl.col("metric") == "mean:readback_share") & (pl.col("stage") == "early")).row(0, named=True)
    assert rate["value"] == 1 / PER_STEP
    assert rate["ci_low"] == 0.0 < rate["ci_high"]

    measures = trajectory_measures(calls, trajectories)
    early = measures.filter(pl.col("step") < STEPS // 2)
    compared = estimates(["mean:readback_share"], early)["mean:readback_share"]
    assert (compared.value, compared.low, compared.high) == (rate["value"], rate["ci_low"], rate["ci_high"])

    (check,) = parse_checks({"checks": {"c": {"measure": "mean:readback_share", "condition": "stage_change",
                                              "direction": "increase", "stages": "early_late"}}}, "test")
    series = trajectory_measure_stats(measures).filter(pl.col("measure") == "mean:readback_share")
    outcome = evaluate(check, "mean:readback_share", series, proportion=False)
    assert outcome.evidence.low == 0.0
    assert outcome.values["low"].min() == 0.0


def test_the_reports_resolved_against_unresolved_keeps_a_mean_in_its_support():
    trajectories, calls = _rare_readback_run()
    # unresolved: half of each step's attempts, and one attempt that read its edit back
    number = pl.col("trajectory_id").str.split("-").list.last().cast(pl.Int64)
    unresolved = (number >= PER_STEP // 2) | (pl.col("trajectory_id") == "s0-0")
    trajectories = trajectories.with_columns((~unresolved).alias("resolved"))
    table = _outcome_contrast(trajectories, trajectory_measures(calls, trajectories)).frame
    row = table.filter(pl.col("measure") == "read-back share").row(0, named=True)
    assert row["unresolved"] > 0 and row["unresolved low"] == 0.0


def test_bounded_statistics_of_advantages_and_channels_keep_their_intervals_inside_their_bounds():
    """A share of positive advantages lies in [0, 1], the bimodality coefficient in (0, 1], a spread
    at 0 or more: the checks' (and compare's) intervals of them too. The reward has no bound."""
    from trajlens.checks.conditions import windowed
    from trajlens.checks.step_measures import measure_support, scalar_stats

    assert measure_support("advantage:gae_raw:positive_share") == (0.0, 1.0)
    assert measure_support("advantage:run:bimodality") == (0.0, 1.0)
    assert measure_support("rel_gain:format") == (0.0, None)
    assert measure_support("mean:readback_share") == (0.0, 1.0)
    assert measure_support("reward") is None and measure_support("advantage:gae_raw:mean") is None
    for measure, values in (("advantage:gae_raw:positive_share", [0.0, 0.0, 0.0, 0.05, 0.0]),
                            ("advantage:gae_raw:bimodality", [0.99, 1.0, 0.97, 1.0, 0.6]),
                            ("rel_gain:format", [0.0, 0.0, 0.2, 0.0, 0.0])):
        series = scalar_stats(pl.DataFrame({"measure": [measure] * 5, "step": range(5), "value": values}))
        last = windowed(series, 5, proportion=False).row(-1, named=True)
        low, high = measure_support(measure)
        assert low <= last["low"] and (high is None or last["high"] <= high), (measure, last)
    reward = scalar_stats(pl.DataFrame({"measure": ["reward"] * 5, "step": range(5), "value": [0.0, 0.0, 0.0, 0.4, 0.0]}))
    assert windowed(reward, 5, proportion=False)["low"][-1] < 0  # no declared bound: the normal interval as it is
