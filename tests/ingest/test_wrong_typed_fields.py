"""A field of the wrong type is the standard error naming its record (or, where the module says
the log is read otherwise, a note), never silently defaulted or dropped."""

from __future__ import annotations

import copy
import json

import pytest
from hostile import OPENHANDS_V0, OPENHANDS_V1

from trajlens.errors import InputError
from trajlens.ingest.agents import load_mini_swe_agent_v1, load_openhands_v0, load_openhands_v1


def test_openhands_v0_observation_content_that_is_no_text_is_an_error(tmp_path):
    events = copy.deepcopy(OPENHANDS_V0)
    events[2]["content"] = ["a.txt"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    with pytest.raises(InputError, match=r"record event 2: field 'content': expected a string, found a list"):
        load_openhands_v0(path)


def test_openhands_v1_output_that_is_a_number_is_an_error(tmp_path):
    state = copy.deepcopy(OPENHANDS_V1)
    state["history"][1]["observation"]["output"] = 12345
    path = tmp_path / "state_x.json"
    path.write_text(json.dumps(state))
    with pytest.raises(InputError, match=r"record event 1: field 'observation.output': .*found an integer"):
        load_openhands_v1(path)


@pytest.mark.parametrize("result, total, field", [(1, 0, "total"), (0, -2, "total"), (5, 3, "result"),
                                                   (-1, 3, "result")])
def test_openhands_v1_checkpoint_score_out_of_range_is_an_error(tmp_path, result, total, field):
    (tmp_path / "state_x.json").write_text(json.dumps(OPENHANDS_V1))
    (tmp_path / "eval_x.json").write_text(json.dumps({"final_score": {"result": result, "total": total}}))
    with pytest.raises(InputError, match=f"eval_x.json: field 'final_score.{field}': "):
        load_openhands_v1(tmp_path / "state_x.json")


def test_mini_swe_agent_v1_action_regex_that_is_no_string_is_noted(tmp_path):
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps({
        "trajectory_format": "mini-swe-agent-1", "instance_id": "t",
        "info": {"exit_status": "Submitted", "config": {"agent": {"action_regex": 5}}},
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                     {"role": "assistant", "content": "T\n```bash\nls\n```"},
                     {"role": "user", "content": "<returncode>0</returncode>"}],
    }))
    run = load_mini_swe_agent_v1(path)
    assert [(p.kind, p.field) for p in run.problems] == [("note", "info.config.agent.action_regex")]
    assert run.table("tool_calls").column("command").to_pylist() == ["ls"]


def test_openhands_v1_grade_of_no_checkpoints_gives_no_score(tmp_path):
    (tmp_path / "state_x.json").write_text(json.dumps(OPENHANDS_V1))
    (tmp_path / "eval_x.json").write_text(json.dumps({"checkpoints": [], "final_score": {"result": 0, "total": 0}}))
    assert load_openhands_v1(tmp_path / "state_x.json").trajectories.column("reward_channels").to_pylist() == [[]]
