"""`trajlens advantages --identify` on a stored run whose trainer logged its per-token advantages
(``trajlens synth --log-advantages``): the flat step kernels the run layer shares with attribution
give what the estimators' frames give, and name the estimator the run's config trained with."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from cli_run import run_cli

import trajlens
from trajlens.estimators.identify import identify_batches
from trajlens.run.identify import identify_run
from trajlens.run.batches import train_trajectories
from trajlens.run.facts import stored_facts
from trajlens.run.reader import RunReader
from trajlens.synth import generate


def _logged_store(work, scenario: str, batch: int, tokens: int, calls: int):
    """A store of a 3-step ``scenario`` run whose trainer logged its per-token advantages."""
    generate(scenario, work / "run", steps=3, batch=batch, tokens_per_trajectory=tokens,
             tool_calls_per_trajectory=calls, log_advantages=True)
    trajlens.ingest([work / "run"], work / "store")
    return work / "store"


@pytest.fixture(scope="module")
def logged_store(tmp_path_factory):
    return _logged_store(tmp_path_factory.mktemp("identify"), "sao-r7", batch=8, tokens=1500, calls=8)


def test_the_synthetic_trainer_logs_the_advantages_it_trained_with(logged_store, tmp_path):
    out = tmp_path / "verdict.json"
    result = run_cli("advantages", logged_store, "--run", "sao-r7", "--identify", "--json", out)
    assert result.returncode == 0, result.stderr
    verdict = json.loads(out.read_text())
    assert verdict["matched"] and verdict["best"]["label"] == "gae_whitened"  # the scenario's config: whitened GAE
    assert verdict["unit"] == "model tokens" and verdict["best"]["max_abs_diff"] < 1e-6


def test_flat_kernels_give_the_frames_fits(logged_store, monkeypatch):
    import trajlens.estimators.identify as identify
    import trajlens.run.step_advantages as step_advantages

    monkeypatch.setattr(identify, "EXACT_MEDIAN_VALUES", 10)  # the histogram's median too
    kernels = step_advantages.flat_step_advantages
    on_flat: set[str] = set()

    def recorded(*args, **options):
        found = kernels(*args, **options)
        on_flat.update(found)
        return found

    monkeypatch.setattr(step_advantages, "flat_step_advantages", recorded)
    store = trajlens.open(logged_store)
    flat = identify_run(store, "sao-r7")
    assert on_flat == {"gae_whitened", "gae_raw", "reinforce_raw", "verl_reinforce_pp", "verl_0.8_reinforce_pp"}
    trajectories = train_trajectories(store, "sao-r7")
    tokens = store.tokens.filter(pl.col("run_id") == "sao-r7").collect()
    facts = stored_facts(RunReader.of(store, "sao-r7"), trajectories, None, store).facts
    steps = [(part, tokens.filter(pl.col("step") == part["step"][0]))
             for part in trajectories.partition_by("step", maintain_order=True)]
    framed = identify_batches(steps, facts=facts)
    assert [f.candidate.label for f in flat.candidates] == [f.candidate.label for f in framed.candidates]
    for a, b in zip(flat.candidates, framed.candidates):
        assert (a.n, a.error) == (b.n, b.error), a.candidate.label
        if math.isfinite(b.max_abs_diff):  # float32 whitening statistics: a few ulp of the advantages
            assert abs(a.max_abs_diff - b.max_abs_diff) <= 1e-6 * max(1.0, b.max_abs_diff), a.candidate.label
    assert flat.best.candidate.label == framed.best.candidate.label == "gae_whitened"
    assert flat.best.median_abs_diff == 0.0  # the bin of exact zeros is zero, not its midpoint


@pytest.fixture(scope="module")
def outcome_store(tmp_path_factory):
    return _logged_store(tmp_path_factory.mktemp("identify-outcome"), "multireward", batch=16, tokens=600, calls=4)


@pytest.mark.parametrize("exact", [True, False])
def test_runs_of_equal_logged_values_give_what_each_value_gives(outcome_store, monkeypatch, exact):
    """An outcome estimator logs one value over a trajectory's tokens: the comparison takes each
    run of equal values once, weighted by its length, and finds every fit the values give."""
    import trajlens.estimators.identify as identify

    if not exact:
        monkeypatch.setattr(identify, "EXACT_MEDIAN_VALUES", 10)  # the histogram's median, weighted
    store = trajlens.open(outcome_store)
    runs_seen: list[int] = []
    runs = identify._Logged.runs.func

    def recorded(self):
        found = runs(self)
        runs_seen.append(0 if found is None else found.values.size)
        return found

    monkeypatch.setattr(identify._Logged, "runs", property(recorded))
    by_runs = identify_run(store, "multireward")
    assert runs_seen and all(0 < n <= 16 for n in runs_seen)  # one run per trajectory of a step
    monkeypatch.setattr(identify._Logged, "runs", property(lambda self: None))
    by_values = identify_run(store, "multireward")
    assert by_runs.matched and by_runs.unit == "model tokens"
    for a, b in zip(by_runs.candidates, by_values.candidates):
        assert a.candidate.label == b.candidate.label
        assert (a.max_abs_diff, a.median_abs_diff, a.n, a.error) == (b.max_abs_diff, b.median_abs_diff, b.n, b.error)
        assert (a.worst_step, a.worst_group, a.worst_trajectory) == (b.worst_step, b.worst_group, b.worst_trajectory)
    assert by_runs.steps.equals(by_values.steps) and by_runs.departures.equals(by_values.departures)


def test_candidates_recomputed_on_the_whole_run_give_each_batchs_fits(outcome_store):
    """The candidates that read no token array are recomputed once on the run's trajectories
    (``run=``); each batch takes its rows, and every fit is the one batch-by-batch recomputation gives."""
    from trajlens.run.identify import by_step

    store = trajlens.open(outcome_store)
    trajectories = train_trajectories(store, "multireward")
    tokens = store.tokens.filter(pl.col("run_id") == "multireward").collect()
    facts = stored_facts(RunReader.of(store, "multireward"), trajectories, None, store).facts
    whole = identify_batches(by_step(trajectories, tokens), facts=facts, run=trajectories)
    batched = identify_batches(by_step(trajectories, tokens), facts=facts)
    assert whole.best.candidate.label == batched.best.candidate.label and whole.matched
    compared = [f for f in whole.candidates if f.error is None]
    assert len(compared) > 10  # the outcome and channel candidates, among others
    for a, b in zip(whole.candidates, batched.candidates):
        assert a.candidate.label == b.candidate.label
        assert (a.max_abs_diff, a.median_abs_diff, a.n, a.error) == (b.max_abs_diff, b.median_abs_diff, b.n, b.error)
        assert (a.worst_step, a.worst_group, a.worst_trajectory) == (b.worst_step, b.worst_group, b.worst_trajectory)
    assert whole.steps.equals(batched.steps)
