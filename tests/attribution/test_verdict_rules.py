"""The verdict rule on hand-chosen evidence, and the measures it reads, on hand-built frames."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from trajlens.attribution.verdicts import (
    AGGREGATION_ARTEFACT, ARTEFACT, LEARNING, UNEXPLAINED, Push, competing_credit, cumulative_push, decide, is_centred,
    structural_classes, within_step_relevance,
)

WITH, NONE, AGAINST, WEAK = Push(5.0, 2.0, 8.0), Push(0.1, -0.5, 0.7), Push(-4.0, -6.0, -1.0), Push(1.0, 0.5, 1.5)


@pytest.mark.parametrize(("step_means", "centred"), [
    ([0.0] * 20, True),  # whitened, group-normalised: zero at every step
    ([0.4, -0.45, 0.3, -0.5, 0.2, -0.35] * 3, True),  # a critic's noise: large, but on both sides
    ([1.0] * 20, False),  # REINFORCE without a baseline on rewards in [0, 1]
    ([-0.45, -0.5, -0.48, -0.4, -0.52, 0.1] * 3, False),  # a critic valuing every state too high: one side
    ([0.6, -0.7, 0.8, -0.55] * 5, False),  # as large as the push itself
])
def test_a_centred_counterfactual_has_small_step_means_on_both_sides_of_zero(step_means, centred):
    assert is_centred(pl.Series(step_means)) is centred


@pytest.mark.parametrize(("own", "others", "relevance", "verdict"), [
    (WITH, {"b": AGAINST}, NONE, ARTEFACT),  # a counterfactual pushes against: the estimator decided the direction
    (WITH, {"b": NONE}, AGAINST, ARTEFACT),  # nobody else pushes it and reward does not explain it
    (WITH, {"b": WEAK}, NONE, ARTEFACT),  # significantly less push elsewhere
    (WITH, {"b": WITH}, WITH, LEARNING),  # every estimator agrees and the class earns reward
    (NONE, {"b": NONE}, WITH, LEARNING),  # reward-relevant, nobody pushes against it
    (WITH, {"b": WITH}, NONE, UNEXPLAINED),  # every estimator pushes it, reward does not explain it
    (AGAINST, {"b": NONE}, NONE, UNEXPLAINED),
    (WITH, {"b": NONE}, WITH, LEARNING),  # weaker elsewhere, but reward explains it
    (WITH, {"b": AGAINST}, WITH, LEARNING),  # reward explains it: the counterfactual goes against reward
])
def test_the_rule(own, others, relevance, verdict):
    decision = decide(own, others, relevance)
    assert decision.verdict == verdict
    assert (decision.dissenting != ()) == (verdict == ARTEFACT)


def test_an_artefact_only_other_aggregations_dissent_from_is_the_aggregations():
    other_mode = "e under seq-mean-token-mean"
    aggregations = frozenset({other_mode})
    decision = decide(WITH, {other_mode: AGAINST, "b": WITH}, NONE, aggregations=aggregations)
    assert decision.verdict == AGGREGATION_ARTEFACT and decision.dissenting == (other_mode,)
    # another estimator dissents too: the estimator is (also) to blame
    assert decide(WITH, {other_mode: AGAINST, "b": WEAK}, NONE, aggregations=aggregations).verdict == ARTEFACT
    assert decide(WITH, {"b": AGAINST}, NONE, aggregations=aggregations).verdict == ARTEFACT


def test_a_counterfactual_without_a_baseline_cannot_dissent():
    left_out = decide(WITH, {"b": AGAINST, "own under seq-mean": WITH}, NONE, frozenset({"b", "own under seq-mean"}),
                      frozenset({"own under seq-mean"}))
    assert left_out.verdict == UNEXPLAINED
    # the line prints b's push against the drift: the reason says why it did not count
    assert left_out.reason == ("the run's push moved with the drift, but no centred counterfactual was recomputed to "
                               "compare it with (b: not centred, so not compared) and reward relevance does not explain it")
    # a centred counterfactual whose interval overlaps the run's does not dissent: said so, not "as hard"
    overlapping = decide(WITH, {"b": WITH, "c": Push(1.0, -1.0, 3.0)}, NONE)
    assert overlapping.verdict == UNEXPLAINED and overlapping.reason == (
        "the run's push moved with the drift, but no centred counterfactual pushed against it or pushed it "
        "significantly less and reward relevance does not explain it")
    # without an interval there is nothing to compare: said so, not counted as agreeing
    bare = Push(1.0, float("nan"), float("nan"))
    assert decide(WITH, {"b": bare}, NONE).reason.startswith(
        "the run's push moved with the drift, but no centred counterfactual could be compared with it (too few steps")
    assert "(c: too few steps for an interval)" in decide(WITH, {"b": WITH, "c": bare}, NONE).reason
    assert decide(WITH, {"b": AGAINST, "c": WEAK}, NONE, frozenset({"b"})).dissenting == ("c",)


def test_structural_calls_leave_the_competition():
    # every trajectory ends with exactly one submit; think and edit share the other calls
    trajectories = pl.DataFrame({"step": [1, 1, 2, 2] * 5, "reward": [0.0, 1.0, 0.0, 1.0] * 5,
                                 "count:submit": [1.0, 1.0, 1.0, 1.0] * 5, "count:think": [2.0, 0.0, 1.0, 0.0] * 5,
                                 "count:edit": [0.0, 2.0, 1.0, 2.0] * 5})
    assert structural_classes(trajectories, ["edit", "submit", "think"]) == ["submit"]
    # two trajectories of one step that both edit once and view once: chance, not structure
    one_step = pl.DataFrame({"step": [1, 1], "count:edit": [1.0, 1.0], "count:view": [1.0, 1.0]})
    assert structural_classes(one_step, ["edit", "view"]) == []
    credit = pl.DataFrame({"step": [1, 1, 1], "estimator": ["e"] * 3, "aggregation": ["m"] * 3,
                           "primary_class": ["submit", "think", "edit"], "calls": [2, 2, 2],
                           "push_sum_scaled": [6.0, -1.0, -3.0]})
    with_all = competing_credit(credit, []).sort("primary_class")["competing_credit"].to_list()
    competing = competing_credit(credit, ["submit"]).sort("primary_class")["competing_credit"].to_list()
    # step mean over all calls 1/3: think -0.5 - 1/3; among think and edit (mean -1): think +0.5, edit -0.5
    assert competing == pytest.approx([-0.5, 4.0, 0.5])
    assert with_all == pytest.approx([-1.5 - 1 / 3, 3.0 - 1 / 3, -0.5 - 1 / 3])


def test_a_push_without_an_interval_prints_no_nan():
    assert Push(1.25, float("nan"), float("nan")).text() == "+1.2 (no interval: too few steps)"
    assert Push(float("nan"), float("nan"), float("nan")).text() == "n/a"
    assert not Push(1.0, float("nan"), float("nan")).with_drift


def test_cumulative_push_is_signed_and_its_interval_covers_it():
    series = np.array([1.0, 0.5, np.nan, 1.5, 1.0, 0.8, 1.2, 0.9])
    grew = cumulative_push(series, 1.0, 2, 400, 0)
    decayed = cumulative_push(series, -1.0, 2, 400, 0)
    assert grew.value == pytest.approx(6.9) and decayed.value == pytest.approx(-6.9)
    assert grew.low <= grew.value <= grew.high and grew.with_drift and decayed.against_drift


def test_a_window_of_fewer_than_two_blocks_has_no_push_interval():
    """Four steps with blocks of five: every resample would be the window itself, an interval of
    no width, and a counterfactual 6e-8 below the run's would count as pushing significantly less."""
    series = np.array([0.7, 0.8, 0.75, 0.73])
    short = cumulative_push(series, 1.0, 5, 400, 0)
    assert short.value == pytest.approx(2.98) and math.isnan(short.low) and math.isnan(short.high)
    assert not short.with_drift and not short.against_drift
    assert math.isfinite(cumulative_push(np.tile(series, 3), 1.0, 5, 400, 0).low)  # twelve steps: two blocks


def test_relevance_ignores_a_shared_trend():
    # reward and the count both rise from step to step; within a step they are unrelated
    rng = np.random.default_rng(0)
    steps = np.repeat(np.arange(20), 30)
    frame = pl.DataFrame({"step": steps, "count:a": steps + rng.integers(0, 3, steps.size).astype(float),
                          "reward": steps * 0.1 + rng.random(steps.size)})
    r, low, high, n = within_step_relevance(frame, "a")
    assert n == 600 - 20 and low < 0 < high and abs(r) < 0.15
    assert float(np.corrcoef(frame["count:a"], frame["reward"])[0, 1]) > 0.5  # the raw correlation would say otherwise
    assert math.isfinite(r)


def test_the_projection_recovers_the_gain_that_made_the_shares():
    from trajlens.attribution.projection import fit_gain, simulate

    rng = np.random.default_rng(1)
    credit = rng.normal(0.0, 1.0, (40, 3)) + np.array([0.5, 0.0, -0.5])
    start = np.array([0.2, 0.5, 0.3])
    observed = simulate(start, credit, 0.07)
    gain, error = fit_gain(start, credit, observed)
    assert abs(gain - 0.07) < 0.005 and error < 0.005
    assert observed[0] == pytest.approx(start) and observed[-1, 0] > 0.5  # the favoured class took over


def test_projections_of_many_gains_at_once_are_each_gains_own():
    from trajlens.attribution.projection import simulate

    rng = np.random.default_rng(2)
    credit = rng.normal(0.0, 1.0, (30, 4))
    start = np.array([0.1, 0.2, 0.3, 0.4])
    gains = np.array([0.0, 0.01, 0.3, 2.0])
    together = simulate(start, credit, gains)
    assert together.shape == (4, 30, 4)
    for row, gain in zip(together, gains):
        np.testing.assert_allclose(row, simulate(start, credit, float(gain)), rtol=4 * np.finfo(float).eps, atol=0)
    assert not np.allclose(together[0], together[-1])  # the gains did move the shares apart


def _bias(rows):
    return pl.DataFrame([{"estimator": "grpo", "aggregation": mode, "trajectories": 100, "elasticity": e,
                          "elasticity_low": e - 0.05, "elasticity_high": e + 0.05, "spearman": 0.0}
                         for mode, e in rows])


def _growing(relevance: float, seed: int = 0) -> pl.DataFrame:
    """40 steps of 16 trajectories whose length grows 2% a step; reward tied to length within a step by ``relevance``."""
    rng = np.random.default_rng(seed)
    steps = np.repeat(np.arange(1, 41), 16)
    noise = rng.normal(0.0, 1.0, steps.size)
    length = 300 * 1.02**steps * np.exp(0.2 * noise)
    reward = relevance * noise + rng.normal(0.0, 1.0, steps.size)
    return pl.DataFrame({"step": steps, "length": length, "reward": reward})


def test_a_length_drift_under_a_biased_aggregation_is_its_artefact():
    from trajlens.attribution.causes import length_verdict

    line = length_verdict(_growing(0.0), _bias([("seq-mean-token-mean", -0.95), ("token-mean", 0.05)]), "grpo",
                          "seq-mean-token-mean")
    assert line.startswith(f"{AGGREGATION_ARTEFACT}: response length grew")  # the aggregation, not the estimator
    assert "the loss aggregation seq-mean-token-mean weighs tokens by length, which token-mean would not" in line
    assert "under token-mean it would be 0.05 [0.00, 0.10]" in line
    learned = length_verdict(_growing(2.0), _bias([("token-mean", 0.05), ("seq-mean-token-mean", -0.95)]), "grpo",
                             "token-mean")
    assert learned.startswith(f"{LEARNING}: response length grew")  # longer answers earn more, no bias
    assert length_verdict(_growing(0.0).with_columns(pl.lit(300.0).alias("length")), _bias([]), "grpo", "token-mean") is None
    # reward that favours shorter answers is no "length earns no reward": it went against the growth
    against = length_verdict(_growing(-2.0), _bias([("token-mean", 0.05)]), "grpo", "token-mean")
    assert against.startswith("unexplained: response length grew")
    assert against.endswith("; the aggregation is not length-biased and reward went against the drift")
    unrewarded = length_verdict(_growing(0.0), _bias([("token-mean", 0.05)]), "grpo", "token-mean")
    assert unrewarded.endswith("; the aggregation is not length-biased and length earns no reward")
    assert learned.endswith("; longer responses earn more reward, and the aggregation is not length-biased")
    # shrinking, with reward that favours shorter answers: learning, in the drift's own words
    shrinking = _growing(2.0).with_columns((300.0 * 300.0 / pl.col("length")).alias("length"))
    shorter = length_verdict(shrinking, _bias([("token-mean", 0.05)]), "grpo", "token-mean")
    assert shorter.startswith(f"{LEARNING}: response length shrank")
    assert shorter.endswith("; shorter responses earn more reward, and the aggregation is not length-biased")



def _calls_drift(seed: int = 0) -> pl.DataFrame:
    """40 steps of 16 trajectories: two edits of 100 tokens and one think of 10 up to step 20,
    then no edit and three thinks of 20 tokens; 50 tokens after the last call, give or take."""
    rng = np.random.default_rng(seed)
    steps = np.repeat(np.arange(1, 41), 16)
    early = steps <= 20
    edits, thinks = np.where(early, 2.0, 0.0), np.where(early, 1.0, 3.0)
    think_tokens = thinks * np.where(early, 10.0, 20.0)
    tail = 50.0 + rng.normal(0.0, 5.0, steps.size)
    return pl.DataFrame({"step": steps, "reward": rng.normal(0.0, 1.0, steps.size),
                         "length": edits * 100.0 + think_tokens + tail, "count:edit": edits, "count:think": thinks,
                         "tokens:edit": edits * 100.0, "tokens:think": think_tokens})


def test_a_length_change_splits_into_the_calls_made_the_tokens_per_call_and_the_rest():
    from trajlens.attribution.causes import length_mix

    frame = _calls_drift()
    mix = length_mix(frame)
    tail_change = float(frame.filter(pl.col("step") > 30)["length"].mean() - 60.0
                        - (frame.filter(pl.col("step") <= 10)["length"].mean() - 210.0))
    edit, think = mix.classes  # largest part first
    assert (edit.name, edit.calls_first, edit.calls_last, edit.tokens_per_call) == ("edit", 2.0, 0.0, 100.0)
    assert (think.name, think.calls_first, think.calls_last, think.tokens_per_call) == ("think", 1.0, 3.0, 10.0)
    assert (edit.calls_part, think.calls_part, mix.calls) == (-200.0, 20.0, -180.0)
    assert mix.per_call == 30.0  # three thinks of 10 more tokens each
    assert mix.other == pytest.approx(tail_change, abs=1e-9)
    assert mix.calls + mix.per_call + mix.other == pytest.approx(mix.last - mix.first, abs=1e-9)
    assert mix.follows_calls()
    assert mix.evidence().startswith(f"of the {round(mix.last) - round(mix.first):+d} token change, the calls made "
                                     "account for -180 (edit -200: 2.00 -> 0.00 calls of 100 tokens, think +20: 1.00 -> "
                                     "3.00 calls of 10 tokens), tokens per call for +30 and other tokens for ")
    assert (mix.trajectories, mix.counted) == (320, 320) and mix.counted_change == mix.last - mix.first
    # A trajectory with a call under the fallback (its tokens spread by turn) is left out of the split.
    guessed = frame.head(16).with_columns(pl.lit(float("nan")).alias("tokens:edit"), pl.lit(500.0).alias("length"))
    with_guessed = length_mix(pl.concat([guessed, frame]))
    assert with_guessed.classes == mix.classes and (with_guessed.trajectories, with_guessed.counted) == (320, 336)
    assert with_guessed.evidence().startswith("over the 320 of the two quarters' 336 trajectories without a fallback "
                                              f"call ({mix.first:.0f} -> {mix.last:.0f}), of the ")
    assert length_mix(frame.drop("tokens:edit", "tokens:think")) is None
    # Tokens per call that grew with the calls held are no drift of the calls made.
    longer = frame.with_columns(pl.col("length") + 2.0 * pl.col("count:think") * (pl.col("step") > 20) * 40.0,
                                pl.col("tokens:think") * (1.0 + 4.0 * (pl.col("step") > 20)))
    assert not length_mix(longer).follows_calls()


def test_the_length_split_of_a_class_the_first_quarter_did_not_call_adds_up():
    from trajlens.attribution.causes import length_mix

    late = pl.col("step") > 30
    frame = _calls_drift().with_columns(pl.when(late).then(2.0).otherwise(0.0).alias("count:search"),
                                        pl.when(late).then(60.0).otherwise(0.0).alias("tokens:search"),
                                        pl.col("length") + pl.when(late).then(60.0).otherwise(0.0))
    mix = length_mix(frame)
    search = next(c for c in mix.classes if c.name == "search")
    assert (search.calls_first, search.calls_last, search.tokens_per_call, search.calls_part) == (0.0, 2.0, 30.0, 60.0)
    assert mix.per_call == 30.0  # the thinks' alone: search's tokens per call are its last quarter's
    assert mix.calls + mix.per_call + mix.other == pytest.approx(mix.last - mix.first, abs=1e-9)


def test_a_split_that_goes_against_the_drift_it_reads_is_no_cause_of_it():
    """Fallback trajectories (a call without its tokens) that grew long while the others shrank:
    the split reads the others only, and does not say the drift follows their calls."""
    from trajlens.attribution.causes import length_mix, length_verdict

    frame = _calls_drift()
    last_half = (pl.col("step") > 30) & (pl.int_range(pl.len()) % 2 == 0)
    fallback = frame.with_columns(pl.when(last_half).then(float("nan")).otherwise(pl.col("tokens:edit")).alias("tokens:edit"),
                                  pl.when(last_half).then(900.0).otherwise(pl.col("length")).alias("length"))
    mix = length_mix(fallback)
    assert mix.last < mix.first and mix.counted_change > 0 and not mix.follows_calls()
    line = length_verdict(fallback, _bias([("token-mean", 0.05)]), "grpo", "token-mean")
    assert line.startswith("unexplained: response length grew") and "trajectories without a fallback call" in line
    assert line.endswith("; the aggregation is not length-biased and length earns no reward")


def test_an_unexplained_length_drift_that_follows_the_calls_made_says_so():
    from trajlens.attribution.causes import length_verdict

    line = length_verdict(_calls_drift(), _bias([("token-mean", 0.05)]), "grpo", "token-mean")
    assert line.startswith("unexplained: response length shrank")
    assert "; of the -" in line and "the calls made account for -180 (edit -200" in line
    assert line.endswith("; it follows the calls made, which account for 120% of it (fewer edit calls most): the "
                         "aggregation is not length-biased and length earns no reward")
    # artefact and learning verdicts keep their reason; the split is evidence beside it
    artefact = length_verdict(_calls_drift(), _bias([("seq-mean-token-mean", -0.95), ("token-mean", 0.05)]), "grpo",
                              "seq-mean-token-mean")
    assert artefact.startswith(f"{AGGREGATION_ARTEFACT}: response length shrank") and "the calls made account" in artefact
    assert artefact.endswith("which token-mean would not")
    # without the calls' tokens, the verdict reads as before
    plain = length_verdict(_calls_drift().drop("tokens:edit", "tokens:think"), _bias([("token-mean", 0.05)]), "grpo",
                           "token-mean")
    assert plain.endswith("; the aggregation is not length-biased and length earns no reward")
    assert "calls made" not in plain


def _interval(mode: str, elasticity: float, low: float, high: float) -> dict:
    return {"estimator": "grpo", "aggregation": mode, "trajectories": 100, "elasticity": elasticity,
            "elasticity_low": low, "elasticity_high": high, "spearman": 0.0}


@pytest.mark.parametrize(("other", "artefact"), [
    ((0.12, 0.04, 0.24), True),    # causal-grpo-length seed 21: near zero, its interval reaching past the band
    ((0.30, 0.25, 0.35), False),   # biased the other way
    ((0.18, -0.02, 0.38), True),   # uncertain but far from the run's -0.87
    ((-0.15, -0.80, 0.10), False),  # overlaps the run's own interval: not measurably fairer
    ((-0.25, -0.70, 0.05), False),  # its estimate beyond the band
])
def test_another_aggregation_is_fair_when_measurably_nearer_zero_and_not_biased(other, artefact):
    from trajlens.attribution.causes import fairer, length_verdict

    own = _interval("seq-mean-token-mean", -0.87, -0.93, -0.78)
    bias = pl.DataFrame([own, _interval("token-mean", *other)])
    assert fairer(bias.row(1, named=True), own) is artefact
    line = length_verdict(_growing(0.0), bias, "grpo", "seq-mean-token-mean")
    assert line.startswith(f"{AGGREGATION_ARTEFACT}: " if artefact else "unexplained: ")

def _channel_run(seed: int, tradeoff: float) -> pl.DataFrame:
    """20 steps of 8 trajectories in groups of 4; a ``fmt`` channel whose rate falls from 0.8 to 0, a
    ``correct`` channel that loses ``tradeoff`` per unit of fmt; the reward is their sum."""
    rng = np.random.default_rng(seed)
    steps = np.repeat(np.arange(1, 21), 8)
    fmt = (rng.random(steps.size) < np.linspace(0.8, 0.0, steps.size)).astype(float)
    correct = rng.normal(0.0, 3.0, steps.size) - tradeoff * fmt
    return pl.DataFrame({
        "step": steps, "trajectory_id": [f"t{i}" for i in range(steps.size)],
        "group_id": [f"g{s}-{i // 4}" for i, s in enumerate(steps)], "reward": correct + fmt,
        "reward_channels": [[{"name": "format", "value": f}, {"name": "correct", "value": c}]
                            for f, c in zip(fmt, correct)]})


CHANNELS = pl.DataFrame({"step": np.arange(1, 21), "mean:format": np.linspace(0.8, 0.0, 20)})


def test_a_collapsed_channel_is_an_artefact_when_another_estimator_credits_it_more():
    from trajlens.attribution.causes import channel_credit, channel_verdicts

    trajectories = _channel_run(0, 0.0)
    fmt = trajectories["reward_channels"].list.get(0).struct.field("value").to_numpy()
    correct = trajectories["reward_channels"].list.get(1).struct.field("value").to_numpy()
    ids = trajectories["trajectory_id"]
    summed = pl.DataFrame({"trajectory_id": ids, "advantage": correct + 0.1 * fmt})  # ranked by correctness alone
    per_channel = pl.DataFrame({"trajectory_id": ids, "advantage": correct / 3.0 + 2.0 * fmt})
    r, low, high = channel_credit(trajectories, per_channel, "format")
    assert low < r < high and low > 0.3
    lines = channel_verdicts(CHANNELS, trajectories, {"summed": summed, "gdpo": per_channel}, "summed")
    assert len(lines) == 1 and lines[0].startswith(f"{ARTEFACT}: reward channel format collapsed") and "gdpo would" in lines[0]
    # under the per-channel estimator the channel was credited and fell anyway: not an artefact, not learning
    kept = channel_verdicts(CHANNELS, trajectories, {"summed": summed, "gdpo": per_channel}, "gdpo")[0]
    assert kept.startswith(UNEXPLAINED) and "credited the channel, yet it fell" in kept


def test_a_collapsed_channel_is_learning_when_reward_asks_for_it_and_the_estimators_agree():
    from trajlens.attribution.causes import channel_relevance, channel_verdicts

    # each unit of format costs 4 of correctness: the summed reward asks for less format, and two
    # estimators of that reward (normalised in the group, and the raw reward) credit it alike
    trajectories = _channel_run(1, 4.0)
    relevance = channel_relevance(trajectories, "format")
    assert relevance.with_drift and relevance.value > 0.2
    reward = trajectories.select("trajectory_id", "group_id", "reward")
    normalised = reward.select("trajectory_id", ((pl.col("reward") - pl.col("reward").mean().over("group_id"))
                                                 / pl.col("reward").std().over("group_id")).alias("advantage"))
    raw = reward.select("trajectory_id", pl.col("reward").alias("advantage"))
    line = channel_verdicts(CHANNELS, trajectories, {"grpo": normalised, "reinforce": raw}, "grpo")[0]
    assert line.startswith(f"{LEARNING}: reward channel format collapsed") and "traded the channel for reward" in line
    # the same collapse where the reward ignores format (correctness alone): the estimators neither credit
    # it nor push it down, and reward does not explain it
    neutral = _channel_run(1, 0.0)
    neutral = neutral.with_columns(pl.col("reward_channels").list.get(1).struct.field("value").alias("reward"))
    assert not channel_relevance(neutral, "format").with_drift
    reward = neutral.select("trajectory_id", "group_id", "reward")
    normalised = reward.select("trajectory_id", ((pl.col("reward") - pl.col("reward").mean().over("group_id"))
                                                 / pl.col("reward").std().over("group_id")).alias("advantage"))
    line = channel_verdicts(CHANNELS, neutral, {"grpo": normalised}, "grpo")[0]
    assert line.startswith(UNEXPLAINED) and "reward does not ask for less of it" in line


@pytest.mark.parametrize(("own", "others", "relevance", "verdict"), [
    (WITH, {"gdpo": AGAINST}, WITH, ARTEFACT),  # another estimator would have kept it, whatever the summed reward says
    (WITH, {"b": WITH}, WITH, LEARNING),  # the estimators agree and the reward asks for less of the channel
    (NONE, {}, WITH, LEARNING),
    (WITH, {"b": WITH}, NONE, UNEXPLAINED),
    (AGAINST, {"b": AGAINST}, WITH, UNEXPLAINED),  # the run credited the channel and it fell anyway
])
def test_the_channel_rule(own, others, relevance, verdict):
    from trajlens.attribution.causes import channel_decision

    decision = channel_decision(own, others, relevance)
    assert decision.verdict == verdict and (decision.dissenting != ()) == (verdict == ARTEFACT)


def test_projections_that_miss_the_run_itself_are_read_as_directions_only():
    from trajlens.attribution.verdicts import _projection_text, reproduces

    def row(estimator, projected, start=0.1, end=0.9):
        return {"primary_class": "think", "estimator": estimator, "share_start": start, "share_end": end,
                "projected_end": projected, "projected_low": projected, "projected_high": projected}

    assert reproduces(row("own", 0.6)) and not reproduces(row("own", 0.4))  # misses by 0.3 and 0.5 of a 0.8 change
    fits = _projection_text(pl.DataFrame([row("own", 0.8), row("other", 0.2)]), 1.0, "own")
    misses = _projection_text(pl.DataFrame([row("own", 0.12), row("other", 0.1)]), 1.0, "own")
    assert fits.endswith("under own 0.80 (observed 0.90)")
    assert misses.endswith("under own 0.12 (observed 0.90); the projection does not reproduce the run under its own "
                           "estimator, so read these as directions only")


def _weighed(mode: str, elasticity: float, weight: float) -> dict:
    return {**_interval(mode, elasticity, elasticity - 0.1, elasticity + 0.1),
            "weight_elasticity": weight, "weight_low": weight, "weight_high": weight}


def test_an_aggregation_is_judged_by_what_its_weights_make_of_length():
    """Where long responses score lower, every aggregation's elasticity carries the same positive
    part from the advantages: token-mean read 0.19 at causal-grpo-length seed 145, and at 0.21 it
    would have left the band, turning the run's aggregation artefact into "unexplained". The bias
    is judged by the weights' own elasticity (-1 for seq-mean-token-mean, 0 for token-mean)."""
    from trajlens.attribution.causes import biased, fairer, length_verdict

    own, other = _weighed("seq-mean-token-mean", -0.70, -1.0), _weighed("token-mean", 0.30, 0.0)
    assert biased(own) and not biased(other) and fairer(other, own)
    line = length_verdict(_growing(0.0), pl.DataFrame([own, other]), "grpo", "seq-mean-token-mean")
    assert line.startswith(f"{AGGREGATION_ARTEFACT}: response length grew")
    assert "is -0.70 [-0.80, -0.60] (its weights -1.00 [-1.00, -1.00]); under token-mean it would be 0.30 " \
           "[0.20, 0.40] (its weights 0.00 [0.00, 0.00])" in line
    # judged by the whole elasticity (no weights measured), token-mean would be biased itself
    assert not fairer(_interval("token-mean", 0.30, 0.25, 0.35), _interval("seq-mean-token-mean", -0.70, -0.8, -0.6))


def test_an_estimator_that_gives_a_channel_no_credit_pushes_it_down_less_it_does_not_keep_it():
    """grpo_passk's channel credit +0.02 [-0.05, +0.09] lies only below the run's: it was said to
    have "credited the channel more and kept it"."""
    from trajlens.attribution.causes import channel_decision
    from trajlens.attribution.verdicts import Push

    own, nil = Push(0.27, 0.20, 0.34), Push(0.02, -0.05, 0.09)
    decision = channel_decision(own, {"gdpo": AGAINST, "grpo_passk": nil}, WITH)
    assert decision.verdict == ARTEFACT and set(decision.dissenting) == {"gdpo", "grpo_passk"}
    assert decision.reason == ("gdpo would have credited the channel and kept it, and grpo_passk would have pushed it "
                               "down less")


def test_a_relevance_bound_the_verdict_reads_as_above_0_never_prints_as_0():
    from trajlens.attribution.verdicts import Push, signed_text

    assert [signed_text(x) for x in (0.0013, 0.04, 0.0, -0.004, 0.005)] == ["+0.0013", "+0.04", "+0.00", "-0.004", "+0.01"]
    relevance = Push(0.04, 0.0013, 0.08)
    assert relevance.with_drift and relevance.correlation_text() == "+0.04 [+0.0013, +0.08]"
    assert Push(float("nan"), float("nan"), float("nan")).correlation_text() == "n/a"
