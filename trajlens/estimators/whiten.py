"""Masked whitening of advantages over all model tokens of a batch.

Matches verl ``masked_whiten`` (``verl/utils/torch_functional.py``, with ``masked_mean``
dividing by ``count + 1e-8`` and ``masked_var`` unbiased), operation for operation, so float32
results are bit-identical::

    mean = sum(mask * A) / (count + 1e-8)
    var  = sum(mask * (A - mean)^2) / (count + 1e-8) * count / (count - 1)     (Bessel)
    A'   = (A - mean) * rsqrt(var + 1e-8)

Like verl, every position is transformed (observation tokens too) but only model tokens enter
the statistics, and NaN at an observation token cannot leak into them. Departure: verl raises a
bare ``ValueError`` for fewer than two model tokens; here the error names the argument and shape.

The same statistics from a batch's plain moments (count, mean, mean squared deviation), for
callers that scan flat buffers without tensors, are :func:`whitening_of_moments`.

Outcome and channel estimators whiten one value per trajectory, repeated over its model tokens
(verl tiles the score over the response). :func:`whiten_rows` takes that value and either the
(B, T) mask (verl's padded tensor, bit-identical) or each trajectory's model-token count: then the
statistics are count-weighted sums in float64 and the padded tensor is never built. verl's float32
sums over the padded tensor round differently, so the two agree to a few ulp of the result
(``tests/estimators/test_whiten_rows.py`` states the tolerance), not bit for bit.

Shapes: B trajectories, T token positions.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators.epsilons import WHITEN_EPS


class WhitenResult(NamedTuple):
    """Whitened advantages and the statistics that produced them."""

    advantages: torch.Tensor
    """(B, T) whitened values (every position; use the mask to read model tokens)."""
    mean: torch.Tensor
    """() masked mean that was subtracted (added back when ``shift_mean`` is False)."""
    var: torch.Tensor
    """() unbiased masked variance."""
    count: int  # type: ignore[assignment]
    """Number of model tokens in the statistics."""
    normalisation: str
    """``"batch_whiten"``, or ``"batch_whiten_keep_mean"`` when ``shift_mean`` is False."""


def masked_whiten(
    advantages: torch.Tensor, response_mask: torch.Tensor, shift_mean: bool = True
) -> WhitenResult:
    """Whiten ``advantages`` with one mean and variance over the model tokens of the batch.

    Args:
        advantages: (B, T) float, or any shape matching ``response_mask``.
        response_mask: bool of the same shape, True for model tokens; two or more needed.
        shift_mean: False adds the mean back after scaling (verl's ``shift_mean=False``).

    Returns:
        :class:`WhitenResult`; ``advantages`` has the input's shape and dtype.

    Matches verl ``masked_whiten`` (see module docstring).
    """
    fn = "masked_whiten"
    advantages = check.float_tensor(fn, "advantages", advantages)
    response_mask = check.bool_mask(fn, "response_mask", response_mask, ndim=advantages.dim())
    check.same_shape(fn, advantages=advantages, response_mask=response_mask)
    check.same_device(fn, advantages=advantages, response_mask=response_mask)
    check.nonempty_batch(fn, "advantages", advantages)
    count = int(response_mask.sum())
    require_two_tokens(fn, count, f"response_mask of shape {check.shape_of(response_mask)}")
    mean = masked_mean(advantages, response_mask)
    centred = advantages - mean
    var = masked_mean(centred**2, response_mask)
    mask_sum = response_mask.sum()
    var = var * (mask_sum / (mask_sum - 1))  # Bessel: n / (n - 1)
    whitened = (advantages - mean) * torch.rsqrt(var + WHITEN_EPS)  # A' = (A - mean) / sqrt(var + eps)
    if not shift_mean:
        whitened += mean
    label = "batch_whiten" if shift_mean else "batch_whiten_keep_mean"
    return WhitenResult(whitened, mean, var, count, label)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """sum(mask * values) / (count + 1e-8), with masked entries replaced by 0 first (verl)."""
    valid = torch.where(mask, values, 0.0)  # NaN on a masked position cannot leak
    total = (valid * mask).sum() if dim is None else (valid * mask).sum(dim=dim)
    count = mask.sum() if dim is None else mask.sum(dim=dim)
    return total / (count + WHITEN_EPS)


class Whitening(NamedTuple):
    """verl's whitening of a batch, ``A' = (A - mean) * scale``."""

    mean: float
    """``sum / (count + 1e-8)``: the mean verl subtracts."""
    scale: float
    """``rsqrt(var + 1e-8)``, var the Bessel-corrected variance about that mean."""


def whitening_of_moments(count: int, mean: float, m2: float) -> Whitening:
    """:func:`masked_whiten`'s statistics from the plain moments of the batch's model-token values.

    Args:
        count: model tokens n (two or more give a finite scale; fewer give NaN).
        mean: their plain mean.
        m2: their mean squared deviation from ``mean`` (divided by n).

    With verl's mean ``mu = mean * n / (n + 1e-8)``, the squared deviations about it sum to
    ``n * m2 + n * (mean - mu)^2``; the variance divides that by ``n + 1e-8`` and applies Bessel.
    """
    if count < 1:
        return Whitening(float("nan"), float("nan"))
    n = float(count)
    verl_mean = mean * n / (n + WHITEN_EPS)  # sum / (count + eps)
    if count < 2:
        return Whitening(verl_mean, float("nan"))
    var = (n * m2 + n * (mean - verl_mean) ** 2) / (n + WHITEN_EPS) * (n / (n - 1))  # Bessel
    return Whitening(verl_mean, 1.0 / math.sqrt(var + WHITEN_EPS))


class RowWhitening(NamedTuple):
    """:func:`whiten_rows`' result."""

    sequence: torch.Tensor
    """(B,) each trajectory's whitened value (0 for a trajectory with no model tokens, as verl's row)."""
    advantages: torch.Tensor | None
    """(B, T) the value on each model token, 0 elsewhere; None when counts were given."""


def whiten_rows(values: torch.Tensor, response_mask: torch.Tensor, fn: str = "masked_whiten") -> RowWhitening:
    """:func:`masked_whiten` of ``values[:, None] * response_mask``, read once per trajectory.

    Args:
        values: (B,) float, one value per trajectory, constant over its model tokens.
        response_mask: (B, T) bool (verl's tensor is built and whitened: bit-identical to verl),
            or (B,) integer model-token counts (count-weighted float64 statistics rounded to the
            dtype of ``values``, then verl's elementwise formula: a few ulp from verl's float32 sums).
        fn: the estimator named in errors.

    The statistics need two model tokens or more in the batch.
    """
    if response_mask.dim() == 2:
        tokens = values[:, None] * response_mask
        advantages = masked_whiten(tokens, response_mask).advantages * response_mask
        first = response_mask.int().argmax(dim=1)
        return RowWhitening(advantages.gather(1, first[:, None]).squeeze(1), advantages)
    counts = response_mask
    count = counts.sum().to(torch.int64)
    require_two_tokens(fn, int(count), f"a batch of {counts.shape[0]} trajectories")
    # verl's integer count: count + eps and count / (count - 1) are in torch's default float dtype
    denominator, bessel = count + WHITEN_EPS, count / (count - 1)
    weights = counts.to(torch.float64)
    mean = ((weights * values.double()).sum() / denominator).to(values.dtype)  # sum / (count + eps)
    centred = values.double() - mean.double()
    var = ((weights * centred * centred).sum() / denominator * bessel).to(values.dtype)  # Bessel
    sequence = (values - mean) * torch.rsqrt(var + WHITEN_EPS)  # verl: (A - mean) * rsqrt(var + eps)
    return RowWhitening(torch.where(counts > 0, sequence, torch.zeros_like(sequence)), None)


def model_token_counts(fn: str, name: str, response_mask: object, rows: int) -> torch.Tensor:
    """``response_mask`` of an estimator that reads only how many model tokens each trajectory has:
    a (B, T) bool mask, or (B,) non-negative integer counts; checked, returned as given."""
    if isinstance(response_mask, torch.Tensor) and response_mask.dim() == 1 and not response_mask.dtype.is_floating_point \
            and response_mask.dtype != torch.bool:
        if response_mask.shape[0] != rows:
            raise check.EstimatorInputError(
                f"{fn}: {name} holds {response_mask.shape[0]} model-token counts for {rows} trajectories")
        if bool((response_mask < 0).any()):
            raise check.EstimatorInputError(f"{fn}: {name}: a model-token count is negative")
        return response_mask
    mask = check.bool_mask(fn, name, response_mask)
    if mask.shape[0] != rows:
        raise check.EstimatorInputError(
            f"{fn}: {name} has shape {check.shape_of(mask)} for {rows} trajectories; it needs one row per trajectory")
    return mask


def counts_of(response_mask: torch.Tensor) -> torch.Tensor:
    """(B,) model tokens per trajectory of a (B, T) mask or of (B,) counts."""
    return response_mask.sum(dim=1) if response_mask.dim() == 2 else response_mask


def require_two_tokens(fn: str, count: int, where: str) -> None:
    """The one-line error of a whitening over fewer than two model tokens (``where``: what had them)."""
    if count < 2:
        raise check.EstimatorInputError(
            f"{fn}: {where} has {count} model token{'s' if count != 1 else ''}; whitening needs at least two")
