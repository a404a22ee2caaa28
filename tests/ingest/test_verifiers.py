"""verifiers results folders, written by verifiers' own ``state_to_output``/``save_outputs``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "verifiers" / "outputs"
RESULTS = DATA / "evals" / "tool-math--mock-model" / "0a1b2c3d" / "results.jsonl"


def test_rollouts_grouped_by_example_with_metrics_as_channels_and_calls():
    assert [s.format.name for s in formats.plan(DATA)] == ["verifiers"]
    run = load(DATA)
    assert run.runs.column("name").to_pylist() == ["tool-math"]
    config = json.loads(run.runs.column("config")[0].as_py())
    assert config["rollouts_per_example"] == 2 and config["model"] == "mock-model"
    rows = [(r["trajectory_id"], r["group_id"], r["reward"], r["exit_status"], r["model_tokens"], r["response_text"])
            for r in run.trajectories.to_pylist()]
    assert rows == [("0/0", "0", 1.1, "no_tools", 30, "42"), ("0/1", "0", 0.1, "no_tools", 31, "48"),
                    ("1/0", "1", 1.1, "no_tools", 30, "7"),
                    ("1/1", "1", 0.1, "max_turns_reached", 31, "I am not sure.")]
    assert run.trajectories.column("reward_channels")[0].as_py() == [
        {"name": "correct_answer", "value": 1.0}, {"name": "format_reward", "value": 0.1}]
    calls = [(c["trajectory_id"], c["tool_name"], c["command"], c["observation"], c["assistant_text"])
             for c in run.tool_calls.to_pylist()]
    assert calls[0] == ("0/0", "bash", "python3 -c 'print(6*7)'", "42\n", "I should run it.\nLet me compute it.")
    assert calls[3][3] == "cat: /tmp/answer.txt: No such file"


def test_the_same_rows_load_from_a_json_array(tmp_path):
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    assert [s.format.name for s in formats.plan(path)] == ["verifiers"]
    assert load(path).trajectories.drop(["source", "run_id"]).equals(load(RESULTS).trajectories.drop(["source", "run_id"]))


def test_flat_tool_calls_and_text_completions(tmp_path):
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()]
    rows[0]["completion"][0]["tool_calls"] = [{"id": "c", "name": "bash", "arguments": '{"command": "ls"}'}]
    rows[0]["completion"][1]["tool_call_id"] = "c"
    rows[1]["completion"] = "The answer is 48."
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = load(path)
    assert run.tool_calls.column("command").to_pylist()[0] == "ls"
    second = run.trajectories.to_pylist()[1]
    assert (second["num_turns"], second["response_text"]) == (1, "The answer is 48.")


@pytest.mark.parametrize("change, field", [
    (lambda r: r.__setitem__("reward", "high"), "reward"),
    (lambda r: r.__setitem__("example_id", [0]), "example_id"),
    (lambda r: r["metrics"].__setitem__("correct_answer", "yes"), "metrics.correct_answer"),
])
def test_bad_rows_are_named_and_lenient_skips_them(tmp_path, change, field):
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()]
    change(rows[2])
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError) as caught:
        load(path)
    assert caught.value.field == field and "record 3" in str(caught.value)
    assert load(path, strict=False).trajectories.num_rows == 3


def test_verifiers_results_ingest_classify_report_and_check(tmp_path):
    _, classes = through_every_surface(DATA, tmp_path)
    # python3 -c, echo, python3 -c, cat: the shell rules decide each command
    assert classes.rows() == [("bash", "quick_check"), ("bash", "other"), ("bash", "quick_check"), ("bash", "view")]
