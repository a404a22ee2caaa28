"""``trajlens synth --log-advantages`` for scenarios that train with a trajectory-level estimator
(grpo-leg: GRPO; multireward: GRPO with the batch's std): each trajectory's advantage is logged on
its model tokens, zero on the others, as verl applies it, and ``trajlens advantages --identify``
names the estimator the scenario's config trained with."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli
from synth_helpers import SMALL, tables

from trajlens.estimators import recompute

TRAINED = {"grpo-leg": "grpo", "multireward": "grpo_batch_std"}
"""The estimator each scenario's config trains with (``algorithm.adv_estimator`` and ``norm_adv``)."""

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("scenario", sorted(TRAINED))
def test_logged_advantages_are_the_trajectory_advantage_on_model_tokens(scenario, tmp_path):
    out = tmp_path / scenario
    result = run_cli("synth", scenario, "--steps", "2", "--batch", "16", "--tokens", SMALL["tokens_per_trajectory"],
                     "--calls", SMALL["tool_calls_per_trajectory"], "--log-advantages", "--out", out)
    assert result.returncode == 0, result.stderr
    run = tables(out)
    tokens = run["tokens"].sort("trajectory_id")
    expected = recompute(run["trajectories"], run["tokens"], TRAINED[scenario]).sort("trajectory_id")
    assert tokens["trajectory_id"].to_list() == expected["trajectory_id"].to_list()
    for mask, logged, advantage in zip(tokens["response_mask"], tokens["logged_advantages"], expected["advantage"]):
        is_model = mask.to_numpy().astype(bool)
        assert logged.len() == mask.len()
        np.testing.assert_allclose(logged.to_numpy(), np.where(is_model, np.float32(advantage), 0.0), rtol=1e-6)
    assert tokens.schema["logged_advantages"] == pl.List(pl.Float32)


@pytest.mark.parametrize("scenario", sorted(TRAINED))
def test_identify_names_the_estimator_the_scenario_trained_with(scenario, tmp_path):
    out, store, verdict = tmp_path / scenario, tmp_path / "store", tmp_path / "verdict.json"
    for args in (("synth", scenario, "--steps", "2", "--batch", "16", "--tokens", SMALL["tokens_per_trajectory"],
                  "--calls", SMALL["tool_calls_per_trajectory"], "--log-advantages", "--out", out),
                 ("ingest", out, "--store", store),
                 ("advantages", store, "--run", scenario, "--identify", "--json", verdict)):
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
    found = json.loads(verdict.read_text())
    assert found["matched"] and found["unit"] == "model tokens"
    assert found["best"]["estimator"] == TRAINED[scenario] and found["best"]["max_abs_diff"] < 1e-6
    check = run_cli("check", store)
    assert check.returncode == 0, check.stderr
    assert any(line.split()[:3] == ["logged_advantages_match", "error", "pass"] for line in check.stdout.splitlines())
