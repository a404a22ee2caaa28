"""``trajlens channels``: the multi-reward digest's watch list per step and channel, with the
numbers every other surface gives (saved query, attribution, the gdpo_dynamic estimator)."""

from __future__ import annotations

import json

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

import trajlens
from cli_run import run_cli
from trajlens.attribution.statistics import channel_measures
from trajlens.estimators import channel_diagnostics, recompute
from trajlens.checks.channels import WATCH_SCHEMA, run_channel_watch, watch_lines

RUN = "multireward"
QUERY = Path(__file__).resolve().parents[2] / "queries" / "reward_channels_by_step.sql"


@pytest.fixture(scope="module")
def watch(samples_store_path):
    return run_channel_watch(trajlens.open(samples_store_path), RUN)


@pytest.fixture(scope="module")
def trajectories(samples_store_path):
    return (trajlens.open(samples_store_path).trajectories
            .filter((pl.col("run_id") == RUN) & (pl.col("split") == "train")).collect())


def test_the_digest_saturation_shows_in_the_watch_list(watch):
    """Format is learned: its rel_gain falls from about 0.8 to 0.05 and its weight to the
    bound's end, while correctness keeps its signal and the top weight."""
    table = watch.table
    assert list(table.columns) == list(WATCH_SCHEMA) and watch.channels == ("format", "correctness")
    assert table.height == 2 * table["step"].n_unique() == 640

    def early_late(channel: str, column: str) -> tuple[float, float]:
        part = table.filter(pl.col("channel") == channel).sort("step")
        return part[column].head(80).mean(), part[column].tail(80).mean()

    early, late = early_late("format", "rel_gain")
    assert early > 0.7 and late < 0.1
    assert early_late("correctness", "rel_gain")[1] > 0.4
    early, late = early_late("format", "weight")
    assert early > 0.4 and late < 0.2
    assert early_late("correctness", "weight") == pytest.approx((0.5, 0.5))
    early, late = early_late("format", "advantage_kurtosis")
    assert late > 10 * max(early, 1.0)  # the rare unformatted response stands out past many sigma


def test_rel_gain_mean_and_std_are_the_saved_query_s(watch, samples_store_path):
    """The saved SQL (a separate implementation, in DuckDB) gives the same numbers at every step."""
    sql = trajlens.open(samples_store_path).sql(QUERY.read_text(), {"run_id": RUN})
    joined = watch.table.join(sql, on=["step", "channel"], how="inner", suffix="_sql")
    assert joined.height == watch.table.height
    for column in ("mean", "std", "rel_gain"):
        difference = (joined[column] - joined[f"{column}_sql"]).abs().max()
        assert difference <= 5.1e-5, column  # the query rounds to 4 decimals


def test_dominant_counts_are_attribution_s(watch, trajectories):
    measures = channel_measures(trajectories)
    for channel in watch.channels:
        ours = watch.table.filter(pl.col("channel") == channel).select("step", "dominant")
        theirs = measures.select("step", pl.col(f"dominant:{channel}").alias("dominant"))
        assert ours.sort("step").equals(theirs.sort("step").cast({"dominant": pl.Int64})), channel


def test_weights_are_those_gdpo_dynamic_recomputes_the_run_with(watch, trajectories):
    """As `trajlens advantages -e gdpo_dynamic` runs it (whitened over model tokens): the weights
    do not depend on the final normalisation."""
    recomputed = recompute(trajectories, None, "gdpo_dynamic")
    weights = recomputed.group_by("step").agg(pl.col("channel_weights").first()).sort("step")
    for index, channel in enumerate(watch.channels):
        ours = watch.table.filter(pl.col("channel") == channel).sort("step")["weight"].to_list()
        assert ours == weights["channel_weights"].list.get(index).to_list(), channel


def test_rel_gain_leaves_out_a_group_of_one():
    """A lone rollout's max - min is 0 by construction: it would make a live channel look saturated."""
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], dtype=torch.float64)
    found = channel_diagnostics(rewards, ["a", "a", "b"], names=["x", "y"])
    assert found.rel_gain.tolist() == [1.0, 1.0]


def test_the_command_prints_the_watch_and_writes_every_row(samples_store_path, tmp_path):
    out = tmp_path / "channels.json"
    result = run_cli("channels", samples_store_path, "--run", RUN, "--out", out, "--rows", "4")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("format: rel_gain 0.7") and "-> 0.05" in line for line in lines), result.stdout
    assert "(636 more rows)" in result.stdout
    rows = json.loads(out.read_text())
    assert len(rows) == 640 and set(rows[0]) == set(WATCH_SCHEMA)


def test_a_run_with_one_reward_says_so(samples_store_path, tmp_path):
    out = tmp_path / "none.csv"
    result = run_cli("channels", samples_store_path, "--run", "sao-r7", "--out", out)
    assert result.returncode == 0 and "fewer than two reward channels" in result.stdout
    assert out.read_text().strip() == ",".join(WATCH_SCHEMA)  # the columns, no rows


@pytest.mark.parametrize("arguments, message", [
    (("--run", "no-such-run"), "no-such-run"),
    (("--run", RUN, "--out", "x.txt"), "expected a file ending in"),
    (("--run", RUN, "--split", "validation"), "has the splits train"),
])
def test_bad_input_is_one_line(samples_store_path, tmp_path, arguments, message):
    result = run_cli("channels", samples_store_path, *arguments, cwd=tmp_path)
    assert result.returncode != 0 and message in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir())


def test_a_quarter_s_rel_gain_is_the_checks_pooled_over_its_groups():
    """Steps with unequal numbers of groups: a quarter's rel_gain in the watch list (and the
    report's channel findings, through the same rel_gain_quarters) is the checks'
    rel_gain:<channel> statistics pooled over the quarter's steps, as their stage change pools
    them: the mean over the quarter's groups, not a mean of the steps' rel_gains."""
    from trajlens.checks.step_measures import channel_stats
    from trajlens.intervals import added, pooled
    from trajlens.checks.channels import channel_watch

    rows = []
    # eight steps, two per quarter; step 0 has three groups (gain 1 each), step 1 one (gain 0)
    for step in range(8):
        gains = (1.0, 1.0, 1.0) if step == 0 else (0.0,) if step == 1 else (0.5,)
        for g, gain in enumerate(gains):
            for member, x in enumerate((0.0, gain)):
                rows.append({"run_id": "r", "step": step, "group_id": f"{step}-{g}", "trajectory_id": f"{step}-{g}-{member}",
                             "reward_channels": [{"name": "x", "value": x}, {"name": "y", "value": 1.0 - x}]})
    trajectories = pl.DataFrame(rows)
    line = next(line for line in watch_lines(channel_watch(trajectories)) if line.startswith("x:"))
    stats = channel_stats(trajectories).filter(pl.col("measure") == "rel_gain:x")
    first, last = (pooled(added(stats.filter(pl.col("step").is_in(steps)), by=()), proportion=False)["value"].item()
                   for steps in ((0, 1), (6, 7)))
    assert (first, last) == pytest.approx((0.75, 0.5))  # (1 + 1 + 1 + 0) / 4 groups; a mean of steps gives 0.5
    assert f"rel_gain {first:.2f} -> {last:.2f}" in line


def test_a_run_gdpo_dynamic_refuses_shows_no_weights_and_says_why():
    """A trajectory without one of the channels: gdpo_dynamic refuses the run (as `trajlens
    advantages -e gdpo_dynamic` and the report say), so the watch list shows no weight at any
    step rather than weights over the other trajectories, and says why."""
    from trajlens.checks.channels import channel_watch

    rows = []
    for step in range(8):
        for g in range(2):
            for member, x in enumerate((0.0, 1.0)):
                channels = [{"name": "x", "value": x}, {"name": "y", "value": 1.0 - x}]
                if (step, g, member) == (3, 1, 0):
                    channels = channels[:1]
                rows.append({"run_id": "r", "step": step, "group_id": f"{step}-{g}", "reward": 1.0,
                             "trajectory_id": f"{step}-{g}-{member}", "reward_channels": channels})
    watch = channel_watch(pl.DataFrame(rows))
    assert watch.table.height and watch.table["weight"].null_count() == watch.table.height
    assert watch.weight_problem and "every reward channel on every trajectory" in watch.weight_problem
    assert any(line.startswith("no weights: gdpo_dynamic cannot run") for line in watch_lines(watch))


def test_a_one_step_run_prints_no_warning(tmp_path):
    """One step: the step's frame is the whole frame, whose arrays Polars may hand out read-only;
    torch warned about them on stderr."""
    import warnings

    from trajlens.synth.generate import generate

    run = tmp_path / "m1"
    generate("multireward", run, steps=1, batch=8)
    trajlens.ingest([run], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    (run_id,) = store.run_ids()
    trajectories = store.trajectories.filter(pl.col("run_id") == run_id).collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run_channel_watch(store, run_id).table["step"].unique().to_list() == [1]
        assert channel_measures(trajectories).height == 1


def test_the_collinear_steps_are_those_the_shipped_check_fires_at(tmp_path):
    """The watch flagged each step whose |r| passed 0.85 on its own, the check
    ``reward_channels_collinear`` a 5-step window: on one run the watch said "collinear at 12 of
    20 steps" where the check fired at 6, and on the sample run it advised dropping a channel
    the check let pass. Both now say the check's steps, each named with its pair."""
    from trajlens.checks.evaluate import check_run
    from trajlens.steps import steps_text
    from trajlens.synth.generate import generate

    generate("multireward", tmp_path / "run", steps=20, batch=8, seed=2)
    trajlens.ingest([tmp_path / "run"], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    (run_id,) = store.run_ids()
    (result,) = [r for r in check_run(tmp_path / "store", run_id=run_id).results if r.name == "reward_channels_collinear"]
    watch = run_channel_watch(store, run_id)
    assert result.fired_steps and watch.collinear["step"].to_list() == list(result.fired_steps)
    assert set(zip(watch.collinear["channel_a"], watch.collinear["channel_b"])) == {("format", "correctness")}
    (line,) = [line for line in watch_lines(watch) if "collinear" in line]
    assert line.startswith(f"channels format and correctness are collinear at {len(result.fired_steps)} of 20 steps, "
                           f"{steps_text(result.fired_steps)} (|r| over the check's window up to ")


def test_a_run_the_check_lets_pass_has_no_collinear_channels(watch):
    assert watch.collinear.is_empty()
    assert not any("collinear" in line for line in watch_lines(watch))


def test_with_three_channels_a_collinear_step_names_its_most_correlated_pair():
    """With three channels whose collinear pair changes mid-run, the watch named a pair by its
    own windowed |r| (0.69, below the threshold) at steps where another pair made the check fire.
    Each step now names the pair whose |r| is that step's largest."""
    from trajlens.checks.channels import collinear_steps

    rng = np.random.default_rng(0)
    rows = []
    for step in range(1, 13):
        for t in range(16):
            a, noise = rng.normal(), rng.normal()
            b, c = (a, noise) if step <= 6 else (noise, a)  # a and b move together, then a and c
            rows += [{"step": step, "trajectory_id": f"{step}-{t}", "channel": name, "value": value}
                     for name, value in (("a", a), ("b", b), ("c", c))]
    found = collinear_steps(pl.DataFrame(rows))
    pairs = dict(zip(found["step"], zip(found["channel_a"], found["channel_b"])))
    assert pairs and all(pairs[s] == (("a", "b") if s <= 6 else ("a", "c")) for s in pairs)
    assert (found["correlation"] > 0.85).all()


def test_channels_never_on_one_trajectory_are_still_watched_by_their_values(tmp_path):
    """Each trajectory scores one of two channels: the channels' values (what the checks judge)
    are watched step by step, and the watch says why it shows no advantages and no weights."""
    from trajlens.checks.channels import channel_watch

    rows = []
    for step in range(8):
        for g in range(2):
            for member in range(4):
                name = "x" if member % 2 == 0 else "y"
                value = float(member // 2 == 0 or step < 4) if name == "x" else 0.5
                rows.append({"run_id": "r", "step": step, "group_id": f"{step}-{g}", "reward": 1.0,
                             "trajectory_id": f"{step}-{g}-{member}",
                             "reward_channels": [{"name": name, "value": value}]})
    watch = channel_watch(pl.DataFrame(rows))
    assert watch.table.height == 16 and watch.table["dominant"].null_count() == 16
    x = watch.table.filter(pl.col("channel") == "x")
    assert x["rel_gain"].to_list() == [0.0] * 4 + [1.0] * 4  # each group's x: 1 and 1 early, 1 and 0 late
    assert watch.table.filter(pl.col("channel") == "y")["rel_gain"].to_list() == [0.0] * 8
    lines = watch_lines(watch)
    assert lines[0].startswith("x: rel_gain 0.00 -> 1.00")
    assert "no advantages: no step has two trajectories with a value of every channel" in lines
    assert any(line.startswith("no weights: gdpo_dynamic cannot run") for line in lines)
