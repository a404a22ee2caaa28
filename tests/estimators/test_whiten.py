"""Masked whitening: hand case, agreement with verl to a few ulp, and the invariants."""

from __future__ import annotations

import pytest
import torch
from _tolerance import assert_close_ulp
from trajlens.estimators.reference.verl import masked_whiten as verl_masked_whiten
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from trajlens.estimators import EstimatorInputError, masked_whiten


def test_whiten_by_hand():
    advantages = torch.tensor([[1.0, 2.0, 3.0, 100.0]])
    mask = torch.tensor([[True, True, True, False]])
    # mean = 6 / (3 + 1e-8) = 2;  var = (1 + 0 + 1) / 3 * 3 / 2 = 1 (Bessel)
    # whitened = (A - 2) / sqrt(1 + 1e-8): [-1, 0, 1, 98]; the masked 100 is transformed but not counted
    result = masked_whiten(advantages, mask)
    assert_close(result.advantages, torch.tensor([[-1.0, 0.0, 1.0, 98.0]]))
    assert_close(result.mean, torch.tensor(2.0))
    assert_close(result.var, torch.tensor(1.0))
    assert result.count == 3
    assert result.normalisation == "batch_whiten"


def test_keep_mean():
    result = masked_whiten(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[True, True, True]]), shift_mean=False)
    # (A - 2) / 1 + 2
    assert_close(result.advantages, torch.tensor([[1.0, 2.0, 3.0]]))
    assert result.normalisation == "batch_whiten_keep_mean"


def test_verl_to_rounding():
    torch.manual_seed(0)
    advantages = torch.randn(16, 500) * 3 + 1
    mask = torch.rand(16, 500) > 0.3
    assert_close_ulp(masked_whiten(advantages, mask).advantages, verl_masked_whiten(advantages, mask))


@settings(max_examples=50, deadline=None)
@given(batch=st.integers(1, 5), length=st.integers(1, 60), seed=st.integers(0, 2**16), scale=st.floats(0.01, 100.0))
def test_whitened_advantages_have_mean_zero_and_variance_one_over_the_mask(batch, length, seed, scale):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, length, generator=generator) > 0.4
    assume(int(mask.sum()) >= 2)
    advantages = torch.randn(batch, length, generator=generator, dtype=torch.float64) * scale
    variance = float(advantages[mask].var())
    assume(variance > 1e-6)
    whitened = masked_whiten(advantages, mask).advantages[mask]
    assert abs(float(whitened.mean())) < 1e-6
    # unit variance up to the 1e-8 inside the square root: var / (var + 1e-8)
    assert abs(float(whitened.var()) - variance / (variance + 1e-8)) < 1e-6


@settings(max_examples=30, deadline=None)
@given(length=st.integers(3, 60), seed=st.integers(0, 2**16))
def test_masked_positions_never_leak_into_the_statistics(length, seed):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(3, length, generator=generator) > 0.5
    assume(int(mask.sum()) >= 2)
    advantages = torch.randn(3, length, generator=generator, dtype=torch.float64)
    base = masked_whiten(advantages, mask)
    poisoned = masked_whiten(torch.where(mask, advantages, float("nan")), mask)
    assert_close(poisoned.mean, base.mean)
    assert_close(poisoned.var, base.var)
    assert_close(poisoned.advantages[mask], base.advantages[mask])


@pytest.mark.parametrize("count", [0, 1])
def test_fewer_than_two_model_tokens_is_an_error(count):
    mask = torch.zeros(2, 3, dtype=torch.bool)
    mask.view(-1)[:count] = True
    with pytest.raises(EstimatorInputError, match=r"masked_whiten: response_mask of shape \(2, 3\) has [01] model token"):
        masked_whiten(torch.randn(2, 3), mask)


def test_whitening_of_moments_gives_masked_whiten_s_statistics():
    import math

    from trajlens.estimators import masked_whiten, whitening_of_moments

    values = torch.tensor([[0.5, -1.0, 2.0, 7.0], [3.0, 0.25, -2.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, False, True], [True, True, True, False]])
    chosen = values[mask]
    mean = float(chosen.mean())
    whitening = whitening_of_moments(int(mask.sum()), mean, float(((chosen - mean) ** 2).mean()))
    result = masked_whiten(values, mask)
    # count + 1e-8 is float32 in the tensor path (the eps is lost there), float64 here: ~1e-8 relative apart
    assert math.isclose(whitening.mean, float(result.mean), rel_tol=1e-7)
    assert math.isclose(whitening.scale, float(torch.rsqrt(result.var + 1e-8)), rel_tol=1e-7)
    assert math.isnan(whitening_of_moments(1, 2.0, 0.0).scale)
