"""Reverse discounted scan ``y_k = x_k + c * y_{k+1}`` without a Python loop over k.

This first-order linear recurrence is the heart of GAE (``c = gamma * lambda``) and of
discounted returns (``c = gamma``). A loop over time costs one interpreter round trip per token;
here the sequence is cut into blocks of ``BLOCK`` tokens and solved in three moves:

1. within each block, ``local = x_block @ U.T`` with the upper-triangular Toeplitz matrix
   ``U[i, j] = c^(j - i)`` for ``j >= i`` (one matrix product for the whole batch);
2. the value at the start of each block obeys the same recurrence over blocks, with
   coefficient ``c^BLOCK`` and inputs ``local[:, b, 0]``: solved by the same function,
   recursively (depth log_BLOCK(T); three levels at T = 131,072);
3. each block adds the discounted value carried in from the next block: ``c^(BLOCK - i)``
   times the start value of block b + 1.

Powers of c are computed in float64 and only ever as ``c^k`` with ``0 <= k <= BLOCK``, so
nothing overflows for long sequences (the ``c^-t`` rescaling trick would overflow at t ~ 2,000
for c = 0.95 in float32). Powers below ``sqrt(tiny)`` are flushed to zero: they change no
float32 result that matters and would otherwise put subnormal numbers in the matrix product,
which runs two orders of magnitude slower on CPUs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BLOCK = 64


def _toeplitz(c: float, size: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``U`` (size, size) with ``U[i, j] = c^(j - i)`` for j >= i, and the powers ``c^0..c^size``."""
    exponents = torch.arange(size + 1, dtype=torch.float64, device=device)
    powers = torch.pow(torch.tensor(c, dtype=torch.float64, device=device), exponents)
    tiny = torch.finfo(dtype).tiny ** 0.5
    powers = torch.where(powers < tiny, torch.zeros_like(powers), powers).to(dtype)
    i = torch.arange(size, device=device)
    lag = i[None, :] - i[:, None]  # j - i
    upper = torch.where(lag >= 0, powers[lag.clamp(min=0)], torch.zeros((), dtype=dtype, device=device))
    return upper, powers


def reverse_discounted_scan(x: torch.Tensor, c: float, block: int = BLOCK) -> torch.Tensor:
    """Solve ``y_k = x_k + c * y_{k+1}`` (``y_n = 0``) along the last dimension of ``x`` (R, n).

    Returns a new (R, n) tensor. ``c`` is a Python float in [0, 1].
    """
    rows, n = x.shape
    if c == 0.0:
        return x.clone()
    upper, powers = _toeplitz(c, min(n, block), x.dtype, x.device)
    if n <= block:
        return x @ upper.T  # y_i = sum_{j >= i} c^(j-i) x_j
    num_blocks = -(-n // block)
    pad = num_blocks * block - n
    blocks = F.pad(x, (0, pad)).view(rows, num_blocks, block)
    local = blocks @ upper.T  # (R, nb, block): the scan inside each block, nothing carried in
    starts = reverse_discounted_scan(local[:, :, 0].contiguous(), float(c**block), block)
    carried = F.pad(starts[:, 1:], (0, 1))  # y at the start of the next block (0 after the last)
    decay = powers[1:].flip(0)  # c^(block - i), i = 0..block-1
    local.addcmul_(carried[:, :, None], decay)  # y_i = local_i + c^(block - i) * y_(next block start)
    out = local.view(rows, num_blocks * block)
    return out[:, :n] if pad else out
