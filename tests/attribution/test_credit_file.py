"""The credit of many small steps: their ``call_credit`` rows written together (a row group of
many steps), their token scans run together, and the same rows as a step at a time gives."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq
from polars.testing import assert_frame_equal

import trajlens
from trajlens.attribution import api

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from built_runs import built_run, degenerate_store  # noqa: E402


def _small_steps_store(store: Path) -> Path:
    """A run of 12 steps of three trajectories (four calls each), written as a store, each
    token's reward drawn at random (so every step's scans differ)."""
    import dataclasses

    import numpy as np
    import pyarrow as pa

    from trajlens.store.writer import StoreWriter

    run = built_run("degenerate", steps=12, per_step=3, calls=4, tokens_per_call=6)
    rng = np.random.default_rng(7)
    rewards = run.tokens.column("token_rewards").combine_chunks()
    drawn = pa.ListArray.from_arrays(rewards.offsets, pa.array(rng.normal(size=len(rewards.values)), pa.float32()))
    run = dataclasses.replace(run, tokens=run.tokens.set_column(
        run.tokens.column_names.index("token_rewards"), "token_rewards", drawn.cast(rewards.type)))
    with StoreWriter(store) as writer:
        with writer.stage("degenerate", run.runs, "generated:small") as stage:
            stage.write_run(run)
        writer.publish()
    return store


def _credit(store_path: Path):
    store = trajlens.open(store_path)
    api.attribute(store, "degenerate")
    files = list((store_path / "derived" / "call_credit").glob("*.parquet"))
    assert len(files) == 1
    return pq.ParquetFile(files[0]).metadata.num_row_groups, store.table("call_credit").collect()


def test_the_credit_of_many_small_steps_is_written_in_row_groups_of_many_steps(tmp_path, monkeypatch):
    grouped_groups, grouped = _credit(degenerate_store(tmp_path / "grouped", 40, chunk=20))
    monkeypatch.setattr(api, "CALL_CREDIT_GROUP_ROWS", 1)  # a row group per step, as each step comes
    step_groups, stepwise = _credit(degenerate_store(tmp_path / "stepwise", 40, chunk=20))
    assert grouped["step"].n_unique() == step_groups == 40
    assert grouped_groups == 1
    assert_frame_equal(grouped, stepwise, check_exact=True)


def test_small_steps_share_their_token_scans_and_get_the_credit_each_gets_alone(tmp_path, monkeypatch):
    """The GAE and returns scans of a window of small steps run at once (``SCAN_WINDOW_TOKENS``),
    each step taking its cut: the credit is the one each step's own scan gives, bit for bit."""
    _, together = _credit(_small_steps_store(tmp_path / "together"))
    monkeypatch.setattr(api, "SCAN_WINDOW_TOKENS", 0)  # a window holds one step: each scans alone
    _, alone = _credit(_small_steps_store(tmp_path / "alone"))
    labels = set(together["estimator"])
    assert {"gae_raw", "gae_whitened"} <= labels and labels & {"reinforce", "reinforce_pp"}, labels
    assert together["advantage"].n_unique() > 2
    assert_frame_equal(together, alone, check_exact=True)
