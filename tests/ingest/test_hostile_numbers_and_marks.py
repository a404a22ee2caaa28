"""Long integers, deep configs, unmatched action groups and byte-order marks: a load or one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hostile import MINI_V1, OPENAI_CHAT, VERL, _set  # noqa: E402

import trajlens  # noqa: E402
from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import load  # noqa: E402
from trajlens.limits import MAX_INT_DIGITS, UTF8_BOM, parse_json  # noqa: E402

LONG = "7" * 5000
BOM = UTF8_BOM


def _with_long_integer(document: dict, key: str) -> str:
    return json.dumps(_set(document, key, 0)).replace(f'"{key}": 0', f'"{key}": {LONG}')


@pytest.mark.parametrize("key", ["score", "step"])
def test_a_5000_digit_integer_in_a_verl_dump_names_file_record_and_field(tmp_path, key):
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "1.jsonl").write_text(json.dumps(VERL) + "\n" + _with_long_integer(VERL, key) + "\n")
    with pytest.raises(InputError) as caught:
        trajlens.ingest([dump], tmp_path / "store")
    error = caught.value
    assert (error.file, error.record, error.field) == (str(dump / "1.jsonl"), 2, key)
    assert "5,000 digits" in str(error) and "\n" not in str(error)
    assert not (tmp_path / "store").exists()


def test_a_5000_digit_reward_in_a_chat_log_names_the_field(tmp_path):
    log = tmp_path / "chat.json"
    log.write_text(_with_long_integer(OPENAI_CHAT, "reward"))
    with pytest.raises(InputError) as caught:
        load(log)
    assert (caught.value.file, caught.value.field) == (str(log), "reward")


def _chat_line_with_a_long_integer() -> str:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a", "usage": {"completion_tokens": 0}}]
    return json.dumps({"messages": messages}).replace('"completion_tokens": 0', f'"completion_tokens": {LONG}')


@pytest.mark.parametrize("name, text, record, field", [
    ("chat.jsonl", _chat_line_with_a_long_integer() + "\n", "line 1", "messages.1.usage.completion_tokens"),
    ("metrics.jsonl", '{"_step": 1, "actor/lr": ' + LONG + "}\n", 1, "actor/lr"),
])
def test_a_long_integer_in_the_first_jsonl_record_is_refused_by_the_format_that_reads_it(tmp_path, name, text,
                                                                                        record, field):
    log = tmp_path / name
    log.write_text(text)
    with pytest.raises(InputError) as caught:
        trajlens.ingest([log], tmp_path / "store")
    error = caught.value
    assert (error.file, error.record, error.field) == (str(log), record, field)
    assert "at most 4300 digits" in str(error) and "5,000 digits" in str(error)
    assert not (tmp_path / "store").exists()


def test_detection_reads_a_long_integer_as_an_integer_and_the_loader_refuses_it():
    sniffed = parse_json('{"a/b": ' + LONG + "}", "f.jsonl", sniff=True)
    assert isinstance(sniffed["a/b"], int)
    with pytest.raises(InputError, match="5,000 digits"):
        parse_json('{"a/b": ' + LONG + "}", "f.jsonl")


def test_a_long_integer_deep_inside_is_named_by_its_path():
    text = '{"a": [1, {"b": ' + "9" * (MAX_INT_DIGITS + 1) + "}]}"
    with pytest.raises(InputError) as caught:
        parse_json(text, "f.json", record=3)
    assert (caught.value.record, caught.value.field) == (3, "a.1.b")
    assert parse_json('{"a": ' + "9" * MAX_INT_DIGITS + "}", "f.json")["a"] == int("9" * MAX_INT_DIGITS)
    assert parse_json('{"a": -' + "9" * MAX_INT_DIGITS + "}", "f.json")["a"] == -int("9" * MAX_INT_DIGITS)


def test_a_parquet_run_whose_config_nests_100000_deep_is_refused_in_one_line(tmp_path, tiny_run_dir):
    file = tiny_run_dir / "runs" / "part-0.parquet"
    runs = pq.read_table(file)
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    runs = runs.set_column(runs.schema.get_field_index("config"), "config", pa.array([deep]))
    pq.write_table(runs, file)
    with pytest.raises(InputError) as caught:
        trajlens.ingest([tiny_run_dir], tmp_path / "store")
    error = caught.value
    assert (error.file, error.record, error.field) == (str(file), "tiny", "config")
    assert "nested at most 200 levels" in str(error) and "100001 levels" in str(error)


def test_a_parquet_run_whose_config_holds_a_long_integer_names_it(tmp_path, tiny_run_dir):
    file = tiny_run_dir / "runs" / "part-0.parquet"
    runs = pq.read_table(file)
    runs = runs.set_column(runs.schema.get_field_index("config"), "config", pa.array(['{"seed": ' + LONG + "}"]))
    pq.write_table(runs, file)
    with pytest.raises(InputError) as caught:
        trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert caught.value.field == "config.seed"


def test_an_action_group_that_takes_no_part_is_a_format_error(tmp_path):
    document = _set(MINI_V1, "info.config.agent.action_regex", "```bash\\s*\\n(x)?.*?\\n```")
    log = tmp_path / "task-1.traj.json"
    log.write_text(json.dumps(document))
    run = load(log)
    assert run.tool_calls.column("format_error").to_pylist() == [True]
    assert run.tool_calls.column("command").to_pylist() == [None]


def test_the_same_pattern_whose_group_takes_part_reads_the_action(tmp_path):
    document = _set(MINI_V1, "info.config.agent.action_regex", "```bash\\s*\\n(l)?s\\n```")
    log = tmp_path / "task-1.traj.json"
    log.write_text(json.dumps(document))
    run = load(log)
    assert run.tool_calls.column("command").to_pylist() == ["l"]
    assert run.tool_calls.column("format_error").to_pylist() == [False]


def test_a_verl_dump_whose_files_start_with_a_byte_order_mark_loads(tmp_path):
    plain, marked = tmp_path / "plain", tmp_path / "marked"
    for folder, prefix in ((plain, b""), (marked, BOM)):
        folder.mkdir()
        for step in (1, 2):
            (folder / f"{step}.jsonl").write_bytes(prefix + ((json.dumps(_set(VERL, "step", step)) + "\n") * 2).encode())
    loaded, expected = load(marked), load(plain)
    for column in ("step", "reward", "group_id"):
        assert loaded.trajectories.column(column).to_pylist() == expected.trajectories.column(column).to_pylist()
    assert loaded.tool_calls.column("command").to_pylist() == expected.tool_calls.column("command").to_pylist() == ["ls"] * 4


@pytest.mark.parametrize("name", ["conversation.json", "messages.jsonl"])
def test_a_chat_log_with_a_byte_order_mark_loads(tmp_path, name):
    text = json.dumps(OPENAI_CHAT) if name.endswith(".json") else json.dumps(OPENAI_CHAT) + "\n"
    plain = tmp_path / "plain" / name
    marked = tmp_path / "marked" / name
    plain.parent.mkdir()
    marked.parent.mkdir()
    plain.write_text(text)
    marked.write_bytes(BOM + text.encode())
    assert load(marked).tool_calls.column("command").to_pylist() == load(plain).tool_calls.column("command").to_pylist()
