"""Check trajlens's estimators against an installed verl (and TRL's importable helpers).

Runs every estimator that verl ships as a function on random batches (masks with observation
spans and right padding, groups of one, equal rewards within a group, reward scales from 1e-3 to
1e3) in float32 and float64, and prints one row per estimator, dtype and case with the largest
absolute and relative differences. Run it against your own verl version::

    pip install verl            # or: pip install -e /path/to/your/verl
    python tests/reference/check_references.py            # table on stdout
    python tests/reference/check_references.py --cases 200 --seed 1

TRL computes its advantages inline in ``GRPOTrainer._generate_and_score_completions`` and
``RLOOTrainer``, so no TRL function can be called for them; the script checks TRL's importable
``trl.trainer.utils.nanstd`` against trajlens's, and the inline code is covered by loops
transcribed from it in ``trajlens.estimators.reference.trl`` (``pytest tests/estimators``).
``pytest tests/reference`` runs this check too, skipped when verl is not installed.
"""

from __future__ import annotations

import argparse
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trajlens.estimators import gae, gdpo_verl, grpo, masked_whiten, rloo  # noqa: E402
from trajlens.estimators.aggregation import aggregation_weights  # noqa: E402
from trajlens.estimators.group_variants import gpg, grpo_passk, opo, reinforce_plus_plus_baseline  # noqa: E402
from trajlens.estimators.reinforce import reinforce_plus_plus  # noqa: E402
from trajlens.estimators.token_baselines import (  # noqa: E402
    optimal_token_baseline,
    remax,
    tir_optimal_token_baseline,
)


@dataclass(frozen=True)
class Case:
    """One random batch."""

    rewards: torch.Tensor  # (B, T) outcome on the last model token
    values: torch.Tensor
    mask: torch.Tensor  # (B, T) bool
    ids: np.ndarray  # (B,) group ids as strings (verl's uid)
    baselines: torch.Tensor  # (B,)
    log_probs: torch.Tensor
    sum_pi_squared: torch.Tensor
    channels: torch.Tensor  # (B, 2) reward channels, values in {0, 0.5, 1} times the scale
    full_groups: bool  # every group has two or more members
    label: str


def make_case(generator: torch.Generator, dtype: torch.dtype, kind: str) -> Case:
    size, length = 16, 24
    mask = torch.rand(size, length, generator=generator) > 0.25  # observation spans inside responses
    mask[:, 0] = True
    ends = torch.randint(4, length + 1, (size,), generator=generator)
    mask &= torch.arange(length)[None, :] < ends[:, None]  # right padding
    last = length - 1 - mask.flip(1).int().argmax(dim=1)
    scale = {"unit": 1.0, "tiny": 1e-3, "huge": 1e3}.get(kind, 1.0)
    outcome = torch.randint(0, 4, (size,), generator=generator).to(dtype) * scale
    groups = [i // 4 for i in range(size)]
    full = True
    if kind == "singletons":
        groups = [0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4, 5, 5, 6, 7, 7]
        full = False
    if kind == "equal":
        outcome = outcome.view(-1, 4)[:, :1].expand(-1, 4).reshape(-1).clone()  # no spread within a group
    rewards = torch.zeros(size, length, dtype=dtype)
    rewards[torch.arange(size), last] = outcome
    probabilities = torch.rand(size, length, generator=generator, dtype=dtype) * 0.9 + 0.05
    return Case(
        rewards=rewards,
        values=torch.randn(size, length, generator=generator, dtype=dtype),
        mask=mask,
        ids=np.array([f"uid-{g}" for g in groups], dtype=object),
        baselines=torch.rand(size, generator=generator, dtype=dtype) * scale,
        log_probs=probabilities.log(),
        sum_pi_squared=probabilities**2 + torch.rand(size, length, generator=generator, dtype=dtype) * 0.05,
        channels=torch.randint(0, 3, (size, 2), generator=generator).to(dtype) / 2 * scale,
        full_groups=full,
        label=kind,
    )


Pair = tuple[Callable[[Case], torch.Tensor], Callable[[Any, Case], torch.Tensor]]

# estimator -> (trajlens, verl): each returns the (B, T) advantages; ``core`` is verl's core_algos
PAIRS: dict[str, Pair] = {
    "gae": (
        lambda c: masked_whiten(gae(c.rewards, c.values, c.mask, 0.99, 0.95).advantages, c.mask).advantages,
        lambda core, c: core.compute_gae_advantage_return(c.rewards, c.values, c.mask.to(c.rewards.dtype), 0.99, 0.95)[0],
    ),
    "grpo": (
        lambda c: grpo(c.rewards, c.mask, c.ids).advantages,
        lambda core, c: core.compute_grpo_outcome_advantage(c.rewards, c.mask.to(c.rewards.dtype), c.ids)[0],
    ),
    "rloo": (
        lambda c: rloo(c.rewards, c.mask, c.ids).advantages,
        lambda core, c: core.compute_rloo_outcome_advantage(c.rewards, c.mask.to(c.rewards.dtype), c.ids)[0],
    ),
    "reinforce_plus_plus": (
        lambda c: reinforce_plus_plus(c.rewards, c.mask, gamma=0.99).advantages,
        lambda core, c: core.compute_reinforce_plus_plus_outcome_advantage(
            c.rewards, c.mask.to(c.rewards.dtype), config=types.SimpleNamespace(gamma=0.99))[0],
    ),
    "reinforce_plus_plus_baseline": (
        lambda c: reinforce_plus_plus_baseline(c.rewards, c.mask, c.ids).advantages,
        lambda core, c: core.compute_reinforce_plus_plus_baseline_outcome_advantage(
            c.rewards, c.mask.to(c.rewards.dtype), c.ids)[0],
    ),
    "grpo_passk": (
        lambda c: grpo_passk(c.rewards, c.mask, c.ids).advantages,
        lambda core, c: core.compute_grpo_passk_outcome_advantage(
            c.rewards, c.mask.to(c.rewards.dtype), c.ids, config={"norm_adv_by_std_in_grpo": True})[0],
    ),
    "opo": (
        lambda c: opo(c.rewards, c.mask, c.ids).advantages,
        lambda core, c: core.compute_opo_outcome_advantage(c.rewards, c.mask.to(c.rewards.dtype), c.ids)[0],
    ),
    "gpg": (
        lambda c: gpg(c.rewards, c.mask, c.ids).advantages,
        lambda core, c: core.compute_gpg_outcome_advantage(c.rewards, c.mask.to(c.rewards.dtype), c.ids)[0],
    ),
    "remax": (
        lambda c: remax(c.rewards, c.mask, c.baselines).advantages,
        lambda core, c: core.compute_remax_outcome_advantage(c.rewards, c.baselines, c.mask.to(c.rewards.dtype))[0],
    ),
    "optimal_token_baseline": (
        lambda c: optimal_token_baseline(c.rewards, c.mask, c.ids, c.log_probs, c.sum_pi_squared).advantages,
        lambda core, c: core.compute_optimal_token_baseline_advantage(
            c.rewards, c.mask.to(c.rewards.dtype), c.ids, c.log_probs, c.sum_pi_squared)[0],
    ),
    "tir_optimal_token_baseline": (
        lambda c: tir_optimal_token_baseline(c.rewards, c.mask, c.ids, c.log_probs, c.sum_pi_squared).advantages,
        lambda core, c: core.compute_multi_turn_optimal_token_baseline_advantage(
            c.rewards, c.mask.to(c.rewards.dtype), c.ids, c.log_probs, c.sum_pi_squared)[0],
    ),
}
GDPO_WEIGHTS = [1.0, 0.5]


def _verl_gdpo(core: Any, c: Case) -> torch.Tensor:
    """verl's GDPO reads each channel from ``non_tensor_batch`` and puts it on the response's last token."""
    ends = c.mask.flip(1).int().argmax(dim=1)
    response = torch.arange(c.mask.shape[1])[None, :] <= (c.mask.shape[1] - 1 - ends)[:, None]
    batch = {"prompts": torch.zeros(len(c.ids), 3, dtype=torch.long),
             "attention_mask": torch.cat([torch.ones(len(c.ids), 3, dtype=torch.long), response.long()], dim=1)}
    config = {"gdpo_reward_keys": ["first", "second"], "gdpo_reward_weights": GDPO_WEIGHTS}
    channels = {"first": c.channels[:, 0].numpy(), "second": c.channels[:, 1].numpy()}
    return core.compute_gdpo_outcome_advantage(c.rewards, c.mask.to(c.rewards.dtype), c.ids, config=config,
                                               non_tensor_batch=channels, batch=batch)[0]


PAIRS["gdpo"] = (
    lambda c: gdpo_verl(c.channels, c.mask, c.ids, weights=GDPO_WEIGHTS).advantages,
    _verl_gdpo,
)
for _mode in ("token-mean", "token-sum", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
    PAIRS[f"agg_loss:{_mode}"] = (
        lambda c, m=_mode: (aggregation_weights(c.mask, m).token_weights * c.values.double()).sum().reshape(1, 1),
        lambda core, c, m=_mode: core.agg_loss(c.values.double(), c.mask.double(), m).reshape(1, 1),
    )

NEEDS_FULL_GROUPS = {"grpo_passk"}


@dataclass(frozen=True)
class Row:
    estimator: str
    dtype: str
    case: str
    max_abs: float
    max_rel: float
    error: str = ""


def check(core: Any, cases: int = 20, seed: int = 0) -> list[Row]:
    """Differences between trajlens and ``core`` (verl's ``core_algos`` module) per estimator, dtype and case."""
    rows = []
    for dtype in (torch.float32, torch.float64):
        generator = torch.Generator().manual_seed(seed)
        batches = [make_case(generator, dtype, kind) for _ in range(cases)
                   for kind in ("unit", "tiny", "huge", "singletons", "equal")]
        for name, (ours, theirs) in PAIRS.items():
            by_kind: dict[str, list[float]] = {}
            for case in batches:
                if name in NEEDS_FULL_GROUPS and not case.full_groups:
                    continue
                try:
                    mine = ours(case).double()
                    reference = theirs(core, case).double()
                except Exception as error:  # a reference that refuses the case is reported, not hidden
                    rows.append(Row(name, str(dtype).removeprefix("torch."), case.label, float("nan"), float("nan"),
                                    f"{type(error).__name__}: {error}"[:80]))
                    break
                difference = (mine - reference).abs()
                relative = difference / reference.abs().clamp_min(1e-12)
                stats = by_kind.setdefault(case.label, [0.0, 0.0])
                stats[0] = max(stats[0], float(difference.max()))
                stats[1] = max(stats[1], float(relative.max()))
            for kind, (max_abs, max_rel) in by_kind.items():
                rows.append(Row(name, str(dtype).removeprefix("torch."), kind, max_abs, max_rel))
    return rows


def check_trl_nanstd(nanstd: Callable[..., torch.Tensor], seed: int = 0) -> Row:
    from trajlens.estimators._trl import trl_nanstd

    generator = torch.Generator().manual_seed(seed)
    values = torch.rand(64, 8, 3, generator=generator)
    values[torch.rand(64, 8, 3, generator=generator) < 0.2] = float("nan")
    mine, reference = trl_nanstd(values, dim=1), nanstd(values, dim=1, keepdim=True)
    difference = torch.nan_to_num((mine - reference).abs(), nan=0.0)
    return Row("trl nanstd", "float32", "nan", float(difference.max()), float((difference / reference.abs()).nan_to_num().max()))


def render(rows: list[Row]) -> str:
    lines = [f"{'estimator':<34} {'dtype':<8} {'case':<11} {'max abs':>10} {'max rel':>10}"]
    for row in rows:
        tail = f"  {row.error}" if row.error else ""
        lines.append(f"{row.estimator:<34} {row.dtype:<8} {row.case:<11} {row.max_abs:>10.2e} {row.max_rel:>10.2e}{tail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20, help="random batches per case kind and dtype")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows: list[Row] = []
    try:
        import verl  # noqa: F401
        from verl.trainer.ppo import core_algos
    except ImportError as error:
        print(f"verl not importable ({error}); install it to check against it: pip install verl")
    else:
        print(f"verl {getattr(sys.modules['verl'], '__version__', '?')}")
        rows += check(core_algos, args.cases, args.seed)
    try:
        from trl.trainer.utils import nanstd
    except ImportError as error:
        print(f"trl not importable ({error}); install it to check against it: pip install trl")
    else:
        print(f"trl {getattr(sys.modules['trl'], '__version__', '?')}")
        rows.append(check_trl_nanstd(nanstd, args.seed))
    if rows:
        print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
