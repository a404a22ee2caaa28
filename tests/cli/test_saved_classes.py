"""``trajlens sample`` and ``trajlens view`` (and the report's viewer pages) show the classes
``trajlens classify --tool-map`` saved, not a classification of their own with the shipped maps;
a run never classified is classified and saved once, as the report does."""

from __future__ import annotations

import json
import re
from collections import Counter

import polars as pl
import pytest
from cli_run import run_cli as trajlens

RUN = "thinker"
STEPS = 8
NO_THINK = '[map]\nname = "no-think"\n\n[[tools]]\nname = "think"\nclass = "other"\n'


@pytest.fixture
def store(tmp_path):
    """A run whose trajectories think more each step: ``step`` think calls and a test run each."""
    from trajlens.rows import RunBuilder
    from trajlens.store.layout import RunDirWriter

    builder = RunBuilder(RUN, config={}, source_format="test", source="thinker")
    for step in range(STEPS):
        for member in range(4):
            calls = [{"turn": turn, "tool_name": "think", "arguments": '{"thought": "hm"}'} for turn in range(step)]
            calls.append({"turn": step, "tool_name": "bash", "command": "pytest -q", "arguments": '{"command": "pytest -q"}'})
            builder.add_trajectory({"step": step, "trajectory_id": f"s{step}-t{member}", "group_id": f"{step}:g",
                                    "task_id": f"task{member}", "reward": float(member % 2)}, calls, None,
                                   where=f"thinker: record s{step}-t{member}")
    directory = tmp_path / "run"
    run = builder.build()
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)
    path = tmp_path / "store"
    done = trajlens("ingest", directory, "--store", path)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture
def classified(store, tmp_path):
    """The store with the run classified under a tool map that sends ``think`` to ``other``."""
    tool_map = tmp_path / "no_think.toml"
    tool_map.write_text(NO_THINK)
    done = trajlens("classify", store, "--run", RUN, "--tool-map", tool_map)
    assert done.returncode == 0, done.stderr
    return store


def _saved(store, table: str) -> pl.DataFrame:
    import trajlens as tl

    return tl.open(store).table(table).filter(pl.col("run_id") == RUN).collect()


def _rates(store, tmp_path) -> pl.DataFrame:
    out = tmp_path / "rates.csv"
    done = trajlens("sample", store, "--run", RUN, "--n", 2, "--out", out)
    assert done.returncode == 0, done.stderr
    return pl.read_csv(out)


def _page_classes(page) -> dict[str, list[tuple[int, str]]]:
    """(call index, class) of each call of each trajectory a viewer page carries."""
    found = {}
    for block in re.findall(r'<script type="application/json" id="trajectory-\d+">(.*?)</script>', page.read_text(), re.S):
        data = json.loads(block.replace("<\\/", "</"))
        found[data["id"]] = [(call["i"], call["class"]) for call in data["calls"]]
    return found


def _saved_classes(store) -> dict[str, list[tuple[int, str]]]:
    rows = _saved(store, "call_classes").sort("trajectory_id", "call_index")
    found: dict[str, list[tuple[int, str]]] = {}
    for row in rows.iter_rows(named=True):
        found.setdefault(row["trajectory_id"], []).append((row["call_index"], row["primary_class"]))
    return found


def test_sample_reports_the_saved_classes(classified, tmp_path):
    from trajlens.classify import stage_report
    from trajlens.run.measures import saved_measures

    import trajlens as tl

    rates = _rates(classified, tmp_path)
    think = rates.filter(pl.col("metric") == "share:think")
    assert think.height == 4 and think["population_value"].to_list() == [0.0] * 4 and think["value"].to_list() == [0.0] * 4
    other = rates.filter(pl.col("metric") == "share:other").sort("stage_index")["population_value"].to_list()
    assert other[0] < other[-1] and other[-1] > 0.8  # the think calls, counted as other
    # the rates are those of the saved measures, and the ones the store keeps (as the report would write them)
    handle = tl.open(classified)
    expected = stage_report(handle, run_id=RUN, n=2, measures=saved_measures(handle, RUN)).rates
    assert rates["population_value"].to_list() == pytest.approx(expected["population_value"].to_list())
    kept = _saved(classified, "stage_rates").filter(pl.col("metric") == "share:think")
    assert kept["population_value"].to_list() == [0.0] * 4


def test_sample_classifies_and_saves_a_run_never_classified(store, tmp_path):
    rates = _rates(store, tmp_path)
    think = rates.filter(pl.col("metric") == "share:think").sort("stage_index")["population_value"].to_list()
    assert think[0] < think[-1] and think[-1] > 0.8  # the shipped maps: think is think
    saved = _saved(store, "call_classes")
    assert saved.height == sum(step + 1 for step in range(STEPS)) * 4
    assert Counter(saved["primary_class"])["think"] == sum(range(STEPS)) * 4


def test_view_shows_the_saved_classes(classified, tmp_path):
    page = tmp_path / "s7.html"
    done = trajlens("view", classified, "--run", RUN, "--trajectory", "s7-t0", "--out", page, "--no-credit")
    assert done.returncode == 0, done.stderr
    shown = _page_classes(page)
    saved = _saved_classes(classified)
    assert set(shown) == {f"s7-t{member}" for member in range(4)}
    assert {trajectory: saved[trajectory] for trajectory in shown} == shown
    assert Counter(klass for calls in shown.values() for _, klass in calls) == {"other": 28, "test_suite": 4}


def test_report_viewer_pages_show_the_saved_classes(classified, tmp_path):
    """The report writes its viewer pages with write_viewer, for the trajectory's step."""
    import trajlens as tl
    from trajlens.report.viewer import write_viewer

    page = write_viewer(tl.open(classified), RUN, "s6-t1", tmp_path / "view" / "s6.html", step=6, back="../index.html")
    shown = _page_classes(page)
    saved = _saved_classes(classified)
    assert len(shown) == 4 and {trajectory: saved[trajectory] for trajectory in shown} == shown
    assert "think" not in {klass for calls in shown.values() for _, klass in calls}


def test_view_classifies_and_saves_a_run_never_classified(store, tmp_path):
    page = tmp_path / "s5.html"
    done = trajlens("view", store, "--run", RUN, "--trajectory", "s5-t2", "--out", page, "--no-credit")
    assert done.returncode == 0, done.stderr
    shown = _page_classes(page)
    assert shown["s5-t2"] == [(index, "think") for index in range(5)] + [(5, "test_suite")]
    saved = _saved_classes(store)
    assert {trajectory: saved[trajectory] for trajectory in shown} == shown


def test_classes_that_change_drop_the_analyses_computed_from_them(store, tmp_path):
    """Attribution and stage reports read the saved classes: classifying the run again with a
    map that changes them drops those analyses (and says so); the same classes again keep them."""
    import trajlens as api

    assert trajlens("attribute", store, "--run", RUN).returncode == 0
    assert trajlens("sample", store, "--run", RUN, "--out", tmp_path / "sample.md").returncode == 0
    analyses = {"class_credit", "call_credit", "attribution_runs", "stage_rates"}
    assert analyses <= set(api.open(store).tables())

    again = trajlens("classify", store, "--run", RUN)
    assert again.returncode == 0 and "dropped" not in again.stdout
    assert analyses <= set(api.open(store).tables())

    (tmp_path / "map.toml").write_text(NO_THINK)
    changed = trajlens("classify", store, "--run", RUN, "--tool-map", tmp_path / "map.toml")
    assert changed.returncode == 0, changed.stderr
    assert f"{RUN}: its classes changed: dropped its analyses stage_rates, stage_changes, call_credit, " in changed.stdout
    # each dropped table's own command, once (ANALYSIS_TABLES): sample writes the stage tables, attribute the rest
    assert changed.stdout.rstrip().endswith(f"; run `trajlens sample {store} --run {RUN}` (or `trajlens report`) and "
                                            f"`trajlens attribute {store} --run {RUN}` again"), changed.stdout
    left = set(api.open(store).tables())
    assert not analyses & left and not any(name.startswith("attribution_") for name in left)
    assert {"call_classes", "trajectory_measures", "unknown_tools"} <= left
