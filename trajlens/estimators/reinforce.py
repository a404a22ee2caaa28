"""REINFORCE and REINFORCE++: the discounted return-to-go over model tokens, raw or whitened.

``A_t = G_t = r_t + gamma * G_next``. Two conventions for what ``next`` is:

* ``"carry"`` (default; verl 0.9.0 on): the next *model* token of the trajectory. Observation
  tokens carry the running return and their rewards are dropped, so the return of a multi-turn
  trajectory flows across its observation spans. This is verl's loop from 0.9.0
  (``running = new * mask_t + running * (1 - mask_t)``), and what GAE degenerates to when the
  critic gives no baseline (V = 0, lambda = 1).
* ``"reset"`` (verl 0.8.0 and earlier): verl's old loop, transcribed: ``running = r_t + gamma *
  running; G_t = running; running *= mask_t``. The running return is *reset to zero at every
  token with mask 0*, and a reward sitting on a masked token still enters that token's return.
  verl wrote it for a mask that is 1 up to EOS and 0 after (its comment says "Reset after EOS");
  on a mask with observation spans it cuts the return at every span, so a turn before a tool
  call never sees the outcome reward.

Both agree on single-turn responses with right padding. verl's
``compute_reinforce_plus_plus_outcome_advantage`` (``verl/trainer/ppo/core_algos.py``) then
whitens the returns over the batch's model tokens and zeroes masked positions.
:func:`reinforce_plus_plus` is that estimator, in either convention; :func:`reinforce` is the raw
return (whiten it with :func:`masked_whiten` to compare with a trainer that whitens).

Departure: ``"carry"`` is solved by a blocked scan, so float32 results differ from a loop by
rounding (about 1e-6 relative); ``"reset"`` is verl's loop over T: the torch kernel
(``TRAJLENS_SCAN_KERNEL=torch``) repeats its float32 operations and is bit-identical to verl's, the
compiled CPU kernel accumulates in float64 and rounds each return once, so its float32 results
differ from verl's by rounding (below 1e-6 relative).

Shapes: B trajectories, T token positions.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
import torch

from trajlens.estimators import _compiled
from trajlens.estimators import _validate as check
from trajlens.estimators._scan import use_compiled
from trajlens.estimators.gae import returns_to_go
from trajlens.estimators.whiten import masked_whiten

ReturnConvention = Literal["carry", "reset"]


class ReinforceResult(NamedTuple):
    """REINFORCE advantages and the returns they came from."""

    advantages: torch.Tensor
    """(B, T) G_t (raw), or the whitened returns times the mask (REINFORCE++)."""
    returns: torch.Tensor
    """(B, T) the discounted returns G_t, before any whitening."""
    normalisation: str = "none"


def reinforce(
    token_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float = 1.0, convention: ReturnConvention = "carry"
) -> ReinforceResult:
    """REINFORCE advantages without a baseline: the raw discounted returns (B, T).

    Args:
        token_rewards: (B, T) float; with ``"carry"`` entries on observation tokens are dropped.
        response_mask: (B, T) bool, True for model tokens.
        gamma: discount in [0, 1].
        convention: ``"carry"`` (across observation spans, verl >= 0.9) or ``"reset"`` (verl <= 0.8).

    Reference: the discounted sum of verl ``compute_reinforce_plus_plus_outcome_advantage``
    without its whitening; see the module docstring. Half-precision rewards (float16, bfloat16):
    ``"carry"`` computes and returns float32, as :func:`~trajlens.estimators.gae` does; ``"reset"``
    keeps their dtype, within two ulp of verl's loop in it.
    """
    returns = _returns("reinforce", token_rewards, response_mask, gamma, convention)
    return ReinforceResult(returns, returns)


def reinforce_plus_plus(
    token_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float = 1.0, convention: ReturnConvention = "carry"
) -> ReinforceResult:
    """REINFORCE++: discounted returns whitened over the batch's model tokens, times the mask.

    ``A = masked_whiten(G, mask) * mask``. Matches verl
    ``compute_reinforce_plus_plus_outcome_advantage``: verl 0.9.0 on with ``convention="carry"``
    (the default), verl 0.8.0 and earlier with ``"reset"``. Arguments as :func:`reinforce`.
    """
    fn = "reinforce_plus_plus"
    returns = _returns(fn, token_rewards, response_mask, gamma, convention)
    whitened = masked_whiten(returns, response_mask)
    return ReinforceResult(whitened.advantages * response_mask, returns, whitened.normalisation)


def _returns(
    fn: str, token_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float, convention: str
) -> torch.Tensor:
    check.choice(fn, "convention", convention, ("carry", "reset"))
    if convention == "carry":
        return returns_to_go(fn, token_rewards, response_mask, gamma)
    token_rewards = check.float_tensor(fn, "token_rewards", token_rewards, ndim=2)
    response_mask = check.bool_mask(fn, "response_mask", response_mask)
    check.same_shape(fn, token_rewards=token_rewards, response_mask=response_mask)
    check.nonempty_batch(fn, "token_rewards", token_rewards)
    gamma = check.unit_interval(fn, "gamma", gamma)
    if use_compiled(token_rewards):  # the same loop, compiled: one pass over each row
        rows, length = token_rewards.shape
        flat = token_rewards.detach().contiguous().numpy().reshape(-1)
        out = np.empty_like(flat)
        _compiled.reset_returns_rows(flat, response_mask.detach().contiguous().numpy().reshape(-1),
                                     np.arange(rows + 1, dtype=np.int64) * length, float(gamma), out)
        return torch.from_numpy(out.reshape(rows, length))
    mask = response_mask.to(token_rewards.dtype)
    returns = torch.zeros_like(token_rewards)
    running = torch.zeros_like(token_rewards[:, 0])
    for t in reversed(range(token_rewards.shape[1])):
        running = token_rewards[:, t] + gamma * running  # G_t = r_t + gamma * G_{t+1}
        returns[:, t] = running
        running = running * mask[:, t]  # verl: "Reset after EOS", at every mask-0 token
    return returns
