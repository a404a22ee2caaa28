"""OpenPipe ART trajectory groups, written by ART's own ``write_trajectory_groups_parquet``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from end_to_end import through_every_surface  # noqa: E402

from trajlens.ingest import formats, load  # noqa: E402

TRAJECTORIES = Path(__file__).resolve().parents[1] / "data" / "art" / "email-agent" / "models" / "agent-001" / \
    "trajectories"


def test_groups_at_their_step_with_metrics_as_channels_and_calls():
    assert [s.format.name for s in formats.plan(TRAJECTORIES)] == ["art"]
    run = load(TRAJECTORIES)
    assert run.run_id == "agent-001"
    rows = [(r["trajectory_id"], r["step"], r["group_id"], r["task_id"], r["reward"], r["response_text"])
            for r in run.trajectories.to_pylist()]
    assert rows == [("train/1/0/0", 1, "train/1/0", "offsite", 1.0, "3 May"),
                    ("train/1/0/1", 1, "train/1/0", "offsite", 0.0, "I could not find it."),
                    ("train/1/1/0", 1, "train/1/1", "invoice", 1.0, "Ana"),
                    ("train/1/1/1", 1, "train/1/1", "invoice", 0.0, "Bob")]
    assert run.trajectories.column("reward_channels")[1].as_py() == [
        {"name": "correct", "value": 0.0}, {"name": "num_turns", "value": 2.0}]
    calls = [(c["tool_name"], c["arguments"], c["observation"], c["assistant_text"]) for c in run.tool_calls.to_pylist()]
    assert calls[0] == ("search_inbox", '{"keywords": "offsite"}', "Offsite: 3 May", "Let me search.")
    assert len(calls) == 4


def test_art_groups_ingest_classify_report_and_check(tmp_path):
    _, classes = through_every_surface(TRAJECTORIES, tmp_path)
    assert set(classes["primary_class"].to_list()) == {"search"}
