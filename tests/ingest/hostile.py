"""A corpus of hostile log files, generated at test time (nothing here is committed as data).

Each :class:`Case` writes one or more files under a folder and names the source to ingest.
The corpus covers the classes of bad input a log written by a crashing program, or handed
over by someone else, can hold: wrong JSON types where strings or numbers belong, integers
beyond 64 bits, lone UTF-16 surrogates, non-finite numbers, steps given as text, deep
nesting, records and fields past the size limits, log-supplied patterns that backtrack
without end, task ids that are paths, and Parquet text that is not UTF-8.
"""

from __future__ import annotations

import copy
import json
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

BIG = 10**20  # 21 digits: past int64
HUGE = 10**400  # past float64
SURROGATE = "ls \ud800 -la"

# Hostile values put where a string, number, id or object belongs.
HOSTILE_VALUES: dict[str, Any] = {
    "list": [1, 2],
    "object": {"a": 1},
    "int>64bit": BIG,
    "int>float": -HUGE,
    "surrogate": SURROGATE,
    "bool": True,
    "null": None,
    "nan": float("nan"),
}


@dataclass
class Case:
    """One hostile input: ``write(folder)`` creates it and returns the path to ingest."""

    name: str
    write: Callable[[Path], Path]
    must_fail: bool = False
    """True when the only right outcome is a one-line error (no correct load exists)."""
    field: str | None = None
    """A field the error must name, when it fails."""
    limits: dict[str, float] = dataclasses.field(default_factory=dict)


# -- base documents, one per format, each the smallest valid log ---------------------------

OPENAI_CHAT = {
    "task_id": "t1",
    "reward": 1.0,
    "messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "", "usage": {"completion_tokens": 5},
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt", "return_code": 0},
    ],
}
OPENAI_CHAT_PATHS = [
    "messages.2.tool_calls.0.id", "messages.1.role", "messages.3.tool_call_id",
    "messages.2.usage.completion_tokens", "messages.3.return_code", "reward", "task_id",
    "messages.2.tool_calls.0.function.name", "messages.2.tool_calls.0.function.arguments", "messages.3.content",
]

MINI_V2 = {
    "trajectory_format": "mini-swe-agent-1.1",
    "instance_id": "task-1",
    "info": {"exit_status": "Submitted", "config": {"model": {"model_name": "m"}}},
    "messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "t", "extra": {"response": {"usage": {"completion_tokens": 3}}},
         "tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "<returncode>0</returncode>", "extra": {"returncode": 0}},
        {"role": "exit", "content": "done"},
    ],
}
MINI_V2_PATHS = [
    "messages.2.tool_calls.0.id", "messages.1.role", "messages.3.extra.returncode", "messages.3.extra",
    "messages.2.extra.response.usage.completion_tokens", "info.exit_status", "info", "instance_id",
    "messages.3.tool_call_id",
]

MINI_V1 = {
    "trajectory_format": "mini-swe-agent-1",
    "instance_id": "task-1",
    "info": {"exit_status": "Submitted", "config": {"agent": {"action_regex": "```bash\\s*\\n(.*?)\\n```"}}},
    "messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "THOUGHT\n```bash\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>a</output>"},
    ],
}
MINI_V1_PATHS = ["messages.2.content", "messages.3.content", "info.config.agent.action_regex", "info.exit_status",
                 "messages.2.role", "instance_id"]

SWE_AGENT = {
    "trajectory": [{"thought": "t", "action": "ls -la", "observation": "a", "response": "r", "state": "{}"}],
    "history": [],
    "info": {"exit_status": "submitted", "model_stats": {"tokens_received": 10}},
}
SWE_AGENT_PATHS = ["trajectory.0.action", "trajectory.0.observation", "info.exit_status",
                   "info.model_stats.tokens_received", "info.model_stats", "trajectory.0"]

OPENHANDS_V0 = [
    {"id": 0, "source": "user", "action": "message", "args": {"content": "do"}},
    {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls", "thought": ""},
     "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "tc1",
                            "model_response": {"id": "r1", "model": "m", "usage": {"completion_tokens": 4},
                                               "choices": [{"message": {"tool_calls": [
                                                   {"id": "tc1", "function": {"name": "execute_bash",
                                                                              "arguments": "{\"command\": \"ls\"}"}}]}}]}}},
    {"id": 2, "source": "environment", "observation": "run", "cause": 1, "content": "a.txt",
     "extras": {"metadata": {"exit_code": 0}}},
]
OPENHANDS_V0_PATHS = ["1.action", "2.cause", "2.extras", "2.extras.metadata.exit_code", "1.id",
                      "1.tool_call_metadata.tool_call_id", "1.tool_call_metadata.model_response.usage.completion_tokens",
                      "1.args.command", "2.observation"]

OPENHANDS_V1 = {
    "instance_id": "x",
    "history": [
        {"kind": "ActionEvent", "id": "e1", "source": "agent", "tool_name": "execute_bash",
         "action": {"kind": "ExecuteBashAction", "command": "ls"},
         "tool_call": {"name": "execute_bash", "arguments": "{\"command\": \"ls\"}"}, "llm_response_id": "r1"},
        {"kind": "ObservationEvent", "id": "e2", "source": "environment", "action_id": "e1",
         "observation": {"kind": "ExecuteBashObservation", "output": "a", "metadata": {"exit_code": 0}}},
    ],
    "num_events": 2,
}
OPENHANDS_V1_PATHS = ["history.0.id", "history.1.action_id", "history.1.observation.metadata.exit_code",
                      "history.0.tool_name", "history.0.action.command", "num_events", "instance_id",
                      "history.0.tool_call.arguments"]

VERL = {"input": "system\nuser\nq\nassistant\n",
        "output": "<tool_call>{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}</tool_call>",
        "gts": "1", "score": 1.0, "step": 1, "acc": 1.0}
VERL_PATHS = ["score", "step", "acc", "input", "output", "advantage", "advantages"]

METRICS = {"_step": 1, "actor/lr": 0.1, "critic/vf_explained_var": 0.5}
METRICS_PATHS = ["_step", "actor/lr"]

ATROPOS = {
    "tokens": [[1, 2, 3], [1, 2, 4]], "masks": [[-100, 2, 3], [-100, 2, 4]], "scores": [1.0, 0.0],
    "advantages": [[0.5, 0.5, 0.5], [-0.5, -0.5, -0.5]],
    "messages": [[{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}],
                 [{"role": "user", "content": "u"}, {"role": "assistant", "content": "b"}]],
}
ATROPOS_PATHS = ["scores.0", "masks.0.1", "tokens.1", "advantages.0.1", "messages.0.1.role", "messages.1"]

SWE_AGENT_ROW = {
    "instance_id": "astropy__astropy-12907", "model_name": "m", "target": True,
    "trajectory": [{"role": "system", "text": "s", "mask": False}, {"role": "user", "text": "task", "mask": False},
                   {"role": "ai", "text": "DISCUSSION\n```\nfind_file x.py\n```", "mask": True},
                   {"role": "user", "text": "Found 1 matches", "mask": False}],
    "exit_status": "submitted",
}
SWE_AGENT_ROW_PATHS = ["instance_id", "target", "trajectory.2.role", "trajectory.2.text", "exit_status",
                       "trajectory", "trajectory.3"]

FORMATS: dict[str, tuple[Any, list[str], str]] = {
    "atropos": (ATROPOS, ATROPOS_PATHS, "groups.jsonl"),
    "swe-agent-dataset": (SWE_AGENT_ROW, SWE_AGENT_ROW_PATHS, "rows.jsonl"),
    "openai-chat": (OPENAI_CHAT, OPENAI_CHAT_PATHS, "conversation.json"),
    "mini-swe-agent-v2": (MINI_V2, MINI_V2_PATHS, "task-1.traj.json"),
    "mini-swe-agent-v1": (MINI_V1, MINI_V1_PATHS, "task-1.traj.json"),
    "swe-agent": (SWE_AGENT, SWE_AGENT_PATHS, "task.traj"),
    "openhands-v0": (OPENHANDS_V0, OPENHANDS_V0_PATHS, "events.json"),
    "openhands-v1": (OPENHANDS_V1, OPENHANDS_V1_PATHS, "state_x.json"),
    "verl": (VERL, VERL_PATHS, "1.jsonl"),
    "metrics": (METRICS, METRICS_PATHS, "metrics.jsonl"),
}

# Mutations after which no correct load exists: the error must name the field.
MUST_FAIL: dict[tuple[str, str, str], str] = {
    ("openai-chat", "messages.2.tool_calls.0.id", "list"): "id",
    ("openai-chat", "messages.2.tool_calls.0.id", "object"): "id",
    ("openai-chat", "messages.1.role", "list"): "role",
    ("openai-chat", "messages.1.role", "object"): "role",
    ("openai-chat", "messages.3.return_code", "int>64bit"): "return_code",
    ("openai-chat", "messages.2.usage.completion_tokens", "int>64bit"): "completion_tokens",
    ("openai-chat", "task_id", "surrogate"): "task_id",
    ("mini-swe-agent-v2", "messages.2.tool_calls.0.id", "list"): "id",
    ("mini-swe-agent-v2", "messages.3.extra.returncode", "int>64bit"): "returncode",
    ("mini-swe-agent-v2", "messages.3.extra", "list"): "extra",
    ("openhands-v0", "1.action", "object"): None,
    ("openhands-v0", "2.cause", "object"): "cause",
    ("openhands-v0", "2.cause", "list"): "cause",
    ("openhands-v0", "2.extras", "list"): "extras",
    ("openhands-v0", "2.extras.metadata.exit_code", "int>64bit"): "exit_code",
    ("openhands-v1", "history.1.observation.metadata.exit_code", "int>64bit"): "exit_code",
    ("openhands-v1", "history.0.id", "list"): "id",
    ("swe-agent", "trajectory.0.action", "list"): "action",
    ("swe-agent", "trajectory.0.action", "surrogate"): "action",
    ("verl", "input", "surrogate"): "input",
    ("swe-agent", "info.model_stats.tokens_received", "int>64bit"): "tokens_received",
    ("verl", "step", "int>64bit"): "step",
    ("verl", "score", "int>float"): "score",
    ("swe-agent-dataset", "target", "list"): "target",
    ("swe-agent-dataset", "trajectory.2.role", "object"): "role",
    ("swe-agent-dataset", "trajectory.2.text", "surrogate"): "text",
    ("swe-agent-dataset", "trajectory", "object"): "trajectory",
    ("atropos", "scores.0", "list"): "scores",
    ("atropos", "masks.0.1", "int>64bit"): "masks",
    ("atropos", "advantages.0.1", "int>float"): "logged_advantages",
    ("atropos", "messages.0.1.role", "object"): "role",
    ("metrics", "_step", "surrogate"): "_step",
    ("metrics", "_step", "int>64bit"): "_step",
}


def _set(document: Any, path: str, value: Any) -> Any:
    document = copy.deepcopy(document)
    keys = path.split(".")
    target = document
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return document


def _writer(name: str, text: str | bytes) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    return write


def _document_text(fmt: str, document: Any) -> str:
    text = json.dumps(document)
    if fmt in ("atropos", "swe-agent-dataset"):
        return text + "\n"
    if fmt in ("verl", "metrics"):
        other = json.dumps(FORMATS[fmt][0])
        return other + "\n" + text + "\n" if fmt == "metrics" else text + "\n"
    return text


def wrong_type_cases() -> list[Case]:
    cases = []
    for fmt, (base, paths, file_name) in FORMATS.items():
        for path in paths:
            for label, value in HOSTILE_VALUES.items():
                if fmt == "metrics":  # the second record is the hostile one
                    base = _set(METRICS, "_step", 2)
                document = _set(base, path, value)
                key = (fmt, path, label)
                cases.append(Case(f"{fmt}:{path}={label}", _writer(file_name, _document_text(fmt, document)),
                                  must_fail=key in MUST_FAIL, field=MUST_FAIL.get(key)))
    return cases


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def nesting_and_size_cases() -> list[Case]:
    deep_arguments = _set(OPENAI_CHAT, "messages.2.tool_calls.0.function.arguments", '{"a": ' + _deep(100_000) + "}")
    deep_content_text = json.dumps(OPENAI_CHAT).replace('"content": "a.txt"', '"content": ' + _deep(100_000))
    many_metrics = "".join(json.dumps({"_step": i, "actor/lr": 0.1}) + "\n" for i in range(200_000))
    many_chat = "".join(json.dumps({"messages": OPENAI_CHAT["messages"], "task_id": f"t{i}"}) + "\n"
                        for i in range(3_000))
    long_line = json.dumps(_set(VERL, "output", "x" * 300_000)) + "\n"
    big_observation = _set(OPENAI_CHAT, "messages.3.content", "y" * 300_000)
    return [
        Case("deep arguments string", _writer("deep_args.json", json.dumps(deep_arguments)), must_fail=True),
        Case("deep message content", _writer("deep_content.json", deep_content_text), must_fail=True),
        Case("deep whole file", _writer("deep.json", _deep(100_000)), must_fail=True),
        Case("deep JSONL line", _writer("deep.jsonl", '{"messages": ' + _deep(100_000) + "}\n"), must_fail=True),
        Case("deep verl line", _writer("9.jsonl", '{"input": "a", "output": "b", "score": 1, "x": '
                                       + _deep(50_000) + "}\n"), must_fail=True),
        Case("deep tool call in a verl output", _writer("8.jsonl", json.dumps(_set(
            VERL, "output", '<tool_call>{"name": "bash", "arguments": ' + _deep(100_000) + "}</tool_call>")) + "\n")),
        Case("deep metrics line", _writer("m.jsonl", json.dumps(METRICS) + "\n" + '{"_step": 2, "a/b": '
                                          + _deep(50_000) + "}\n"), must_fail=True),
        Case("200,000 tiny metrics records", _writer("many.jsonl", many_metrics)),
        Case("thousands of chat records", _writer("many_chat.jsonl", many_chat)),
        Case("a line past the record limit", _writer("5.jsonl", long_line), must_fail=True,
             limits={"record_mb": 0.1}),
        Case("a file past the record limit", _writer("big.json", json.dumps(big_observation)), must_fail=True,
             limits={"record_mb": 0.1}),
        Case("a field past the field limit", _writer("wide.json", json.dumps(big_observation)), must_fail=True,
             field="observation", limits={"field_mb": 0.1}),
        Case("a field within the limits", _writer("fine.json", json.dumps(big_observation))),
        Case("an empty file", _writer("empty.json", ""), must_fail=True),
        Case("truncated JSON", _writer("cut.json", json.dumps(OPENAI_CHAT)[:-7]), must_fail=True),
        Case("not UTF-8", _writer("bytes.json", json.dumps(OPENAI_CHAT).encode().replace(b"a.txt", b"a\xff.txt")),
             must_fail=True),
        Case("NaN reward", _writer("nan.json", json.dumps(_set(OPENAI_CHAT, "reward", float("nan")))),
             must_fail=True, field="reward"),
        Case("Infinity score", _writer("4.jsonl", json.dumps(_set(VERL, "score", float("inf"))) + "\n"),
             must_fail=True, field="score"),
    ]


def csv_cases() -> list[Case]:
    rows = {
        "step 1e20": ("_step,actor/lr\n1,0.1\n1e20,0.2\n", True, "_step"),
        "step NaN": ("_step,actor/lr\n1,0.1\nNaN,0.2\n", True, "_step"),
        "step as text": ("_step,actor/lr\n1,0.1\ntwelve,0.2\n", True, "_step"),
        "step negative": ("_step,actor/lr\n-3,0.1\n", True, "_step"),
        "value inf": ("_step,actor/lr\n1,inf\n", False, None),  # a diverging run logs it
        "value 400 digits": ("_step,actor/lr\n1," + "9" * 400 + "\n", True, "actor/lr"),
        "row too long": ("_step,actor/lr\n1,0.1,7\n", True, None),
        "clean": ("_step,actor/lr\n1,0.1\n2,0.2\n", False, None),
    }
    return [Case(f"metrics csv: {name}", _writer("metrics.csv", text), must_fail=fail, field=field)
            for name, (text, fail, field) in rows.items()]


def jsonl_step_cases() -> list[Case]:
    return [
        Case("metrics step as a string", _writer("m.jsonl", '{"_step": 1, "actor/lr": 0.1}\n{"_step": "2", "actor/lr": 0.2}\n'),
             must_fail=True, field="_step"),
        Case("metrics step 1e20", _writer("m.jsonl", '{"_step": 1, "actor/lr": 0.1}\n{"_step": 1e20, "actor/lr": 0.2}\n'),
             must_fail=True, field="_step"),
        Case("metrics step NaN", _writer("m.jsonl", '{"_step": 1, "actor/lr": 0.1}\n{"_step": NaN, "actor/lr": 0.2}\n'),
             must_fail=True, field="_step"),
    ]


def log_content_cases() -> list[Case]:
    catastrophic = _set(MINI_V1, "info.config.agent.action_regex", "(a|aa)+$")
    catastrophic["messages"][2]["content"] = "a" * 40 + "!"
    cases = [
        Case("catastrophic action_regex", _writer("task-1.traj.json", json.dumps(catastrophic)), limits={"regex_seconds": 0.2}),
        Case("action_regex that does not compile",
             _writer("task-1.traj.json", json.dumps(_set(MINI_V1, "info.config.agent.action_regex", "(")))),
    ]
    for label, task in {"absolute": "/etc", "parent": "../../..", "glob": "*", "separator": "a/b", "nul": "a\u0000b",
                        "dots": ".."}.items():
        cases.append(Case(f"instance_id {label}",
                          _writer("run/task-1/task-1.traj.json", json.dumps(_set(MINI_V2, "instance_id", task)))))
    return cases


def _event_file(values: list[tuple[int, str, float]]) -> bytes:
    """A TensorBoard event file holding ``(step, tag, value)`` scalars, as tensorboard's own
    ``EventFileWriter`` writes it."""
    import tempfile

    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    with tempfile.TemporaryDirectory() as folder:
        writer = EventFileWriter(folder)
        for step, tag, value in values:
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summary))
        writer.close()
        return next(Path(folder).iterdir()).read_bytes()


def tensorboard_cases() -> list[Case]:
    try:
        valid = _event_file([(1, "train/loss", 0.5), (2, "train/loss", 0.25), (3, "train/loss", 0.125)])
        nan = _event_file([(1, "train/loss", 0.5), (2, "train/loss", float("nan"))])
    except ImportError:  # the tensorboard extra is not installed
        return []
    name = "events.out.tfevents.1700000000.host.1.0"
    return [
        Case("tensorboard: a valid event file", _writer(name, valid)),
        Case("tensorboard: an empty event file", _writer(name, b"")),
        Case("tensorboard: cut inside the last record's data", _writer(name, valid[:-5]), must_fail=True, field="data"),
        Case("tensorboard: cut inside a length", _writer(name, valid[:-len(valid) // 3 * 2][:-1]), must_fail=True),
        Case("tensorboard: text, not TFRecords", _writer(name, b"step,loss\n1,0.5\n2,0.25\n"), must_fail=True,
             field="crc"),
        Case("tensorboard: a flipped byte", _writer(name, valid[:60] + bytes([valid[60] ^ 0xFF]) + valid[61:]),
             must_fail=True, field="crc"),
        Case("tensorboard: a NaN scalar", _writer(name, nan)),  # kept: a diverging run logs it
    ]


def corpus() -> list[Case]:
    return [*wrong_type_cases(), *nesting_and_size_cases(), *csv_cases(), *jsonl_step_cases(), *log_content_cases(),
            *tensorboard_cases()]
