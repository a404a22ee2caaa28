"""classify_calls on whole tables: columns, order, paths, rejected calls, input types."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest

from trajlens.classify import classify_calls
from trajlens.errors import FrameError


def calls(*rows: tuple, trajectory: str = "t") -> pl.DataFrame:
    """Tool calls of one trajectory from (tool_name, arguments dict, command[, format_error])."""
    return pl.DataFrame(
        {
            "run_id": ["r"] * len(rows),
            "step": [0] * len(rows),
            "trajectory_id": [trajectory] * len(rows),
            "call_index": list(range(len(rows))),
            "tool_name": [r[0] for r in rows],
            "arguments": [json.dumps(r[1]) for r in rows],
            "command": [r[2] for r in rows],
            "format_error": [bool(r[3]) if len(r) > 3 else False for r in rows],
        },
        schema_overrides={"command": pl.String, "call_index": pl.Int32},
    )


def test_adds_columns_and_keeps_rows_in_order():
    frame = calls(
        ("bash", {}, "pytest tests/test_a.py"),
        ("think", {"thought": "x"}, None),
        ("bash", {}, "cat a.py"),
        ("bash", {}, "pytest tests/test_a.py"),
    )
    result = classify_calls(frame)
    assert result.columns == [*frame.columns, "primary_class", "action_classes", "paths", "edited_paths", "is_edit",
                              "is_verification"]
    assert result["primary_class"].to_list() == ["test_targeted", "think", "view", "test_targeted"]
    assert result["call_index"].to_list() == [0, 1, 2, 3]
    assert result["is_verification"].to_list() == [True, False, False, True]


def test_format_errors_have_no_class():
    frame = calls(("bash", {}, "pytest", True), ("bash", {}, "pytest"))
    result = classify_calls(frame)
    assert result["primary_class"].to_list() == [None, "test_suite"]
    assert result["action_classes"].to_list() == [[], ["test_suite"]]
    assert result["is_edit"].to_list() == [False, False]
    assert result["is_verification"].to_list() == [False, True]


def test_edit_and_verification_flags_come_from_any_action():
    frame = calls(("bash", {}, "cat > t.py <<'EOF'\nprint(1)\nEOF\npython t.py"), ("bash", {}, "sed -n '1,5p' t.py"))
    result = classify_calls(frame)
    assert result["primary_class"].to_list() == ["run_script", "view"]
    assert result["is_edit"].to_list() == [True, False]
    assert result["is_verification"].to_list() == [True, False]


@pytest.mark.parametrize(
    "tool, arguments, command, paths",
    [
        ("bash", {}, "cat src/a.py src/b.py", ["src/a.py", "src/b.py"]),
        ("bash", {}, "sed -n '1,80p' ./pkg/mod.py", ["pkg/mod.py"]),
        ("bash", {}, "sed -i 's/a/b/' pkg/mod.py && nl -ba pkg/mod.py | head", ["pkg/mod.py"]),
        ("bash", {}, "cat > /tmp/t.py <<'EOF'\nimport x\nEOF\npython /tmp/t.py", ["/tmp/t.py"]),
        ("bash", {}, "grep -rn 'def foo' src/pkg tests", ["src/pkg"]),
        ("bash", {}, "pytest tests/test_x.py::TestA::test_b -q", ["tests/test_x.py"]),
        ("bash", {}, "git diff -- src/a.py > patch.txt", ["patch.txt"]),
        ("bash", {}, "find src/pkg -name '*.py' -type f", ["src/pkg"]),
        ("bash", {}, "head -n 20 setup.py", ["setup.py"]),
        ("bash", {}, "cat Makefile Dockerfile build", ["Makefile", "Dockerfile"]),
        ("bash", {}, "sed -i 's/-O2/-O3/' Makefile && make", ["Makefile"]),
        ("bash", {}, "black src/a.py", ["src/a.py"]),
        ("bash", {}, "pip install numpy==1.2", []),
        ("bash", {}, "python -c 'open(\"x.py\")'", []),
        ("bash", {}, 'cat "$D"/d.py src/e.py', ["src/e.py"]),
        ("bash", {}, "cat $(pwd)/x.py `pwd`/y.py z.py", ["z.py"]),
        ("str_replace_editor", {"command": "view", "path": "/testbed/a.py"}, None, ["/testbed/a.py"]),
        ("file_editor", {"command": "create", "path": "./b.py", "file_text": "x"}, None, ["b.py"]),
        ("think", {"thought": "look at a.py"}, None, []),
        ("str_replace_editor", {"command": "view", "path": ""}, None, []),
    ],
)
def test_paths(tool, arguments, command, paths):
    assert classify_calls(calls((tool, arguments, command)))["paths"][0].to_list() == paths


def test_swe_agent_commands_act_on_the_last_opened_file():
    frame = calls(
        ("open", {"action": "open src/fields.py 100"}, "open src/fields.py 100"),
        ("edit", {"action": "edit 3:4\nx\nend_of_edit"}, "edit 3:4\nx\nend_of_edit"),
        ("create", {"action": "create reproduce.py"}, "create reproduce.py"),
        ("goto", {"action": "goto 10"}, "goto 10"),
        ("bash", {"action": "python reproduce.py"}, "python reproduce.py"),
    )
    result = classify_calls(frame)
    assert result["primary_class"].to_list() == ["view", "edit", "edit", "view", "run_script"]
    assert result["paths"].to_list() == [["src/fields.py"], ["src/fields.py"], ["reproduce.py"], ["reproduce.py"],
                                         ["reproduce.py"]]


def test_current_file_does_not_cross_trajectories():
    frame = pl.concat([
        calls(("open", {}, "open a.py"), trajectory="t1"),
        calls(("edit", {}, "edit 1:1\nx\nend_of_edit"), trajectory="t2"),
    ])
    assert classify_calls(frame)["paths"].to_list() == [["a.py"], []]


def test_command_read_from_arguments_when_column_is_null():
    frame = calls(("execute_bash", {"command": "python -m pytest -k x"}, None), ("run", {"cmd": "ls"}, None))
    assert classify_calls(frame)["primary_class"].to_list() == ["test_targeted", "search"]


def test_accepts_lazy_and_arrow_tables():
    frame = calls(("bash", {}, "ls"))
    assert classify_calls(frame.lazy())["primary_class"][0] == "search"
    assert classify_calls(frame.to_arrow())["primary_class"][0] == "search"


def test_minimal_columns_and_reclassification():
    frame = pl.DataFrame({"tool_name": ["bash"], "arguments": ["{}"], "command": ["git diff"]})
    once = classify_calls(frame)
    assert once["primary_class"][0] == "other"
    assert classify_calls(once).columns == once.columns


def test_missing_column_is_a_frame_error():
    with pytest.raises(FrameError, match="no column 'command'"):
        classify_calls(pl.DataFrame({"tool_name": ["bash"], "arguments": ["{}"]}))


def test_malformed_arguments_json_is_other():
    frame = pl.DataFrame({"tool_name": ["str_replace_editor", "bash"], "arguments": ["{not json", "[1, 2"],
                          "command": [None, None]}, schema_overrides={"command": pl.String})
    assert classify_calls(frame)["primary_class"].to_list() == ["other", "other"]


def test_empty_table():
    result = classify_calls(calls())
    assert result.height == 0 and "primary_class" in result.columns


def test_importing_classify_does_not_import_torch():
    code = "import sys, trajlens.classify; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_edited_paths_are_the_files_a_call_changes():
    """A copy reads its source and writes its destination; a redirection writes its target; an
    editor tool's edit changes its path; a view, or a test run whose output goes to a file, edits nothing
    it names (a test run is no edit: its log is no change of the work)."""
    frame = calls(
        ("bash", {}, "cp src/a.py /tmp/a_backup.py"),
        ("bash", {}, "cd /testbed && sed -i 's/a/b/' src/a.py && cat src/a.py"),
        ("bash", {}, "git diff -- src/a.py > patch.txt"),
        ("bash", {}, "mv old.py new.py"),
        ("str_replace_editor", {"command": "str_replace", "path": "/testbed/b.py"}, None),
        ("str_replace_editor", {"command": "view", "path": "/testbed/b.py"}, None),
        ("bash", {}, "pytest > out.txt"),
    )
    result = classify_calls(frame)
    assert result["edited_paths"].to_list() == [["/tmp/a_backup.py"], ["src/a.py"], ["patch.txt"], ["old.py", "new.py"],
                                                ["/testbed/b.py"], [], []]
    assert result["paths"].to_list()[0] == ["src/a.py", "/tmp/a_backup.py"]  # the files it names, the source too
