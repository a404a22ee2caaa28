"""REINFORCE without a baseline: the discounted return-to-go over model tokens.

``A_t = G_t = r_t + gamma * G_next``, where ``next`` is the next model token of the trajectory;
observation tokens carry the running return and their rewards are dropped. This is what GAE
degenerates to when the critic gives no baseline (V = 0, lambda = 1), the failure the r6 digest
describes. The advantages are raw; whiten them with :func:`masked_whiten` when comparing with a
trainer that whitens.

Reference and departures: verl's ``compute_reinforce_plus_plus_outcome_advantage`` computes the
same discounted sum but *resets* the running return at every token with mask 0 (its mask marks
padding after EOS, not observation spans) and always whitens. On a single-turn response with
right padding the two agree before whitening; on multi-turn masks verl's would cut the return
at each observation span, which is not REINFORCE over the trajectory.

Shapes: B trajectories, T token positions.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from trajlens.estimators.gae import returns_to_go


class ReinforceResult(NamedTuple):
    """REINFORCE advantages (the returns themselves) and the returns."""

    advantages: torch.Tensor
    """(B, T) G_t; at observation tokens the return carried from the next model token."""
    returns: torch.Tensor
    """(B, T) the same tensor as ``advantages``."""
    normalisation: str = "none"


def reinforce(token_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float = 1.0) -> ReinforceResult:
    """REINFORCE advantages without a baseline (B, T).

    Args:
        token_rewards: (B, T) float; entries on observation tokens are dropped.
        response_mask: (B, T) bool, True for model tokens.
        gamma: discount in [0, 1].

    Reference: the discounted sum of verl ``compute_reinforce_plus_plus_outcome_advantage``
    without its whitening, and without its reset at masked tokens (see module docstring).
    """
    returns = returns_to_go("reinforce", token_rewards, response_mask, gamma)
    return ReinforceResult(returns, returns)
