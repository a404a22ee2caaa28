"""The logged_advantages_match check on TRL runs whose advantages were made under known conventions."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import trajlens
from trajlens.checks import check_run, default_checks, parse_checks

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "ingest"))

STEPS, PROMPTS, GENERATIONS = 2, 3, 4
REWARDS = {  # per step, per prompt: the summed reward of each generation
    1: [[1.0, 0.0, 0.5, 1.0], [0.0, 0.0, 1.0, 0.25], [2.0, 1.0, 1.0, 0.0]],
    2: [[1.0, 1.0, 0.0, 0.5], [0.5, 0.0, 0.0, 1.0], [1.0, 2.0, 0.0, 0.0]],
}


def trl_advantages(rewards: np.ndarray, scale_rewards: str, epsilon: float = 1e-4) -> np.ndarray:
    """TRL ``GRPOTrainer._generate_and_score_completions``: group mean removed; divided by the
    group's (``group``) or the batch's (``batch``) unbiased std plus ``epsilon``, or not (``none``)."""
    grouped = rewards.reshape(-1, GENERATIONS)
    advantages = (grouped - grouped.mean(axis=1, keepdims=True)).reshape(-1)
    if scale_rewards == "group":
        std = np.repeat(grouped.std(axis=1, ddof=1), GENERATIONS)
    elif scale_rewards == "batch":
        std = np.full_like(rewards, rewards.std(ddof=1))
    else:
        return advantages.astype(np.float32)
    return (advantages / (std + epsilon)).astype(np.float32)  # logged as float32 tensors


def write_run(output_dir: Path, scale_rewards: str, epsilon: float = 1e-4, logged: bool = True) -> Path:
    """A TRL output folder (completions tables as GRPOTrainer writes them) made under a convention."""
    (output_dir / "completions").mkdir(parents=True)
    for step in range(1, STEPS + 1):
        rewards = np.array(REWARDS[step], dtype=np.float32).reshape(-1)
        advantages = trl_advantages(rewards, scale_rewards, epsilon)
        rows = [{"step": str(step), "prompt": f"<|im_start|>user\nTask {p}<|im_end|>\n", "completion": f"answer {g}",
                 "accuracy_reward": float(rewards[p * GENERATIONS + g])}
                | ({"advantage": float(advantages[p * GENERATIONS + g])} if logged else {})
                for p in range(PROMPTS) for g in range(GENERATIONS)]
        pq.write_table(pa.Table.from_pylist(rows), output_dir / "completions" / f"completions_{step:05d}.parquet")
    return output_dir


def check(tmp_path: Path, run: Path, measure: str):
    store = tmp_path / "store"
    trajlens.ingest([run], store)
    checks = parse_checks(tomllib.loads(f'''
[checks.logged_advantages_match]
measure = "{measure}"
condition = "threshold"
above = 1e-5
'''), "test")
    (result,) = check_run(store, checks, run_id=run.name).results
    return result


def test_the_shipped_check_passes_on_advantages_trl_made_with_group_scaling(tmp_path):
    shipped = {c.name: c for c in default_checks()}["logged_advantages_match"]
    run = write_run(tmp_path / "group-run", "group")
    trajlens.ingest([run], tmp_path / "store")
    (result,) = check_run(tmp_path / "store", [shipped], run_id="group-run").results
    assert result.status == "pass", result.evidence_text()
    assert "TRL >= 1.6 GRPO, scale_rewards=group, eps 1e-4" in result.reason
    assert result.outcomes[0].evaluated_steps == STEPS


def test_a_declared_convention_that_the_trainer_did_not_use_fails_naming_where_and_what_matches(tmp_path):
    run = write_run(tmp_path / "batch-run", "batch")
    result = check(tmp_path, run, "logged_advantage_diff:trl_grpo_group")
    assert result.status == "fail"
    assert result.fired_steps == (1, 2)
    assert "departs most at step" in result.reason and "group" in result.reason
    assert "they match trl_grpo_batch instead" in result.reason
    # the value is the step's largest |diff| relative to max(1, max |logged|): far beyond 1e-5
    assert result.evidence.value > 1e-2


def test_the_right_declared_convention_passes(tmp_path):
    run = write_run(tmp_path / "batch-run", "batch")
    result = check(tmp_path, run, "logged_advantage_diff:trl_grpo_batch")
    assert result.status == "pass", result.evidence_text()
    assert result.evidence.value <= 1e-5


def test_an_epsilon_of_1e_6_is_told_from_trl_s_1e_4(tmp_path):
    run = write_run(tmp_path / "eps-run", "group", epsilon=1e-6)
    result = check(tmp_path, run, "logged_advantage_diff:trl_grpo_group")
    assert result.status == "fail"
    assert "verl GRPO (group std, eps 1e-6)" in result.reason
    assert check(tmp_path / "again", run, "logged_advantage_diff:auto").status == "pass"


def test_a_run_without_logged_advantages_is_skipped_with_the_reason(tmp_path):
    run = write_run(tmp_path / "plain-run", "group", logged=False)
    result = check(tmp_path, run, "logged_advantage_diff:auto")
    assert result.status == "skip"
    assert "no logged advantages" in result.reason


def test_a_verl_dump_without_advantages_skips_it_too():
    shipped = {c.name: c for c in default_checks()}["logged_advantages_match"]
    (result,) = check_run(TESTS / "data" / "verl" / "grpo-sandbox", [shipped]).results
    assert result.status == "skip" and "no logged advantages" in result.reason


def test_an_unknown_candidate_is_a_config_error():
    from trajlens.checks import CheckConfigError

    with pytest.raises(CheckConfigError, match="unknown candidate 'trl_grpo_groups'"):
        parse_checks({"checks": {"c": {"measure": "logged_advantage_diff:trl_grpo_groups", "condition": "threshold",
                                       "above": 1e-5}}}, "test")


def test_advantage_checks_of_the_run_s_own_estimator_use_what_identify_found(tmp_path):
    # a TRL log names no estimator in a config; its logged advantages say TRL GRPO, scale_rewards=group
    run = write_run(tmp_path / "group-run", "group")
    result = check(tmp_path, run, "advantage:run:positive_share")
    assert result.status != "skip", result.reason
    assert result.outcomes[0].evaluated_steps == STEPS


def test_advantage_checks_of_the_run_s_own_estimator_skip_when_identify_finds_none_either(tmp_path):
    run = write_run(tmp_path / "plain-run", "group", logged=False)
    result = check(tmp_path, run, "advantage:run:positive_share")
    assert result.status == "skip"
    assert "config names no estimator" in result.reason and "no logged advantages" in result.reason
