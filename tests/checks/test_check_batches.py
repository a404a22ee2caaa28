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


def test_each_batch_s_token_arrays_are_read_ahead_while_the_one_before_is_checked(samples_store_path, monkeypatch):
    import threading

    import trajlens.checks.data as data
    import trajlens.run.batches as batches

    direct, threads = data._read_tokens, []

    def recorded(partitions, steps, columns):
        threads.append((tuple(steps), threading.current_thread().name))
        return direct(partitions, steps, columns)

    plan = batches.plan_batches
    monkeypatch.setattr(batches, "plan_batches", lambda trajectories, **kw: plan(trajectories, max_steps=2))
    monkeypatch.setattr(data, "_read_tokens", recorded)
    needs = Needs.of(default_checks())
    _, steps = open_batches(samples_store_path, "sao-r6", needs)
    columns = ("trajectory_id", "step", "response_mask")
    read = [(batch.steps, batch.token_rows(columns)) for batch in steps if batch.trajectories.height]
    assert len(read) >= 3
    for batch_steps, tokens in read:  # each batch got its own steps' rows, whichever thread read them
        assert tokens.height and set(tokens["step"].unique().to_list()) <= set(batch_steps)
    by_batch = dict(threads)
    assert sorted(by_batch) == sorted(tuple(batch_steps) for batch_steps, _ in read) and len(threads) == len(read)
    first = tuple(read[0][0])
    assert by_batch.pop(first) == "MainThread"  # the first batch is read when asked; each later one ahead of it
    assert all(name.startswith("trajlens-read") for name in by_batch.values())


def test_check_reads_each_batch_s_token_columns_once_and_every_batch_after_the_first_ahead(samples_store_path,
                                                                                            monkeypatch):
    """The checks ask a batch for its logged column, then for the arrays they recompute from:
    each ask is read of the next batch ahead, so no batch is read twice or on the spot."""
    import threading

    import trajlens.checks.data as data
    import trajlens.run.batches as batches

    direct, reads = data._read_tokens, []

    def recorded(partitions, steps, columns):
        reads.append((tuple(steps), tuple(columns or ()), threading.current_thread().name))
        return direct(partitions, steps, columns)

    plan = batches.plan_batches
    monkeypatch.setattr(batches, "plan_batches", lambda trajectories, **kw: plan(trajectories, max_steps=40))
    monkeypatch.setattr(data, "_read_tokens", recorded)
    check_run(samples_store_path, run_id="sao-r6")
    first = min(steps for steps, _, _ in reads)
    asks = {columns for _, columns, _ in reads}
    assert len({steps for steps, _, _ in reads}) >= 3 and ("logged_advantages",) in asks and len(asks) == 2
    assert len(reads) == len(set(reads)) == 2 * len({steps for steps, _, _ in reads})  # each ask once a batch
    assert all(name.startswith("trajlens-read") for steps, _, name in reads if steps != first)


@pytest.mark.parametrize("stored", [True, False], ids=["store", "run-directory"])
def test_the_calls_of_small_batches_are_classified_together_with_the_statistics_of_one_at_a_time(
        samples_store_path, stored, monkeypatch):
    import polars as pl
    from polars.testing import assert_frame_equal

    import trajlens.checks.data as data
    import trajlens.classify as classify

    source, run_id = (samples_store_path, "sao-r6") if stored else (SAMPLES / "sao-r6", None)
    checks = tuple(c for c in default_checks() if c.measure.startswith(("share:", "verification:")))
    needs = Needs.of(checks)
    classified: list[int] = []
    original, held = classify.classify_calls, data.CLASSIFY_CALLS

    def counted(calls, *args, **kwargs):
        classified.append(calls.height)
        return original(calls, *args, **kwargs)

    monkeypatch.setattr(classify, "classify_calls", counted)

    def stats(calls: int) -> pl.DataFrame:
        monkeypatch.setattr(data, "CLASSIFY_CALLS", calls)
        classified.clear()
        info, batches = open_batches(source, run_id, needs)
        state = RunState(info, needs)
        for batch in batches:
            state.add(batch)
        return state.stats

    one_at_a_time = stats(1)
    per_batch = list(classified)
    together = stats(held)
    assert len(per_batch) >= 2 and classified == [sum(per_batch)]  # every call, in one classification
    assert one_at_a_time.filter(pl.col("measure") == "share:think").height == 135  # every step of the run
    assert_frame_equal(together, one_at_a_time, check_exact=True)
