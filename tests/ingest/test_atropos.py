"""Atropos scored groups: token arrays with their masks, scores, logged advantages and tool calls."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from atropos_fixture import GROUPS, write_groups  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "atropos" / "groups.jsonl"


def test_the_shipped_fixture_is_what_the_writer_writes(tmp_path):
    assert write_groups(tmp_path / "g.jsonl").read_text() == SHIPPED.read_text()


def test_groups_members_tokens_and_calls():
    assert [s.format.name for s in formats.plan(SHIPPED)] == ["atropos"]
    run = load(SHIPPED)
    rows = run.trajectories.to_pylist()
    assert [(r["trajectory_id"], r["group_id"], r["reward"], r["model_tokens"]) for r in rows] == [
        ("1-0", "line1", 1.0, 3), ("1-1", "line1", -1.0, 2), ("2-0", "line2", 0.5, 2), ("2-1", "line2", 0.5, 2)]
    assert [r["num_turns"] for r in rows] == [2, 1, 0, 0]  # no messages logged: no turns known
    tokens = {t["trajectory_id"]: t for t in run.tokens.to_pylist()}
    assert tokens["1-0"]["response_mask"] == [False, False, True, True, True]
    assert tokens["1-1"]["logged_advantages"] == [-1.0] * 4
    assert tokens["2-1"]["log_probs"] == pytest.approx([0.0, -0.3, -0.4])
    assert tokens["2-0"]["logged_advantages"] is None
    calls = run.tool_calls.to_pylist()
    assert [(c["trajectory_id"], c["command"], c["observation"]) for c in calls] == [("1-0", "ls", "a.txt")]


@pytest.mark.parametrize("change, field", [
    (lambda g: g["masks"].pop(), "masks"),
    (lambda g: g["masks"][0].append(-100), "masks"),
    (lambda g: g["scores"].__setitem__(0, "high"), "scores"),
    (lambda g: g["advantages"][0].pop(), "advantages"),
    (lambda g: g["masks"][0].__setitem__(0, [1]), "masks"),
    (lambda g: g["tokens"].__setitem__(1, {"a": 1}), "tokens"),
])
def test_bad_groups_are_named_and_lenient_skips_them(tmp_path, change, field):
    groups = json.loads(json.dumps(GROUPS))
    change(groups[0])
    path = tmp_path / "groups.jsonl"
    path.write_text("".join(json.dumps(g) + "\n" for g in groups))
    with pytest.raises(InputError) as caught:
        load(path)
    assert caught.value.field == field
    run = load(path, strict=False)
    assert run.trajectories.column("group_id").to_pylist() == ["line2", "line2"]
