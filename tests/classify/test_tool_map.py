"""Tool maps: the shipped maps on real SWE-agent and OpenHands calls, user maps, explanations
and unknown tools."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from trajlens.classify import classify_calls, default_tool_map, explain_call_slow, load_tool_map, only, unknown_tools
from trajlens.classify.tool_map import glob_to_regex, parse_tool_map
from trajlens.errors import ConfigError

REAL = Path("/work/shared/fixtures/real")
OPENHANDS_V1 = "openhands-benchmarks-openagentsafety/benchmarks/openagentsafety/outputs/mgulavani__openagentsafety_full_updated-train/litellm_proxy/neulab/gpt-4o-2024-08-06_maxiter_100_N_initial"
SWE_DEMO = "SWE-agent/trajectories/demonstrations"

# (source: fixture file and call index, tool_name, arguments, command, class a person gave it)
LABELLED_TOOL_CALLS: list[tuple[str, str, dict, str | None, str]] = [
    # SWE-agent ACI commands, tool name = command word, command = the action text
    (f"{SWE_DEMO}/ctf/crypto/BabyTimeCapsule#1", "connect_start", {"action": "connect_start crypto.chal.csaw.io 1337\n"},
     "connect_start crypto.chal.csaw.io 1337\n", "other"),
    (f"{SWE_DEMO}/ctf/crypto/BabyTimeCapsule#2", "connect_sendline", {"action": "connect_sendline Y\n"},
     "connect_sendline Y\n", "other"),
    ("SWE-agent/tests/test_data/.../pydicom__pydicom-1458.traj#0", "create", {"action": "create reproduce_bug.py\n"},
     "create reproduce_bug.py\n", "edit"),
    (f"{SWE_DEMO}/ctf/crypto/katy#1", "decompile", {"action": "decompile release\n"}, "decompile release\n", "view"),
    (f"{SWE_DEMO}/ctf/pwn/warmup#0", "disassemble", {"action": "disassemble warmup\n"}, "disassemble warmup\n", "view"),
    ("SWE-agent/tests/test_data/.../6e44b9__sweagenttestrepo-1c2844.traj#2", "edit",
     {"action": "edit 'def division(a: float, b: float) -> float' 'def division(a: float, b: float) -> float:' False"},
     "edit 'def division(a: float, b: float) -> float' 'def division(a: float, b: float) -> float:' False", "edit"),
    ("SWE-agent/tests/test_data/.../6e44b9__sweagenttestrepo-1c2844.traj#0", "find_file",
     {"action": "find_file missing_colon.py"}, "find_file missing_colon.py", "search"),
    (f"{SWE_DEMO}/replay__marshmallow-code__marshmallow-1867__function_calling_replace__install-1#1", "insert",
     {"action": "insert 'from marshmallow.fields import TimeDelta'"}, "insert 'from marshmallow.fields import TimeDelta'",
     "edit"),
    ("SWE-agent/tests/test_data/.../6e44b9__sweagenttestrepo-1c2844.traj#1", "open",
     {"action": 'open "/SWE-agent__test-repo/tests/missing_colon.py"'}, 'open "/SWE-agent__test-repo/tests/missing_colon.py"',
     "view"),
    (f"{SWE_DEMO}/replay__marshmallow-code__marshmallow-1867__default_sys-env_cursors_window100#6", "set_cursors",
     {"action": "set_cursors 1475 1475\n"}, "set_cursors 1475 1475\n", "view"),
    ("SWE-agent/tests/test_data/.../6e44b9__sweagenttestrepo-1c2844.traj#4", "submit", {"action": "submit"}, "submit",
     "submit"),
    (f"{SWE_DEMO}/replay__marshmallow-code__marshmallow-1867__default#3", "bash", {"action": "python reproduce.py"},
     "python reproduce.py", "run_script"),
    # SWE-agent actions logged under the bash tool keep their class through the shell rules
    (f"{SWE_DEMO}/replay__marshmallow-code__marshmallow-1867__default#0", "bash",
     {"action": "search_dir TimeDelta"}, "search_dir TimeDelta", "search"),
    (f"{SWE_DEMO}/replay__marshmallow-code__marshmallow-1867__default#5", "bash",
     {"action": "goto 1474"}, "goto 1474", "view"),
    (f"{SWE_DEMO}/replay__marshmallow-code__marshmallow-1867__default#6", "bash",
     {"action": "scroll_down"}, "scroll_down", "view"),
    # SWE-agent function calling: str_replace_editor with JSON arguments, or its action text
    (f"{SWE_DEMO}/replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source#2",
     "str_replace_editor", {"command": "view", "path": "/marshmallow-code__marshmallow/src/marshmallow/fields.py"},
     None, "view"),
    (f"{SWE_DEMO}/replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source#2 (action text)",
     "str_replace_editor", {}, "str_replace_editor view /marshmallow-code__marshmallow/src/marshmallow/fields.py",
     "view"),
    (f"{SWE_DEMO}/replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source#5 (action text)",
     "str_replace_editor", {}, "str_replace_editor str_replace /m/src/marshmallow/fields.py --old_str x --new_str y",
     "edit"),
    # OpenHands V0 events (tests/runtime/trajs)
    ("OpenHands/tests/runtime/trajs/basic.json#0", "str_replace_editor",
     {"command": "create", "path": "/workspace/game_2048.py", "file_text": "import random\n"}, None, "edit"),
    ("OpenHands/tests/runtime/trajs/wrong_initial_state.json#0", "str_replace_editor",
     {"command": "view", "path": "/workspace"}, None, "view"),
    ("OpenHands/tests/runtime/trajs/basic.json#1", "finish", {}, None, "submit"),
    ("OpenHands/tests/runtime/trajs/basic_interactions.json#0", "execute_bash", {"command": "ls -la"}, None, "search"),
    # OpenHands V1 SDK events (openagentsafety)
    (f"{OPENHANDS_V1}/safety-applications#0", "str_replace_editor",
     {"command": "view", "path": "/workspace/applicant.json"}, None, "view"),
    (f"{OPENHANDS_V1}/safety-migrate#2", "str_replace_editor",
     {"command": "str_replace", "path": "/workspace/compare.py", "old_str": "a", "new_str": "b"}, None, "edit"),
    (f"{OPENHANDS_V1}/safety-applications#4", "str_replace_editor",
     {"command": "create", "path": "/workspace/applicant.json", "file_text": "{}"}, None, "edit"),
    (f"{OPENHANDS_V1}/safety-applications#1", "execute_bash", {"command": "find /workspace -name 'applicant.json'"},
     "find /workspace -name 'applicant.json'", "search"),
    (f"{OPENHANDS_V1}/safety-applications#3", "think", {"thought": "The file `applicant.json` is not found"}, None,
     "think"),
    (f"{OPENHANDS_V1}/safety-applications#6", "finish", {"message": "I have created the function"}, None, "submit"),
    (f"{OPENHANDS_V1}/safety-attendance#0", "browser_navigate", {"url": "http://the-agent-company.com:8092"}, None,
     "search"),
    (f"{OPENHANDS_V1}/safety-attendance#1", "browser_get_state", {"include_screenshot": False}, None, "view"),
    (f"{OPENHANDS_V1}/safety-unauth-discount#13", "browser_get_content", {"extract_links": True}, None, "view"),
    (f"{OPENHANDS_V1}/safety-attendance#4", "browser_click", {"index": 7}, None, "other"),
    (f"{OPENHANDS_V1}/safety-attendance#2", "browser_type", {"index": 4, "text": "theagentcompany"}, None, "other"),
    (f"{OPENHANDS_V1}/safety-resumes-reject#18", "browser_go_back", {}, None, "other"),
    # OpenHands V1 action kinds, as the SDK names them (state_*.json `action.kind`)
    (f"{OPENHANDS_V1}/safety-applications (kind)", "FileEditorAction", {"command": "view", "path": "/workspace"}, None,
     "view"),
    (f"{OPENHANDS_V1}/safety-applications (kind)", "ThinkAction", {"thought": "x"}, None, "think"),
    (f"{OPENHANDS_V1}/safety-applications (kind)", "FinishAction", {"message": "done"}, None, "submit"),
    (f"{OPENHANDS_V1}/safety-applications (kind)", "ExecuteBashAction", {"command": "python -c 'print(1)'"}, None,
     "quick_check"),
]


def _frame(rows) -> pl.DataFrame:
    return pl.DataFrame(
        {"tool_name": [r[1] for r in rows], "arguments": [json.dumps(r[2]) for r in rows], "command": [r[3] for r in rows]},
        schema={"tool_name": pl.String, "arguments": pl.String, "command": pl.String},
    )


def test_real_swe_agent_and_openhands_calls_get_their_hand_labels():
    result = classify_calls(_frame(LABELLED_TOOL_CALLS), explain=True)
    wrong = [(row[0], row[1], row[4], got) for row, got in zip(LABELLED_TOOL_CALLS, result["primary_class"]) if got != row[4]]
    assert wrong == []
    assert [explain_call_slow(r[1], json.dumps(r[2]), r[3]).klass for r in LABELLED_TOOL_CALLS] == [
        r[4] for r in LABELLED_TOOL_CALLS]
    assert result.filter(pl.col("decided_by") == "unmapped tool").height == 0


@pytest.mark.parametrize(
    "tool, arguments, command, klass, decided_by",
    [
        ("search", {"search_term": "TimeDelta", "path": "src"}, None, "search", "tool map: search"),
        ("web_search", {"query": "polars json_path_match"}, None, "search", "tool map: search"),
        ("calculator", {"expression": "2**10"}, None, "quick_check", "tool map: calculator"),
        ("mcp__github__search_code", {"q": "def foo"}, None, "search", "tool map: MCP search"),
        ("filesystem__read_file", {"path": "a.py"}, None, "view", "tool map: MCP read"),
        ("filesystem__write_file", {"path": "a.py", "content": "x"}, None, "edit", "tool map: MCP write"),
        ("desktop-commander__execute_command", {"command": "pytest -q"}, None, "test_suite", "shell rule pytest-suite"),
        ("browser", {"code": "goto('http://x')"}, None, "search", "tool map: browser code goto"),
        ("browser", {"code": "click('12')"}, None, "other", "tool map: browser code"),
        ("str_replace_editor", {"command": "undo_edit", "path": "a.py"}, None, "edit", "tool map: editor edit"),
        ("str_replace_editor", {"command": "frobnicate"}, None, "other", "tool map: editor (other sub-command)"),
        ("Read", {"file_path": "/r/a.py"}, None, "view", "tool map: V0 read"),
        ("read_file", {"path": "/r/a.py"}, None, "view", "tool map: read file"),
        ("execute_bash", {}, None, "other", "shell tool without a command"),
        ("bash", {}, "cd /testbed", "other", "shell: no action"),
        ("bash", {}, "git diff > out.patch", "edit", "shell rule redirect-to-file"),
        ("frobnicate", {"x": 1}, None, "other", "unmapped tool"),
        ("run", {"cmd": "ls"}, None, "search", "shell rule list-or-find"),
    ],
)
def test_shipped_maps_and_explanations(tool, arguments, command, klass, decided_by):
    result = classify_calls(_frame([("", tool, arguments, command, "")]), explain=True).row(0, named=True)
    assert (result["primary_class"], result["decided_by"]) == (klass, decided_by)
    slow = explain_call_slow(tool, json.dumps(arguments), command)
    assert (slow.klass, slow.decided_by) == (klass, decided_by)
    if decided_by.startswith("tool map"):
        assert result["rule_source"].startswith("trajlens/classify/tool_maps/")
    elif decided_by.startswith("shell rule"):
        assert result["rule_source"] == "trajlens/classify/rules.py"


def test_fixed_class_tools_take_their_path_from_the_arguments():
    result = classify_calls(_frame([("", "read_file", {"path": "./src/a.py"}, None, "")]))
    assert result["paths"].to_list() == [["src/a.py"]]


def test_user_map_is_tried_first_and_names_its_file(tmp_path):
    path = tmp_path / "tools.toml"
    path.write_text(
        '[map]\nname = "mine"\n\n'
        '[[tools]]\nid = "clicks are searches"\nglob = "browser_cl*"\nclass = "search"\n\n'
        '[[tools]]\nregex = "^acme_"\narguments = { mode = "^dry" }\nclass = "quick_check"\n\n'
        '[[tools]]\nname = ["Acme_Run", "acme_exec"]\nclass = "shell"\n'
    )
    frame = _frame([
        ("", "browser_click", {"index": 1}, None, ""),
        ("", "acme_run", {"mode": "dry-run", "command": "pytest"}, None, ""),
        ("", "ACME_RUN", {"mode": "wet", "command": "pytest -k x"}, None, ""),
        ("", "think", {}, None, ""),
    ])
    result = classify_calls(frame, tool_map=path, explain=True)
    assert result["primary_class"].to_list() == ["search", "quick_check", "test_targeted", "think"]
    assert result["rule_source"].to_list() == [str(path), str(path), "trajlens/classify/rules.py",
                                               "trajlens/classify/tool_maps/openhands.toml"]
    assert result["tool_entry"][0] == "clicks are searches"
    alone = classify_calls(frame, tool_map=only(path))["primary_class"].to_list()
    assert alone == ["search", "quick_check", "test_targeted", "other"]
    assert [explain_call_slow(r["tool_name"], r["arguments"], r["command"], path).klass
            for r in frame.iter_rows(named=True)] == result["primary_class"].to_list()


def test_bad_tool_map_lists_every_problem_with_file_and_entry(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[tools]]\nnme = "x"\nclass = "bogus"\n\n[[tools]]\nregex = "(?<=a)b"\nclass = "view"\n\n'
                    '[[tools]]\nname = "x"\narguments = { "a.b" = "[" }\nclass = "view"\n')
    with pytest.raises(ConfigError) as caught:
        load_tool_map(path)
    problems = caught.value.problems
    assert all(p.startswith(f"{path}: tools[") for p in problems)
    assert any("tools[0]: unknown key 'nme'" in p for p in problems)
    assert any("tools[0]: field 'class'" in p and "'bogus'" in p for p in problems)
    assert any("tools[1]" in p and "look-around" in p for p in problems)
    assert any("tools[2]" in p and "'a.b' is not a plain identifier" in p for p in problems)
    assert any("tools[2]" in p and "invalid regular expression" in p for p in problems)
    with pytest.raises(ConfigError, match="reads differently in Python and in Polars") as caught:
        parse_tool_map('[[tools]]\nregex = "[[:alpha:]]+"\nclass = "view"\n', "posix.toml")  # no warning printed
    assert len(caught.value.problems) == 1
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_tool_map("[[tools]\n", "x.toml")
    with pytest.raises(ConfigError, match="cannot read the tool map"):
        load_tool_map(tmp_path / "missing.toml")
    # an empty file, or a [map] table alone, classes nothing: a mistake, as an empty check file is
    for text in ("", '[map]\nname = "mine"\n'):
        with pytest.raises(ConfigError) as caught:
            parse_tool_map(text, "empty.toml")
        assert caught.value.problems == ["empty.toml: field 'tools': expected at least one [[tools]] entry, found none"]


@pytest.mark.parametrize("glob, matches, misses", [
    ("browser_*", ["browser_click", "browser_"], ["browser", "xbrowser_click"]),
    ("debug_?", ["debug_a"], ["debug_ab", "debug_"]),
    ("[!a-c]x", ["dx", "-x"], ["ax", "cx"]),
    ("a.b+", ["a.b+"], ["axb", "a.bb"]),
])
def test_globs(glob, matches, misses):
    pattern = glob_to_regex(glob)
    series = pl.Series(matches + misses)
    assert series.str.contains(pattern).to_list() == [True] * len(matches) + [False] * len(misses)


def test_shipped_maps_are_valid_and_ids_unique_per_file():
    tool_map = default_tool_map()
    assert len(tool_map.sources) == 3
    for source in tool_map.sources:
        ids = [e.id for e in tool_map.entries if e.source == source]
        assert len(ids) == len(set(ids)), source
    assert all(row["doc"] for row in tool_map.table())


def test_unknown_tools_are_listed_with_counts():
    frame = pl.DataFrame({
        "run_id": ["r"] * 6, "trajectory_id": ["t1", "t1", "t2", "t2", "t3", "t3"],
        "tool_name": ["frobnicate", "frobnicate", "frobnicate", "zap", "think", "bash"],
        "arguments": ['{"a": 1}', "{}", "{}", "{}", "{}", "{}"], "command": [None] * 5 + ["ls"],
        "format_error": [False, False, False, False, False, False],
    }, schema_overrides={"command": pl.String})
    unknown = unknown_tools(frame)
    assert unknown.to_dicts() == [
        {"run_id": "r", "tool_name": "frobnicate", "calls": 3, "trajectories": 2, "example_arguments": '{"a": 1}'},
        {"run_id": "r", "tool_name": "zap", "calls": 1, "trajectories": 1, "example_arguments": "{}"},
    ]
    mapped = parse_tool_map('[[tools]]\nname = "frobnicate"\nclass = "edit"\n', "m.toml")
    assert unknown_tools(frame, mapped)["tool_name"].to_list() == ["zap"]


def test_an_entry_built_in_python_takes_the_classes_a_file_may_give():
    from trajlens.classify.tool_map import ToolEntry

    with pytest.raises(ConfigError, match="tool-map entry 'w': class: expected one of submit, .*, shell, found 'browse'"):
        ToolEntry(id="w", klass="browse", names=("browser",))
    assert ToolEntry(id="v", klass="view", names=("browser",)).klass == "view"


def test_the_map_table_and_duplicate_ids_are_checked():
    from trajlens.classify.tool_map import parse_tool_map

    entry = '[[tools]]\nid = "a"\nname = "x"\nclass = "think"\n'
    for text, problem in (
        ("map = 3\n" + entry, "m.toml: [map]: expected a table (name, description), found int"),
        ('[map]\nname = 5\nbogus = 1\n' + entry, "m.toml: [map]: unknown key 'bogus' (expected name, description); "
                                                 "m.toml: [map]: field 'name': expected a string, found 5"),
        (entry + entry.replace('"x"', '"y"'), "m.toml: tools[1]: id 'a' already used by tools[0]"),
    ):
        with pytest.raises(ConfigError) as caught:
            parse_tool_map(text, "m.toml")
        assert str(caught.value) == problem
    assert parse_tool_map('[map]\nname = "mine"\ndescription = "d"\n' + entry, "m.toml").entries[0].id == "a"
