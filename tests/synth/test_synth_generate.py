"""The generator writes valid, deterministic, internally consistent runs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from synth_helpers import SMALL, small_runs, tables  # noqa: F401 (small_runs is a fixture)
from trajlens.errors import ConfigError
from trajlens.ingest.parquet import read_table_file
from trajlens.rows import RunData
from trajlens.schema import TABLES
from trajlens.store.layout import is_run_dir, table_files
from trajlens.synth import SCENARIOS, generate, load_truth
from trajlens.synth.commands import CALL_CLASSES


def _digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_same_arguments_give_identical_files(tmp_path):
    for name in ("sao-r6", "multireward"):
        a = generate(name, tmp_path / f"{name}-a", steps=3, batch=8, **SMALL).directory
        b = generate(name, tmp_path / f"{name}-b", steps=3, batch=8, **SMALL).directory
        assert _digest(a) == _digest(b)


def test_another_seed_gives_another_run(tmp_path):
    a = generate("sao-r6", tmp_path / "a", steps=2, batch=4, seed=0, **SMALL).directory
    b = generate("sao-r6", tmp_path / "b", steps=2, batch=4, seed=1, **SMALL).directory
    calls_a, calls_b = tables(a)["tool_calls"], tables(b)["tool_calls"]
    assert calls_a["command"].to_list() != calls_b["command"].to_list()
    assert tables(b)["runs"]["run_id"][0] == "sao-r6-seed1"


def test_a_run_started_later_has_the_same_steps(tmp_path):
    full = generate("sao-r6", tmp_path / "full", steps=6, batch=4, **SMALL).directory
    late = generate("sao-r6", tmp_path / "late", steps=2, first_step=5, batch=4, **SMALL).directory
    for name in ("trajectories", "tool_calls", "tokens"):
        for step in (5, 6):
            part = Path(name) / f"step={step:06d}" / "part-0.parquet"
            assert (full / part).read_bytes() == (late / part).read_bytes()
    assert not (late / "tool_calls" / "step=000004").exists()
    assert load_truth(late)["per_step"]["step"] == [5, 6]


def test_every_table_file_conforms_and_the_run_validates(small_runs):
    for name, directory in small_runs.items():
        assert is_run_dir(directory), name
        loaded = {table: [read_table_file(f, table) for f in table_files(directory, table)] for table in TABLES}
        import pyarrow as pa

        run = RunData(**{table: pa.concat_tables(parts) for table, parts in loaded.items()})
        run.validate(str(directory))
        assert run.run_id == name


def test_token_arrays_agree_with_calls_and_trajectories(small_runs):
    for name in ("sao-r6", "sao-r7", "grpo-leg", "multireward"):
        t = tables(small_runs[name])
        trajectories = t["trajectories"].sort("trajectory_id")
        tokens = t["tokens"].sort("trajectory_id")
        calls = t["tool_calls"].sort(["trajectory_id", "call_index"])
        assert trajectories["trajectory_id"].to_list() == tokens["trajectory_id"].to_list()
        has_values = SCENARIOS[name].critic is not None
        assert tokens["values"].null_count() == (0 if has_values else tokens.height)
        by_trajectory = calls.partition_by("trajectory_id", as_dict=True)
        for traj, tok in zip(trajectories.iter_rows(named=True), tokens.iter_rows(named=True)):
            mask = np.array(tok["response_mask"])
            rewards = np.array(tok["token_rewards"])
            assert mask.sum() == traj["model_tokens"]
            assert (~mask).sum() == traj["observation_tokens"]
            assert mask[-1], "the episode ends on a model token"
            assert rewards[-1] == pytest.approx(traj["reward"])
            assert np.count_nonzero(rewards[:-1]) == 0
            own = by_trajectory[(traj["trajectory_id"],)]
            assert own["call_index"].to_list() == list(range(traj["num_turns"]))
            spans = np.zeros(mask.size, dtype=bool)
            for start, end in zip(own["token_start"], own["token_end"]):
                assert 0 <= start < end <= mask.size
                spans[start:end] = True
            assert (spans == mask).all(), "model tokens are exactly the calls' spans"
            if has_values:
                assert len(tok["values"]) == mask.size


def test_truth_counts_match_the_written_calls(small_runs):
    for name in ("sao-r6", "sao-r7", "grpo-leg", "multireward"):
        truth = load_truth(small_runs[name])
        calls = tables(small_runs[name])["tool_calls"]
        per_step = calls.group_by("step").len().sort("step")
        assert per_step["len"].to_list() == truth["per_step"]["calls"]
        think = calls.filter(pl.col("tool_name") == "think").group_by("step").len()
        think_counts = dict(think.iter_rows())
        assert [think_counts.get(s, 0) for s in truth["per_step"]["step"]] == truth["per_step"]["calls.think"]
        total = sum(sum(truth["per_step"][f"calls.{c}"]) for c in CALL_CLASSES)
        assert total == calls.height


def test_sandbox_event_writes_empty_shells(tmp_path):
    run = generate("sao-r7", tmp_path / "r7", steps=3, first_step=142, batch=16, **SMALL).directory
    t = tables(run)
    shells = t["trajectories"].filter(pl.col("exit_status") == "sandbox_error")
    assert shells.height > 0 and set(shells["step"].to_list()) == {143}
    assert (shells["num_turns"] == 1).all() and (shells["reward"] == 0).all()
    metrics = t["step_metrics"].filter(pl.col("name") == "critic/grad_norm").sort("step")
    assert metrics.filter(pl.col("step") == 143)["value"][0] == 233.0


def test_large_trajectories_follow_the_requested_size(tmp_path):
    result = generate("sao-r7", tmp_path / "big", steps=1, batch=8, tokens_per_trajectory=20_000,
                      tool_calls_per_trajectory=50, log_probs=True)
    tokens = tables(result.directory)["tokens"]
    lengths = tokens["response_mask"].list.len()
    assert 14_000 < lengths.mean() < 26_000
    assert tokens["log_probs"].null_count() == 0
    assert result.tokens == lengths.sum()


def test_bad_arguments_are_reported_together(tmp_path):
    (tmp_path / "exists").mkdir()
    with pytest.raises(ConfigError) as error:
        generate("grpo-leg", tmp_path / "exists", steps=0, batch=12, tool_calls_per_trajectory=1)
    assert len(error.value.problems) == 4
    with pytest.raises(ConfigError, match="unknown scenario 'r6'"):
        generate("r6", tmp_path / "x")


def test_run_config_says_how_the_run_was_trained(small_runs):
    config = json.loads(tables(small_runs["sao-r6"])["runs"]["config"][0])
    assert config["algorithm"] == {"adv_estimator": "gae", "gamma": 1.0, "lam": 1.0, "whiten_advantages": False}
    assert config["critic"]["grad_clip"] == 1.0
    config = json.loads(tables(small_runs["multireward"])["runs"]["config"][0])
    assert config["reward"]["channels"] == ["format", "correctness"]
    assert config["actor_rollout_ref"]["rollout"]["n"] == 8
