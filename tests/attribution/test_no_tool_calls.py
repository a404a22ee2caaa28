"""A run without tool calls (a maths GRPO run, say) gets its length and reward-channel attribution."""

from __future__ import annotations

import numpy as np
import polars as pl
from cli_run import run_cli as cli

import trajlens
from trajlens.attribution import attribute
from trajlens.attribution.api import NO_TOOL_CALLS


def _run_without_tools(directory, steps: int = 12, groups: int = 3, size: int = 4):
    """Two reward channels, responses that grow by 6 tokens a step, not one tool call."""
    from trajlens.rows import RunBuilder
    from trajlens.store.layout import RunDirWriter

    rng = np.random.default_rng(0)
    builder = RunBuilder("no-tools", estimator="grpo", config={}, source_format="test", source="hand")
    for step in range(1, steps + 1):
        for group in range(groups):
            for member in range(size):
                correct = float(rng.random() < 0.5)
                builder.add_trajectory(
                    {"step": step, "trajectory_id": f"{step}-{group}-{member}", "group_id": f"{step}:{group}",
                     "task_id": f"task-{group}", "reward": correct + 0.1,
                     "reward_channels": [{"name": "correct", "value": correct}, {"name": "format", "value": 0.1}],
                     "model_tokens": int(rng.integers(20, 40)) + 6 * step},
                    [], None, where="hand")
    run = builder.build()
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)
    return directory


def test_a_run_without_tool_calls_is_attributed_and_says_what_it_lacks(tmp_path):
    trajlens.ingest([_run_without_tools(tmp_path / "run")], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    result = attribute(store, "no-tools")
    assert NO_TOOL_CALLS in result.findings
    assert result.drift.height == 0 and result.class_credit.height == 0
    assert any("response length grew" in f for f in result.findings)
    assert set(result.length_bias["aggregation"]) >= {"token-mean", "seq-mean-token-mean"}
    assert result.channels.height == 12  # a row per step: the reward channels are measured
    grpo = {row["aggregation"]: row["elasticity"] for row in
            result.length_bias.filter(pl.col("estimator") == "grpo").iter_rows(named=True)}
    # seq-mean-token-mean weighs a token of a response of length L by 1/L more than token-mean does
    assert abs(grpo["seq-mean-token-mean"] - (grpo["token-mean"] - 1.0)) < 1e-9

    status = cli("attribute", tmp_path / "store", "--run", "no-tools")
    assert status.returncode == 0, status.stderr
    assert "no tool calls in the run" in status.stdout
