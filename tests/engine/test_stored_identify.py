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


@pytest.fixture(scope="module")
def logged_store(tmp_path_factory):
    work = tmp_path_factory.mktemp("identify")
    generate("sao-r7", work / "run", steps=3, batch=8, tokens_per_trajectory=1500, tool_calls_per_trajectory=8,
             log_advantages=True)
    trajlens.ingest([work / "run"], work / "store")
    return work / "store"


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

    def recorded(*args):
        found = kernels(*args)
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
