"""The checks take what the report has already computed (classified calls, advantage
diagnostics) instead of computing it again, with the same statistics."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
from polars.testing import assert_frame_equal

from trajlens.store import open_store
from trajlens.checks import default_checks
from trajlens.checks.data import Needs, Precomputed, RunState, open_batches, open_source
from trajlens.classify import classify_calls, trajectory_measures
from trajlens.run.choices import report_advantages

RUN = "sao-r7"


def _stats(store_path, precomputed: Precomputed | None) -> tuple[pl.DataFrame, Needs]:
    needs = Needs.of(default_checks())
    if precomputed is not None:
        needs = replace(needs, classified=True)
    info, batches = open_batches(store_path, RUN, needs)
    state = RunState(info, needs, precomputed)
    for batch in batches:
        state.add(batch)
    return state.stats, needs


def _report_parts(store_path) -> tuple[pl.DataFrame, pl.DataFrame, tuple]:
    _, whole = open_source(store_path, RUN)
    measures = trajectory_measures(classify_calls(whole.tool_calls), whole.trajectories)
    advantages = report_advantages(open_store(store_path), RUN, extremes=True)
    assert advantages.extremes is not None and advantages.choices
    assert "min" not in advantages.diagnostics.columns  # the report's own table keeps its columns
    diagnostics = advantages.diagnostics.join(advantages.extremes, on=["estimator", "step"])
    return measures, diagnostics, tuple(advantages.choices)


def test_handed_over_measures_and_advantages_give_the_same_statistics(samples_store_path):
    computed, _ = _stats(samples_store_path, None)
    measures, diagnostics, choices = _report_parts(samples_store_path)
    handed, needs = _stats(samples_store_path, Precomputed(measures, diagnostics, choices))
    assert "tool_calls" not in needs.tables  # the calls are neither read nor classified again
    assert computed.filter(pl.col("measure").str.starts_with("advantage:run:")).height > 0
    assert computed.filter(pl.col("measure") == "share:think").height > 0
    assert_frame_equal(handed, computed)


def test_handed_over_advantages_are_taken_not_recomputed(samples_store_path):
    measures, diagnostics, choices = _report_parts(samples_store_path)
    doubled = diagnostics.with_columns(pl.col("std") * 2)
    handed, _ = _stats(samples_store_path, Precomputed(measures, doubled, choices))
    computed, _ = _stats(samples_store_path, None)
    std = pl.col("measure").str.starts_with("advantage:") & pl.col("measure").str.ends_with(":std")
    assert handed.filter(std).height > 0
    ratio = handed.filter(std).join(computed.filter(std), on=["measure", "step"]).select(pl.col("x") / pl.col("x_right"))
    assert ratio.to_series().to_list() == [2.0] * ratio.height


def _tree(folder) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_check_on_a_classified_store_takes_its_saved_classification_and_writes_nothing(samples_store_copy):
    from trajlens.checks.evaluate import _saved_measures, check_run
    from trajlens.engine.classify import classify_run
    from trajlens.run.measures import saved_measures

    before = check_run(samples_store_copy, run_id=RUN)
    assert _saved_measures(samples_store_copy, RUN) is None  # nothing saved yet: the checks classify
    classified = classify_run(open_store(samples_store_copy), RUN).measures
    saved = saved_measures(samples_store_copy, RUN)
    assert saved is not None
    assert_frame_equal(saved, classified)
    assert_frame_equal(saved_measures(open_store(samples_store_copy), RUN), saved)  # the handle reads the same
    # a saved classification that says every call is a think call: the check must read it
    thinking = saved.with_columns(pl.col("n_calls").cast(saved.schema["count_think"]).alias("count_think"))
    part = samples_store_copy / "derived" / "trajectory_measures" / f"{RUN}.parquet"
    thinking.write_parquet(part)
    untouched = _tree(samples_store_copy)
    after = check_run(samples_store_copy, run_id=RUN)
    assert _tree(samples_store_copy) == untouched  # reading the saved table opened nothing for writing
    think = {r.name: r for r in after.results}["think_share"]
    assert think.status == "fail" and {r.name: r for r in before.results}["think_share"].status != "fail"
