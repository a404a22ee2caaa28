"""Tool results pair with the call they answer when a trajectory repeats a call or event id.

Some providers and proxies number tool calls ``call_0`` in every turn, and a damaged event
stream can repeat an event id. A result answers the nearest call of its id before it; where
order cannot tell (two calls of one message sharing an id, a second result for one call), the
load is the standard one-line error naming the file, the record and the id.
"""

from __future__ import annotations

import json

import pytest

from trajlens.errors import InputError
from trajlens.ingest.agents import (
    load_mini_swe_agent_v2,
    load_openai_chat,
    load_openhands_v0,
    load_openhands_v1,
    load_swe_agent,
)


def calls(run):
    return run.table("tool_calls").to_pylist()


def bash_call(call_id, command):
    return {"id": call_id, "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def tool_result(call_id, output, returncode):
    return {"role": "tool", "tool_call_id": call_id, "content": output, "extra": {"returncode": returncode}}


def mini_swe_agent(tmp_path, messages):
    path = tmp_path / "demo.traj.json"
    path.write_text(json.dumps({
        "trajectory_format": "mini-swe-agent-1.1", "instance_id": "demo", "info": {"exit_status": "Submitted"},
        "messages": [{"role": "system", "content": "use bash"}, {"role": "user", "content": "task"}, *messages],
    }))
    return path


def one_line_error(load, path):
    with pytest.raises(InputError) as caught:
        load(path)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    return message


# -- mini-swe-agent v2 -----------------------------------------------------------------------


def test_mini_swe_agent_v2_reused_id_pairs_each_call_with_its_own_result(tmp_path):
    path = mini_swe_agent(tmp_path, [
        {"role": "assistant", "content": "", "tool_calls": [bash_call("call_0", "ls")]},
        tool_result("call_0", "a.py", 0),
        {"role": "assistant", "content": "", "tool_calls": [bash_call("call_0", "false")]},
        tool_result("call_0", "", 1),
    ])
    got = [(c["command"], c["observation"], c["return_code"]) for c in calls(load_mini_swe_agent_v2(path))]
    assert got == [("ls", "a.py", 0), ("false", "", 1)]


def test_mini_swe_agent_v2_one_message_giving_two_calls_one_id_is_an_error(tmp_path):
    path = mini_swe_agent(tmp_path, [
        {"role": "assistant", "content": "", "tool_calls": [bash_call("call_0", "ls"), bash_call("call_0", "pwd")]},
        tool_result("call_0", "a.py", 0),
        tool_result("call_0", "/repo", 0),
    ])
    message = one_line_error(load_mini_swe_agent_v2, path)
    assert "record message 3: field 'tool_call_id'" in message
    assert "'call_0', the id of 2 calls of message 2" in message


def _answered_twice(tmp_path):
    """A mini-swe-agent v2 trajectory whose one call has two results."""
    return mini_swe_agent(tmp_path, [
        {"role": "assistant", "content": "", "tool_calls": [bash_call("call_0", "ls")]},
        tool_result("call_0", "a.py", 0),
        tool_result("call_0", "b.py", 0),
    ])


def test_mini_swe_agent_v2_second_result_for_one_call_is_an_error(tmp_path):
    path = _answered_twice(tmp_path)
    message = one_line_error(load_mini_swe_agent_v2, path)
    assert "record message 4: field 'tool_call_id': expected one result per call" in message
    assert "a second result for 'call_0' (the call of message 2, answered by message 3)" in message


def test_mini_swe_agent_v2_lenient_skips_the_trajectory_it_cannot_pair(tmp_path):
    path = _answered_twice(tmp_path)
    run = load_mini_swe_agent_v2(path, strict=False)
    assert run.trajectories.num_rows == 0
    assert ["one result per call" in p.message for p in run.problems] == [True]


# -- OpenAI-style chat and SWE-agent history -------------------------------------------------


def test_openai_chat_reused_id_pairs_each_call_with_its_own_result(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [bash_call("call_0", "ls")]},
        {"role": "tool", "tool_call_id": "call_0", "content": "a.py", "return_code": 0},
        {"role": "assistant", "content": None, "tool_calls": [bash_call("call_0", "false")]},
        {"role": "tool", "tool_call_id": "call_0", "content": "", "return_code": 1},
    ]}))
    got = [(c["command"], c["observation"], c["return_code"]) for c in calls(load_openai_chat(path))]
    assert got == [("ls", "a.py", 0), ("false", "", 1)]


def test_openai_chat_parallel_calls_sharing_an_id_are_an_error(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [bash_call("call_0", "ls"), bash_call("call_0", "pwd")]},
        {"role": "tool", "tool_call_id": "call_0", "content": "a.py"},
    ]}))
    message = one_line_error(load_openai_chat, path)
    assert "record message 2: field 'tool_call_id'" in message and "2 calls of message 1" in message


def test_swe_agent_history_reused_id_pairs_each_call_with_its_own_result(tmp_path):
    path = tmp_path / "demo.traj"
    path.write_text(json.dumps({"history": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "look", "tool_calls": [bash_call("call_0", "ls")]},
        {"role": "tool", "tool_call_ids": ["call_0"], "content": "a.py"},
        {"role": "assistant", "content": "again", "tool_calls": [bash_call("call_0", "pwd")]},
        {"role": "tool", "tool_call_id": "call_0", "content": "/repo"},
    ]}))
    assert [c["observation"] for c in calls(load_swe_agent(path))] == ["a.py", "/repo"]


def test_swe_agent_history_second_result_for_one_call_is_an_error(tmp_path):
    path = tmp_path / "demo.traj"
    path.write_text(json.dumps({"history": [
        {"role": "assistant", "content": "look", "tool_calls": [bash_call("call_0", "ls")]},
        {"role": "tool", "tool_call_id": "call_0", "content": "a.py"},
        {"role": "tool", "tool_call_ids": ["call_1", "call_0"], "content": "b.py"},
    ]}))
    message = one_line_error(load_swe_agent, path)
    assert "record history 2: field 'tool_call_ids[1]': expected one result per call" in message


# -- OpenHands -------------------------------------------------------------------------------


def run_action(event_id, command):
    return {"id": event_id, "source": "agent", "action": "run", "args": {"command": command}}


def run_observation(event_id, cause, output, exit_code):
    return {"id": event_id, "source": "agent", "observation": "run", "cause": cause, "content": output,
            "extras": {"metadata": {"exit_code": exit_code}}}


def test_openhands_v0_repeated_event_id_pairs_each_action_with_its_own_observation(tmp_path):
    path = tmp_path / "demo.json"
    path.write_text(json.dumps([
        run_action(7, "mkdir app"), run_observation(8, 7, "", 0),
        run_action(7, "python3 -m http.server"), run_observation(9, 7, "Serving HTTP", -1),
    ]))
    run = load_openhands_v0(path)
    got = [(c["command"], c["observation"], c["return_code"], c["turn"]) for c in calls(run)]
    assert got == [("mkdir app", "", 0, 0), ("python3 -m http.server", "Serving HTTP", -1, 1)]
    # Two actions without a model response are two turns, whatever their ids.
    assert run.trajectories.column("num_turns").to_pylist() == [2]


def test_openhands_v0_two_observations_of_one_action_are_an_error(tmp_path):
    path = tmp_path / "demo.json"
    path.write_text(json.dumps([
        run_action(7, "mkdir app"), run_observation(8, 7, "", 0),
        run_action(13, "python3 -m http.server"), run_observation(14, 7, "Serving HTTP", -1),
    ]))
    message = one_line_error(load_openhands_v0, path)
    assert "record event 3: field 'cause': expected one result per call" in message
    assert "a second result for 7 (the call of event 0, answered by event 1)" in message


def v1_action(event_id, tool_call_id, command):
    return {"kind": "ActionEvent", "id": event_id, "source": "agent", "tool_name": "execute_bash",
            "tool_call_id": tool_call_id, "llm_response_id": f"r-{event_id}",
            "action": {"kind": "ExecuteBashAction", "command": command}}


def test_openhands_v1_repeated_ids_pair_each_action_with_its_own_answer(tmp_path):
    path = tmp_path / "traj_demo.json"
    path.write_text(json.dumps([
        v1_action("a", "call_0", "ls"),
        {"kind": "ObservationEvent", "id": "o1", "source": "environment", "action_id": "a", "tool_call_id": "call_0",
         "observation": {"output": "a.py", "metadata": {"exit_code": 0}}},
        v1_action("a", "call_0", "pwd"),
        {"kind": "ObservationEvent", "id": "o2", "source": "environment", "action_id": "a", "tool_call_id": "call_0",
         "observation": {"output": "/repo", "metadata": {"exit_code": 0}}},
        v1_action("b", "call_0", "cat x"),
        {"kind": "AgentErrorEvent", "id": "e1", "source": "agent", "tool_call_id": "call_0", "error": "no such file"},
    ]))
    got = [(c["command"], c["observation"]) for c in calls(load_openhands_v1(path))]
    assert got == [("ls", "a.py"), ("pwd", "/repo"), ("cat x", "no such file")]


def test_openhands_v1_two_observations_of_one_action_are_an_error(tmp_path):
    path = tmp_path / "traj_demo.json"
    path.write_text(json.dumps([
        v1_action("a", "call_0", "ls"),
        {"kind": "ObservationEvent", "id": "o1", "source": "environment", "action_id": "a",
         "observation": {"output": "a.py"}},
        {"kind": "ObservationEvent", "id": "o2", "source": "environment", "action_id": "a",
         "observation": {"output": "b.py"}},
    ]))
    message = one_line_error(load_openhands_v1, path)
    assert "record event 2: field 'action_id': expected one result per call" in message
