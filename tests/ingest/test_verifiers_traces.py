"""verifiers 0.4 ``traces.jsonl`` episodes, written by verifiers' own ``write_episode``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "verifiers_traces" / "outputs"
TRACES = DATA / "tool-math--mock-model--default--0a1b2c3d" / "traces.jsonl"


def test_episodes_grouped_with_rewards_as_channels_calls_and_logged_advantages():
    assert [s.format.name for s in formats.plan(DATA)] == ["verifiers-traces"]
    run = load(DATA)
    assert run.runs.column("name").to_pylist() == ["tool-math--mock-model--default--0a1b2c3d"]
    rows = [(r["trajectory_id"], r["step"], r["group_id"], r["task_id"], r["reward"], r["exit_status"], r["response_text"])
            for r in run.trajectories.to_pylist()]
    assert rows == [("ep-0", 3, "3:q0", "q0", 1.5, "completed", "42"),
                    ("ep-1", 3, "3:q0", "q0", 0.5, "completed", "I do not know."),
                    ("ep-2", 3, "3:q1", "q1", 1.5, "completed", "7"),
                    ("ep-3", 3, "3:q1", "q1", 1.5, "completed", "7"),
                    ("ep-4", 3, "3:q1", "q1", None, "error", "I do not know.")]
    assert run.trajectories.column("reward_channels")[0].as_py() == [
        {"name": "correct", "value": 1.0}, {"name": "format", "value": 1.0}]
    assert run.trajectories.column("reward_channels")[4].as_py() == []  # scoring did not run
    calls = [(c["trajectory_id"], c["tool_name"], c["command"], c["observation"], c["assistant_text"])
             for c in run.tool_calls.to_pylist()]
    assert calls[0] == ("ep-0", "bash", "echo $((6*7))", "42\n", "I should run it.\nLet me compute it.")
    tokens = run.tokens.to_pylist()
    # system 2 + user 3 + assistant 4 (1 scaffold, 3 sampled) + tool 2 + assistant 4 tokens
    assert tokens[0]["response_mask"] == [False] * 6 + [True] * 3 + [False] * 3 + [True] * 3
    assert tokens[0]["logged_advantages"] == [0.0] * 6 + [0.5] * 3 + [0.0] * 3 + [0.5] * 3
    assert tokens[1]["log_probs"][6:9] == [-0.5, -0.25, -0.125]
    assert tokens[4]["logged_advantages"] is None  # never assigned, not zero


def test_the_same_episodes_load_from_a_json_array(tmp_path):
    episodes = [json.loads(line) for line in TRACES.read_text().splitlines()]
    path = tmp_path / "episodes.json"
    path.write_text(json.dumps(episodes))
    assert [s.format.name for s in formats.plan(path)] == ["verifiers-traces"]
    drop = ["source", "run_id"]
    assert load(path).trajectories.drop(drop).equals(load(TRACES).trajectories.drop(drop))


def test_a_graph_of_several_branches_has_no_token_arrays(tmp_path):
    episodes = [json.loads(line) for line in TRACES.read_text().splitlines()]
    nodes = episodes[0]["traces"][0]["nodes"]
    nodes.append({**nodes[4], "parent": 3})  # a second answer to the same tool result
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    run = load(path)
    assert run.tokens.column("trajectory_id").to_pylist() == ["ep-1", "ep-2", "ep-3", "ep-4"]


@pytest.mark.parametrize("change, field", [
    (lambda e: e.__setitem__("id", [0]), "id"),
    (lambda e: e["traces"][0]["rewards"]["correct"].__setitem__("score", "high"), "rewards.correct.score"),
    (lambda e: e["traces"][0]["nodes"][2].__setitem__("mask", [True]), "nodes[2].mask"),
    (lambda e: e["traces"][0]["nodes"][2].__setitem__("advantages", [1.0]), "nodes[2].advantages"),
])
def test_bad_episodes_are_named_and_lenient_skips_them(tmp_path, change, field):
    episodes = [json.loads(line) for line in TRACES.read_text().splitlines()]
    change(episodes[2])
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    with pytest.raises(InputError) as caught:
        load(path)
    assert caught.value.field == field and "record 3" in str(caught.value)
    assert load(path, strict=False).trajectories.num_rows == 4


def test_verifiers_traces_ingest_classify_report_and_check(tmp_path):
    store, classes = through_every_surface(DATA, tmp_path)
    assert classes["tool_name"].to_list() == ["bash"] * 5
    labels = set(store.sql("SELECT DISTINCT estimator FROM advantage_batches")["estimator"])
    # ep-4 has no reward (grpo needs one on every trajectory) and no channels (gdpo_verl needs every one)
    assert labels == {"sum_then_normalize"}
