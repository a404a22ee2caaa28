"""A fused reverse scan on CUDA (Triton): GAE and discounted returns in one pass per row.

The torch path on a GPU (:func:`trajlens.estimators._scan._masked_chunk`) compacts the model
tokens, builds TD errors, runs blocked Toeplitz products and gathers back: a dozen kernels and
as many round trips through memory. Here one Triton program owns one row and walks it from the
end in tiles of ``TILE`` tokens, reading rewards, values and mask once and writing advantages
and returns once (about 17 bytes of traffic a token in float32). Within a tile two
``tl.associative_scan`` calls do the work, over the tile loaded back to front:

* the next model token's value, ``V_next``: a "latest model token wins" scan over the values
  one position to the right, falling back on the value carried from the tile before;
* the masked recurrence as a composition of affine maps ``y -> a y + b``, with ``(a, b) =
  (c, delta_t)`` at a model token and ``(1, 0)`` (carry unchanged) at an observation token;
  composing ``(a1, b1)`` then ``(a2, b2)`` gives ``(a2 a1, a2 b1 + b2)``, and the advantage is
  the composed map applied to the advantage carried from the tile before.

Float32 only (Triton passes scalars as float32, so gamma would be rounded for float64); other
dtypes, and any machine without Triton, use the torch path. :data:`AVAILABLE` says whether
Triton imported; :func:`masked_scan` raises if the kernel cannot be built, and the caller falls
back (see :func:`trajlens.estimators._scan.masked_reverse_scan`).
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton: the torch path runs
    triton = None  # type: ignore[assignment, unused-ignore]
    tl = None  # type: ignore[assignment, unused-ignore]

AVAILABLE: bool = triton is not None
TILE = 2048

if AVAILABLE:

    @triton.jit
    def _latest(has_a, value_a, has_b, value_b):  # type: ignore[no-untyped-def]
        # b comes later in scan order (nearer to the row start): it wins when it is a model token
        return tl.maximum(has_a, has_b), tl.where(has_b > 0, value_b, value_a)

    @triton.jit
    def _affine(a1, b1, a2, b2):  # type: ignore[no-untyped-def]
        # apply (a1, b1) first, then (a2, b2): y -> a2 (a1 y + b1) + b2
        return a2 * a1, a2 * b1 + b2

    @triton.jit  # type: ignore[untyped-decorator]
    def _masked_scan_kernel(  # type: ignore[no-untyped-def]
        rewards_ptr, values_ptr, mask_ptr, out_ptr, plus_values_ptr, length, gamma, c,
        HAS_VALUES: tl.constexpr, TILE_SIZE: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        base = row * length
        k = tl.arange(0, TILE_SIZE)
        is_last = k == TILE_SIZE - 1
        carried = tl.sum(tl.zeros([TILE_SIZE], dtype=tl.float32), axis=0)  # y after the tile
        carried_value = tl.sum(tl.zeros([TILE_SIZE], dtype=tl.float32), axis=0)  # V of the next model token
        for tile in range(0, tl.cdiv(length, TILE_SIZE)):
            t = length - 1 - tile * TILE_SIZE - k  # back to front
            inside = t >= 0
            model = tl.load(mask_ptr + base + t, mask=inside, other=0) != 0
            reward = tl.load(rewards_ptr + base + t, mask=inside & model, other=0.0).to(tl.float32)
            if HAS_VALUES:
                value = tl.load(values_ptr + base + t, mask=inside, other=0.0).to(tl.float32)
                right = inside & (t + 1 < length)
                model_right = (tl.load(mask_ptr + base + t + 1, mask=right, other=0) != 0).to(tl.int32)
                value_right = tl.load(values_ptr + base + t + 1, mask=right, other=0.0).to(tl.float32)
                has, nearest = tl.associative_scan((model_right, value_right), 0, _latest)
                next_value = tl.where(has > 0, nearest, carried_value)
                delta = reward + gamma * next_value - value  # delta_t = r_t + gamma V_next - V_t
                last_has = tl.sum(tl.where(is_last, has, 0), axis=0)
                last_value = tl.sum(tl.where(is_last, nearest, 0.0), axis=0)
                carried_value = tl.where(last_has > 0, last_value, carried_value)
            else:
                delta = reward
            a = tl.where(model, c, 1.0)
            b = tl.where(model, delta, 0.0)
            a, b = tl.associative_scan((a, b), 0, _affine)
            y = a * carried + b  # A_t = delta_t + c A_next, observation tokens carry
            tl.store(out_ptr + base + t, y, mask=inside)
            if HAS_VALUES:
                tl.store(plus_values_ptr + base + t, y + value, mask=inside)  # R_t = A_t + V_t
            carried = tl.sum(tl.where(is_last, y, 0.0), axis=0)


def supports(x: torch.Tensor) -> bool:
    """Whether the Triton kernel can take ``x``: float32 on a CUDA device, Triton installed."""
    return AVAILABLE and x.is_cuda and x.dtype == torch.float32


def masked_scan(
    x: torch.Tensor, values: torch.Tensor | None, mask: torch.Tensor, gamma: float, c: float
) -> tuple[torch.Tensor, torch.Tensor | None, bool, bool]:
    """The masked reverse scan on CUDA: (y, y + values or None, empty row?, non-finite?).

    ``x``, ``values`` (B, T) float32 CUDA tensors, ``mask`` (B, T) bool on the same device.
    """
    rows, length = x.shape
    x = x.contiguous()
    mask_bytes = mask.contiguous().view(torch.uint8)
    out = torch.empty_like(x)
    plus_values = torch.empty_like(x) if values is not None else None
    values_arg = values.contiguous() if values is not None else x
    if rows and length:
        _masked_scan_kernel[(rows,)](
            x, values_arg, mask_bytes, out, plus_values if plus_values is not None else out, length,
            float(gamma), float(c), HAS_VALUES=values is not None, TILE_SIZE=TILE, num_warps=8,
        )
    empty = not bool(mask.any(dim=1).all())
    nonfinite = not bool(torch.isfinite(torch.where(mask, out, 0.0).sum()))
    return out, plus_values, empty, nonfinite
