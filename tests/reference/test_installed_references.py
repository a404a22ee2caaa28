"""The reference check: against an installed verl when there is one, and its plumbing always.

Without verl installed, the check runs against verl's functions as transcribed in
``trajlens.estimators.reference.verl`` (same names and signatures), so the script cannot rot
unnoticed.
"""

from __future__ import annotations

import math
import sys
import types
from pathlib import Path

import pytest
import torch
from _tolerance import ulp_tolerance

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import check_references  # noqa: E402

import trajlens.estimators.reference.verl as loops  # noqa: E402


def _transcribed_core() -> types.SimpleNamespace:
    """verl core_algos' estimator functions, by their verl names and signatures, from the transcriptions."""

    def gae(token_level_rewards, values, response_mask, gamma, lam):
        advantages, returns = loops.gae_loop(token_level_rewards, values, response_mask, gamma, lam)
        return loops.masked_whiten(advantages, response_mask), returns

    def passk(token_level_rewards, response_mask, index, config=None, **_):
        return loops.grpo_passk_loop(token_level_rewards.clone(), response_mask, index,
                                     norm_adv_by_std_in_grpo=config.get("norm_adv_by_std_in_grpo", True)), None

    def gdpo(token_level_rewards, response_mask, index, config=None, non_tensor_batch=None, batch=None, **_):
        import torch

        keys = config["gdpo_reward_keys"]
        channels = torch.stack([torch.tensor(non_tensor_batch[k], dtype=torch.float32) for k in keys], dim=1)
        weights = torch.tensor(config["gdpo_reward_weights"], dtype=torch.float32)
        return loops.gdpo_verl_loop(channels, response_mask.bool(), index, weights), None

    return types.SimpleNamespace(
        compute_gdpo_outcome_advantage=gdpo,
        compute_gae_advantage_return=gae,
        compute_grpo_outcome_advantage=lambda r, m, i, **_: (loops.grpo_loop(r.clone(), m, i), None),
        compute_rloo_outcome_advantage=lambda r, m, i, **_: (loops.rloo_loop(r.clone(), m, i), None),
        compute_reinforce_plus_plus_outcome_advantage=lambda r, m, config=None, **_: loops.reinforce_plus_plus_loop(
            r, m, config.gamma),
        compute_reinforce_plus_plus_baseline_outcome_advantage=lambda r, m, i, **_: (
            loops.reinforce_plus_plus_baseline_loop(r.clone(), m, i), None),
        compute_grpo_passk_outcome_advantage=passk,
        compute_opo_outcome_advantage=lambda r, m, i, **_: (loops.opo_loop(r.clone(), m, i), None),
        compute_gpg_outcome_advantage=lambda r, m, i, **_: (loops.gpg_loop(r.clone(), m, i), None),
        compute_remax_outcome_advantage=lambda r, b, m, **_: loops.remax_loop(r, b, m),
        compute_optimal_token_baseline_advantage=lambda r, m, i, lp, s, **_: (loops.otb_loop(r, m, i, lp, s), None),
        compute_multi_turn_optimal_token_baseline_advantage=lambda r, m, i, lp, s, **_: (
            loops.tir_otb_loop(r, m, i, lp, s), None),
        agg_loss=loops.agg_loss_verl,
    )


def test_check_runs_every_pair_against_the_transcribed_reference():
    rows = check_references.check(_transcribed_core(), cases=2)
    assert not [row for row in rows if row.error]
    assert {row.estimator for row in rows} == set(check_references.PAIRS)
    for row in rows:
        if row.estimator in ("gae", "reinforce_plus_plus"):  # a blocked scan against a loop: float rounding
            assert row.max_rel < 1e-3 or row.max_abs < 1e-4, row
        elif row.dtype == "float32" and not row.estimator.startswith("agg_loss"):
            assert row.max_rel <= ulp_tolerance(torch.float32), row  # a few ulp: the summation orders differ
        else:
            assert row.max_abs <= 1e-9 * max(1.0, 1e3), row
    text = check_references.render(rows)
    assert "reinforce_plus_plus_baseline" in text and "max rel" in text


def test_against_installed_verl():
    core = pytest.importorskip("verl.trainer.ppo.core_algos")
    rows = check_references.check(core, cases=3)
    print(check_references.render(rows))
    failing = [row for row in rows if row.error or not (row.max_rel < 1e-3 or row.max_abs < 1e-4)]
    assert not failing, check_references.render(failing)
    assert all(math.isfinite(row.max_abs) for row in rows)


def test_against_installed_trl_nanstd():
    utils = pytest.importorskip("trl.trainer.utils")
    row = check_references.check_trl_nanstd(utils.nanstd)
    assert row.max_rel <= ulp_tolerance(torch.float32), row
