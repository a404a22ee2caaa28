"""Call credit on hand-derived steps: the token rule, the push under each aggregation, the fallback."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import torch

from trajlens.attribution._spans import credited_spans, span_sums
from trajlens.attribution.calls import step_call_credit

MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def _step():
    # Trajectory a: 3 reasoning + 2 call tokens, 2 observation, 1 call token (8 tokens, 6 model).
    # Trajectory b: 1 call token, 1 observation, 2 call tokens (4 tokens, 3 model).
    trajectories = pl.DataFrame({"trajectory_id": ["a", "b"], "model_tokens": [6, 3], "reward": [1.0, 0.0]})
    tokens = pl.DataFrame({"trajectory_id": ["a", "b"],
                           "response_mask": [[True] * 5 + [False, False, True], [True, False, True, True]]})
    calls = pl.DataFrame({"trajectory_id": ["a", "a", "b", "b"], "call_index": [0, 1, 0, 1], "turn": [0, 1, 0, 1],
                          "token_end": [5, 8, 1, 4]})
    token_advantages = pl.DataFrame({
        "trajectory_id": ["a", "b"],
        "token_advantages": [[1.0, 1.0, 1.0, 2.0, 2.0, 9.0, 9.0, 4.0], [-1.0, 9.0, -2.0, -2.0]],
    })
    outcome = pl.DataFrame({"trajectory_id": ["a", "b"], "advantage": [0.5, -0.5]})
    return trajectories, calls, tokens, [token_advantages, outcome]


def test_token_rule_and_push_by_hand():
    trajectories, calls, tokens, advantages = _step()
    credit = step_call_credit(trajectories, calls, tokens, advantages, MODES)
    # Call a0 owns tokens 0-4 (sum 7, 5 tokens); a1 owns 5-7 whose only model token is 7 (sum 4).
    # b0 owns token 0 (sum -1); b1 owns 1-3, model tokens 2-3 (sum -4).
    np.testing.assert_array_equal(credit.tokens, [5, 1, 1, 2])
    np.testing.assert_array_equal(credit.token_start, [0, 5, 0, 1])
    np.testing.assert_array_equal(credit.token_end, [5, 8, 1, 4])
    sums = np.array([7.0, 4.0, -1.0, -4.0])
    np.testing.assert_allclose(credit.advantage[0], sums / [5, 1, 1, 2])
    token_mean, seq_mean, seq_sum, sum_norm = credit.push[0]
    np.testing.assert_allclose(token_mean, sums / 9)  # w = 1 / (6 + 3) model tokens
    np.testing.assert_allclose(seq_mean, sums / (2 * np.array([6, 6, 3, 3])))  # w = 1 / (B L_i)
    np.testing.assert_allclose(seq_sum, sums / 2)  # w = 1 / B
    np.testing.assert_allclose(sum_norm, sums / (2 * 8))  # w = 1 / (B L_max), L_max the padded length
    # Outcome advantage: A_i on every model token of the call.
    np.testing.assert_allclose(credit.push[1, 0], np.array([0.5 * 5, 0.5, -0.5, -1.0]) / 9)
    assert not credit.fallback.any()
    assert credit.all_negative.tolist() == [False, False]
    assert credit.all_positive.tolist() == [False, False]


def test_batch_flags_are_over_model_tokens_as_the_batch_statistics_have_them():
    """A step whose every trajectory has a positive mean advantage is not all-positive while one
    model token is negative: the flag is the batch statistics' (every model token), not a
    per-trajectory mean's."""
    from trajlens.estimators import advantage_stats

    trajectories, calls, tokens, _ = _step()
    mostly = pl.DataFrame({"trajectory_id": ["a", "b"],
                           "token_advantages": [[1.0, 1.0, 1.0, 2.0, 2.0, -9.0, -9.0, -1.0], [3.0, -9.0, 1.0, 2.0]]})
    positive = mostly.with_columns(pl.col("token_advantages").list.eval(pl.element().abs()))
    negative = mostly.with_columns(pl.col("token_advantages").list.eval(-pl.element().abs()))
    credit = step_call_credit(trajectories, calls, tokens, [mostly, positive, negative], MODES)
    assert (credit.trajectory_advantage[0] > 0).all()  # every trajectory's mean is positive
    assert credit.all_positive.tolist() == [False, True, False]
    assert credit.all_negative.tolist() == [False, False, True]
    for r, frame in enumerate((mostly, positive, negative)):
        values = torch.tensor(frame["token_advantages"].explode().to_list())
        mask = torch.tensor(tokens["response_mask"].explode().to_list())
        stats = advantage_stats(values, mask)
        assert (stats.all_positive, stats.all_negative) == (credit.all_positive[r], credit.all_negative[r])


def test_fallback_spreads_the_trajectory_advantage_by_turn_and_says_so():
    trajectories, calls, _, advantages = _step()
    calls = calls.with_columns(pl.Series("turn", [0, 0, 0, 1]))  # a: both calls in one turn
    credit = step_call_credit(trajectories, calls, None, [None, advantages[1]], MODES)
    assert credit.fallback.all() and (credit.token_start == -1).all()
    # a: 6 model tokens, one turn with two calls -> 3 each; b: 3 tokens, two turns -> 1.5 each.
    np.testing.assert_allclose(credit.tokens, [3.0, 3.0, 1.5, 1.5])
    np.testing.assert_allclose(credit.push[1, 0], np.array([1.5, 1.5, -0.75, -0.75]) / 9)
    assert not credit.computed[0] and credit.computed[1]


def test_span_sums_match_a_loop_on_random_steps():
    rng = np.random.default_rng(0)
    for _ in range(20):
        lengths = rng.integers(1, 40, 6)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        values = rng.normal(size=offsets[-1])
        mask = rng.random(offsets[-1]) < 0.7
        calls_per = rng.integers(0, 5, 6)
        call_trajectory = np.repeat(np.arange(6), calls_per)
        ends = np.concatenate([np.sort(rng.integers(0, n + 1, c)) for n, c in zip(lengths, calls_per)]).astype(np.int64)
        spans = credited_spans(call_trajectory, ends)
        sums, counts = span_sums(values, mask, offsets, call_trajectory, spans)
        for j, b in enumerate(call_trajectory):
            start = ends[j - 1] if j and call_trajectory[j - 1] == b else 0
            window = slice(offsets[b] + start, offsets[b] + ends[j])
            assert sums[j] == pytest.approx(values[window][mask[window]].sum())
            assert counts[j] == mask[window].sum()


@pytest.mark.parametrize("seed", range(4))
def test_compiled_span_sums_equal_the_prefix_sums(seed):
    from trajlens.attribution import _kernels
    from trajlens.attribution._spans import masked_prefix, span_bounds

    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 50, 9)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = rng.normal(size=offsets[-1]).astype(np.float32)
    mask = rng.random(offsets[-1]) < 0.6
    calls_per = rng.integers(0, 6, 9)
    call_trajectory = np.repeat(np.arange(9), calls_per)
    ends = np.concatenate([np.sort(rng.integers(0, n + 1, c)) for n, c in zip(lengths, calls_per)]).astype(np.int64)
    bounds = span_bounds(offsets, call_trajectory, credited_spans(call_trajectory, ends))
    span, rows, largest, smallest = _kernels.span_and_row_sums(values, mask, offsets, call_trajectory, bounds.low, bounds.high)
    prefix = masked_prefix(values, mask)
    np.testing.assert_allclose(span, prefix[bounds.high] - prefix[bounds.low], atol=1e-9)
    np.testing.assert_allclose(rows, prefix[offsets[1:]] - prefix[offsets[:-1]], atol=1e-9)
    assert (largest, smallest) == (values[mask].max(), values[mask].min())


def test_a_log_without_token_counts_has_no_measured_length():
    """Without token arrays or model_tokens the fallback spreads by calls, but no response length
    is measured: attribution's length drift reads model tokens only, as the checks do."""
    trajectories, calls, _, advantages = _step()
    credit = step_call_credit(trajectories, calls, None, [None, advantages[1]], MODES)
    assert credit.measured.tolist() == [True, True]
    unknown = trajectories.with_columns(pl.lit(None, dtype=pl.Int64).alias("model_tokens"))
    credit = step_call_credit(unknown, calls, None, [None, advantages[1]], MODES)
    assert credit.lengths.tolist() == [2, 2] and credit.measured.tolist() == [False, False]


def test_length_drift_leaves_out_lengths_that_were_not_counted():
    from trajlens.attribution.causes import length_change

    steps = np.repeat(np.arange(8), 4)
    counted = pl.DataFrame({"step": steps, "length": np.where(steps < 4, 100.0, 200.0) + np.tile([0.0, 1, 2, 3], 8)})
    assert length_change(counted) is not None  # doubled
    unknown = counted.with_columns(pl.lit(float("nan")).alias("length"))
    assert length_change(unknown) is None


def test_length_bias_leaves_out_lengths_that_were_not_counted():
    """The elasticity of push per token on length reads model tokens only: rows whose length is
    not counted (NaN, a log without token counts) are left out, not read as a length."""
    from trajlens.attribution.statistics import length_bias

    rng = np.random.default_rng(0)
    steps = np.repeat(np.arange(20), 8)
    length = rng.integers(10, 1000, steps.size).astype(float)
    counted = pl.DataFrame({"step": steps, "estimator": "grpo", "aggregation": "seq-mean-token-mean",
                            "length": length, "push_per_token": 1.0 / length})  # elasticity -1
    found = length_bias(counted, bootstrap=50)
    assert found["elasticity"].item() == pytest.approx(-1.0, abs=1e-9)
    unknown = counted.with_columns(pl.lit(float("nan")).alias("length"))
    assert length_bias(unknown, bootstrap=50).is_empty()


def test_the_weight_elasticity_leaves_out_what_the_advantages_make_of_length():
    """Advantages whose size grows with length (|A| ~ L^0.3) add 0.3 to every aggregation's
    elasticity; the weight elasticity is what its weights alone make of length: -1 for
    seq-mean-token-mean, 0 for the rest, whichever aggregations are compared."""
    from trajlens.attribution.statistics import length_bias

    rng = np.random.default_rng(1)
    steps = np.repeat(np.arange(20), 8)
    length = rng.integers(10, 1000, steps.size).astype(float)
    advantage = length**0.3 * rng.choice([-1.0, 1.0], steps.size) * np.exp(rng.normal(0, 0.2, steps.size))
    per_token = {"token-mean": advantage / 4000.0, "seq-mean-token-sum": advantage / 8,
                 "seq-mean-token-mean": advantage / (8 * length)}
    frame = pl.concat([pl.DataFrame({"step": steps, "estimator": "grpo", "aggregation": mode, "length": length,
                                     "push_per_token": values}) for mode, values in per_token.items()])
    found = {row["aggregation"]: row for row in length_bias(frame, bootstrap=50).iter_rows(named=True)}
    assert found["token-mean"]["elasticity"] == pytest.approx(0.3, abs=0.1)
    assert found["seq-mean-token-mean"]["elasticity"] == pytest.approx(found["token-mean"]["elasticity"] - 1.0, abs=1e-9)
    for mode, weight in (("token-mean", 0.0), ("seq-mean-token-sum", 0.0), ("seq-mean-token-mean", -1.0)):
        assert [found[mode][c] for c in ("weight_elasticity", "weight_low", "weight_high")] == pytest.approx(
            [weight] * 3, abs=1e-9)
    # without token-mean among them, the others' weights are judged the same
    alone = length_bias(frame.filter(pl.col("aggregation") == "seq-mean-token-mean"), bootstrap=50)
    assert alone["weight_elasticity"].item() == pytest.approx(-1.0, abs=1e-9)
