"""Diagnostics: explained variance, batch shape, streaks, outliers, clips, channels."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from trajlens.estimators import (
    EstimatorInputError,
    advantage_outliers,
    advantage_stats,
    channel_diagnostics,
    clip_share,
    critic_grad_clip,
    explained_variance,
    flagged_runs,
    sign_streaks,
)


def test_explained_variance_by_hand():
    returns = torch.tensor([[1.0, 2.0, 3.0, 50.0]])
    values = torch.tensor([[0.5, 1.0, 1.5, -9.0]])
    mask = torch.tensor([[True, True, True, False]])
    # R - V = [0.5, 1, 1.5]: unbiased var 0.25;  var(R) = var([1, 2, 3]) = 1;  1 - 0.25 / (1 + 1e-5)
    assert explained_variance(returns, values, mask) == pytest.approx(1 - 0.25 / (1 + 1e-5), rel=1e-6)
    # a perfect critic explains everything
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)


def test_advantage_stats_by_hand():
    advantages = torch.tensor([[1.0, -1.0, 2.0, 99.0], [-2.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    stats = advantage_stats(advantages, mask)
    # values 1, -1, 2, -2, 0: mean 0, m2 = 10/5 = 2, m3 = 0, m4 = (1 + 1 + 16 + 16) / 5 = 6.8
    assert stats.count == 5
    assert stats.mean == pytest.approx(0.0)
    assert stats.std == pytest.approx(math.sqrt(10 / 4))
    assert stats.skew == pytest.approx(0.0)
    assert stats.kurtosis == pytest.approx(6.8 / 4 - 3)
    n = 5
    assert stats.bimodality == pytest.approx(1 / (6.8 / 4 - 3 + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3))))
    assert stats.positive_share == pytest.approx(2 / 5)
    assert stats.negative_share == pytest.approx(2 / 5)
    assert not stats.all_negative and not stats.all_positive


def test_an_all_negative_batch():
    stats = advantage_stats(torch.tensor([[-0.2, -0.3], [-0.1, 5.0]]), torch.tensor([[True, True], [True, False]]))
    assert stats.all_negative and stats.positive_share == 0.0


def test_a_two_point_distribution_reads_bimodal():
    values = torch.tensor([-1.0] * 50 + [1.0] * 50)
    assert advantage_stats(values).bimodal


def test_sign_streaks():
    steps = [123, 118, 119, 120, 121, 122]
    negative = [True, False, True, True, True, False]
    positive = [False, True, False, False, False, False]
    streaks = sign_streaks(steps, negative, positive)
    assert streaks.negative_steps == (119, 120, 121, 123)
    assert streaks.negative_streaks == ((119, 121), (123, 123))
    assert streaks.longest_negative == 3
    assert streaks.positive_streaks == ((118, 118),)
    assert streaks.longest_positive == 1


def test_a_missing_step_breaks_a_streak_and_a_cadence_keeps_one():
    # Logged every step, step 120 missing: 119 and 121 are not consecutive.
    assert sign_streaks([118, 119, 121, 122], [True, True, True, True]).negative_streaks == ((118, 119), (121, 122))
    # Logged every 5 steps: 115, 120, 125 are three consecutive batches; 140 after a missing 130, 135 is not.
    streaks = sign_streaks([110, 115, 120, 125, 140], [False, True, True, True, True])
    assert streaks.negative_streaks == ((115, 125), (140, 140)) and streaks.longest_negative == 3
    # One odd step does not redefine the cadence: a run logged every 10 steps that ends at 999.
    steps = [*range(0, 1000, 10), 999]
    assert flagged_runs(steps, [True] * len(steps)) == [(0, 990, 100), (999, 999, 1)]
    assert flagged_runs([], []) == []
    with pytest.raises(EstimatorInputError, match="ascend"):
        flagged_runs([2, 1], [True, True])


def test_the_consecutive_check_counts_streaks_as_sign_streaks_does():
    """One definition of consecutive steps: the check fires on the same streaks the report names."""
    import polars as pl

    from trajlens.checks.conditions import consecutive
    from trajlens.checks.spec import Check

    steps = [5, 10, 15, 20, 25, 35, 40, 45]
    flags = [False, True, True, True, False, True, True, True]  # 30 missing: 35-45 stand alone from 25
    series = pl.DataFrame({"step": steps, "x": [float(f) for f in flags], "n": 1.0, "units": 1, "sxx": 0.0,
                           "sxn": 0.0, "snn": 1.0})
    check = Check(name="streak", measure="advantage:run:all_negative", condition="consecutive", above=0.5, steps=3)
    outcome = consecutive(check, check.measure, series, True)
    assert sign_streaks(steps, flags).negative_streaks == ((10, 20), (35, 45))
    assert outcome.fired_steps == (10, 15, 20, 35, 40, 45)  # the old check, wanting step + 1, fired at none


def test_outliers():
    values = torch.zeros(100)
    values[7] = 10.0
    # mean 0.1, unbiased std sqrt((99 * 0.01 + 9.9^2) / 99) = 1.0; z = 9.9 / 1.0
    found = advantage_outliers(values, k=3.0)
    assert found.count == 1
    assert found.share == pytest.approx(0.01)
    assert found.max_abs_z == pytest.approx(9.9 / math.sqrt((99 * 0.01 + 9.9**2) / 99))
    assert bool(found.mask[7]) and found.per_trajectory is None


def test_outliers_ignore_masked_tokens_and_count_per_trajectory():
    advantages = torch.tensor([[0.0] * 10 + [1000.0], [0.0] * 9 + [20.0, 0.0]])
    mask = torch.ones(2, 11, dtype=torch.bool)
    mask[0, 10] = False
    found = advantage_outliers(advantages, mask, k=3.0)
    assert found.per_trajectory.tolist() == [0, 1]


def test_clip_share():
    advantages = torch.tensor([[-3.0, -2.0, 0.5, 2.5], [9.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, True], [False, True, True, True]])
    # |A| > 2 on model tokens: -3.0 and 2.5 of 7 (2.0 exactly is not changed by the clip)
    assert clip_share(advantages, 2.0, mask) == pytest.approx(2 / 7)


def test_critic_grad_clip():
    report = critic_grad_clip([7.0, 68.0, 0.5, 31.0, 35.0, 40.0], clip=1.0, alarm_above=30.0)
    assert_close(report.ratio, torch.tensor([7.0, 68.0, 0.5, 31.0, 35.0, 40.0], dtype=torch.float64))
    assert_close(report.shrink, torch.tensor([7.0, 68.0, 1.0, 31.0, 35.0, 40.0], dtype=torch.float64))
    assert report.clipped_share == pytest.approx(5 / 6)
    assert report.alarm_runs == ((3, 5),)  # three consecutive steps above 30
    assert critic_grad_clip([9.0, 11.0], clip=10.0).shrink.tolist() == [1.0, 1.1]


def test_channel_diagnostics_by_hand():
    nan = float("nan")
    # groups: g0 rows 0, 1; g1 rows 2, 3
    rewards = torch.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 3.0], [0.0, 1.0, 3.0], [1.0, nan, 3.0]])
    diagnostics = channel_diagnostics(rewards, ["g0", "g0", "g1", "g1"], names=["format", "correct", "style"])
    # rel_gain = mean over groups of (max - min): format (0 + 1) / 2, correct (1 + 0) / 2 (g1 has one
    # value), style (2 + 0) / 2
    assert_close(diagnostics.rel_gain, torch.tensor([0.5, 0.5, 1.0], dtype=torch.float64))
    assert_close(diagnostics.mean, torch.tensor([0.75, 2 / 3, 2.5], dtype=torch.float64))
    assert len(diagnostics.collinear_pairs) == 1
    # style = 2 * correct + 1 where both are present: collinear
    assert diagnostics.collinear_pairs[0][:2] == ("correct", "style")
    assert diagnostics.collinear_pairs[0][2] == pytest.approx(1.0)
    assert "collinear" in diagnostics.warnings[0]
    assert int(diagnostics.dominant_counts.sum()) == 4


def test_dominant_channel_counts_from_given_advantages():
    advantages = torch.tensor([[0.1, 2.0], [1.5, -1.0], [0.3, 0.2]])
    diagnostics = channel_diagnostics(torch.rand(3, 2), [0, 0, 0], channel_advantages=advantages)
    assert diagnostics.dominant_counts.tolist() == [2, 1]


def test_explained_variance_needs_two_tokens():
    with pytest.raises(EstimatorInputError, match=r"explained_variance: response_mask of shape \(1, 2\) has 1 model tokens"):
        explained_variance(torch.ones(1, 2), torch.ones(1, 2), torch.tensor([[True, False]]))


def test_no_channel_dominates_a_trajectory_whose_largest_advantage_two_channels_share():
    import torch

    from trajlens.estimators.channels import dominant_channels

    advantages = torch.tensor([[0.0, 0.0], [0.5, -0.5], [float("nan"), 0.2], [float("nan"), float("nan")],
                               [0.3, 0.3], [-0.1, 0.3]])
    assert dominant_channels(advantages).tolist() == [-1, 0, 1, -1, -1, 1]
