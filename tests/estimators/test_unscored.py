"""A trajectory without a reward: TRL's trainers score it (an unscorable completion), verl's
estimators cannot. Every surface asks the estimator's settings the same question."""

from __future__ import annotations

import polars as pl
import pytest

from trajlens.errors import ConfigError
from trajlens.estimators.registry import RunFacts, estimator_spec
from trajlens.estimators.spec import EstimatorChoice
from trajlens.run.advantages import RunFrames, require_inputs
from trajlens.run.choices import ESTIMATOR_CHOICES

UNREWARDED = RunFacts(trajectories=4, largest_group=2, smallest_group=2, all_rewarded=False, any_rewarded=True)
"""A run where some trajectory has no reward (and some has one)."""


def test_trl_conventions_need_no_reward_for_every_trajectory():
    batch = estimator_spec("grpo_batch_std")  # TRL's scale_rewards="batch": convention trl by default
    assert batch.missing(UNREWARDED) == []
    assert batch.missing(UNREWARDED, {**batch.defaults(), "convention": "trl-1.5"}) == []
    grpo = estimator_spec("grpo")  # verl's by default
    assert grpo.missing(UNREWARDED) == ["a reward for every trajectory"]
    assert EstimatorChoice("trl_grpo_group", "grpo", {"convention": "trl"}).missing(UNREWARDED) == []
    assert EstimatorChoice("verl_grpo", "grpo", {}).missing(UNREWARDED) == ["a reward for every trajectory"]


def test_the_report_and_the_explicit_recomputation_agree():
    """What the report recomputes on such a run is what `trajlens advantages` and the checks accept."""
    declared = RunFacts(trajectories=4, largest_group=2, smallest_group=2, all_rewarded=False, any_rewarded=True,
                        declared=frozenset({"grpo_batch_std"}))
    in_report = {c.label for c in ESTIMATOR_CHOICES if c.in_report(declared)}
    assert "grpo_batch_std" in in_report and "grpo" not in in_report
    trajectories = pl.DataFrame({
        "run_id": ["r"] * 4, "step": [1] * 4, "trajectory_id": ["a", "b", "c", "d"],
        "group_id": ["g", "g", "h", "h"], "reward": [1.0, None, 0.0, 1.0], "split": ["train"] * 4,
    })
    frames = RunFrames("r", trajectories, None)
    require_inputs("r", "grpo_batch_std", frames)
    with pytest.raises(ConfigError, match="grpo needs a reward for every trajectory"):
        require_inputs("r", "grpo", frames)
    require_inputs("r", "grpo", frames, {"convention": "trl"})
