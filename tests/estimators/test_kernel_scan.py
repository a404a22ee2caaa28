"""The scan kernels behind GAE and returns: compiled and torch paths, ragged rows, threading."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch
from trajlens.estimators.reference.verl import gae_loop, returns_loop
from torch.testing import assert_close

from trajlens.estimators import EstimatorInputError, discounted_returns, gae
from trajlens.estimators import _arrays, _compiled, _scan

needs_numba = pytest.mark.skipif(not _compiled.AVAILABLE, reason="numba is not installed")


def batch(rows: int, length: int, seed: int, observed: float = 0.3, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(rows, length, generator=generator) >= observed
    mask[:, 0] = True  # every row has a model token
    rewards = torch.randn(rows, length, generator=generator, dtype=dtype)
    values = torch.randn(rows, length, generator=generator, dtype=dtype)
    return rewards, values, mask


@pytest.fixture(params=["compiled", "torch"])
def kernel(request, monkeypatch):
    """Run the test once on each CPU kernel."""
    if request.param == "compiled" and not _compiled.AVAILABLE:
        pytest.skip("numba is not installed")
    monkeypatch.setenv("TRAJLENS_SCAN_KERNEL", "" if request.param == "compiled" else "torch")
    return request.param


@pytest.mark.parametrize(("rows", "length", "gamma", "lam"), [(3, 1, 1.0, 1.0), (5, 97, 0.99, 0.95), (4, 2500, 1.0, 0.9),
                                                              (2, 300, 0.5, 0.0), (7, 64, 0.0, 1.0)])
def test_each_kernel_equals_verls_loop(kernel, rows, length, gamma, lam):
    rewards, values, mask = batch(rows, length, seed=rows * length)
    assert _scan.use_compiled(rewards) == (kernel == "compiled")
    result = gae(rewards, values, mask, gamma, lam)
    expected_advantages, expected_returns = gae_loop(rewards, values, mask, gamma, lam)
    assert_close(result.advantages, expected_advantages, rtol=1e-10, atol=1e-10)
    assert_close(result.returns, expected_returns, rtol=1e-10, atol=1e-10)
    assert_close(discounted_returns(rewards, mask, gamma), returns_loop(rewards, mask, gamma), rtol=1e-10, atol=1e-10)


def test_the_two_kernels_agree_in_float32(monkeypatch):
    rewards, values, mask = batch(16, 4000, seed=3, dtype=torch.float32)
    fast = gae(rewards, values, mask, 1.0, 0.95)
    monkeypatch.setenv("TRAJLENS_SCAN_KERNEL", "torch")
    blocked = gae(rewards, values, mask, 1.0, 0.95)
    assert fast.advantages.dtype == torch.float32
    assert_close(fast.advantages, blocked.advantages, rtol=0, atol=1e-5)
    assert_close(fast.returns, blocked.returns, rtol=0, atol=1e-5)


def test_many_chunks_on_many_workers_give_the_same_result(kernel, monkeypatch):
    rewards, values, mask = batch(37, 300, seed=11)
    whole = gae(rewards, values, mask, 1.0, 0.9)
    monkeypatch.setattr(_scan, "CHUNK_TOKENS", 600)  # two rows a chunk: 19 chunks
    monkeypatch.setattr(_scan, "worker_count", lambda: 3)
    monkeypatch.setattr(_scan, "idle_cpus", lambda: 3)
    chunked = gae(rewards, values, mask, 1.0, 0.9)
    # the compiled loop is row by row, so bit-identical; the blocked scan's padding follows the chunk
    tolerance = {"rtol": 0, "atol": 0} if kernel == "compiled" else {"rtol": 1e-12, "atol": 1e-12}
    assert_close(whole.advantages, chunked.advantages, **tolerance)
    assert_close(whole.returns, chunked.returns, **tolerance)


def test_row_spans_cover_every_row_once():
    offsets = np.array([0, 5, 5, 40, 41, 90, 200])
    spans = _scan.row_spans(offsets, tokens=30)
    assert spans[0][0] == 0 and spans[-1][1] == 6
    assert all(a[1] == b[0] and a[1] > a[0] for a, b in zip(spans, spans[1:]))


def test_a_row_without_model_tokens_is_named(kernel):
    rewards, values, mask = batch(4, 50, seed=1)
    mask[2] = False
    with pytest.raises(EstimatorInputError, match="response_mask"):
        gae(rewards, values, mask, 1.0, 1.0)


def test_a_non_finite_value_at_a_model_token_is_named(kernel):
    rewards, values, mask = batch(3, 40, seed=2)
    values[1, 0] = float("nan")
    with pytest.raises(EstimatorInputError, match="values"):
        gae(rewards, values, mask, 1.0, 1.0)


def test_a_non_finite_value_at_an_observation_token_is_ignored(kernel):
    rewards, values, mask = batch(3, 40, seed=2)
    mask[1, 5] = False
    values[1, 5] = float("inf")
    assert torch.isfinite(gae(rewards, values, mask, 1.0, 0.95).advantages).all()


@needs_numba
def test_ragged_rows_equal_the_padded_batch():
    lengths = [7, 1, 120, 33]
    rewards, values, mask = batch(len(lengths), max(lengths), seed=5)
    padded = gae(rewards, values, mask, 0.99, 0.95)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    pick = lambda x: np.concatenate([x[i, :n].numpy() for i, n in enumerate(lengths)])  # noqa: E731
    flat = _scan.flat_masked_scan(pick(rewards), pick(values), pick(mask), offsets, 0.99, 0.99 * 0.95)
    # a row cut short ends where its tokens end: compare with GAE of each row on its own
    for i, n in enumerate(lengths):
        alone = gae(rewards[i : i + 1, :n], values[i : i + 1, :n], mask[i : i + 1, :n], 0.99, 0.95)
        assert_close(torch.from_numpy(flat.scanned[offsets[i] : offsets[i + 1]]), alone.advantages[0])
        assert_close(torch.from_numpy(flat.plus_values[offsets[i] : offsets[i + 1]]), alone.returns[0])
    full = _scan.flat_masked_scan(rewards.reshape(-1).numpy(), values.reshape(-1).numpy(), mask.reshape(-1).numpy(),
                                  np.arange(5, dtype=np.int64) * max(lengths), 0.99, 0.99 * 0.95)
    assert_close(torch.from_numpy(full.scanned).reshape(padded.advantages.shape), padded.advantages)


def test_arrow_lists_round_trip_through_flat_buffers():
    column = pa.array([[1.0, 2.0], None, [], [3.0, None, 5.0], [6.0]], type=pa.list_(pa.float32())).slice(1)
    flat = _arrays.flat_list(column, np.float32, fill=0.0)
    assert flat.offsets.tolist() == [0, 0, 0, 3, 4]
    assert flat.values.tolist() == [3.0, 0.0, 5.0, 6.0]
    assert flat.present.tolist() == [False, True, True, True]
    back = _arrays.list_array(flat.values, flat.offsets)
    assert back.to_pylist() == [[], [], [3.0, 0.0, 5.0], [6.0]]
    mask = _arrays.flat_list(pa.array([[True, False], [True]], type=pa.list_(pa.bool_())), np.bool_)
    assert mask.values.dtype == np.bool_ and mask.values.tolist() == [True, False, True]


@needs_numba
def test_moments_match_advantage_stats():
    from trajlens.estimators import advantage_stats
    from trajlens.run.stepwise import model_token_stats, step_moments

    generator = np.random.default_rng(0)
    values = generator.normal(0.3, 2.0, 5000).astype(np.float32)
    mask = generator.random(5000) > 0.3
    expected = advantage_stats(torch.from_numpy(values[mask].astype(np.float64)))
    got = model_token_stats(step_moments(values, mask), whitened=False)
    for name in ("count", "mean", "std", "skew", "kurtosis", "bimodality", "positive_share", "all_negative"):
        assert getattr(got, name) == pytest.approx(getattr(expected, name), rel=1e-9, abs=1e-12), name


@needs_numba
@pytest.mark.parametrize("whitened", [False, True])
def test_a_step_without_model_tokens_is_neither_all_negative_nor_all_positive(whitened):
    # as attribution's step flags read it: no token, no sign
    from trajlens.run.stepwise import model_token_stats, step_moments

    got = model_token_stats(step_moments(np.ones(4, dtype=np.float32), np.zeros(4, dtype=bool)), whitened=whitened)
    assert got.count == 0 and not got.all_negative and not got.all_positive


@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 1.0), (0.0, 1.0), (1.0, 0.0), (0.0, 0.0)])
@pytest.mark.parametrize("position", [0, 17, 38, 39])
def test_a_non_finite_reward_anywhere_in_a_row_is_named_whatever_the_discount(kernel, gamma, lam, position):
    # the compiled kernel finds it at the row's first token: every earlier advantage must be non-finite
    rewards, values, mask = batch(3, 40, seed=4)
    mask[1, position] = True
    rewards[1, position] = float("inf")
    with pytest.raises(EstimatorInputError, match="token_rewards"):
        gae(rewards, values, mask, gamma, lam)
    with pytest.raises(EstimatorInputError, match="token_rewards"):
        discounted_returns(rewards, mask, gamma)


@pytest.mark.parametrize("length", [1, 2, 3, 64, 65])
def test_two_tokens_a_step_equals_the_loop_on_every_mask_pattern(kernel, length):
    # every pair of (model, observation) neighbours, odd and even row lengths, in float64
    rewards, values, mask = batch(8, length, seed=length, observed=0.5)
    for lam in (0.95, 1.0):
        result = gae(rewards, values, mask, 0.99, lam)
        expected_advantages, expected_returns = gae_loop(rewards, values, mask, 0.99, lam)
        assert_close(result.advantages, expected_advantages, rtol=1e-12, atol=1e-12)
        assert_close(result.returns, expected_returns, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("runnable", "expected"), [(1, 4), (2, 3), (4, 1), (9, 1)])
def test_workers_are_the_cpus_other_tasks_leave_idle(tmp_path, monkeypatch, runnable, expected):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"0.50 0.40 0.30 {runnable}/512 4242\n")
    monkeypatch.setattr(_scan, "usable_cpus", lambda: 4)
    assert _scan.idle_cpus(loadavg) == expected
    assert _scan.idle_cpus(tmp_path / "missing") == 4  # not Linux: every usable CPU


def test_a_busy_machine_runs_the_chunks_in_the_calling_thread(monkeypatch):
    import threading

    monkeypatch.setattr(_scan, "worker_count", lambda: 4)
    threads = set()

    def work(span):
        threads.add(threading.current_thread().name)
        return span

    monkeypatch.setattr(_scan, "idle_cpus", lambda: 1)
    assert _scan._run_single_threaded(work, list(range(8))) == list(range(8))
    assert threads == {threading.current_thread().name}
    threads.clear()
    monkeypatch.setattr(_scan, "idle_cpus", lambda: 4)
    assert _scan._run_single_threaded(work, list(range(64))) == list(range(64))
    assert threads and all(name.startswith("trajlens-scan") for name in threads)


def test_small_batches_get_one_intra_op_thread_whatever_the_load(monkeypatch):
    previous = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        for idle in (4, 1):  # the load never changes the choice: sums would change with it
            monkeypatch.setattr(_scan, "idle_cpus", lambda idle=idle: idle)
            with _scan.intra_op_threads_for(1000):  # no parallel op pays for its barrier here
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 4
            with _scan.intra_op_threads_for(2 * _scan.CHUNK_TOKENS - 1):
                assert torch.get_num_threads() == 1
            with _scan.intra_op_threads_for(2 * _scan.CHUNK_TOKENS):  # large: torch's own setting
                assert torch.get_num_threads() == 4
            assert torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(previous)


def test_recompute_runs_a_small_step_on_one_intra_op_thread(monkeypatch):
    import polars as pl

    from trajlens.estimators import adapters

    threads = []
    outcome = adapters.ADAPTERS["outcome"]

    def observed(call, batch):
        threads.append(torch.get_num_threads())
        return outcome(call, batch)

    monkeypatch.setitem(adapters.ADAPTERS, "outcome", observed)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        trajectories = pl.DataFrame({
            "run_id": "r", "step": [0, 0, 1, 1], "trajectory_id": ["a", "b", "c", "d"], "group_id": "g",
            "reward": [1.0, 0.0, 0.5, 0.25],
        })
        result = adapters.recompute(trajectories, estimator="grpo")
        assert threads == [1, 1]  # one intra-op thread in each step
        assert torch.get_num_threads() == 2  # restored after the call
        assert result["advantage"].to_list() == pytest.approx([0.7071068, -0.7071068, 0.7071068, -0.7071068], abs=1e-5)
    finally:
        torch.set_num_threads(previous)
