"""The reference trainers' epsilons, in one place and without torch.

The estimators use them, and so do the synthetic generator's NumPy references
(:mod:`trajlens.synth._reference`), which must not import torch.
"""

from __future__ import annotations

GRPO_EPS = 1e-6
"""verl GRPO: added to the unbiased group std, (score - mean_g) / (std_g + eps)."""
TRL_EPS = 1e-4
"""TRL: added to every std it divides by (GRPOTrainer, RLOOTrainer)."""
WHITEN_EPS = 1e-8
"""verl ``masked_whiten``: added to the token count and to the variance."""
EXPLAINED_VARIANCE_EPS = 1e-5
"""verl ``critic/vf_explained_var``: 1 - var(R - V) / (var(R) + eps)."""
