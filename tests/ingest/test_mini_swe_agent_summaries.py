"""Run summaries near a mini-swe-agent run: only a file holding ``resolved_ids`` is one."""

from __future__ import annotations

import json

from trajlens.ingest.agents import load_mini_swe_agent_v2


def write_run(root):
    """``<root>/runA/t1/t1.traj.json``: one submitted task."""
    path = root / "runA" / "t1" / "t1.traj.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "trajectory_format": "mini-swe-agent-1.1", "instance_id": "t1", "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "use bash"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py", "extra": {"returncode": 0}},
        ],
    }))
    return root / "runA"


def test_a_dangling_link_named_like_a_summary_is_not_one(tmp_path):
    run = write_run(tmp_path)
    (tmp_path / "model.runA.json").symlink_to(tmp_path / "nonexistent")
    (tmp_path / "runA" / "other.runA.json").mkdir()
    loaded = load_mini_swe_agent_v2(run)
    assert loaded.trajectories.column("resolved").to_pylist() == [None]


def test_a_summary_beside_a_dangling_link_still_gives_the_verdict(tmp_path):
    run = write_run(tmp_path)
    (tmp_path / "a.runA.json").symlink_to(tmp_path / "nonexistent")
    (tmp_path / "b.runA.json").write_text(json.dumps({"resolved_ids": ["t1"]}))
    loaded = load_mini_swe_agent_v2(run)
    assert loaded.trajectories.column("resolved").to_pylist() == [True]
