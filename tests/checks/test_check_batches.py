"""A run is checked a batch of steps at a time, with the results of reading it whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from trajlens.checks import default_checks
from trajlens.checks.data import Needs, RunState, open_batches, open_source
from trajlens.checks.evaluate import check_run, evaluate_checks

SAMPLES = Path(__file__).resolve().parents[2] / "sample_data"


def _summary(results) -> list[tuple]:
    return [(r.name, r.status, tuple(r.fired_steps), r.reason) for r in results]


@pytest.mark.slow
@pytest.mark.parametrize("stored", [True, False], ids=["store", "run-directory"])
def test_batches_give_the_results_of_the_whole_run(samples_store_path, stored):
    if stored:
        source, run_id = samples_store_path, "sao-r6"
    else:
        source, run_id = SAMPLES / "sao-r6", None
    checks = tuple(default_checks())
    needs = Needs.of(checks)
    _, batches = open_batches(source, run_id, needs)
    sizes = [batch.trajectories.height for batch in batches]
    assert sizes[0] == 0 and len(sizes) >= 3 and sum(sizes) == 1_350  # metrics first, then two of steps

    info, whole = open_source(source, run_id)
    state = RunState(info, needs)
    state.add(whole)
    expected = evaluate_checks(checks, state)
    found = check_run(source, checks, run_id=run_id).results
    assert _summary(found) == _summary(expected)
    assert any(r.status in ("fail", "warn") for r in found)


def test_statistics_are_kept_per_measure_in_step_order(samples_store_path):
    checks = tuple(default_checks())
    needs = Needs.of(checks)
    info, batches = open_batches(samples_store_path, "sao-r6", needs)
    state = RunState(info, needs)
    for batch in reversed(list(batches)):  # later steps first: the series still come in step order
        state.add(batch)
    series = state.series("share:think")
    assert series["measure"].unique().to_list() == ["share:think"]
    assert series["step"].is_sorted() and series["step"].n_unique() == series.height == len(state.steps)
    assert state.stats.filter(state.stats["measure"] == "share:think").equals(series)
    assert state.series("no such measure").is_empty()
