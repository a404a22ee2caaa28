"""A run whose config names no estimator: the report, attribution and the checks name one estimator,
identified on one piece of evidence (the first training step's logged advantages), and a change of
convention later in the run is where ``logged_advantages_match`` fails, whatever the batches."""

from __future__ import annotations

import functools

import polars as pl
import pytest
from logged_runs import write_logged_run

import trajlens
import trajlens.run.batches as batches

TRL_GROUP = {"epsilon": 1e-4, "singleton": "zero", "convention": "trl"}
"""TRL's GRPO with scale_rewards="group" (the candidate ``trl_grpo_group``), which attribution's
default recomputations do not hold under that label."""
SWITCH = 4
"""From this step on, the logged advantages are Dr.GRPO's."""


def _switching_run(directory, variant: str = "switch"):
    """Six steps of four groups of four; each trajectory logs TRL GRPO's advantage before step
    ``SWITCH`` and Dr.GRPO's from it, under a config that names no estimator. ``variant``
    ``zero_first``: every reward of step 1 is 0 (every candidate gives 0 there) and every step
    logs Dr.GRPO's; ``none_first``: step 1 logs none and every later step TRL GRPO's."""
    from trajlens.estimators import recompute

    rows = pl.DataFrame([{"run_id": "switch", "step": step, "trajectory_id": f"{step}-{group}-{member}",
                          "group_id": f"{step}:{group}",
                          "reward": 0.0 if variant == "zero_first" and step == 1 else float((step + 3 * group + member * member) % 5)}
                         for step in range(1, 7) for group in range(4) for member in range(4)])
    trl = dict(recompute(rows, None, "grpo", **TRL_GROUP).select("trajectory_id", "advantage").iter_rows())
    dr = dict(recompute(rows, None, "dr_grpo").select("trajectory_id", "advantage").iter_rows())
    def logged_of(trajectory: str, step: int) -> float | None:
        if variant == "zero_first":
            return dr[trajectory]
        if variant == "none_first":
            return None if step == 1 else trl[trajectory]
        return (trl if step < SWITCH else dr)[trajectory]

    logged = {t: logged_of(t, step) for t, step in rows.select("trajectory_id", "step").iter_rows()}
    return write_logged_run(directory, "switch", rows.iter_rows(named=True), logged, {})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from trajlens.report import classify_store

    work = tmp_path_factory.mktemp("switch")
    trajlens.ingest([_switching_run(work / "switch")], store=work / "store")
    store = trajlens.open(work / "store")
    classify_store(store)
    return store


def _results(store, run_id: str = "switch"):
    from trajlens.checks import check_run
    from trajlens.checks.spec import parse_checks

    checks = parse_checks({"checks": {
        "logged_advantages_match": {"measure": "logged_advantage_diff:auto", "condition": "threshold", "above": 1e-5},
        "run_mean": {"measure": "advantage:run:mean", "condition": "threshold", "above": 10}}}, "checks.toml")
    return {result.check.name: result for result in check_run(store.path, checks, run_id).results}


def test_report_attribution_and_checks_name_the_estimator_of_the_first_training_step(store, tmp_path):
    from trajlens.attribution import attribute
    from trajlens.report import report_store
    from trajlens.run.trained import run_trained_with

    trained = run_trained_with(store, "switch")
    assert trained.source == "identified" and trained.label == "trl_grpo_group"
    report_store(store, tmp_path / "report", viewers_per_run=0)
    assert f"identified from its logged advantages: {trained.evidence}" in \
        (tmp_path / "report" / "switch" / "stage_report.md").read_text()
    attributed = attribute(store, "switch")
    assert attributed.own.label == "trl_grpo_group"  # recomputed though no default recomputation has its label
    assert not any("not known" in note for note in attributed.notes)
    run_mean = _results(store)["run_mean"]
    assert run_mean.reason == f"the run's estimator is trl_grpo_group (identified from its logged advantages: " \
                              f"{trained.evidence})"


@pytest.mark.parametrize("steps_a_batch", [None, 1])
def test_logged_advantages_fail_where_their_convention_leaves_the_run_s_estimator(store, steps_a_batch, monkeypatch):
    if steps_a_batch is not None:  # every step its own batch: the first batch holds the first step alone
        monkeypatch.setattr(batches, "plan_batches", functools.partial(batches.plan_batches, max_steps=steps_a_batch))
    result = _results(store)["logged_advantages_match"]
    assert result.status == "fail"
    assert min(result.fired_steps) == SWITCH


@pytest.mark.parametrize("variant, estimator", [("zero_first", "dr_grpo"), ("none_first", "grpo")])
def test_a_first_step_that_tells_nothing_is_passed_over_on_every_surface(tmp_path, variant, estimator):
    """A first training step whose advantages every candidate gives (all 0) or that logs none
    decides nothing: the next step names the estimator, the same for the report, attribution and
    the checks (on the run directory, and on the store)."""
    from trajlens.attribution import attribute
    from trajlens.report import classify_store
    from trajlens.run.trained import run_trained_with

    run_dir = _switching_run(tmp_path / variant, variant)
    trajlens.ingest([run_dir], store=tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    classify_store(store)
    trained = run_trained_with(store, "switch")
    assert trained.source == "identified" and trained.estimator == estimator
    if variant == "none_first":
        assert trained.label == "trl_grpo_group"
    attributed = attribute(store, "switch")
    assert attributed.own.label is not None and not any("not known" in note for note in attributed.notes)
    assert any(f"is identified from its logged advantages ({trained.evidence})" in note for note in attributed.notes)
    from trajlens.checks import check_run
    from trajlens.checks.spec import parse_checks

    checks = parse_checks({"checks": {"run_mean": {"measure": "advantage:run:mean", "condition": "threshold",
                                                   "above": 10}}}, "checks.toml")
    for source, run_id in ((run_dir, None), (store.path, "switch")):
        (result,) = check_run(source, checks, run_id).results
        assert result.status == "pass"
        assert result.reason.endswith(f"(identified from its logged advantages: {trained.evidence})"), result.reason
