"""The drift rules on hand-built series: the decay sign, a drift from the first step, p-values in words."""

from __future__ import annotations

import numpy as np
import pytest
import polars as pl
from drift_frames import class_credit_frame, no_flags

from trajlens.attribution.drift import DriftConfig, attribute_drift, predicts
from trajlens.attribution.statistics import p_text


def _decay_after_an_early_dip(seed: int = 0):
    """view dips at steps 1-5 (low: past a quarter of the way down), rises, then decays from step
    16; "mover" credits it as its share is about to move, "flat" credits it above the rest at every step."""
    rng = np.random.default_rng(seed)
    steps = 60
    t = np.arange(steps)
    view = np.where(t < 5, 0.3, np.where(t < 15, 0.6, 0.1 + 0.5 * np.exp(-(t - 15) / 8.0)))
    view = np.clip(view + rng.normal(0.0, 0.01, steps), 0.02, 0.9)
    change = np.concatenate([view[5:] - view[:-5], np.zeros(5)])  # y_t, the share change to t+5
    mover = {"view": change * 20 + rng.normal(0, 0.05, steps), "other": -change * 20}
    flat = {"view": 0.2 + rng.normal(0.0, 0.05, steps), "other": -0.2 + rng.normal(0.0, 0.05, steps)}
    shares = {"view": view, "other": 1.0 - view}
    return class_credit_frame(shares, {"flat": flat, "mover": mover})


def test_a_decay_is_predicted_by_the_estimator_whose_credit_moves_with_it_and_prints_no_nan():
    result = attribute_drift(_decay_after_an_early_dip(), no_flags(), "flat", "token-mean", DriftConfig(bootstrap=200))
    view = result.frame.filter(pl.col("primary_class") == "view")
    # the early dip crosses the quarter-way mark and comes back: the onset is where the decay crosses for good
    assert view["direction"][0] == "decayed" and view["onset_step"][0] == 19
    by_label = {row["estimator"]: row for row in view.iter_rows(named=True)}
    assert by_label["mover"]["r"] > 0.8 and predicts(by_label["mover"]["r_low"])
    sentence = next(f for f in result.findings if "view share" in f)
    assert "mover credit predicts the decay" in sentence
    assert "nan" not in sentence.lower()
    assert "(flat) its calls' relative credit was +0.25 [+0.24, +0.25] at steps 14-18 (steps before the onset)" in sentence


@pytest.mark.parametrize(("series", "onset"), [
    ([0.1] * 10 + [0.9] * 30, 8),  # a step at 11: the first 5-step mean a quarter of the way up
    ([0.1, 0.9, 0.9, 0.9] + [0.1] * 6 + [0.9] * 30, 9),  # an early blip past the quarter mark comes back: no onset
    ([0.1] * 10 + [0.9, 0.9] + [0.1] * 6 + [0.9] * 22, 16),  # nor does one that falls back before the rise
    # a spike past the settling mark that falls back to the first stage's share: not where the drift settled
    ([0.1] * 10 + [0.9] * 6 + [0.1] * 34 + [0.9] * 30, 48),
    ([0.5] * 40, 40),  # no change: the last step
])
def test_the_onset_is_the_crossing_that_leads_into_the_drift(series, onset):
    from trajlens.attribution.statistics import onset_step

    share = np.array(series)
    steps = np.arange(1, share.size + 1)
    assert onset_step(steps, share, float(share[:10].mean()), float(share[-10:].mean()), 5) == onset
    # a decay mirrors a growth
    assert onset_step(steps, 1.0 - share, float(1.0 - share[:10].mean()), float(1.0 - share[-10:].mean()), 5) == onset


def _rise_then_fall() -> tuple[np.ndarray, np.ndarray]:
    """A think share at 0.02 over the first stage, then about 0.10 with a bump to 0.17 at steps
    35-39, rising over steps 56-65 to 0.98 and falling to 0 after step 78: the last stage (steps
    69-90) holds ten steps of the peak and twelve of nothing, a share of 0.45 (causal-r6 seed 84)."""
    steps = np.arange(1, 91)
    share = np.where(steps <= 22, 0.02, 0.10)
    share = np.where((steps >= 35) & (steps <= 39), 0.17, share)
    share = np.where((steps >= 56) & (steps <= 65), 0.10 + (steps - 55) * 0.088, share)
    share = np.where((steps > 65) & (steps <= 78), 0.98, share)
    return steps, np.where(steps > 78, 0.0, share)


def test_a_drift_that_turned_back_is_dated_by_its_rise_not_by_its_diluted_last_stage():
    """The quarter-way mark toward the last stage's 0.45 is 0.13, which the bump at step 35
    crosses: the onset was 32, over twenty steps before the rise, and the verdict's window missed the
    rise. The drift reached 0.98 (the furthest mean over a stage's length of steps, a drift's
    worth beyond the last stage's): its quarter-way mark is crossed in the rise."""
    from trajlens.attribution.statistics import drift_onset, drift_reach, onset_step

    steps, share = _rise_then_fall()
    first, last = float(share[:22].mean()), float(share[-22:].mean())
    assert onset_step(steps, share, first, last, 5) == 32  # the 5-step mean from step 32 holds the bump
    assert 0.8 < drift_reach(steps, share, first, last, 0.1) < 0.98  # 22 steps from 57: the rise and the peak
    assert 55 <= drift_onset(steps, share, first, last, 5, 0.1) <= 60


@pytest.mark.parametrize("series", [
    [0.1] * 10 + [0.9] * 30,  # a rise that holds
    [0.1] * 20 + [0.95] * 10 + [0.9] * 10,  # a rise that eases back by less than a drift's worth
])
def test_a_drift_that_did_not_turn_back_reaches_its_last_stage(series):
    from trajlens.attribution.statistics import drift_reach

    share = np.array(series)
    steps = np.arange(1, share.size + 1)
    last = float(share[-10:].mean())
    assert drift_reach(steps, share, float(share[:10].mean()), last, 0.1) == last
    # in two stages (early_late), a steady rise's last stage lies far below its final quarter: no turn back
    rise = np.linspace(0.1, 0.9, 40)
    assert drift_reach(steps, rise, float(rise[:20].mean()), float(rise[20:].mean()), 0.1) == float(rise[20:].mean())


def test_predicts_reads_the_printed_interval():
    assert not predicts(0.004)  # printed [0.00, ...]
    assert predicts(0.006)
    assert not predicts(float("nan"))


def test_p_values_in_words():
    assert p_text(0.0) == "p < 0.001"
    assert p_text(2e-9) == "p < 0.001"
    assert p_text(0.0312) == "p = 0.031"


def test_a_share_that_swings_from_step_to_step_is_not_a_drift():
    """Calls of one step are not independent draws: a think share that swings between 0.05 and
    0.45 from step to step, 0.12 higher on average in the last stage, with 8 steps a stage, is
    no drift at p < 0.001 (as independent calls, 400 a step, it would be: p about 1e-40)."""
    steps = 32
    swing = np.where(np.arange(steps) % 2 == 0, 0.05, 0.45)
    think = swing + np.where(np.arange(steps) >= 24, 0.12, 0.0)
    credit = {"think": np.zeros(steps), "other": np.zeros(steps)}
    frame = class_credit_frame({"think": think, "other": 1.0 - think}, {"own": credit})
    result = attribute_drift(frame, no_flags(), "own", "token-mean", DriftConfig(bootstrap=50))
    assert result.frame.is_empty() and "no drift to attribute" in result.findings[0]
    # the move there was, named beside the rule it falls short of: not "no class share changed"
    assert "; the largest change, think 0.25 -> 0.37 (p = " in result.findings[0]
    # The same change with steps that agree is a drift.
    steady = 0.25 + np.where(np.arange(steps) >= 24, 0.12, 0.0)
    frame = class_credit_frame({"think": steady, "other": 1.0 - steady}, {"own": credit})
    result = attribute_drift(frame, no_flags(), "own", "token-mean", DriftConfig(bootstrap=50))
    assert set(result.frame["primary_class"]) == {"think", "other"}  # one grew, the other decayed


@pytest.mark.parametrize("steps, where", [(1, "step 1"), (3, "steps 1-3")])
def test_a_run_of_one_stage_has_no_drift_and_says_why(steps, where):
    """A drift is a change from the first stage to the last: a run of one stage (an eval, one
    step of agent logs) has none, and the finding says so rather than that no share changed."""
    think = np.full(steps, 0.3)
    frame = class_credit_frame({"think": think, "other": 1.0 - think}, {"own": {"think": np.zeros(steps), "other": np.zeros(steps)}})
    frame = frame.with_columns(pl.lit("all").alias("stage"), pl.lit(0).alias("stage_index"))
    result = attribute_drift(frame, no_flags(), "own", "token-mean", DriftConfig(bootstrap=50))
    assert result.frame.is_empty()
    assert result.findings == [f"the run has one stage ({where}): a drift needs two, so there is none to attribute"]
