"""The logged-advantages measure (checks.step_measures.LoggedAdvantages) on the runs that break
a naive one: groups of one step that match different candidates, a step without a model token,
a change of logging unit inside a batch, callers that read more token columns than it asks, an
infinite logged value."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from trajlens.checks.step_measures import LoggedAdvantages
from trajlens.estimators import identify_advantages, recompute

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "estimators"))
from test_identify import frames  # noqa: E402

REWARDS = np.array([0.0, 1.0, 1.0, 0.0])


def _trajectories(steps, logged) -> pl.DataFrame:
    """Four trajectories a step in one group, each logging ``logged(step, k)`` per trajectory."""
    return pl.DataFrame([
        {"run_id": "r", "step": s, "trajectory_id": f"{s}-{k}", "group_id": f"{s}:0", "split": "train",
         "reward": float(REWARDS[k]), "logged_advantage": logged(s, k)} for s in steps for k in range(4)])


def test_a_step_whose_groups_match_different_candidates_is_no_match():
    rows = []
    for group, rewards in enumerate(([0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0])):
        r = np.array(rewards)
        centred = r - r.mean()
        logged = centred / (r.std(ddof=1) + 1e-6) if group == 0 else centred  # grpo, then dr_grpo
        rows += [{"run_id": "r", "step": 1, "trajectory_id": f"{group}-{k}", "group_id": f"1:{group}",
                  "split": "train", "reward": float(r[k]), "logged_advantage": float(logged[k])} for k in range(4)]
    trajectories = pl.DataFrame(rows)
    measure = LoggedAdvantages("auto", {})
    value = measure.add(trajectories, None)["x"].item()
    best = identify_advantages(trajectories)
    assert not best.matched and value > 0.1
    assert value == pytest.approx(best.best.max_abs_diff, rel=1e-12)  # the closest single candidate's


def test_a_step_without_a_model_token_is_left_out_not_a_crash():
    trajectories = _trajectories([1], lambda s, k: None).drop("logged_advantage")
    tokens = pl.DataFrame({"run_id": ["r"] * 4, "step": [1] * 4, "trajectory_id": [f"1-{k}" for k in range(4)],
                           "response_mask": [[False, False]] * 4, "logged_advantages": [[0.0, 0.0]] * 4},
                          schema_overrides={"logged_advantages": pl.List(pl.Float32)})
    measure = LoggedAdvantages("auto", {})
    assert measure.add(trajectories, tokens).is_empty()
    assert measure.problem and "no candidate could be recomputed" in measure.problem


def test_steps_before_a_change_of_logging_unit_keep_their_values_in_any_batches():
    centred = REWARDS - REWARDS.mean()
    trajectories = _trajectories([1, 2, 3], lambda s, k: None if s == 3 else float(centred[k]))
    tokens = pl.DataFrame([
        {"run_id": "r", "step": s, "trajectory_id": f"{s}-{k}", "response_mask": [True, True],
         "logged_advantages": [float(centred[k])] * 2 if s == 3 else None} for s in (1, 2, 3) for k in range(4)],
        schema_overrides={"logged_advantages": pl.List(pl.Float32)})

    def steps_with_values(batches):
        measure = LoggedAdvantages("verl_dr_grpo", {})
        parts = [measure.add(trajectories.filter(pl.col("step").is_in(b)), tokens.filter(pl.col("step").is_in(b)))
                 for b in batches]
        return pl.concat(parts)["step"].to_list(), measure.problem

    whole, per_step = steps_with_values([[1, 2, 3]]), steps_with_values([[1], [2], [3]])
    assert whole == per_step and whole[0] == [1, 2] and "per trajectories in some steps" in whole[1]


def test_the_verdict_is_the_same_whatever_token_columns_the_caller_read():
    trajectories, tokens = frames()
    gae = recompute(trajectories, tokens, "gae", whiten=False)  # logged raw GAE, under a grpo config
    logged = trajectories.select("trajectory_id").join(gae.select("trajectory_id", "token_advantages"),
                                                       on="trajectory_id", how="left")
    tokens = tokens.join(logged.rename({"token_advantages": "logged_advantages"}), on="trajectory_id", how="left") \
        .with_columns(pl.col("logged_advantages").cast(pl.List(pl.Float32)))
    config = {"algorithm": {"adv_estimator": "grpo"}}
    asked = LoggedAdvantages("auto", config).token_columns
    assert {"values", "token_rewards"} <= set(asked)  # it may try every candidate: it reads their columns
    notes = []
    for columns in (asked, tuple(tokens.columns)):  # the checks' read, the report pass's wider one
        measure = LoggedAdvantages("auto", config)
        measure.add(trajectories, tokens.select(c for c in columns if c in tokens.columns))
        notes.append(measure.note)
    assert notes[0] == notes[1] and "they match gae_raw instead" in notes[0]


def test_an_infinite_logged_value_is_an_infinite_difference_not_nan():
    centred = REWARDS - REWARDS.mean()
    trajectories = _trajectories([1, 2], lambda s, k: math.inf if (s, k) == (2, 0) else float(centred[k]))
    measure = LoggedAdvantages("verl_dr_grpo", {})
    values = dict(measure.add(trajectories, None).select("step", "x").iter_rows())
    assert values == {1: 0.0, 2: math.inf}
    assert "infinite" in measure.problem


def test_a_step_no_candidate_can_recompute_is_skipped_with_its_reason_not_failed():
    """A trajectory without its token row (left out of a lenient ingest): the run's GAE cannot be
    recomputed on its step, so there is nothing to measure there (no infinite difference that
    fails the check); the check says why."""
    trajectories, tokens = frames()
    recomputed = recompute(trajectories, tokens, "gae", whiten=False)
    logged = tokens.join(recomputed.select("trajectory_id", "token_advantages"), on="trajectory_id").with_columns(
        pl.col("token_advantages").cast(pl.List(pl.Float32)).alias("logged_advantages")).drop("token_advantages")
    measure = LoggedAdvantages("gae_raw", {})
    assert measure.add(trajectories, logged.filter(pl.col("trajectory_id") != "1-0-0")).is_empty()
    assert "no candidate could be recomputed" in measure.problem and measure.note is None
