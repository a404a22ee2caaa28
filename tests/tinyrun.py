"""A tiny hand-made run shared by store, query and CLI tests."""

from __future__ import annotations


def tiny_run(run_id: str = "tiny"):
    """Two steps, two groups of two, with tool calls and token arrays, built by hand."""
    from trajlens.rows import RunBuilder

    builder = RunBuilder(run_id, estimator="grpo", config={"group_size": 2}, source_format="test", source="tiny")
    for step in (1, 2):
        for group in ("a", "b"):
            for member in (0, 1):
                trajectory_id = f"{step}-{group}-{member}"
                reward = float(member)
                builder.add_trajectory(
                    {
                        "step": step,
                        "trajectory_id": trajectory_id,
                        "group_id": f"{step}:{group}",
                        "task_id": group,
                        "reward": reward,
                        "reward_channels": [{"name": "correct", "value": reward}, {"name": "format", "value": 1.0}],
                        "resolved": bool(member),
                        "exit_status": "submitted",
                        "model_tokens": 5,
                        "observation_tokens": 2,
                    },
                    [
                        {"turn": 0, "tool_name": "bash", "command": "pytest -q", "arguments": '{"command": "pytest -q"}',
                         "observation": "1 passed", "return_code": 0, "token_start": 0, "token_end": 3},
                        {"turn": 1, "tool_name": "think", "arguments": '{"thought": "ok"}'},
                    ],
                    {
                        "response_mask": [True, True, True, False, False, True, True],
                        "values": [0.1, 0.2, 0.3, 0.0, 0.0, 0.4, 0.5],
                        "token_rewards": [0, 0, 0, 0, 0, 0, reward],
                        "log_probs": None,
                    },
                    where=f"tiny: record {trajectory_id}",
                )
    builder.add_metric(1, "critic/vf_explained_var", 0.1)
    builder.add_metric(2, "critic/vf_explained_var", 0.2)
    return builder.build()
