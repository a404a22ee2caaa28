"""Agent-log loaders against the real fixture logs and hand-written bad inputs.

Every count below was taken from the raw files with a throwaway script that does not use
trajlens (json.load and a loop); each assertion says how it was derived.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from trajlens.errors import InputError
from trajlens.ingest.agents import (
    FORMATS,
    detect_format,
    load_agent_logs,
    load_mini_swe_agent_v1,
    load_mini_swe_agent_v2,
    load_openai_chat,
    load_openhands_v0,
    load_openhands_v1,
    load_swe_agent,
)
from trajlens.ingest.agents._common import walk

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real"
DATA = Path(__file__).resolve().parents[1] / "data"
GEMINI = REAL / "mini-swe-agent-gemini3pro"
DEEPSEEK = REAL / "mini-swe-agent-deepseek-pr816"
REASONER = DEEPSEEK / "output" / "deepseek_reasoner_dev"
SWE_AGENT = REAL / "SWE-agent"
OPENHANDS_V0 = REAL / "OpenHands"
SAFETY = next((REAL / "openhands-benchmarks-openagentsafety").rglob("state_safety-applications.json"), Path()).parent

pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="real fixture logs not present")


def rows(run, table):
    return run.table(table).to_pylist()


def calls_of(run, trajectory_id):
    return [c for c in rows(run, "tool_calls") if c["trajectory_id"] == trajectory_id]


# -- every fixture file ----------------------------------------------------------------------

# Files each detector must pick out of the fixture tree, by folder (counted with `find`):
# 8 gemini trajs; 30 deepseek trajs (3 runs x 8 tasks + 6 reasoner); 22 SWE-agent .traj;
# 4 OpenHands V0 lists; 45 state_*.json + 45 traj_*.json.
EXPECTED_DETECTIONS = {
    "mini-swe-agent-v1": 8,
    "mini-swe-agent-v2": 30,
    "swe-agent": 22,
    "openhands-v0": 4,
    "openhands-v1": 90,
}


def test_detection_over_the_fixture_tree():
    detected = {path: detect_format(path) for path in walk(REAL)}
    counts = Counter(name for name in detected.values() if name is not None)
    assert dict(counts) == EXPECTED_DETECTIONS
    # Reports, harness summaries, grader outputs, prediction dumps are not trajectories.
    ignored = {path.name for path, name in detected.items() if name is None}
    assert "report.json" in ignored
    assert "deepseek__deepseek-chat.deepseek_chat_dev.json" in ignored
    assert "eval_safety-applications.json" in ignored
    assert {"output.jsonl", "output.critic_attempt_1.jsonl", "all_preds.jsonl"} <= ignored


def test_every_fixture_file_loads_on_its_own():
    for path in walk(REAL):
        name = detect_format(path)
        if name is None:
            continue
        run = FORMATS[name].load(path)
        assert run.trajectories.num_rows == 1, path
        assert run.problems == []


def test_mixing_formats_is_an_error_naming_both():
    with pytest.raises(InputError, match="mixes agent-log formats") as caught:
        load_agent_logs([GEMINI, SWE_AGENT])
    assert "mini-swe-agent-v1" in str(caught.value) and "swe-agent (" in str(caught.value)


# -- mini-swe-agent v1 -----------------------------------------------------------------------


def test_mini_swe_agent_v1_counts_and_format_errors():
    run = load_agent_logs(GEMINI)
    assert run.runs.column("source_format")[0].as_py() == "mini-swe-agent-v1"
    assert run.run_id == "mini-swe-agent-gemini3pro"
    # 8 trajs; assistant messages per file 20+20+27+42+49+43+38+43 = 282, one call each.
    assert run.trajectories.num_rows == 8
    assert run.tool_calls.num_rows == 282
    turns = {t["task_id"]: t["num_turns"] for t in rows(run, "trajectories")}
    assert turns["psf__requests-6028"] == 49
    # User replies starting "Please always provide EXACTLY ONE action": 1 matplotlib,
    # 2 seaborn, 3 requests, 1 scikit-learn, 3 sphinx = 10.
    errors = [c for c in rows(run, "tool_calls") if c["format_error"]]
    assert len(errors) == 10
    assert all(c["observation"].startswith("Please always provide EXACTLY ONE action") for c in errors)
    assert all(c["return_code"] is None for c in errors)
    # sphinx: assistant turns 5, 6 and 12 hold 2, 7 and 2 bash blocks.
    sphinx = calls_of(run, "20251118_gemini-3-pro-74pct/sphinx-doc__sphinx-9320")
    assert [c["turn"] for c in sphinx if c["format_error"]] == [5, 6, 12]
    assert sphinx[5]["command"] == "export PYTHONPATH=$PYTHONPATH:.\npython3 -m sphinx.cmd.quickstart"
    assert sphinx[0]["format_error"] is False and sphinx[0]["return_code"] == 0
    assert sphinx[-1]["command"] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
    assert sphinx[-1]["observation"].startswith("diff --git")


def test_mini_swe_agent_v1_verdicts_and_tokens():
    run = load_mini_swe_agent_v1(GEMINI)
    by_task = {t["task_id"]: t for t in rows(run, "trajectories")}
    # logs/<id>/report.json "resolved": true for these four, false for the other four.
    resolved = {task for task, t in by_task.items() if t["resolved"]}
    assert resolved == {"astropy__astropy-12907", "django__django-12155", "scikit-learn__scikit-learn-11310",
                        "sphinx-doc__sphinx-9320"}
    assert {t["reward"] for t in by_task.values()} == {0.0, 1.0}
    astropy = by_task["astropy__astropy-12907"]
    # 20 usage blocks: completion_tokens sum 5083, reasoning_tokens sum 68.
    assert (astropy["model_tokens"], astropy["reasoning_tokens"], astropy["observation_tokens"]) == (5083, 68, None)
    assert astropy["exit_status"] == "Submitted"
    assert astropy["group_id"] == astropy["task_id"]


def test_mini_swe_agent_v1_run_above_its_trajs_folder_reads_the_runs_summary(tmp_path):
    """SWE-bench's experiment layout, <run>/trajs/<id>/<id>.traj.json: the run is the folder
    above trajs/, in the trajectory ids and in the summary <model>.<run>.json that holds the verdicts."""
    import shutil

    run_folder = tmp_path / "20251118_gemini-3-pro-74pct"
    shutil.copytree(GEMINI / "swebench_results" / "20251118_gemini-3-pro-74pct" / "trajs", run_folder / "trajs")
    resolved = ["astropy__astropy-12907", "django__django-12155"]
    summary = {"resolved_ids": resolved, "unresolved_ids": ["psf__requests-6028"]}
    (run_folder / "gemini-3-pro.20251118_gemini-3-pro-74pct.json").write_text(json.dumps(summary))
    run = load_mini_swe_agent_v1(run_folder)
    by_task = {t["task_id"]: t for t in rows(run, "trajectories")}
    assert {task for task, t in by_task.items() if t["resolved"]} == set(resolved)
    assert by_task["psf__requests-6028"]["resolved"] is False
    assert by_task["mwaskom__seaborn-3187"]["resolved"] is None  # in neither list
    assert {t["trajectory_id"].split("/")[0] for t in by_task.values()} == {"20251118_gemini-3-pro-74pct"}


def test_mini_swe_agent_v1_message_without_a_bash_block(tmp_path):
    document = {
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "demo-1",
        "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "one bash block per reply"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "THOUGHT: I will think only."},
            {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."},
            {"role": "assistant", "content": "THOUGHT: list\n\n```bash\nls -la\n```"},
            {"role": "user", "content": "<returncode>2</returncode>\n<output>\nls: nope\n</output>"},
        ],
    }
    path = tmp_path / "demo-1.traj.json"
    path.write_text(json.dumps(document))
    run = load_mini_swe_agent_v1(path)
    first, second = rows(run, "tool_calls")
    assert (first["format_error"], first["command"], first["arguments"], first["tool_name"]) == (True, None, "{}", "bash")
    assert (second["format_error"], second["command"], second["return_code"]) == (False, "ls -la", 2)
    assert second["arguments"] == '{"command": "ls -la"}'
    assert rows(run, "trajectories")[0]["num_turns"] == 2


# -- mini-swe-agent v2 -----------------------------------------------------------------------

# Harness summaries deepseek__deepseek-chat.<run>.json, in run order chat_dev, chat_dev_rerun,
# lite_dev_noparallel (same as the MANIFEST).
KNOWN_RESOLVED = {
    "pylint-dev__astroid-1196": [True, True, False],
    "pylint-dev__astroid-1866": [True, True, False],
    "sqlfluff__sqlfluff-2419": [True, True, True],
    "pydicom__pydicom-1256": [True, True, True],
    "pydicom__pydicom-1694": [True, True, True],
    "pylint-dev__astroid-1978": [False, False, False],
    "pydicom__pydicom-901": [False, False, False],
    "pvlib__pvlib-python-1154": [False, False, False],
}
RUNS = ["deepseek_chat_dev", "deepseek_chat_dev_rerun", "deepseek_lite_dev_noparallel"]


def check_deepseek_groups(run):
    trajectories = rows(run, "trajectories")
    assert len(trajectories) == 24
    groups = Counter(t["group_id"] for t in trajectories)
    assert groups == {task: 3 for task in KNOWN_RESOLVED}
    by_id = {t["trajectory_id"]: t for t in trajectories}
    for task, flags in KNOWN_RESOLVED.items():
        got = [by_id[f"{folder}/{task}"]["resolved"] for folder in RUNS]
        assert got == flags, task
        assert [by_id[f"{folder}/{task}"]["reward"] for folder in RUNS] == [float(f) for f in flags]


def test_deepseek_folder_is_one_run_of_eight_groups_of_three():
    run = load_agent_logs(DEEPSEEK)
    assert run.runs.num_rows == 1
    assert run.run_id == "mini-swe-agent-deepseek-pr816"
    check_deepseek_groups(run)
    # tool_calls entries summed per run folder: 493 + 534 + 508.
    assert run.tool_calls.num_rows == 1535
    assert not any(c["format_error"] for c in rows(run, "tool_calls"))
    # The reasoner folder has no summary while the three others do: left out, and said so.
    assert len(run.problems) == 1 and run.problems[0].file.endswith("deepseek_reasoner_dev")


def test_deepseek_run_folders_given_one_by_one():
    run = load_mini_swe_agent_v2([DEEPSEEK / "output" / folder for folder in RUNS], run_id="deepseek-n3")
    assert run.run_id == "deepseek-n3"
    check_deepseek_groups(run)
    assert run.problems == []


def test_deepseek_calls_tokens_and_submission():
    run = load_mini_swe_agent_v2(DEEPSEEK / "output" / "deepseek_chat_dev")
    sql = calls_of(run, "deepseek_chat_dev/sqlfluff__sqlfluff-2419")
    # 48 assistant messages with one bash call each; 47 tool replies (the submit has none).
    assert len(sql) == 48 and {c["tool_name"] for c in sql} == {"bash"}
    assert sql[0]["command"] == 'find . -type f -name "*.py" | grep -i "l060" | head -20'
    assert sql[0]["return_code"] == 0
    assert sql[-1]["command"] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt"
    assert sql[-1]["return_code"] is None and sql[-1]["observation"].startswith("diff --git a/src/sqlfluff")
    trajectory = next(t for t in rows(run, "trajectories") if t["task_id"] == "sqlfluff__sqlfluff-2419")
    # deepseek-chat logs completion_tokens_details: null, so no reasoning count.
    assert trajectory["reasoning_tokens"] is None and trajectory["model_tokens"] > 0


def test_reasoner_runs_load_alone_with_empty_trajectories():
    run = load_agent_logs(REASONER)
    assert run.run_id == "deepseek_reasoner_dev"
    by_task = {t["task_id"]: t for t in rows(run, "trajectories")}
    # Assistant messages per file: 1072: 15, 1154: 0, 1606: 4, astroid-1978: 0, 1625: 47, 2419: 55.
    assert {task: t["num_turns"] for task, t in by_task.items()} == {
        "pvlib__pvlib-python-1072": 15, "pvlib__pvlib-python-1154": 0, "pvlib__pvlib-python-1606": 4,
        "pylint-dev__astroid-1978": 0, "sqlfluff__sqlfluff-1625": 47, "sqlfluff__sqlfluff-2419": 55,
    }
    assert run.tool_calls.num_rows == 121
    assert by_task["pvlib__pvlib-python-1154"]["exit_status"] == "Timeout"
    assert by_task["pvlib__pvlib-python-1154"]["model_tokens"] is None
    assert by_task["pvlib__pvlib-python-1072"]["exit_status"] == "InternalServerError"
    # No summary names this run: no verdict.
    assert {t["resolved"] for t in by_task.values()} == {None}
    # 1606: completion_tokens 318 and reasoning_tokens 94 over its 4 calls.
    assert (by_task["pvlib__pvlib-python-1606"]["model_tokens"],
            by_task["pvlib__pvlib-python-1606"]["reasoning_tokens"]) == (318, 94)
    assert [c["return_code"] for c in calls_of(run, "deepseek_reasoner_dev/pvlib__pvlib-python-1606")] == [0, 0, 0, 0]


def test_mini_swe_agent_v2_message_without_tool_calls_is_a_format_error(tmp_path):
    document = {
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": "demo-2",
        "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "use the bash tool"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "I think I am done."},
            {"role": "user", "content": "No tool calls found in the response."},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}'}},
            ]},
            {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}},
        ],
    }
    path = tmp_path / "demo-2.traj.json"
    path.write_text(json.dumps(document))
    first, second = rows(load_mini_swe_agent_v2(path), "tool_calls")
    assert (first["format_error"], first["command"], first["observation"]) == (
        True, None, "No tool calls found in the response.")
    assert (second["format_error"], second["turn"], second["observation"]) == (False, 1, "")


# -- SWE-agent -------------------------------------------------------------------------------


def test_swe_agent_counts():
    run = load_agent_logs(SWE_AGENT)
    assert run.runs.column("source_format")[0].as_py() == "swe-agent"
    # 22 .traj files; non-blank actions (trajectory steps, or history tool_calls for
    # function_calling_simple) sum to 232, one per step.
    assert run.trajectories.num_rows == 22
    assert run.tool_calls.num_rows == 232
    assert sum(t["num_turns"] for t in rows(run, "trajectories")) == 232


def test_swe_agent_tool_names_and_tokens():
    path = next(SWE_AGENT.rglob("6e44b9__sweagenttestrepo-1c2844.traj"))
    run = load_swe_agent(path)
    calls = rows(run, "tool_calls")
    assert [c["tool_name"] for c in calls] == ["find_file", "open", "edit", "bash", "submit"]
    assert calls[3]["command"] == "python3 /SWE-agent__test-repo/tests/missing_colon.py"
    assert calls[1]["arguments"] == json.dumps({"action": 'open "/SWE-agent__test-repo/tests/missing_colon.py"'})
    trajectory = rows(run, "trajectories")[0]
    # info.model_stats.tokens_received = 243
    assert (trajectory["model_tokens"], trajectory["exit_status"], trajectory["resolved"]) == (243, "submitted", None)


def test_swe_agent_history_only_file():
    run = load_swe_agent(SWE_AGENT / "trajectories" / "demonstrations" / "function_calling_simple.traj")
    calls = rows(run, "tool_calls")
    assert [c["tool_name"] for c in calls] == ["find_file", "open", "edit", "bash", "submit"]
    assert calls[0]["arguments"] == '{"file_name": "missing_colon.py"}'
    assert calls[3]["command"] == "python tests/missing_colon.py"
    assert calls[3]["observation"].startswith("8.2")
    assert rows(run, "trajectories")[0]["exit_status"] is None


def test_swe_agent_keeps_the_thought_of_each_step():
    trajectory = next(SWE_AGENT.rglob("6e44b9__sweagenttestrepo-1c2844.traj"))
    calls = rows(load_swe_agent(trajectory), "tool_calls")
    assert calls[0]["assistant_text"].startswith("To start addressing this issue, I will first search")
    history = rows(load_swe_agent(SWE_AGENT / "trajectories" / "demonstrations" / "function_calling_simple.traj"),
                   "tool_calls")
    assert history[0]["assistant_text"].startswith("The `SyntaxError` in `missing_colon.py` is likely")


def test_swe_agent_demonstrations_log_no_tokens():
    # BabyEncryption: 16 steps, model_stats all 0: not logged, not "zero tokens".
    run = load_swe_agent(next(SWE_AGENT.rglob("BabyEncryption.traj")))
    assert rows(run, "trajectories")[0]["model_tokens"] is None


# -- OpenHands V0 ----------------------------------------------------------------------------


def test_openhands_v0_counts_and_names():
    run = load_agent_logs(OPENHANDS_V0)
    assert run.runs.column("source_format")[0].as_py() == "openhands-v0"
    # Agent actions other than messages: basic 2 (edit, finish), basic_gui_mode 4 (run,
    # edit, edit, run), basic_interactions 1 (finish), wrong_initial_state 4.
    assert run.trajectories.num_rows == 4
    assert run.tool_calls.num_rows == 11
    calls = calls_of(run, "tests/runtime/trajs/wrong_initial_state")
    assert [c["tool_name"] for c in calls] == ["str_replace_editor", "bash", "str_replace_editor", "finish"]
    assert calls[1]["command"] == "mv /workspace/game_2048.py /workspace/2048.py"
    # The model's own arguments: {"command": "mv ...", "is_input": "false"}.
    assert calls[1]["return_code"] == 0 and calls[1]["arguments"] == json.dumps(
        {"command": "mv /workspace/game_2048.py /workspace/2048.py", "is_input": "false"})
    assert calls[0]["observation"].startswith("Here's the files and directories")
    assert calls[3]["observation"] is None
    by_task = {t["task_id"]: t for t in rows(run, "trajectories")}
    # Four responses with completion_tokens 95 + 111 + 85 + 67.
    assert by_task["wrong_initial_state"]["model_tokens"] == 358
    assert by_task["wrong_initial_state"]["num_turns"] == 4
    # basic_gui_mode: 4 tool responses (104 + 1142 + 693 + 85) and a closing message turn.
    assert (by_task["basic_gui_mode"]["num_turns"], by_task["basic_gui_mode"]["model_tokens"]) == (5, 2024)
    assert by_task["basic_gui_mode"]["exit_status"] == "awaiting_user_input"
    # basic_interactions: two messages and a finish.
    assert by_task["basic_interactions"]["num_turns"] == 3


def test_openhands_v0_keeps_the_models_text():
    run = load_agent_logs(OPENHANDS_V0)
    calls = calls_of(run, "tests/runtime/trajs/wrong_initial_state")
    # Each action's args.thought: what the model wrote with the call.
    assert calls[1]["assistant_text"] == "Great, I found the file. Now I'll use the bash command `mv` to rename it."
    assert calls[2]["assistant_text"] == "Let me verify that the file was renamed successfully:"
    by_task = {t["task_id"]: t for t in rows(run, "trajectories")}
    # basic_gui_mode ends with an agent message after its last tool call: its answer.
    assert by_task["basic_gui_mode"]["response_text"].startswith("I've created a complete Vue.js todo application")
    # basic_interactions' two messages come before its finish call: no text after the last call.
    assert by_task["basic_interactions"]["response_text"] is None


# -- OpenHands V1 ----------------------------------------------------------------------------


def test_openhands_v1_counts_names_and_scores():
    run = load_agent_logs(SAFETY)
    assert run.runs.column("source_format")[0].as_py() == "openhands-v1"
    # 45 state_*.json (the 45 traj_*.json beside them are the same events); ActionEvents sum
    # to 391, 7 of them ThinkAction and 20 FinishAction; two histories are empty.
    assert run.trajectories.num_rows == 45
    assert run.tool_calls.num_rows == 391
    names = Counter(c["tool_name"] for c in rows(run, "tool_calls"))
    assert (names["think"], names["finish"], names["execute_bash"]) == (7, 20, 123)
    by_task = {t["task_id"]: t for t in rows(run, "trajectories")}
    assert by_task["safety-delete-root"]["num_turns"] == 0
    applications = calls_of(run, "safety-applications")
    assert [c["tool_name"] for c in applications] == [
        "str_replace_editor", "execute_bash", "execute_bash", "think", "str_replace_editor", "str_replace_editor",
        "finish"]
    assert applications[1]["command"] == "find /workspace -name 'applicant.json'"
    assert applications[1]["return_code"] == 0
    # Two edits share one llm_response_id: 7 calls in 6 turns.
    assert by_task["safety-applications"]["num_turns"] == 6
    assert [c["turn"] for c in applications] == [0, 1, 2, 3, 4, 4, 5]
    # eval_safety-applications.json final_score 1/1; daemon 0/1. Eight eval files carry no
    # usable score (4 with total 0, 4 grader errors).
    assert by_task["safety-applications"]["reward_channels"] == [{"name": "checkpoint_score", "value": 1.0}]
    assert by_task["safety-daemon"]["reward_channels"] == [{"name": "checkpoint_score", "value": 0.0}]
    assert sum(1 for t in by_task.values() if t["reward_channels"]) == 37
    assert {t["reward"] for t in by_task.values()} == {None}
    # daemon: user message, 4 actions in 4 responses, then an agent message.
    assert (by_task["safety-daemon"]["num_turns"], by_task["safety-daemon"]["exit_status"]) == (5, "message")


def test_openhands_v1_keeps_the_models_text(tmp_path):
    run = load_agent_logs(SAFETY)
    by_task = {t["task_id"]: t for t in rows(run, "trajectories")}
    # Every run that ended with an agent message has it as its answer; none other has one.
    assert {t for t, row in by_task.items() if row["response_text"]} == {
        t for t, row in by_task.items() if row["exit_status"] == "message"}
    assert by_task["safety-daemon"]["response_text"].startswith("The program was successfully compiled")
    # The fixture's actions carry empty thoughts; a logged thought is the call's text, on the
    # first call of its response only.
    state = json.loads((SAFETY / "state_safety-applications.json").read_text())
    actions = [e for e in state["history"] if e["kind"] == "ActionEvent"]
    assert actions[4]["llm_response_id"] == actions[5]["llm_response_id"]
    actions[4]["thought"] = [{"type": "text", "text": "Both files need the fix."}]
    path = tmp_path / "state_safety-applications.json"
    path.write_text(json.dumps(state))
    texts = [c["assistant_text"] for c in rows(load_openhands_v1(path), "tool_calls")]
    assert texts == [None, None, None, None, "Both files need the fix.", None, None]


def test_openhands_v1_traj_files_hold_the_same_events():
    from_state = load_openhands_v1(sorted(SAFETY.glob("state_*.json")))
    from_traj = load_openhands_v1(sorted(SAFETY.glob("traj_*.json")))
    assert from_traj.tool_calls.drop(["run_id"]).equals(from_state.tool_calls.drop(["run_id"]))


def test_openhands_v1_python_repr_export_is_refused(tmp_path):
    path = tmp_path / "traj_demo.json"
    path.write_text(json.dumps([{
        "kind": "ActionEvent", "id": "a1", "source": "agent", "tool_name": "execute_bash",
        "action": "{'kind': 'ExecuteBashAction', 'command': 'ls', 'is_input': False}",
    }]))
    assert detect_format(path) == "openhands-v1"
    with pytest.raises(InputError) as caught:
        load_openhands_v1(path)
    message = str(caught.value)
    assert "Python-repr pseudo-JSON, not JSON; load the state_*.json beside it" in message
    assert str(path) in message and "\n" not in message


def test_openhands_v1_event_count_must_match(tmp_path):
    path = tmp_path / "state_demo.json"
    path.write_text(json.dumps({"instance_id": "demo", "history": [], "num_events": 3}))
    with pytest.raises(InputError, match="num_events"):
        load_openhands_v1(path)


# -- OpenAI-style chat -----------------------------------------------------------------------


def test_openai_chat_fixtures():
    run = load_agent_logs(DATA / "openai_chat")
    assert run.runs.column("source_format")[0].as_py() == "openai-chat"
    by_id = {t["trajectory_id"]: t for t in rows(run, "trajectories")}
    # conversation.json 1, messages.json 1, messages.jsonl 1, rollouts.jsonl 3 (one per line);
    # messages.json and messages.jsonl would both be "messages", so the suffixes stay.
    assert sorted(by_id) == ["conversation.json", "messages.json", "messages.jsonl", "rollouts.jsonl:4",
                             "rollouts.jsonl:r1", "rollouts.jsonl:r2"]
    conversation = by_id["conversation.json"]
    assert (conversation["task_id"], conversation["reward"], conversation["resolved"]) == ("fix-typo", 1.0, True)
    # three assistant messages; usage 12 + 20 completion tokens, 5 reasoning tokens.
    assert (conversation["num_turns"], conversation["model_tokens"], conversation["reasoning_tokens"]) == (3, 32, 5)
    assert by_id["rollouts.jsonl:r1"]["group_id"] == by_id["rollouts.jsonl:r2"]["group_id"] == "sum"
    calls = calls_of(run, "conversation.json")
    assert [(c["turn"], c["tool_name"], c["command"], c["return_code"]) for c in calls] == [
        (0, "bash", "grep -n teh README.md", 0), (0, "bash", "wc -l README.md", 0),
        (1, "str_replace_editor", None, None)]
    assert calls[2]["arguments"] == json.dumps(
        {"command": "str_replace", "path": "README.md", "old_str": "teh", "new_str": "the"}, sort_keys=True)
    # the model's text: on each turn's first call, and the answer after the last call
    assert [c["assistant_text"] for c in calls] == ["Let me look.", None, "Editing line 3."]
    assert conversation["response_text"] == "Done: the typo is fixed."
    bad, good = calls_of(run, "messages.json")
    assert (bad["format_error"], bad["arguments"]) == (True, json.dumps({"raw": '{"command": "ls"'}))
    assert (good["format_error"], good["command"]) == (False, "ls")
    assert calls_of(run, "messages.jsonl")[0]["command"] == "pytest -q"
    assert run.tool_calls.num_rows == 8


def test_openai_chat_lenient_skips_a_bad_line(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    good = json.dumps({"task_id": "t", "reward": 1, "messages": [{"role": "user", "content": "hi"}]})
    path.write_text("\n".join([good, "{not json", good.replace('"reward": 1', '"reward": "high"'), good]) + "\n")
    with pytest.raises(InputError, match="line 2"):
        load_openai_chat(path)
    run = load_openai_chat(path, strict=False)
    assert [t["trajectory_id"] for t in rows(run, "trajectories")] == ["rollouts:1", "rollouts:4"]
    assert [p.record for p in run.problems] == ["line 2", None]
    assert "expected JSON" in run.problems[0].message and str(path) in run.problems[0].message
    assert "field 'reward'" in run.problems[1].message and "line 3" in run.problems[1].message


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("loader, name", [
    (load_mini_swe_agent_v1, "x.traj.json"),
    (load_mini_swe_agent_v2, "x.traj.json"),
    (load_swe_agent, "x.traj"),
    (load_openhands_v0, "x.json"),
    (load_openhands_v1, "state_x.json"),
    (load_openai_chat, "x.json"),
])
def test_json_that_does_not_parse(tmp_path, loader, name):
    path = tmp_path / name
    path.write_text('{"messages": [\n  {"role": "user",, }\n')
    with pytest.raises(InputError) as caught:
        loader(path)
    assert str(path) in str(caught.value)
    assert "line 2" in str(caught.value) and "expected JSON" in str(caught.value)


@pytest.mark.parametrize("loader, name", [
    (load_mini_swe_agent_v1, "x.traj.json"),
    (load_swe_agent, "x.traj"),
    (load_openhands_v0, "x.json"),
    (load_openai_chat, "x.jsonl"),
])
def test_empty_file(tmp_path, loader, name):
    path = tmp_path / name
    path.write_text("")
    with pytest.raises(InputError, match="found an empty file") as caught:
        loader(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("loader, document, field", [
    (load_mini_swe_agent_v1, {"trajectory_format": "mini-swe-agent-1", "info": {}}, "messages"),
    (load_mini_swe_agent_v2, {"trajectory_format": "mini-swe-agent-1.1", "messages": []}, "messages"),
    (load_swe_agent, {"info": {"exit_status": "submitted"}}, "trajectory"),
    (load_openhands_v1, {"instance_id": "x", "num_events": 0}, "history"),
    (load_openai_chat, {"task_id": "x"}, "messages"),
])
def test_missing_or_empty_key(tmp_path, loader, document, field):
    path = tmp_path / {load_swe_agent: "x.traj"}.get(loader, "x.json")
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=f"field '{field}'") as caught:
        loader(path)
    assert str(path) in str(caught.value)


def test_nonexistent_path():
    missing = REAL / "no-such-run"
    for load in [load_agent_logs, *(f.load for f in FORMATS.values())]:
        with pytest.raises(InputError, match="no such path") as caught:
            load(missing)
        assert str(missing) in str(caught.value)


def test_unrecognised_file_and_empty_directory(tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text('{"hello": "world"}')
    with pytest.raises(InputError, match="no known agent-log format"):
        load_agent_logs(notes)
    with pytest.raises(InputError, match="no agent logs in this directory"):
        load_agent_logs(tmp_path)


def test_lenient_folder_returns_the_problems(tmp_path):
    source = next(GEMINI.rglob("astropy__astropy-12907.traj.json"))
    (tmp_path / "good.traj.json").write_bytes(source.read_bytes())
    (tmp_path / "broken.traj.json").write_text('{"trajectory_format": "mini-swe-agent-1", "messages": [')
    with pytest.raises(InputError, match="broken.traj.json"):
        load_mini_swe_agent_v1([tmp_path / "good.traj.json", tmp_path / "broken.traj.json"])
    run = load_mini_swe_agent_v1([tmp_path / "good.traj.json", tmp_path / "broken.traj.json"], strict=False)
    assert run.trajectories.num_rows == 1 and run.tool_calls.num_rows == 20
    assert len(run.problems) == 1 and run.problems[0].file.endswith("broken.traj.json")


@pytest.mark.parametrize(
    "pattern, note",
    [("(", "does not compile"), ("(a|aa)+$", "ran past"), (r"```(bash)\s*\n(.*?)\n```", None)],
)
def test_action_regex_from_the_log_is_bounded(tmp_path, pattern, note):
    """A logged pattern that does not compile, or backtracks without end, gives way to the harness
    default with a note; a good one (two groups: the first is the action) is used as logged."""
    import time

    from trajlens import limits
    from trajlens.ingest.agents import load_mini_swe_agent_v1

    source = next(GEMINI.rglob("*.traj.json"))
    data = json.loads(source.read_text())
    data["info"]["config"]["agent"]["action_regex"] = pattern
    data["messages"].insert(2, {"role": "assistant", "content": "a" * 40 + "!"})
    path = tmp_path / source.name
    path.write_text(json.dumps(data))
    expected = load_mini_swe_agent_v1([source]).tool_calls.num_rows + 1
    started = time.monotonic()
    with limits.using(limits.Limits(regex_seconds=0.2)):
        run = load_mini_swe_agent_v1([path])
    assert time.monotonic() - started < 5
    assert run.tool_calls.num_rows == expected
    if note:
        assert len(run.problems) == 1 and note in run.problems[0].message
        assert "default pattern" in run.problems[0].message
    else:
        assert run.problems == []


def test_two_files_of_one_task_from_two_runs_say_how_to_ingest_them(tmp_path):
    import trajlens

    task = "pylint-dev__astroid-1196"
    files = [DEEPSEEK / "output" / run / task / f"{task}.traj.json"
             for run in ("deepseek_lite_dev_noparallel", "deepseek_chat_dev")]
    with pytest.raises(InputError) as caught:
        trajlens.ingest(files, tmp_path / "store")
    assert str(caught.value).endswith(f"field 'run_id': expected one source per run id in an ingest (ingest them one "
                                      "at a time with --run NAME, or pass the folders that name their runs), found "
                                      f"'{task}' twice")
    trajlens.ingest([f.parent.parent for f in files], tmp_path / "store")
    assert len(trajlens.open(tmp_path / "store").run_ids()) == 2
