"""Generalised advantage estimation (GAE) over tokens, with observation tokens skipped.

Matches verl ``compute_gae_advantage_return`` (``verl/trainer/ppo/core_algos.py``, the version
that skips observation tokens) before its final whitening, which is a separate call here
(:func:`trajlens.estimators.masked_whiten`)::

    delta_t = r_t + gamma * V_next - V_t
    A_t     = delta_t + gamma * lambda * A_next

where ``next`` is the next *model* token of the same trajectory (mask True): the running value
and advantage carry over observation tokens unchanged, so the last model token of one turn links
to the first model token of the next. At an observation token the output holds the carried
advantage (that of the next model token, 0 after the last), exactly as verl's loop leaves it.
Rewards and values on observation tokens are ignored, as in verl (whose arithmetic still
carries a NaN value there back to every earlier position of its row; here it is ignored like
any other). Returns are the raw advantages plus the values, built before any whitening.

Departures from verl:

* verl whitens inside the estimator; here the caller does, and :class:`GAEResult` says the
  advantages are raw.
* The recurrence is solved by a blocked scan (:mod:`trajlens.estimators._scan`), not a loop
  over time, so float32 results differ from verl's by rounding (about 1e-6 relative).
* Inputs of half precision are computed and returned in float32.

Shapes: B trajectories, T token positions.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators._scan import masked_reverse_scan


class GAEResult(NamedTuple):
    """Raw (unwhitened) GAE advantages and the critic's targets."""

    advantages: torch.Tensor
    """(B, T) A_t; at observation tokens the advantage carried from the next model token."""
    returns: torch.Tensor
    """(B, T) A_t + V_t, the value targets, built before any whitening."""
    normalisation: str = "none"
    """Always ``"none"``: whiten with :func:`masked_whiten` if the trainer did."""


def gae(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> GAEResult:
    """GAE advantages and returns over model tokens, skipping observation tokens.

    Args:
        token_rewards: (B, T) float reward per token; entries on observation tokens are dropped.
        values: (B, T) float critic values; entries on observation tokens are ignored.
        response_mask: (B, T) bool, True for model tokens. Every row needs one.
        gamma: discount in [0, 1].
        lam: GAE lambda in [0, 1].

    Returns:
        :class:`GAEResult` with (B, T) advantages and returns in the inputs' dtype (float32 at least).

    Matches verl ``compute_gae_advantage_return`` without its whitening (see module docstring).
    """
    fn = "gae"
    token_rewards, values, response_mask = _check(fn, token_rewards, values, response_mask)
    gamma = check.unit_interval(fn, "gamma", gamma)
    lam = check.unit_interval(fn, "lam", lam)
    advantages, returns = _masked_reverse_scan(fn, token_rewards, values, response_mask, gamma, gamma * lam)
    return GAEResult(advantages, returns)


def discounted_returns(
    token_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float = 1.0
) -> torch.Tensor:
    """Discounted return-to-go over model tokens: ``G_t = r_t + gamma * G_next`` (B, T).

    ``next`` is the next model token; observation tokens carry the running return and their
    rewards are dropped. This is GAE with V = 0 and lambda = 1 (verl's GAE loop with zero
    values); verl's REINFORCE++ differs by resetting at every masked token, see
    :mod:`trajlens.estimators.reinforce`.
    """
    return returns_to_go("discounted_returns", token_rewards, response_mask, gamma)


def returns_to_go(fn: str, token_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """:func:`discounted_returns` with errors reported as coming from ``fn``."""
    token_rewards = check.float_tensor(fn, "token_rewards", token_rewards, ndim=2)
    response_mask = check.bool_mask(fn, "response_mask", response_mask)
    check.same_shape(fn, token_rewards=token_rewards, response_mask=response_mask)
    check.same_device(fn, token_rewards=token_rewards, response_mask=response_mask)
    check.nonempty_batch(fn, "token_rewards", token_rewards)
    gamma = check.unit_interval(fn, "gamma", gamma)
    rewards = _compute_dtype(token_rewards)
    returns, _ = _masked_reverse_scan(fn, rewards, None, response_mask, gamma, gamma)
    return returns


def _check(
    fn: str, token_rewards: torch.Tensor, values: torch.Tensor, response_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    token_rewards = check.float_tensor(fn, "token_rewards", token_rewards, ndim=2)
    values = check.float_tensor(fn, "values", values, ndim=2)
    response_mask = check.bool_mask(fn, "response_mask", response_mask)
    check.same_shape(fn, token_rewards=token_rewards, values=values, response_mask=response_mask)
    check.same_device(fn, token_rewards=token_rewards, values=values, response_mask=response_mask)
    check.nonempty_batch(fn, "token_rewards", token_rewards)
    dtype = torch.promote_types(torch.promote_types(token_rewards.dtype, values.dtype), torch.float32)
    return token_rewards.to(dtype), values.to(dtype), response_mask


def _compute_dtype(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _masked_reverse_scan(
    fn: str,
    token_rewards: torch.Tensor,
    values: torch.Tensor | None,
    response_mask: torch.Tensor,
    gamma: float,
    c: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages (and advantages + values) of the masked recurrence; see :mod:`._scan`."""
    result = masked_reverse_scan(token_rewards, values, response_mask, gamma, c)
    if result.empty_row:
        check.rows_have_tokens(fn, "response_mask", response_mask)
    if result.nonfinite:
        check.finite_where(fn, "token_rewards", token_rewards, response_mask)
        if values is not None:
            check.finite_where(fn, "values", values, response_mask)
    return result.scanned, (result.plus_values if result.plus_values is not None else result.scanned)
