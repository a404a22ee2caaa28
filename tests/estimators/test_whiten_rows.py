"""Whitening one value per trajectory from model-token counts, against verl's padded tensor.

The estimators that tile a trajectory's value over its model tokens and whiten the batch
(``gdpo_verl``, ``gdpo_dynamic`` with token normalisation, ``reinforce_plus_plus_baseline``) read
only each trajectory's model-token count. Given counts, :func:`whiten_rows` takes count-weighted
float64 statistics instead of verl's float32 sums over a (B, T) tensor. The tolerance against
verl: ``4 eps (max |A'| + |mean| * scale)``, four float32 ulp of the largest whitened value or of
the mean it subtracts, whichever is larger (verl's own float32 mean is a few ulp of the mean from
the exact one; the subtraction carries that error to every value).
"""

from __future__ import annotations

import pytest
import torch
from _tolerance import assert_close_ulp
from trajlens.estimators.reference.verl import masked_whiten as verl_masked_whiten

from trajlens.estimators import (
    EstimatorInputError,
    advantage_stats,
    gdpo_dynamic,
    gdpo_verl,
    opo,
    reinforce_plus_plus_baseline,
)
from trajlens.estimators.dynamic import DynamicWeightConfig
from trajlens.estimators.whiten import whiten_rows

EPS32 = torch.finfo(torch.float32).eps


def _batch(seed: int, longest: int, spread: float, offset: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    counts = torch.randint(1, longest, (64,), generator=generator)
    values = (torch.randn(64, generator=generator) * spread + offset).float()
    mask = torch.arange(int(counts.max()))[None, :] < counts[:, None]
    return values, counts, mask


def _verl_rows(values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, float]:
    """verl's whitened value of each row (read at its first token) and its ``|mean| * scale``."""
    tiled = values[:, None] * mask
    whitened = verl_masked_whiten(tiled, mask) * mask
    chosen = tiled[mask].double()
    mean, var = float(chosen.mean()), float(chosen.var())
    return whitened[:, 0], abs(mean) / (var + 1e-8) ** 0.5


@pytest.mark.parametrize(("seed", "longest", "spread", "offset"), [
    (0, 3_000, 1.0, 0.0),  # GDPO's fused values: centred by their groups
    (1, 20_000, 0.01, 0.0),
    (2, 20_000, 1.0, 5.0),
    (3, 3_000, 1.0, 100.0),  # a mean far from zero: verl's rounding of it dominates
    (4, 20_000, 1000.0, 0.0),
])
def test_counts_agree_with_verl_to_four_ulp(seed, longest, spread, offset):
    values, counts, mask = _batch(seed, longest, spread, offset)
    expected, mean_scale = _verl_rows(values, mask)
    found = whiten_rows(values, counts).sequence
    tolerance = 4 * EPS32 * (float(expected.abs().max()) + mean_scale)
    assert float((found - expected).abs().max()) <= tolerance
    assert found.dtype == torch.float32


def test_the_mask_path_is_verl_s_tensor():
    values, _, mask = _batch(5, 500, 1.0, 0.5)
    result = whiten_rows(values, mask)
    tiled = values[:, None] * mask
    assert_close_ulp(result.advantages, verl_masked_whiten(tiled, mask) * mask)
    assert torch.equal(result.sequence, result.advantages[:, 0])


def test_by_hand_and_rows_without_tokens():
    # values 1 (3 tokens), 3 (1 token), 9 (no token): mean = 6 / 4 = 1.5;
    # var = (3 * 0.25 + 2.25) / 4 * 4 / 3 = 1, so A' = A - 1.5; the empty row gets 0, as verl's row of zeros
    result = whiten_rows(torch.tensor([1.0, 3.0, 9.0]), torch.tensor([3, 1, 0]))
    assert result.sequence.tolist() == pytest.approx([-0.5, 1.5, 0.0], abs=1e-6)
    assert result.advantages is None


def test_fewer_than_two_tokens_is_an_error():
    with pytest.raises(EstimatorInputError, match="gdpo_verl: a batch of 2 trajectories has 1 model token; "
                                                  "whitening needs at least two"):
        whiten_rows(torch.tensor([1.0, 2.0]), torch.tensor([1, 0]), "gdpo_verl")


def test_estimators_take_counts_for_the_mask():
    values, counts, mask = _batch(6, 2_000, 1.0, 0.0)
    channels = torch.stack([values, values.roll(1) * 0.5], dim=1)
    groups = [i // 4 for i in range(64)]
    scores = values[:, None]
    tokens = torch.zeros(mask.shape)
    tokens[:, 0] = values
    config = DynamicWeightConfig(batch_normalisation="token")
    pairs = [
        (gdpo_verl(channels, counts, groups), gdpo_verl(channels, mask, groups)),
        (gdpo_dynamic(channels, groups, counts, config=config), gdpo_dynamic(channels, groups, mask, config=config)),
        (reinforce_plus_plus_baseline(scores, counts, groups), reinforce_plus_plus_baseline(tokens, mask, groups)),
        (opo(scores, counts, groups), opo(tokens, mask, groups)),
    ]
    for from_counts, from_mask in pairs:
        assert from_counts.advantages is None
        assert_close_ulp(from_counts.sequence_advantages, from_mask.sequence_advantages)


def test_counts_are_checked():
    channels, groups = torch.ones(3, 2), ["a", "a", "b"]
    with pytest.raises(EstimatorInputError, match="gdpo_verl: response_mask holds 2 model-token counts for 3 trajectories"):
        gdpo_verl(channels, torch.tensor([2, 3]), groups)
    with pytest.raises(EstimatorInputError, match="gdpo_verl: response_mask: a model-token count is negative"):
        gdpo_verl(channels, torch.tensor([2, -1, 3]), groups)
    with pytest.raises(EstimatorInputError, match="gdpo_verl: response_mask counts no model token for trajectories 1; drop"):
        gdpo_verl(channels, torch.tensor([2, 0, 3]), groups)
    with pytest.raises(EstimatorInputError, match="masked_rewards='drop' needs the"):
        reinforce_plus_plus_baseline(torch.ones(3, 1), torch.tensor([2, 1, 3]), groups, masked_rewards="drop")


def test_advantage_stats_of_repeated_values():
    generator = torch.Generator().manual_seed(7)
    values = torch.randn(40, generator=generator, dtype=torch.float64)
    repeats = torch.randint(0, 50, (40,), generator=generator)
    expanded = advantage_stats(values.repeat_interleave(repeats))
    weighted = advantage_stats(values, repeats=repeats)
    assert weighted.count == expanded.count == int(repeats.sum())
    for name in ("mean", "std", "skew", "kurtosis", "bimodality"):
        assert_close_ulp(getattr(weighted, name), getattr(expanded, name), ulps=64)
    assert (weighted.positive_share, weighted.negative_share) == (expanded.positive_share, expanded.negative_share)
    # a value that stands for no token is not described, whatever it is
    described = advantage_stats(torch.tensor([1.0, float("nan"), 3.0]), repeats=torch.tensor([1, 0, 1]))
    assert (described.count, described.mean) == (2, 2.0)
    with pytest.raises(EstimatorInputError, match="advantage_stats: nothing to describe"):
        advantage_stats(torch.tensor([1.0]), repeats=torch.tensor([0]))


def test_step_statistics_count_each_trajectory_by_its_model_tokens():
    import polars as pl

    from trajlens.run.advantages import batch_diagnostics

    recomputed = pl.DataFrame({"run_id": ["r"] * 5, "step": [1, 1, 1, 2, 2], "advantage": [0.5, -1.0, 2.0, 1.0, -3.0],
                               "model_tokens": [3, 0, 2, 1, 4]})
    weighted = batch_diagnostics(recomputed, extremes=True, repeats="model_tokens")
    expanded = batch_diagnostics(recomputed.select("run_id", "step", pl.col("advantage").repeat_by("model_tokens"))
                                 .explode("advantage").drop_nulls(), extremes=True)
    assert weighted["count"].to_list() == [5, 5] and weighted["min"].to_list() == [0.5, -3.0]  # -1.0 has no token
    for name in ("mean", "std", "skew", "kurtosis", "positive_share", "min", "max"):
        assert_close_ulp(weighted[name].to_numpy(), expanded[name].to_numpy(), ulps=16)
