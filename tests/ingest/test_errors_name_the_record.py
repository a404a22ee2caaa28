"""An error names the record that holds the bad field, and the format a file came closest to:
a tool result's field is the result's record, not the calling message's; a conversation of a
JSON array that lacks its messages is that record; a verl dump whose first row lacks a key
names verl and the key."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hostile import OPENAI_CHAT, OPENHANDS_V0, OPENHANDS_V1

from trajlens.errors import InputError
from trajlens.ingest.agents import load_mini_swe_agent_v2, load_openai_chat, load_openhands_v0, load_openhands_v1
from trajlens.ingest.formats import plan

DATA = Path(__file__).resolve().parents[1] / "data"

MINI_V2 = {
    "trajectory_format": "mini-swe-agent-1.1", "instance_id": "t", "info": {"exit_status": "Submitted"},
    "messages": [
        {"role": "system", "content": "use bash"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py", "extra": {"returncode": "0"}},
    ],
}


def error_of(load, path) -> str:
    with pytest.raises(InputError) as caught:
        load(path)
    return str(caught.value)


def test_mini_swe_agent_v2_returncode_is_the_tool_message_s(tmp_path):
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps(MINI_V2))
    assert error_of(load_mini_swe_agent_v2, path).startswith(f"{path}: record message 3: field 'extra.returncode': ")


def test_openhands_v0_exit_code_is_the_observation_s(tmp_path):
    events = copy.deepcopy(OPENHANDS_V0)
    events[2]["extras"]["metadata"]["exit_code"] = "1"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    assert error_of(load_openhands_v0, path).startswith(f"{path}: record event 2: field 'extras.metadata.exit_code': ")


def test_openhands_v1_exit_code_is_the_observation_s(tmp_path):
    state = copy.deepcopy(OPENHANDS_V1)
    state["history"][1]["observation"]["metadata"]["exit_code"] = "0"
    path = tmp_path / "state_x.json"
    path.write_text(json.dumps(state))
    assert error_of(load_openhands_v1, path).startswith(
        f"{path}: record event 1: field 'observation.metadata.exit_code': ")


def test_openai_chat_return_code_is_the_tool_message_s(tmp_path):
    chat = copy.deepcopy(OPENAI_CHAT)
    chat["messages"][3]["return_code"] = "0"
    path = tmp_path / "c.json"
    path.write_text(json.dumps(chat))
    assert error_of(load_openai_chat, path).startswith(f"{path}: record message 3: field 'return_code': ")


def test_a_conversation_of_an_array_without_messages_is_named(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps([OPENAI_CHAT, {"id": "r2", "task_id": "t"}]))
    assert error_of(load_openai_chat, path) == (
        f"{path}: record 1: field 'messages': expected a list of chat messages, found no such key")
    assert load_openai_chat(path, strict=False).trajectories.num_rows == 1


def test_a_verl_dump_whose_first_row_lacks_output_names_verl(tmp_path):
    path = tmp_path / "1.jsonl"
    path.write_text(json.dumps({"input": "system\nuser\nq\nassistant\n", "gts": "1", "score": 1.0, "step": 1}) + "\n")
    with pytest.raises(InputError) as caught:
        plan(path)
    assert "closest: verl (" in str(caught.value) and "lacks output" in str(caught.value)


@pytest.mark.parametrize("levels", [5_000, 100_000])
def test_a_jsonl_first_record_nested_past_the_parser_is_the_depth_error(tmp_path, levels):
    """Deeper than the parser can nest, detection cannot read the record's shape: the file is
    said to be too deep (docs/limits.md), not of no known format."""
    path = tmp_path / "1.jsonl"
    path.write_text(json.dumps({"input": "q", "output": "a", "score": 1.0})[:-1] + ', "x": '
                    + "[" * levels + "]" * levels + "}\n")
    with pytest.raises(InputError) as caught:
        plan(path)
    assert str(caught.value).startswith(f"{path}: record line 1: expected JSON nested at most 200 levels "
                                        "(raise it with --limit depth=...), found ")


@pytest.mark.parametrize("levels", [5_000, 100_000])
def test_a_json_document_nested_past_the_parser_under_a_format_s_key_is_the_depth_error(tmp_path, levels):
    """``{"messages": [[[...]]]}``: the keys of a chat log, values nested past the limit. It said
    "no known format; closest: openai-chat" (docs/limits.md: an error naming its depth)."""
    path = tmp_path / "deep.json"
    path.write_text('{"messages": ' + "[" * levels + "]" * levels + "}")
    with pytest.raises(InputError) as caught:
        plan(path)
    at_least = "at least " if path.stat().st_size > 65536 else ""
    assert str(caught.value).startswith(f"{path}: expected JSON nested at most 200 levels (raise it with --limit "
                                        f"depth=...), found {at_least}")
    assert str(caught.value).endswith(" levels")


def _inspect_with_nan_score(path):
    import re
    import zipfile

    with zipfile.ZipFile(DATA / "inspect_ai" / "tiny.eval") as given, zipfile.ZipFile(path, "w") as out:
        for name in given.namelist():
            data = given.read(name)
            if name == "samples/multiply_epoch_1.json":
                data = re.sub(rb'"value":\s*"C"', b'"value":NaN', data, count=1)
            out.writestr(name, data)


def _atropos_with_huge_score(path):
    groups = [json.loads(line) for line in (DATA / "atropos" / "groups.jsonl").read_text().splitlines()]
    groups[1]["scores"][0] = 1e308
    path.write_text("".join(json.dumps(group) + "\n" for group in groups))


@pytest.mark.parametrize("name, damage, said", [
    ("nan.eval", _inspect_with_nan_score,
     "samples/multiply_epoch_1.json: field 'scores.includes.value': expected a finite number, found nan"),
    ("big.jsonl", _atropos_with_huge_score,
     "record 2, member 0: field 'scores': expected a number of at most 3.403e+38 in size (float32, in which the "
     "estimators compute), found 1e+308"),
])
def test_a_reward_no_estimator_can_take_is_named_by_the_logs_own_field(tmp_path, name, damage, said):
    """Not 'field reward', which the log does not have: the score it was read from."""
    from cli_run import run_cli

    damage(tmp_path / name)
    done = run_cli("ingest", tmp_path / name, "--store", tmp_path / "store")
    assert (done.returncode, done.stderr) == (1, f"error: {tmp_path / name}: {said}\n")
