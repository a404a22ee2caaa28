"""Every saved query in queries/ documents itself and runs with only the parameters it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import trajlens
from trajlens.report import report_store

QUERIES = sorted((Path(__file__).resolve().parents[2] / "queries").glob("*.sql"))
SAMPLE_PARAMS = {"run_id": "tiny", "name": "critic/vf_explained_var", "metric": "share:think", "estimator": "grpo",
                 "run_a": "tiny", "run_b": "tiny"}


def declared_parameters(text: str) -> set[str]:
    header = "\n".join(line for line in text.splitlines() if line.startswith("--"))
    match = re.search(r"Parameters: (.*)", header)
    assert match, "header lacks a 'Parameters:' line"
    return set() if match.group(1).startswith("none") else set(re.findall(r"\$(\w+)", match.group(1)))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from tinyrun import tiny_run
    from trajlens.store.layout import RunDirWriter

    root = tmp_path_factory.mktemp("queries")
    run = tiny_run()
    with RunDirWriter(root / "run", run.runs) as writer:
        writer.write_run(run)
    trajlens.ingest([root / "run"], root / "store")
    store = trajlens.open(root / "store")
    report_store(store, root / "report", n=2)
    from trajlens.attribution import attribute

    attribute(store, "tiny")  # call_credit and class_credit for the attribution queries
    return store


@pytest.mark.parametrize("path", QUERIES, ids=[p.stem for p in QUERIES])
def test_query_is_documented_and_runs(store, path):
    text = path.read_text()
    assert text.startswith("-- "), "a query starts with a comment saying what it answers"
    used = set(re.findall(r"\$(\w+)", "\n".join(l for l in text.splitlines() if not l.startswith("--"))))
    assert used == declared_parameters(text)
    frame = store.sql(text, {name: SAMPLE_PARAMS[name] for name in used})
    assert frame.width > 0 and frame.height > 0 or "format_error" in text


# --- one truth per fact: the saved queries give the numbers the Python surfaces give -------------

QUERY_DIR = QUERIES[0].parent
THINK = {"tool_name": "think", "arguments": '{"thought": "plan"}'}


def _bash(command: str) -> dict:
    import json

    return {"tool_name": "bash", "command": command, "arguments": json.dumps({"command": command})}


# Train calls per step and member: a suite run, quick checks and scripts, a step whose only test
# run is inside a submit call (a verification action, but no call of a verification class).
TRAIN_CALLS = {
    1: ([_bash("pytest -q"), _bash("grep -r foo ."), THINK], [THINK]),
    2: ([_bash('python -c "print(1)"'), _bash("python repro.py"), THINK, THINK], [_bash("pytest tests/test_a.py")]),
    3: ([_bash("pytest -q && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")], [THINK, _bash("cat x.py")]),
}
# (group, rewards): live, dead, a single trajectory, a pair with a null reward, live again
TRAIN_GROUPS = (("live", (0.0, 1.0)), ("dead", (1.0, 1.0)), ("single", (0.5,)), ("null", (None, 1.0)),
                ("half", (0.0, 0.5)))


def split_run(run_id: str, extra_think: int):
    """Three steps of training groups beside validation trajectories that think, test and score
    differently: any query that counts the validation split gets other numbers."""
    from trajlens.rows import RunBuilder

    builder = RunBuilder(run_id, estimator="grpo", config={}, source_format="test", source=run_id)

    def add(step, split, group, member, reward, calls, channels):
        calls = [{**call, "turn": turn} for turn, call in enumerate(calls)]
        builder.add_trajectory({
            "step": step, "trajectory_id": f"{split}-{step}-{group}-{member}", "group_id": f"{split}:{step}:{group}",
            "task_id": group, "split": split, "reward": reward,
            "resolved": None if reward is None else reward == 1.0,
            "reward_channels": [{"name": n, "value": v} for n, v in channels.items()], "model_tokens": 10 + len(calls),
        }, calls, where=f"{run_id}: {step} {group} {member}")

    for step, calls in TRAIN_CALLS.items():
        for group, rewards in TRAIN_GROUPS:
            for member, reward in enumerate(rewards):
                made = calls[member] + [THINK] * (extra_think if member else 0)
                add(step, "train", group, member, reward, made,
                    {"correct": reward or 0.0, "format": 0.0 if (group, member) == ("live", 0) else 1.0})
        for member in (0, 1):
            add(step, "validation", "v", member, 0.0, [THINK] * 4 + [_bash("pytest tests/test_b.py")] * (member + 1),
                {"correct": 0.0, "format": float(member)})
    return builder.build()


@pytest.fixture(scope="module")
def split_store(tmp_path_factory):
    from trajlens.report.build import classify_store
    from trajlens.store.layout import RunDirWriter

    root = tmp_path_factory.mktemp("split_queries")
    for run_id, extra in (("split-a", 0), ("split-b", 3)):
        run = split_run(run_id, extra)
        with RunDirWriter(root / run_id, run.runs) as writer:
            writer.write_run(run)
    trajlens.ingest([root / "split-a", root / "split-b"], root / "store")
    store = trajlens.open(root / "store")
    classify_store(store, ["split-a", "split-b"])
    return store


def saved(store, name: str, **params):
    return store.sql((QUERY_DIR / f"{name}.sql").read_text(), params)


def train_frames(store, run_id: str):
    import polars as pl

    trajectories = store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == "train")).collect()
    measures = store.table("trajectory_measures").filter(pl.col("run_id") == run_id).collect().join(
        trajectories.select("trajectory_id"), on="trajectory_id", how="semi")
    return trajectories, measures


def step_values(stats) -> dict:
    """{(measure, step): value} of step statistics, as the checks read them (null where n is 0)."""
    return {(r["measure"], r["step"]): r["x"] / r["n"] if r["n"] else None for r in stats.iter_rows(named=True)}


def same(sql_value, python_value) -> bool:
    """A value the query rounds to 4 places against the Python number."""
    if sql_value is None or python_value is None:
        return sql_value is None and python_value is None
    return sql_value == pytest.approx(python_value, abs=5.1e-5)


@pytest.mark.parametrize("run_id", ["split-a", "split-b"])
def test_think_share_and_verification_mix_are_the_checks_measures(split_store, run_id):
    from trajlens.checks.step_measures import trajectory_measure_stats

    trajectories, measures = train_frames(split_store, run_id)
    python = step_values(trajectory_measure_stats(measures))
    think = saved(split_store, "think_share_by_step", run_id=run_id)
    assert think["step"].to_list() == [1, 2, 3]
    for row in think.iter_rows(named=True):
        assert same(row["think_share"], python["share:think", row["step"]]), row
    mix = saved(split_store, "verification_mix_by_step", run_id=run_id)
    assert mix["step"].to_list() == sorted(trajectories["step"].unique())  # every step, gaps included
    columns = {"suite": "test_suite", "targeted": "test_targeted", "quick_check": "quick_check",
               "run_script": "run_script"}
    for row in mix.iter_rows(named=True):
        step = row["step"]
        assert row["verification_calls"] == measures.filter(measures["step"] == step)["n_verification"].sum()
        for column, klass in columns.items():
            assert same(row[column], python.get((f"verification:{klass}", step))), (row, klass)
        assert same(row["suite_run_rate"], python["ran_suite", step]), row
    step3 = mix.row(2, named=True)  # the suite runs only inside a submit call
    assert step3["verification_calls"] == 0 and step3["suite"] is None and step3["suite_run_rate"] > 0


def test_reward_channels_rel_gain_counts_groups_of_two_or_more(split_store):
    import polars as pl

    from trajlens.checks.step_measures import channel_stats

    trajectories, _ = train_frames(split_store, "split-a")
    python = step_values(channel_stats(trajectories))
    channels = saved(split_store, "reward_channels_by_step", run_id="split-a")
    assert channels.height == 6
    for row in channels.iter_rows(named=True):
        assert same(row["rel_gain"], python[f"rel_gain:{row['channel']}", row["step"]]), row
        assert same(row["std"], python[f"channel_std:{row['channel']}", row["step"]]), row
    # live 1, dead 0, null pair 1, half 0.5 over four groups; the single trajectory is no group
    assert channels.filter(pl.col("channel") == "correct")["rel_gain"].to_list() == [0.625] * 3


def test_dead_groups_are_the_reports(split_store):
    from trajlens.report.summary import run_summary

    trajectories, measures = train_frames(split_store, "split-a")
    (table,) = [t for t in run_summary(split_store, "split-a", measures, split="train") if t.key == "dead_groups"]
    report = table.frame.row(0, named=True)
    dead = saved(split_store, "dead_groups_by_step", run_id="split-a")
    assert (int(dead["groups"].sum()), int(dead["dead_groups"].sum())) == (report["groups"], report["dead_groups"])
    # per step: live, dead and half; the single trajectory and the pair with a null reward are no groups
    assert dead["groups"].to_list() == [3, 3, 3] and dead["dead_group_share"].to_list() == [0.3333] * 3


def test_rewards_and_runs_overview_are_the_training_splits(split_store):
    import polars as pl

    from trajlens.report.overview import run_trends
    from trajlens.report.summary import run_summary

    trajectories, measures = train_frames(split_store, "split-a")
    rewards = saved(split_store, "reward_by_step", run_id="split-a")
    trend = dict(run_trends(split_store, "split-a", measures, "train")[0]["reward"].points)
    for row in rewards.iter_rows(named=True):
        assert same(row["mean_reward"], trend[row["step"]]), row
    overview = saved(split_store, "runs_overview").filter(pl.col("run_id") == "split-a").row(0, named=True)
    (outcome,) = [t.frame for t in run_summary(split_store, "split-a", measures, split="train") if t.key == "outcome"]
    values = dict(zip(outcome["measure"], outcome["value"]))
    assert overview["trajectories"] == trajectories.height == measures.height
    assert same(overview["mean_reward"], values["mean reward"])
    assert same(overview["resolved_rate"], values["resolved rate"])
    assert overview["mean_turns"] == pytest.approx(measures["num_turns"].mean(), abs=0.0051)  # 2 places


def test_compare_runs_is_what_compare_reports(split_store):
    import polars as pl

    from trajlens.compare import compare

    python = compare(split_store, "split-a", "split-b", advantages=False)
    frame = saved(split_store, "compare_runs", run_a="split-a", run_b="split-b")
    names = {"think_share": "share:think", "ran_suite": "ran_suite"}
    assert set(frame["measure"]) >= set(names)
    for row in frame.iter_rows(named=True):
        name = names.get(row["measure"], f"mean:{row['measure']}")
        match = python.filter((pl.col("measure") == name) | pl.col("same_as").str.split(", ").list.contains(name))
        want = match.row(0, named=True)
        for column, theirs in (("value_a", "a_value"), ("value_b", "b_value"), ("difference", "difference"),
                               ("difference_low", "difference_low"), ("difference_high", "difference_high")):
            assert same(row[column], want[theirs]), (row, column, want)
        assert row["n_a"] == pytest.approx(want["a_n"], abs=0.006) and row["n_b"] == pytest.approx(want["b_n"], abs=0.006)
        assert row["effect"] == want["effect"]
        assert row["effect_size"] == pytest.approx(want["effect_size"], abs=5.1e-4) if want["effect_size"] is not None \
            else row["effect_size"] is None


def test_nan_rewards_are_left_out():
    """A store's ingest refuses NaN rewards; the queries leave them out all the same, as the
    report's trend does (drop_nans)."""
    import duckdb
    import polars as pl

    nan = float("nan")
    trajectories = pl.DataFrame({
        "run_id": "r", "split": "train", "step": [1, 1, 1, 1, 2, 2],
        "group_id": ["a", "a", "b", "b", "c", "c"], "reward": [nan, 1.0, 0.0, 1.0, 0.5, 0.5],
        "resolved": [None, True, False, True, False, False], "num_turns": 1, "model_tokens": 1, "reasoning_tokens": None,
    }, schema_overrides={"reasoning_tokens": pl.Int64})
    from trajlens.schema import VIEWS

    connection = duckdb.connect()
    connection.register("trajectories", trajectories)
    connection.execute(f"CREATE VIEW measured_splits AS {VIEWS['measured_splits']}")

    def run(name: str):
        return connection.sql((QUERY_DIR / f"{name}.sql").read_text(), params={"run_id": "r"}).pl()

    trend = trajectories.group_by("step").agg(pl.col("reward").drop_nans().mean()).sort("step")
    assert run("reward_by_step")["mean_reward"].to_list() == pytest.approx(trend["reward"].to_list(), abs=5.1e-5)
    dead = run("dead_groups_by_step")  # NaN left out: group a is one rewarded trajectory, no group
    assert dead.select("step", "groups", "dead_groups").rows() == [(1, 1, 0), (2, 1, 1)]


def test_nan_channel_values_are_left_out_as_the_checks_leave_them():
    """A frame given to the Python API may hold NaN channel values (ingest refuses them): the
    saved query's mean, std and rel_gain leave them out, as the watch list and the checks do."""
    import duckdb
    import polars as pl

    from trajlens.checks.step_measures import channel_stats
    from trajlens.run.channels import channel_step_means, channel_values
    from trajlens.schema import VIEWS

    nan = float("nan")
    values = [nan, 1.0, 0.0, 0.5, 0.25, 0.25]
    trajectories = pl.DataFrame({
        "run_id": "r", "split": "train", "step": [1, 1, 1, 1, 2, 2], "group_id": ["a", "a", "b", "b", "c", "c"],
        "trajectory_id": [f"t{i}" for i in range(6)],
        "reward_channels": [[{"name": "format", "value": v}] for v in values],
    })
    connection = duckdb.connect()
    connection.register("trajectories", trajectories)
    connection.execute(f"CREATE VIEW measured_splits AS {VIEWS['measured_splits']}")
    sql = connection.sql((QUERY_DIR / "reward_channels_by_step.sql").read_text(), params={"run_id": "r"}).pl()
    python = step_values(channel_stats(trajectories))
    means = channel_step_means(channel_values(trajectories)).sort("step")
    assert sql["mean"].to_list() == pytest.approx(means["mean"].to_list(), abs=5.1e-5) == [0.5, 0.25]
    assert sql["std"].to_list() == pytest.approx([python["channel_std:format", s] for s in (1, 2)], abs=5.1e-5)
    assert sql["std"].to_list() == pytest.approx([0.5, 0.0], abs=5.1e-5)
    # groups count their trajectories, NaN left out of max and min only: a's gain is 0, b's 0.5, c's 0
    assert sql["rel_gain"].to_list() == pytest.approx([python["rel_gain:format", s] for s in (1, 2)])
    assert sql["rel_gain"].to_list() == pytest.approx([0.25, 0.0])


def test_the_run_summary_outcome_is_compares(split_store):
    """One truth: the run summary's resolved rate and mean reward carry the values and 95%
    intervals ``trajlens compare`` (and the checks' ``resolved`` and ``reward``) give the run."""
    import polars as pl

    from trajlens.compare import compare
    from trajlens.report.summary import run_summary

    _, measures = train_frames(split_store, "split-a")
    (outcome,) = [t.frame for t in run_summary(split_store, "split-a", measures, split="train") if t.key == "outcome"]
    table = compare(split_store, "split-a", "split-b", advantages=False)
    for name, measure in (("resolved rate", "resolved"), ("mean reward", "mean:reward")):
        mine = outcome.filter(pl.col("measure") == name).row(0, named=True)
        theirs = table.filter((pl.col("measure") == measure) | pl.col("same_as").str.split(", ").list.contains(measure))
        theirs = theirs.row(0, named=True)
        assert (mine["value"], mine["ci_low"], mine["ci_high"]) == pytest.approx(
            (theirs["a_value"], theirs["a_low"], theirs["a_high"]), rel=1e-12), name
