"""The shipped check of logged advantages, fed by the report's advantage pass (one read of the
token arrays for both) or by the checks' own batches, gives the same values and verdict; a
step's value does not depend on how the run is cut into batches."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import trajlens
import trajlens.checks.data as check_data
from trajlens.checks import check_run, default_checks
from trajlens.checks.report import logged_feeds, shipped_checks
from trajlens.run.batches import train_trajectories
from trajlens.run.choices import report_advantages
from trajlens.run.facts import stored_facts
from trajlens.run.reader import RunReader
from trajlens.synth import generate

RUN = "sao-r7"
LOGGED = "logged_advantage_diff:auto"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    work = tmp_path_factory.mktemp("logged-pass")
    for name, logs in (("logged", True), ("plain", False)):
        generate("sao-r7", work / f"run-{name}", steps=4, batch=8, tokens_per_trajectory=1500,
                 tool_calls_per_trajectory=6, log_advantages=logs)
        trajlens.ingest([work / f"run-{name}"], work / name)
    return work


def _shipped(result):
    return next(r for r in result.results if r.name == "logged_advantages_match")


def test_the_footers_tell_a_run_that_logged_advantages(stores):
    for name, logs in (("logged", True), ("plain", False)):
        store = trajlens.open(stores / name)
        facts = stored_facts(RunReader.of(store, RUN), train_trajectories(store, RUN), None)
        assert facts.logged is logs, name


def test_the_report_pass_feeds_the_check_which_then_reads_no_token_array(stores, monkeypatch):
    store = trajlens.open(stores / "logged")
    alone = check_run(stores / "logged", run_id=RUN)
    advantages = report_advantages(store, RUN, extremes=True, logged=logged_feeds(store, RUN))
    assert [feed.measure for feed in advantages.logged] == [LOGGED]  # fed: the run logged advantages

    def unread(*args, **kwargs):
        raise AssertionError("the checks read the token arrays the report's pass already read")

    monkeypatch.setattr(check_data, "_read_tokens", unread)
    fed = shipped_checks(store, RUN, advantages=advantages)
    mine, theirs = _shipped(fed), _shipped(alone)
    assert mine.status == theirs.status == "pass"
    assert mine.reason == theirs.reason and "max |diff|" in mine.reason
    assert mine.evidence.value == theirs.evidence.value < 1e-5
    assert mine.outcomes[0].evaluated_steps == theirs.outcomes[0].evaluated_steps == 4


def test_the_check_takes_the_pass_s_gae_scans_rather_than_running_them_again(stores, monkeypatch):
    import trajlens.run.stepwise as stepwise

    store = trajlens.open(stores / "logged")
    scan, runs = stepwise.raw_gae, []
    monkeypatch.setattr(stepwise, "raw_gae", lambda *a, **kw: runs.append(1) or scan(*a, **kw))
    report_advantages(store, RUN, extremes=True)
    alone, runs[:] = len(runs), []
    advantages = report_advantages(store, RUN, extremes=True, logged=logged_feeds(store, RUN))
    assert advantages.logged and alone > 0
    assert len(runs) == alone  # the fed check compared whitened and raw GAE on the pass's own scans


@pytest.mark.parametrize("source", ["store", "run directory"])
def test_check_compares_the_logged_advantages_on_the_scans_of_its_own_advantage_statistics(
        stores, monkeypatch, source):
    """``trajlens check`` runs each step's GAE scan once: its advantage statistics and the
    comparison with the logged advantages share it, as the report's pass and the check do."""
    import trajlens.run.stepwise as stepwise

    scan, runs = stepwise.raw_gae, []
    monkeypatch.setattr(stepwise, "raw_gae", lambda *a, **kw: runs.append(1) or scan(*a, **kw))
    path, run_id = (stores / "logged", RUN) if source == "store" else (stores / "run-logged", None)
    result = check_run(path, run_id=run_id)
    assert _shipped(result).status == "pass" and _shipped(result).outcomes[0].evaluated_steps == 4
    assert len(runs) == 1  # the four steps are one batch: one scan, not one more for the comparison


def test_a_run_without_logged_advantages_is_not_fed_and_skips_alike(stores):
    store = trajlens.open(stores / "plain")
    advantages = report_advantages(store, RUN, extremes=True, logged=logged_feeds(store, RUN))
    assert advantages.logged == ()  # nothing to feed: the pass reads no logged column
    fed, alone = _shipped(shipped_checks(store, RUN, advantages=advantages)), _shipped(check_run(stores / "plain", run_id=RUN))
    assert fed.status == alone.status == "skip"
    assert fed.reason == alone.reason and "no logged advantages" in fed.reason


def _logged_series(store_path) -> pl.DataFrame:
    from trajlens.checks.data import Needs, RunState, open_batches

    needs = Needs.of([c for c in default_checks() if c.name == "logged_advantages_match"])
    info, batches = open_batches(store_path, RUN, needs)
    state = RunState(info, needs)
    for batch in batches:
        state.add(batch)
    return state.series(LOGGED)


def test_a_step_s_value_does_not_depend_on_the_batches(stores, monkeypatch):
    import trajlens.run.batches as batches

    whole = _logged_series(stores / "logged")
    plan = batches.plan_batches
    monkeypatch.setattr(batches, "plan_batches", lambda trajectories, **kw: plan(trajectories, max_steps=1))
    one_by_one = _logged_series(stores / "logged")
    assert whole.height == 4
    assert_frame_equal(whole, one_by_one)


def test_the_verdict_is_read_again_once_more_steps_are_fed(stores):
    from trajlens.checks.data import stored_run_info
    from trajlens.checks.step_measures import LoggedAdvantages

    store = trajlens.open(stores / "logged")
    trajectories = store.trajectories.filter(pl.col("run_id") == RUN).collect().sort("step")
    tokens = store.tokens.filter(pl.col("run_id") == RUN).collect()
    measure = LoggedAdvantages("auto", stored_run_info(stores / "logged", RUN).history.current)
    counts = []
    for step in (1, 2):
        measure.add(trajectories.filter(pl.col("step") == step), tokens.filter(pl.col("step") == step))
        assert measure.note is not None and measure.problem == ""
        counts.append(int(measure.note.split(" over ")[1].split()[0].replace(",", "")))
    assert 0 < counts[0] < counts[1]  # as --watch reads it after each step: the second counts both
