"""The fused CUDA scan (Triton) against verl's loop; skipped without a CUDA device.

``python benchmarks/gpu_check.py`` runs the same checks, and the GPU benchmark, on a machine
that has torch and Triton but none of trajlens's other dependencies.
"""

from __future__ import annotations

import pytest
import torch
from trajlens.estimators.reference.verl import gae_loop, returns_loop
from torch.testing import assert_close

from trajlens.estimators import discounted_returns, gae
from trajlens.estimators import _scan

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize(("rows", "length"), [(3, 1), (4, 100), (5, 2047), (3, 2049), (2, 9000)])
def test_fused_cuda_scan_equals_the_loop(rows, length):
    generator = torch.Generator().manual_seed(rows * length)
    mask = torch.rand(rows, length, generator=generator) > 0.3
    mask[:, 0] = True
    rewards = torch.randn(rows, length, generator=generator)
    values = torch.randn(rows, length, generator=generator)
    expected, expected_returns = gae_loop(rewards.double(), values.double(), mask, 1.0, 0.95)
    result = gae(rewards.cuda(), values.cuda(), mask.cuda(), 1.0, 0.95)
    assert result.advantages.is_cuda and not _scan._TRITON_FAILED
    assert_close(result.advantages.cpu().double(), expected, rtol=0, atol=1e-4)
    assert_close(result.returns.cpu().double(), expected_returns, rtol=0, atol=1e-4)
    returns = discounted_returns(rewards.cuda(), mask.cuda(), 0.99)
    assert_close(returns.cpu().double(), returns_loop(rewards.double(), mask, 0.99), rtol=0, atol=1e-4)
