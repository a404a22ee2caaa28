"""Step-wise recomputation over a real store gives what the whole-run path gives."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import trajlens
from trajlens.estimators import recompute
from trajlens.estimators._compiled import AVAILABLE
from trajlens.run.advantages import read_run
from trajlens.run.stepwise import labelled_diagnostics
from trajlens.estimators import EstimatorChoice
from trajlens.run.stepwise import diagnostics_by_step, recompute_steps

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="the step-wise GAE needs numba")

CHOICES = [
    EstimatorChoice("gae_raw", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": False}),
    EstimatorChoice("gae_whitened", "gae", {"gamma": 0.99, "lam": 0.95, "whiten": True}),
    EstimatorChoice("grpo", "grpo", {}),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A real store: the first 12 steps of the sample r6 run (critic values on every token)."""
    from trajlens.synth import generate

    run = tmp_path_factory.mktemp("run") / "r6"
    generate("sao-r6", run, steps=12, batch=8, tokens_per_trajectory=3000, tool_calls_per_trajectory=6)
    path = tmp_path_factory.mktemp("store") / "store"
    trajlens.ingest([run], path)
    return trajlens.open(path)


def test_diagnostics_equal_the_whole_run_path(store):
    run_id = store.run_ids()[0]
    frames = read_run(store, run_id)
    expected = pl.concat([labelled_diagnostics(store, run_id, c.estimator, c.label, frames=frames, **c.options)
                          for c in CHOICES])
    got = diagnostics_by_step(store, run_id, CHOICES)
    assert got.height == 3 * 12
    assert_frame_equal(got, expected, check_exact=False, rel_tol=1e-5, abs_tol=1e-6)


def test_recomputed_frames_equal_recompute_row_for_row(store, tmp_path):
    run_id = store.run_ids()[0]
    frames = read_run(store, run_id)
    options = {"gamma": 1.0, "lam": 0.95, "whiten": True}
    expected = recompute(frames.trajectories, frames.tokens, "gae", **options)
    got = pl.concat(list(recompute_steps(store, run_id, "gae", **options)))
    assert got.columns == expected.columns
    assert_frame_equal(got.drop("token_advantages", "token_returns"),
                       expected.drop("token_advantages", "token_returns"), check_exact=False, rel_tol=1e-5, abs_tol=1e-6)
    for column in ("token_advantages", "token_returns"):
        a = got[column].explode().to_numpy()
        b = expected[column].explode().to_numpy()
        assert a.shape == b.shape and np.abs(a - b).max() < 1e-5


def test_results_are_written_per_step(store, tmp_path):
    run_id = store.run_ids()[0]
    diagnostics_by_step(store, run_id, CHOICES[:1], steps=[1, 2], out=tmp_path)
    written = sorted(p.name for p in (tmp_path / "gae_raw").iterdir())
    assert written == ["step=000001.parquet", "step=000002.parquet"]
    assert pl.read_parquet(tmp_path / "gae_raw" / written[0])["token_advantages"].dtype == pl.List(pl.Float32)


def test_a_trajectory_without_token_arrays_is_named(store, tmp_path):
    from trajlens.run.stepwise import gae_step, read_step

    run_id = store.run_ids()[0]
    trajectories = pl.from_arrow(read_step(store, run_id, "trajectories", 1)).filter(pl.col("split") == "train")
    tokens = read_step(store, run_id, "tokens", 1).slice(1)
    with pytest.raises(trajlens.estimators.EstimatorInputError, match="has no row in tokens"):
        gae_step(trajectories, tokens)


def test_token_facts_without_a_choice_load_no_torch(store):
    """Reading a run's token facts with no estimator to run (``report_advantages(compute=False)``
    on a run without a saved choice) never loads torch: a fresh interpreter shows it."""
    import subprocess
    import sys

    code = ("import sys, trajlens; from trajlens.run.stepwise import advantage_pass\n"
            "from trajlens.run.choices import FACT_TOKEN_COLUMNS\n"
            f"found = advantage_pass(trajlens.open({str(store.path)!r}), {store.run_ids()[0]!r}, [], "
            "token_columns=FACT_TOKEN_COLUMNS)\n"
            "print(found.token_arrays, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, torch_loaded = done.stdout.split()
    assert int(count) == 12 * 8 and torch_loaded == "False"


def test_estimators_that_read_no_token_array_give_what_each_batch_gives(store, tmp_path):
    """The pass recomputes the estimators of whole responses on the run's trajectories at once
    (those that whiten over model tokens, on the counts it took of the response masks): each
    step's statistics and written frame are the ones that step's batch alone gives."""
    from trajlens.run.batches import step_batches, train_trajectories
    from trajlens.run.stepwise import advantage_pass, batch_choice_diagnostics, choice_token_columns

    run_id = store.run_ids()[0]
    choices = [EstimatorChoice("grpo", "grpo", {}), EstimatorChoice("rloo", "rloo", {}),
               EstimatorChoice("grpo_batch_std", "grpo_batch_std", {}),
               EstimatorChoice("reinforce_plus_plus_baseline", "reinforce_plus_plus_baseline", {}),
               EstimatorChoice("opo", "opo", {})]
    got = advantage_pass(store, run_id, choices, out=tmp_path / "whole", extremes=True)
    trajectories = train_trajectories(store, run_id)
    parts, carry, errors = [], {}, {}
    for batch in step_batches(store, run_id, trajectories, choice_token_columns(choices), max_steps=2):
        parts += batch_choice_diagnostics(run_id, batch.trajectories, batch.tokens, choices, carry=carry,
                                          errors=errors, out=tmp_path / "batched", extremes=True)
    expected = pl.concat(parts).sort("estimator", "step")
    assert not got.errors and not errors
    assert_frame_equal(got.diagnostics.sort("estimator", "step"), expected.select(got.diagnostics.columns))
    for choice in choices:
        written = sorted((tmp_path / "whole" / choice.label).iterdir())
        assert len(written) == 12
        for path in written:
            assert pl.read_parquet(path).equals(pl.read_parquet(tmp_path / "batched" / choice.label / path.name))
