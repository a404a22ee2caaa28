"""SkyRL-Agent CodeAct traces, written through SkyRL-Agent's own message converter."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "skyrl_agent" / "trace"
FIRST = DATA / "demo-run" / "step10" / "astropy__astropy-12907" / "0"


def test_the_latest_trace_of_each_trajectory_with_its_xml_calls_and_observations():
    assert [s.format.name for s in formats.plan(DATA)] == ["skyrl-agent"]
    run = load(DATA)
    assert run.runs.column("name").to_pylist() == ["demo-run"]
    rows = [(r["trajectory_id"], r["step"], r["task_id"], r["group_id"], r["num_turns"], r["reward"])
            for r in run.trajectories.to_pylist()]
    assert rows == [("step10/astropy__astropy-12907/0", 10, "astropy__astropy-12907", "10:astropy__astropy-12907", 3, None),
                    ("step10/astropy__astropy-12907/1", 10, "astropy__astropy-12907", "10:astropy__astropy-12907", 2, None),
                    ("step10/django__django-11099/0", 10, "django__django-11099", "10:django__django-11099", 2, None),
                    ("step10/django__django-11099/1", 10, "django__django-11099", "10:django__django-11099", 1, None)]
    calls = [(c["tool_name"], c["command"], c["observation"], c["assistant_text"]) for c in run.tool_calls.to_pylist()]
    # the result prefix and the agent's "Steps remaining" note are taken off the observation
    assert calls[:3] == [("execute_bash", "ls", "setup.py\nastropy\n", "Step 1."),
                         ("execute_bash", "python -m pytest -q astropy/modeling", "1 failed", "Step 2."),
                         ("finish", None, None, "Step 3.")]
    assert calls[4][2] is None  # the trace ends with a call not yet answered


def test_a_single_trace_file_loads_alone():
    run = load(sorted(FIRST.glob("trace_*.json"))[0])
    assert run.tool_calls.column("command").to_pylist() == ["ls"]


def test_a_trace_that_is_not_a_message_list_is_named(tmp_path):
    folder = tmp_path / "trace" / "r" / "step1" / "task" / "0"
    shutil.copytree(FIRST, folder)
    (folder / "trace_20990101_000000_000000.json").write_text(json.dumps({"messages": []}))
    with pytest.raises(InputError) as caught:
        load(tmp_path / "trace")
    assert "trace_20990101_000000_000000.json" in str(caught.value) and "a list of chat messages" in str(caught.value)


def test_skyrl_agent_traces_ingest_classify_report_and_check(tmp_path):
    store, classes = through_every_surface(DATA, tmp_path)
    (run_id,) = store.sql("SELECT run_id FROM runs")["run_id"].to_list()
    summary = (tmp_path / "report" / "README.md").read_text()
    assert "one step of agent logs (step 10): no training stages to compare" in summary  # the step the paths give
    assert classes["tool_name"].to_list()[:3] == ["execute_bash", "execute_bash", "finish"]
    assert classes["primary_class"].to_list()[0] != classes["primary_class"].to_list()[1]  # ls vs pytest
