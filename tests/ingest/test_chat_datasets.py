"""Chat-format trajectory datasets as the hub serves them: Parquet rows with a ``messages`` column.

Fixtures are written here in the layouts the dataset cards document: SWE-Gym's OpenHands
sampled trajectories (OpenAI ``tool_calls``, some parallel, ``role: tool`` results) and
SWE-smith's trajectories (``instance_id``, ``messages``, ``resolved``; function calls written
as XML in the assistant text, OpenHands style, ``think`` and ``finish`` included).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trajlens.errors import InputError
from trajlens.ingest import formats, load


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


SWE_GYM_ROWS = [{
    "instance_id": "getmoto__moto-5752",
    "resolved": True,
    "messages": [
        {"role": "system", "content": "You are OpenHands agent.", "tool_calls": None, "tool_call_id": None, "name": None},
        {"role": "user", "content": "Fix the bug.", "tool_calls": None, "tool_call_id": None, "name": None},
        {"role": "assistant", "content": "Let me look.", "tool_call_id": None, "name": None, "tool_calls": [
            _call("c1", "execute_bash", {"command": "ls /workspace"}),
            _call("c2", "str_replace_editor", {"command": "view", "path": "/workspace/moto/ssm/models.py"})]},
        {"role": "tool", "content": "moto setup.py", "tool_calls": None, "tool_call_id": "c1", "name": "execute_bash"},
        {"role": "tool", "content": "1 import json", "tool_calls": None, "tool_call_id": "c2",
         "name": "str_replace_editor"},
        {"role": "assistant", "content": "", "tool_call_id": None, "name": None, "tool_calls": [
            _call("c3", "execute_bash", {"command": "python -m pytest tests/test_ssm -q"})]},
        {"role": "tool", "content": "3 passed", "tool_calls": None, "tool_call_id": "c3", "name": "execute_bash"},
        {"role": "assistant", "content": "Done.", "tool_call_id": None, "name": None, "tool_calls": [
            _call("c4", "finish", {})]},
    ],
}]

XML_ASSISTANT = [
    "I will look around.\n\n<function=think>\n<parameter=thought>\nThe bug is in the parser.\n</parameter>\n</function>",
    "<function=execute_bash>\n<parameter=command>\ngrep -rn parse src/ | head\n</parameter>\n</function>",
    "<function=str_replace_editor>\n<parameter=command>str_replace</parameter>\n<parameter=path>/testbed/src/p.py"
    "</parameter>\n<parameter=old_str>a</parameter>\n<parameter=new_str>b</parameter>\n</function>",
    "<function=finish>\n</function>",
]
SWE_SMITH_ROWS = [{
    "instance_id": "pandas-dev__pandas.95280573.pr_53652",
    "traj_id": "pandas-dev__pandas.95280573.pr_53652.8qa84d2e",
    "resolved": False,
    "model": "claude-3-7-sonnet-20250219",
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "<uploaded_files>/testbed</uploaded_files> Fix the issue."},
        {"role": "assistant", "content": XML_ASSISTANT[0]},
        {"role": "user", "content": "Your thought has been logged."},
        {"role": "assistant", "content": XML_ASSISTANT[1]},
        {"role": "user", "content": "EXECUTION RESULT of [execute_bash]:\nsrc/p.py:3: def parse"},
        {"role": "assistant", "content": XML_ASSISTANT[2]},
        {"role": "user", "content": "The file /testbed/src/p.py has been edited."},
        {"role": "assistant", "content": XML_ASSISTANT[3]},
    ],
}]


def test_swe_gym_rows_keep_parallel_tool_calls(tmp_path):
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(SWE_GYM_ROWS), path)
    assert [s.format.name for s in formats.plan(path)] == ["openai-chat"]
    run = load(path)
    row = run.trajectories.to_pylist()[0]
    assert (row["task_id"], row["resolved"], row["num_turns"]) == ("getmoto__moto-5752", True, 3)
    calls = [(c["turn"], c["tool_name"], c["command"], c["observation"]) for c in run.tool_calls.to_pylist()]
    assert calls == [
        (0, "execute_bash", "ls /workspace", "moto setup.py"),
        (0, "str_replace_editor", None, "1 import json"),
        (1, "execute_bash", "python -m pytest tests/test_ssm -q", "3 passed"),
        (2, "finish", None, None),
    ]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_swe_smith_rows_read_xml_function_calls(tmp_path, suffix):
    path = tmp_path / f"trajectories{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(SWE_SMITH_ROWS), path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in SWE_SMITH_ROWS))
    run = load(path)
    row = run.trajectories.to_pylist()[0]
    assert (row["task_id"], row["resolved"], row["num_turns"]) == ("pandas-dev__pandas.95280573.pr_53652", False, 4)
    calls = run.tool_calls.to_pylist()
    assert [c["tool_name"] for c in calls] == ["think", "execute_bash", "str_replace_editor", "finish"]
    assert calls[1]["command"] == "grep -rn parse src/ | head"
    assert calls[1]["observation"].startswith("EXECUTION RESULT of [execute_bash]")
    assert json.loads(calls[2]["arguments"]) == {"command": "str_replace", "path": "/testbed/src/p.py",
                                                  "old_str": "a", "new_str": "b"}
    assert json.loads(calls[0]["arguments"]) == {"thought": "The bug is in the parser."}
    assert not any(c["format_error"] for c in calls)


def test_a_bad_row_is_named_and_skipped_leniently(tmp_path):
    rows = [SWE_SMITH_ROWS[0], {**SWE_SMITH_ROWS[0], "resolved": "yes"}]
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "resolved": str(r["resolved"])} for r in rows]), path)
    with pytest.raises(InputError) as caught:
        load(path)
    assert caught.value.field == "resolved" and "record 0" in str(caught.value)
    assert load(path, strict=False).trajectories.num_rows == 0


@pytest.mark.parametrize("first", ["messages", "role"])
def test_a_chat_log_whose_first_line_is_longer_than_the_probe_is_read(tmp_path, first):
    """A conversation longer than the head detection reads (real agent trajectories run to 100 KB
    a line) is chat all the same; such a line that turns out no JSON is named when it is read."""
    from trajlens.ingest._probe import SNIFF_BYTES

    long = "x" * (SNIFF_BYTES + 10)
    if first == "messages":
        rows = [{"id": name, "task_id": "t", "reward": 1.0,
                 "messages": [{"role": "user", "content": long}, {"role": "assistant", "content": "ok"}]}
                for name in ("a", "b")]
    else:
        rows = [{"role": "user", "content": long}, {"role": "assistant", "content": "ok"}]
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert formats.detect(path).name == "openai-chat"
    assert load(path).trajectories.num_rows == (2 if first == "messages" else 1)
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"messages": [' + long + "\n")
    with pytest.raises(InputError, match="record line 1: not JSON"):
        load(cut)
    short = tmp_path / "short.jsonl"
    short.write_text('{"messages": [x\n')
    assert formats.detect(short) is None
