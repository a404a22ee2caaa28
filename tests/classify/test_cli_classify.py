"""``trajlens classify`` with a tool map and --explain, the unknown_tools table and its query."""

from __future__ import annotations

from pathlib import Path

import pytest

from trajlens.cli._app import main

QUERY = Path(__file__).resolve().parents[2] / "queries" / "unknown_tools.sql"


@pytest.fixture
def store(tmp_path):
    from trajlens.rows import RunBuilder
    from trajlens.store.layout import RunDirWriter

    builder = RunBuilder("tools", config={}, source_format="test", source="tools")
    calls = [
        {"turn": 0, "tool_name": "bash", "command": "pytest -q", "arguments": '{"command": "pytest -q"}'},
        {"turn": 1, "tool_name": "frobnicate", "arguments": '{"level": 3}'},
        {"turn": 2, "tool_name": "frobnicate", "arguments": "{}"},
        {"turn": 3, "tool_name": "zap", "arguments": "{}"},
        {"turn": 4, "tool_name": "think", "arguments": '{"thought": "ok"}'},
        # a JSON null command is no command: an unknown tool; a shell tool without one is not
        {"turn": 5, "tool_name": "mytool", "arguments": '{"command": null}'},
        {"turn": 6, "tool_name": "bash", "arguments": "{}"},
    ]
    builder.add_trajectory({"step": 0, "trajectory_id": "t0", "group_id": "g", "task_id": "a", "reward": 1.0}, calls, None,
                           where="tools: record t0")
    run = builder.build()
    directory = tmp_path / "run"
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)
    path = tmp_path / "store"
    assert main(["ingest", str(directory), "--store", str(path)]) == 0
    return path


def test_classify_lists_unknown_tools_and_saves_them(store, capsys):
    assert main(["classify", str(store)]) == 0
    out = capsys.readouterr().out
    assert "tools: 3 unmapped tool(s) classed other: frobnicate (2), mytool (1), zap (1)" in out


def test_the_saved_query_names_the_tools_the_classifier_names(store, tmp_path, capsys):
    """unknown_tools.sql reads what `trajlens classify` saved: the same tools and counts as
    trajlens.classify.unknown_tools(), next to every tool's executed calls."""
    import csv

    from trajlens.classify import unknown_tools
    from trajlens.store import Store

    assert main(["classify", str(store)]) == 0
    capsys.readouterr()
    out = tmp_path / "unknown.csv"
    assert main(["sql", str(store), str(QUERY), "--param", "run_id=tools", "--out", str(out)]) == 0
    rows = {row["tool_name"]: row for row in csv.DictReader(out.open())}
    unclassified = {name: int(row["unclassified_calls"]) for name, row in rows.items()}
    assert unclassified == {"frobnicate": 2, "mytool": 1, "zap": 1, "bash": 0, "think": 0}
    assert int(rows["bash"]["calls"]) == 2
    expected = unknown_tools(Store(store).tool_calls.collect())
    assert dict(zip(expected["tool_name"], expected["calls"])) == {k: v for k, v in unclassified.items() if v}


def test_tool_map_and_explain(store, tmp_path, capsys):
    tool_map = tmp_path / "mine.toml"
    tool_map.write_text('[[tools]]\nid = "frob edits"\nname = "frobnicate"\nclass = "edit"\n')
    assert main(["classify", str(store), "--tool-map", str(tool_map), "--explain"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines() if "\t" in line]
    header, rows = lines[0], lines[1:]
    assert header == ["run_id", "trajectory_id", "call_index", "tool_name", "class", "decided_by", "source", "command"]
    decided = {(row[3], row[4], row[5], row[6]) for row in rows}
    assert decided == {
        ("bash", "test_suite", "shell rule pytest-suite", "trajlens/classify/rules.py"),
        ("frobnicate", "edit", "tool map: frob edits", str(tool_map)),
        ("zap", "other", "unmapped tool", ""),
        ("think", "think", "tool map: think", "trajlens/classify/tool_maps/openhands.toml"),
        ("mytool", "other", "unmapped tool", ""),
        ("bash", "other", "shell tool without a command", "trajlens/classify/tool_maps/generic.toml"),
    }
    assert len(rows) == 7


def test_the_explanation_is_one_line_a_call_with_the_start_of_its_command():
    import polars as pl

    from trajlens.classify import classify_calls
    from trajlens.classify.explanation import EXPLAIN_COMMAND_CHARS, EXPLANATION_HEADER, explanation_lines

    long = "python - <<'EOF'\nprint(1)\tprint(2)\n" + "x = 1\n" * 20 + "EOF"
    calls = pl.DataFrame({"run_id": ["r", None], "trajectory_id": ["t", "t"], "call_index": [0, 1],
                          "tool_name": ["bash", "think"], "command": [long, None],
                          "arguments": ['{"command": "..."}', "{}"]})
    lines = explanation_lines(classify_calls(calls, explain=True)).to_list()
    first, second = (line.split("\t") for line in lines)
    assert len(first) == len(second) == len(EXPLANATION_HEADER)
    command = long.replace("\n", "\\n").replace("\t", " ")
    assert first[:5] == ["r", "t", "0", "bash", "quick_check"] and first[-1] == command[:EXPLAIN_COMMAND_CHARS - 1] + "…"
    assert len(first[-1]) == EXPLAIN_COMMAND_CHARS
    assert second[0] == "" and second[3:5] == ["think", "think"] and second[-1] == ""  # missing fields are empty


def test_explaining_several_runs_prints_one_header(samples_store_copy, capsys):
    from trajlens.classify.explanation import EXPLANATION_HEADER

    runs = ("sao-r6", "grpo-leg")
    assert main(["classify", str(samples_store_copy), "--run", runs[0], "--run", runs[1], "--explain"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "\t" in line]
    assert lines[0] == "\t".join(EXPLANATION_HEADER) and lines.count(lines[0]) == 1
    assert {line.split("\t")[0] for line in lines[1:]} == set(runs)


def test_bad_tool_map_is_one_line_error(store, tmp_path, capsys):
    tool_map = tmp_path / "bad.toml"
    tool_map.write_text('[[tools]]\nname = "x"\nclass = "nonsense"\n')
    assert main(["classify", str(store), "--tool-map", str(tool_map)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {tool_map}: tools[0]: field 'class'")
