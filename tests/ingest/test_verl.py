"""Tests of the verl rollout-dump loader and of the chat-template parsing it relies on."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from cli_run import run_cli

from trajlens.errors import InputError
from trajlens.ingest._chat_template import parse_response
from trajlens.ingest.verl import detect, load_verl
from trajlens.schema import SCHEMAS

DUMP = Path(__file__).parent.parent / "data" / "verl" / "grpo-sandbox"

PROMPT = "system\nYou can run bash.\nuser\nCount the lines of a.txt.\nassistant\n"


def task(prompt: str) -> str:
    return hashlib.sha1(prompt.encode()).hexdigest()[:12]


def record(**fields) -> str:
    base = {"input": PROMPT, "output": "\\boxed{1}", "gts": "1", "score": 1.0, "step": 3}
    return json.dumps({**base, **fields})


def write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


# --- the sample dump -----------------------------------------------------------------------------


def test_sample_dump_trajectories():
    run = load_verl([DUMP])
    assert run.run_id == "grpo-sandbox"
    assert run.runs.column("source_format").to_pylist() == ["verl"]
    assert run.problems == []
    assert run.trajectories.schema.equals(SCHEMAS["trajectories"])
    columns = ["step", "trajectory_id", "group_id", "split", "reward", "resolved", "num_turns"]
    got = [tuple(row[c] for c in columns) for row in run.trajectories.select(columns).to_pylist()]
    count_lines = "573ee5e48a6d"
    sum_squares = "c05013529f96"
    count_files = "7e47a4425bd5"
    assert got == [
        (1, "1-0", f"1:{count_lines}", "train", 1.0, True, 2),
        (1, "1-1", f"1:{count_lines}", "train", 0.0, False, 1),
        (1, "1-2", f"1:{sum_squares}", "train", 1.0, True, 2),
        (1, "1-3", f"1:{sum_squares}", "train", 0.0, False, 1),
        (2, "2-0", f"2:{count_files}", "train", 1.0, True, 2),
        (2, "2-1", f"2:{count_files}", "train", 0.0, False, 2),
        (2, "2-2", f"2:{count_files}", "train", 1.0, True, 3),
        (2, "val-2-0", f"val:2:{count_lines}", "val", 1.0, True, 2),
        (2, "val-2-1", f"val:2:{count_lines}", "val", 0.0, False, 1),
    ]
    first = run.trajectories.slice(0, 1).to_pylist()[0]
    prompt = json.loads((DUMP / "1.jsonl").read_text().splitlines()[0])["input"]
    assert first["task_id"] == task(prompt) == count_lines
    assert first["reward_channels"] == [{"name": "acc", "value": 1.0}, {"name": "format", "value": 1.0}]
    assert first["source"] == f"{DUMP / '1.jsonl'}:1"
    assert first["model_tokens"] is None and first["reasoning_tokens"] is None and first["exit_status"] is None
    validation = run.trajectories.slice(7, 1).to_pylist()[0]
    assert validation["reward_channels"] == [{"name": "reward", "value": 1.0}, {"name": "acc", "value": 1.0}]


def test_sample_dump_tool_calls():
    run = load_verl(DUMP)
    columns = ["trajectory_id", "call_index", "turn", "tool_name", "command", "observation", "format_error"]
    got = [tuple(row[c] for c in columns) for row in run.tool_calls.select(columns).to_pylist()]
    count_py = "find /repo/src -name '*.py' | wc -l"
    assert got == [
        ("1-0", 0, 0, "bash", "wc -l /data/input.txt", "42 /data/input.txt", False),
        ("1-1", 0, 0, "<unparsed>", None, None, True),
        ("1-2", 0, 0, "python", None, "385\n", False),
        ("2-0", 0, 0, "bash", "find /repo/src -name '*.py' | head", "/repo/src/app.py\n/repo/src/util/io.py\n/repo/src/util/__init__.py", False),
        ("2-0", 1, 0, "bash", count_py, "3", False),
        ("2-1", 0, 0, "bash", "ls /repo/src", "app.py\nutil", False),
        ("2-2", 0, 0, "bash", "ls -R /repo/src", "/repo/src:\napp.py\nutil\n\n/repo/src/util:\n__init__.py\nio.py", False),
        ("2-2", 1, 1, "bash", count_py, "3", False),
        ("val-2-0", 0, 0, "bash", "wc -l < /data/input.txt", "42", False),
    ]
    arguments = run.tool_calls.column("arguments").to_pylist()
    assert json.loads(arguments[2]) == {"code": "print(sum(i * i for i in range(1, 11)))"}
    assert json.loads(arguments[5]) == {"cmd": "ls /repo/src"}  # given as a JSON string in the dump
    assert json.loads(arguments[1])["raw"].startswith('\n{"name": "bash"')


def test_files_in_any_order_and_explicit_run_id():
    files = [DUMP / "val" / "2.jsonl", DUMP / "2.jsonl", str(DUMP / "1.jsonl")]
    run = load_verl(files, run_id="mine")
    assert run.run_id == "mine"
    assert run.trajectories.num_rows == 9
    assert sorted(run.trajectories.column("trajectory_id").to_pylist()) == sorted(load_verl(DUMP).trajectories.column("trajectory_id").to_pylist())


def test_input_files_unchanged():
    files = sorted(DUMP.rglob("*.jsonl"))
    before = [f.read_bytes() for f in files]
    load_verl(DUMP)
    load_verl(DUMP, strict=False)
    assert [f.read_bytes() for f in files] == before


def test_detect(tmp_path):
    assert detect(DUMP)
    assert detect(DUMP / "1.jsonl")
    assert detect(str(DUMP / "val"))
    assert not detect(Path(__file__).parent.parent / "data" / "metrics" / "wandb_history.jsonl")
    assert not detect(write(tmp_path / "x.jsonl", '{"input": "a", "output": "b"}'))  # no score
    assert not detect(write(tmp_path / "y.jsonl", "not json"))
    assert not detect(tmp_path / "absent")
    assert not detect(tmp_path / "empty")


# --- reading rules -------------------------------------------------------------------------------


def test_score_is_the_only_channel_without_extras(tmp_path):
    run = load_verl([write(tmp_path / "3.jsonl", record(score=0.5))])
    assert run.trajectories.column("reward_channels").to_pylist() == [[{"name": "score", "value": 0.5}]]
    assert run.trajectories.column("resolved").to_pylist() == [None]


def test_extras_numeric_and_boolean_kept_others_dropped(tmp_path):
    line = record(score=0.75, acc=1, format=True, pred="1", request_id="r-9", data={"x": 1}, penalty=-0.25)
    run = load_verl([write(tmp_path / "3.jsonl", line)])
    assert run.trajectories.column("reward_channels").to_pylist() == [[
        {"name": "acc", "value": 1.0}, {"name": "format", "value": 1.0}, {"name": "penalty", "value": -0.25},
    ]]
    assert run.trajectories.column("resolved").to_pylist() == [True]


def test_model_tokens_count_the_logged_response_mask(tmp_path):
    """A dump with per-token advantages says how many tokens each response trained; the empty
    response (no model token) then gets advantage 0 from an outcome estimator, as its token
    arrays hold it, on the command line as in the Python API."""
    dump = write(tmp_path / "rollout" / "3.jsonl",
                 record(score=0.0, output="", advantages=[], response_mask=[]),
                 record(score=1.0, advantages=[0.1, 0.1, 0.0], response_mask=[1, 1, 0]),
                 record(score=2.0, advantages=[0.2], response_mask=[1]),
                 record(score=2.0))
    assert load_verl([dump]).trajectories.column("model_tokens").to_pylist() == [0, 2, 1, None]
    store = tmp_path / "store"
    assert run_cli("ingest", dump.parent, "--store", store, "--run", "v").returncode == 0
    done = run_cli("advantages", store, "--run", "v", "--estimator", "rloo")
    assert done.returncode == 0, done.stderr
    row = done.stdout.splitlines()[3].split()  # scores [0, 1, 2, 2]: RLOO [-5/3, -1/3, 1, 1], the first trained on no token
    assert row[:4] == ["3", "4", "0.417", "0.687"], done.stdout


def test_a_response_mask_logged_without_advantages_counts_the_model_tokens(tmp_path):
    """The mask alone sets model_tokens (no token row: there is nothing else to hold); 0/1 as
    numbers and booleans read alike."""
    dump = write(tmp_path / "rollout" / "3.jsonl",
                 record(response_mask=[1, 1, 0]),
                 record(response_mask=[True, 0.0, 1.0]),
                 record(advantages=[0.5, 0.5], response_mask=[False, 1]))
    run = load_verl([dump])
    assert run.trajectories.column("model_tokens").to_pylist() == [2, 2, 1]
    assert [(t["trajectory_id"], t["response_mask"]) for t in run.tokens.to_pylist()] == [("3-2", [False, True])]


def test_groups_follow_the_prompt(tmp_path):
    other = PROMPT.replace("a.txt", "b.txt")
    path = write(tmp_path / "3.jsonl", record(), record(score=0.0), record(input=other), record(input=other, score=0.0))
    run = load_verl([path])
    assert run.trajectories.column("group_id").to_pylist() == [f"3:{task(PROMPT)}"] * 2 + [f"3:{task(other)}"] * 2
    assert run.trajectories.column("trajectory_id").to_pylist() == ["3-0", "3-1", "3-2", "3-3"]


def test_blank_lines_keep_line_numbers(tmp_path):
    path = tmp_path / "3.jsonl"
    path.write_text(record() + "\n\n" + record() + "\n")
    run = load_verl([path])
    assert run.trajectories.column("trajectory_id").to_pylist() == ["3-0", "3-2"]
    assert run.trajectories.column("source").to_pylist() == [f"{path}:1", f"{path}:3"]


def test_split_key(tmp_path):
    run = load_verl([write(tmp_path / "3.jsonl", record(split="test"), record(split="train"), record(split="Validation"))])
    assert run.trajectories.column("split").to_pylist() == ["val", "train", "val"]
    assert run.trajectories.column("trajectory_id").to_pylist() == ["val-3-0", "3-1", "val-3-2"]


def test_validation_directory_sets_split(tmp_path):
    write(tmp_path / "exp-1" / "4.jsonl", record(step=4))
    write(tmp_path / "exp-1" / "val" / "4.jsonl", record(step=4))
    run = load_verl(tmp_path / "exp-1")
    assert run.run_id == "exp-1"
    assert run.trajectories.column("trajectory_id").to_pylist() == ["4-0", "val-4-0"]
    assert run.trajectories.column("split").to_pylist() == ["train", "val"]
    assert load_verl(tmp_path / "exp-1" / "val").run_id == "exp-1"
    write(tmp_path / "exp-1" / "validation_data" / "4.jsonl", record(step=4))
    assert load_verl(tmp_path / "exp-1" / "validation_data").run_id == "exp-1"
    # a folder named for its own run keeps its name, even with a validation word in it
    write(tmp_path / "rl-logs" / "search-r1-val" / "4.jsonl", record(step=4))
    assert load_verl(tmp_path / "rl-logs" / "search-r1-val").run_id == "search-r1-val"


def test_non_numeric_file_name_takes_the_record_step(tmp_path):
    run = load_verl([write(tmp_path / "rollouts.jsonl", record(step=9), record(step=10))])
    assert run.trajectories.column("step").to_pylist() == [9, 10]


def test_missing_step_falls_back_to_the_file_name(tmp_path):
    line = json.dumps({"input": PROMPT, "output": "x", "score": 0.0})
    run = load_verl([write(tmp_path / "5.jsonl", line)])
    assert run.trajectories.column("step").to_pylist() == [5]


# --- bad input -----------------------------------------------------------------------------------

BAD_LINES = [
    # (line, field, text in the message)
    ("{not json", None, "not JSON"),
    ('["input", "output"]', None, "expected a JSON object, found list"),
    (json.dumps({"input": PROMPT, "score": 1.0, "step": 3}), "output", "missing key"),
    (json.dumps({"input": PROMPT, "output": "x", "step": 3}), "score", "missing key"),
    (json.dumps({"output": "x", "score": 1.0, "step": 3}), "input", "missing key"),
    (record(score="1.0"), "score", 'expected a number, found "1.0"'),
    (record(score=None), "score", "expected a number, found null"),
    (record(score=True), "score", "expected a number, found true"),
    (record(output=["a", "b"]), "output", 'expected a string, found ["a", "b"]'),
    (record(input=None), "input", "expected a string, found null"),
    (record(step="3"), "step", 'expected an integer, found "3"'),
    (record(step=3.0), "step", "expected an integer, found 3.0"),
    (record(step=4), "step", "expected 3 (the step in the file name), found 4"),
    (record(split="holdout"), "split", "expected 'train' or one of eval, test, val, validation"),
    (record().replace('"score": 1.0', '"score": NaN'), "score", "expected a finite number, found nan"),
    (record().replace('"score": 1.0', '"score": Infinity'), "score", "found inf"),
    (record().replace('"score": 1.0', '"score": 1.0, "acc": -Infinity'), "acc", "found -inf"),
    (record(advantages=[0.1, 0.1], response_mask=["no", "no"]), "response_mask[0]",
     "expected true, false, 0 or 1, found 'no'"),
    (record(response_mask=[1, 5]), "response_mask[1]", "expected true, false, 0 or 1, found 5"),
]


@pytest.mark.parametrize("line,field,text", BAD_LINES)
def test_bad_record_strict(tmp_path, line, field, text):
    path = write(tmp_path / "3.jsonl", record(), line)
    with pytest.raises(InputError) as caught:
        load_verl([path])
    error = caught.value
    assert (error.file, error.record, error.field) == (str(path), 2, field)
    assert text in str(error)
    assert str(error).startswith(f"{path}: record 2")


@pytest.mark.parametrize("line,field,text", BAD_LINES)
def test_bad_record_lenient(tmp_path, line, field, text):
    path = write(tmp_path / "3.jsonl", record(), line, record(score=0.0))
    run = load_verl([path], strict=False)
    assert run.trajectories.column("trajectory_id").to_pylist() == ["3-0", "3-2"]
    assert [(p.file, p.record, p.field) for p in run.problems] == [(str(path), "2", field)]
    assert text in run.problems[0].message


def test_not_utf8(tmp_path):
    path = tmp_path / "3.jsonl"
    path.write_bytes(record().encode() + b"\n" + b'{"input": "\xff"}\n')
    with pytest.raises(InputError, match="record 2: expected UTF-8 text"):
        load_verl([path])


def test_a_lone_dump_with_a_byte_that_is_not_utf8_is_named_by_record_and_offset(tmp_path):
    """The byte in the first record: the folder is still read as verl dumps (detection reads a
    record's shape), and the error names the record and where the byte is."""
    good = record().encode()
    at = good.index(b'"output"')
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "3.jsonl").write_bytes(good[:at] + b'"note": "\xff", ' + good[at:] + b"\n")
    done = run_cli("ingest", tmp_path / "run", "--store", tmp_path / "store")
    assert done.returncode == 1
    assert done.stderr == (f"error: {tmp_path / 'run' / '3.jsonl'}: record 1: expected UTF-8 text, found an "
                           f"undecodable byte at offset {at + 9}\n")


def test_an_empty_first_dump_of_a_folder_is_named_not_dropped(tmp_path):
    """A step cut short to 0 bytes is the run's first dump: the folder is still read as verl's,
    and the empty file is an error rather than a step gone without a word."""
    import trajlens

    (tmp_path / "run").mkdir()
    empty = tmp_path / "run" / "1.jsonl"
    empty.write_bytes(b"")
    write(tmp_path / "run" / "2.jsonl", record(step=2))
    with pytest.raises(InputError, match="no records") as caught:
        trajlens.ingest([tmp_path / "run"], tmp_path / "store")
    assert caught.value.file == str(empty)
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("first", ['{"foo": {"bar": 1}}', '{"input": "a", "output": "b"}', "not json"],
                         ids=["other-keys", "no-score", "garbled"])
def test_a_first_step_that_is_no_dump_is_named_by_ingest_as_by_check(tmp_path, first):
    """A <step>.jsonl whose first record is no dump's does not make the folder another kind of
    folder: ingest reads it with the rest, as check does, and names its record."""
    folder = tmp_path / "run"
    shutil.copytree(DUMP, folder)
    (folder / "1.jsonl").write_text(first + "\n")
    ingested = run_cli("ingest", folder, "--store", tmp_path / "store")
    checked = run_cli("check", folder)
    assert ingested.returncode == 1 and not (tmp_path / "store").exists()
    assert ingested.stderr.startswith(f"error: {folder / '1.jsonl'}: record 1: ") and ingested.stderr.count("\n") == 1
    assert checked.returncode == 2 and checked.stderr == ingested.stderr
    lenient = run_cli("ingest", folder, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0 and "; skipped 1 (each named above)" in lenient.stdout
    assert lenient.stderr == ingested.stderr.replace("error: ", "skipped: ", 1)
    run = load_verl(folder, strict=False)
    assert sorted(set(run.trajectories.column("step").to_pylist())) == [2]


def test_empty_file(tmp_path):
    empty = tmp_path / "run" / "4.jsonl"
    empty.parent.mkdir()
    empty.write_text("\n")
    write(tmp_path / "run" / "3.jsonl", record())
    with pytest.raises(InputError, match="no records"):
        load_verl(tmp_path / "run")
    run = load_verl(tmp_path / "run", strict=False)
    assert run.trajectories.num_rows == 1
    assert [(p.file, p.record) for p in run.problems] == [(str(empty), None)]
    assert "no records" in run.problems[0].message


def test_same_step_in_two_files(tmp_path):
    first = write(tmp_path / "a" / "3.jsonl", record())
    second = write(tmp_path / "b" / "3.jsonl", record())
    with pytest.raises(InputError) as caught:
        load_verl([first, second])
    assert (caught.value.file, caught.value.record, caught.value.field) == (str(second), 1, "step")
    assert f"already loaded from {first}" in str(caught.value)
    run = load_verl([first, second], strict=False)
    assert run.trajectories.num_rows == 1 and len(run.problems) == 1


def test_bad_paths(tmp_path):
    with pytest.raises(InputError, match="no such path"):
        load_verl([tmp_path / "absent"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no dump files"):
        load_verl([tmp_path / "empty"])
    with pytest.raises(InputError, match="no paths given"):
        load_verl([])


def test_lenient_run_is_still_valid(tmp_path):
    copy = tmp_path / "grpo-sandbox"
    shutil.copytree(DUMP, copy)
    with open(copy / "1.jsonl", "a") as handle:
        handle.write('{"input": "x", "output": "y", "score": NaN, "step": 1}\n')
    run = load_verl(copy, strict=False)
    assert run.trajectories.num_rows == 9
    assert [(p.record, p.field) for p in run.problems] == [("5", "score")]


# --- chat template parsing -----------------------------------------------------------------------


def call(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def test_parse_with_special_tokens_kept():
    text = (
        "<think>\nlook first\n</think>\n\n" + call("bash", {"command": "ls"}) + "<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\na.txt\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n" + call("bash", {"command": "wc -l a.txt"}) + "<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n3 a.txt\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\nthree\n</think>\n\n\\boxed{3}<|im_end|>"
    )
    parsed = parse_response(text)
    assert parsed.num_turns == 3
    assert [(c.turn, c.tool_name, c.arguments, c.observation) for c in parsed.tool_calls] == [
        (0, "bash", '{"command": "ls"}', "a.txt"),
        (1, "bash", '{"command": "wc -l a.txt"}', "3 a.txt"),
    ]
    assert parsed.reasoning == ("\nlook first\n", "\nthree\n")


def test_parse_with_special_tokens_skipped():
    text = (
        call("bash", {"command": "ls"}) + "\n" + call("bash", {"command": "pwd"})
        + "user\n<tool_response>\na.txt\n</tool_response>\n<tool_response>\n/work\n</tool_response>\nassistant\n"
        + "The user asked for files; a.txt is there."
    )
    parsed = parse_response(text)
    assert parsed.num_turns == 2
    assert [(c.turn, c.observation) for c in parsed.tool_calls] == [(0, "a.txt"), (0, "/work")]
    assert parsed.unmatched_observations == 0


def test_parse_plain_answer_and_empty_output():
    assert parse_response("The answer is \\boxed{4}.").num_turns == 1
    assert parse_response("").num_turns == 1
    assert parse_response("").tool_calls == ()
    # "user" in prose is not a turn boundary
    assert parse_response("Ask the user\nuser\nagain").num_turns == 1


def test_parse_malformed_calls():
    text = (
        "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}\n</tool_call>\n"  # bad JSON
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>\n"  # no name
        "<tool_call>\n{\"name\": \"bash\"}\n</tool_call>\n"  # no arguments
        + call("bash", {"command": "ls"}) + "\n"
        "<tool_call>\n{\"name\": \"bash\", \"argu"  # cut off by the length limit
    )
    parsed = parse_response(text)
    assert [(c.tool_name, c.format_error) for c in parsed.tool_calls] == [
        ("<unparsed>", True), ("<unparsed>", True), ("bash", True), ("bash", False), ("<unparsed>", True),
    ]
    assert json.loads(parsed.tool_calls[0].arguments) == {"raw": '\n{"name": "bash", "arguments": {"command": "ls"}\n'}
    assert parsed.tool_calls[3].arguments_object == {"command": "ls"}


def test_parse_observations_skip_calls_with_format_errors():
    text = (
        "<tool_call>\nnot json\n</tool_call>\n" + call("bash", {"command": "ls"})
        + "user\n<tool_response>\nout\n</tool_response>\n<tool_response>\nextra\n</tool_response>\nassistant\ndone"
    )
    parsed = parse_response(text)
    assert [c.observation for c in parsed.tool_calls] == [None, "out"]
    assert parsed.unmatched_observations == 1


def test_parse_pending_calls_do_not_carry_over_turns():
    text = (
        call("bash", {"command": "a"}) + call("bash", {"command": "b"})
        + "user\n<tool_response>\nA\n</tool_response>\nassistant\n" + call("bash", {"command": "c"})
        + "user\n<tool_response>\nC\n</tool_response>\nassistant\nok"
    )
    parsed = parse_response(text)
    assert [(c.turn, c.observation) for c in parsed.tool_calls] == [(0, "A"), (0, None), (1, "C")]
    assert parsed.num_turns == 3


def test_parse_call_inside_think_counts_and_model_written_response_does_not():
    # verl's Hermes parser runs a call written inside a think block too.
    text = "<think>\n" + call("bash", {"command": "ls"}) + "\n</think>\n<tool_response>\nmade up\n</tool_response>"
    parsed = parse_response(text)
    assert [(c.tool_name, c.observation) for c in parsed.tool_calls] == [("bash", None)]
    assert parsed.num_turns == 1


def test_parse_arguments_forms():
    string_object = parse_response(
        "<tool_call>\n" + json.dumps({"name": "bash", "arguments": json.dumps({"command": "ls"})}) + "\n</tool_call>"
    ).tool_calls[0]
    assert (string_object.arguments, string_object.format_error) == ('{"command": "ls"}', False)
    not_object = parse_response('<tool_call>\n{"name": "bash", "arguments": "ls -la"}\n</tool_call>').tool_calls[0]
    assert not_object.format_error is False and not_object.arguments_object is None
    assert json.loads(not_object.arguments) == {"raw": '\n{"name": "bash", "arguments": "ls -la"}\n'}


def test_command_of_shell_tools(tmp_path):
    output = (
        call("execute_bash", {"cmd": ["ls", "-la", "my dir"]}) + call("terminal", {"command": "pwd"})
        + call("python", {"command": "print(1)"}) + call("shell", {"command": 42})
    )
    run = load_verl([write(tmp_path / "3.jsonl", record(output=output))])
    assert run.tool_calls.column("command").to_pylist() == ["ls -la 'my dir'", "pwd", None, None]
    assert run.trajectories.column("num_turns").to_pylist() == [1]
