"""Conditions on hand-made per-step statistics, with numbers derived by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import polars as pl
import pytest

from trajlens.checks.conditions import evaluate, windowed
from trajlens.intervals import pooled
from trajlens.checks.step_measures import ConfigHistory, metric_stats, scalar_stats
from trajlens.checks.spec import parse_checks


def _check(**fields):
    (check,) = parse_checks({"checks": {"c": fields}}, "test")
    return check


def _scalars(values: dict[int, float]) -> pl.DataFrame:
    return scalar_stats(pl.DataFrame({"measure": ["m"] * len(values), "step": list(values), "value": list(values.values())}))


def _rates(rows: list[tuple[int, float, float]]) -> pl.DataFrame:
    """One unit per step: (step, successes, trials)."""
    return pl.DataFrame({
        "measure": ["r"] * len(rows), "step": [r[0] for r in rows], "x": [float(r[1]) for r in rows],
        "n": [float(r[2]) for r in rows], "units": [1] * len(rows), "sxx": [float(r[1]) ** 2 for r in rows],
        "sxn": [float(r[1] * r[2]) for r in rows], "snn": [float(r[2]) ** 2 for r in rows],
    })


def test_pooled_mean_of_scalars_has_the_standard_error_of_the_mean():
    # values 1, 2, 3, 6: mean 3, sample variance 14/3, standard error sqrt(14/3/4)
    frame = windowed(_scalars({1: 1.0, 2: 2.0, 3: 3.0, 4: 6.0}), 4, proportion=False)
    last = frame.row(-1, named=True)
    assert last["value"] == pytest.approx(3.0)
    half = 1.959963984540054 * math.sqrt(14 / 3 / 4)
    assert (last["low"], last["high"]) == pytest.approx((3.0 - half, 3.0 + half))


def test_pooled_share_uses_the_cluster_variance():
    # two trajectories: 1 of 4 calls and 3 of 4 calls; p = 0.5, var = 2/1 * (1 + 1) / 64 = 1/16
    stats = pl.DataFrame({"measure": ["r"], "step": [1], "x": [4.0], "n": [8.0], "units": [2],
                          "sxx": [1.0 + 9.0], "sxn": [4.0 + 12.0], "snn": [32.0]})
    row = pooled(stats, proportion=True).row(0, named=True)
    assert row["value"] == 0.5
    assert row["variance"] == pytest.approx(1 / 16)
    assert row["n_effective"] == pytest.approx(0.25 / (1 / 16))


def test_threshold_fires_on_exactly_the_steps_beyond():
    check = _check(measure="metric:x", condition="threshold", above=0.15)
    outcome = evaluate(check, "m", _scalars({1: 0.1, 2: 0.2, 3: 0.15, 4: 0.3}), False)
    assert outcome.fired_steps == (2, 4)
    assert outcome.evidence.step == 4 and outcome.evidence.value == 0.3


def test_threshold_with_both_bounds_fires_outside_the_band():
    check = _check(measure="metric:x", condition="threshold", above=1.001, below=0.999)
    outcome = evaluate(check, "m", _scalars({1: 1.0, 2: 2.0, 3: 0.5, 4: 1.0005}), False)
    assert outcome.fired_steps == (2, 3)


def test_windowed_threshold_pools_the_counts():
    # steps: 0/10, 0/10, 6/10 -> window 3 at step 3: 6/30 = 0.2 (above 0.15); window 1: 0.6
    check = _check(measure="ran_suite", condition="threshold", above=0.15, window=3)
    outcome = evaluate(check, "r", _rates([(1, 0, 10), (2, 0, 10), (3, 6, 10)]), True)
    assert outcome.fired_steps == (3,)
    assert outcome.evidence.value == pytest.approx(0.2)


def test_consecutive_needs_a_run_of_contiguous_steps():
    check = _check(measure="metric:x", condition="consecutive", above=30.0, steps=3)
    values = {1: 40.0, 2: 50.0, 3: 10.0, 4: 31.0, 5: 35.0, 6: 33.0, 7: 20.0, 9: 40.0, 10: 40.0, 12: 40.0}
    outcome = evaluate(check, "m", _scalars(values), False)
    assert outcome.fired_steps == (4, 5, 6)  # 9-10-12 is not contiguous
    spike = evaluate(check, "m", _scalars({1: 10.0, 2: 233.0, 3: 10.0}), False)
    assert spike.fired_steps == ()


def test_stage_change_two_proportion_z_by_hand():
    from trajlens.intervals import student_t_p_value

    # early: 80/100 trajectories ran the suite, late: 50/100; pooled p = 0.65,
    # z = -0.3 / sqrt(0.65 * 0.35 * 0.02) = -4.447, on Student's t with the degrees of freedom of
    # the units the variance was estimated from: 10 steps a side, 9 + 9 (Welch-Satterthwaite, equal sides)
    rows = [(s, 8, 10) for s in range(1, 11)] + [(s, 5, 10) for s in range(11, 21)]
    series = _rates(rows)
    # one unit per step of 10 trajectories: the cluster variance of equal steps is 0, so n_eff = n
    check = _check(measure="ran_suite", condition="stage_change", direction="decrease", stages="early_late",
                   alpha=0.05)
    outcome = evaluate(check, "r", series, True)
    assert outcome.fired_steps == tuple(range(11, 21))
    z = -0.3 / math.sqrt(0.65 * 0.35 * (1 / 100 + 1 / 100))
    assert f"p = {student_t_p_value(z, 18):.2g}" in outcome.evidence.detail
    assert student_t_p_value(z, 18) == pytest.approx(3.1e-4, abs=1e-5)  # 198 df would say 1.4e-5, the normal 8.7e-6
    rising = _check(measure="ran_suite", condition="stage_change", direction="increase", stages="early_late")
    assert evaluate(rising, "r", series, True).fired_steps == ()
    big = _check(measure="ran_suite", condition="stage_change", direction="decrease", stages="early_late",
                 min_change=0.4)
    assert evaluate(big, "r", series, True).fired_steps == ()


def test_stage_change_reads_the_same_rows_of_a_stage_however_the_steps_are_ordered():
    """A stage's rows are cut from steps in order (with gaps, repeated steps, steps outside every
    range); shuffled, the same rows are found another way: the outcome is the same."""
    rows = [(s, 9 - s % 3, 10) for s in (1, 2, 4, 5, 7, 8, 9)] + [(s, 3 + s % 2, 10) for s in (12, 13, 13, 15, 20, 21)]
    series = _rates(rows)
    shuffled = series.sample(fraction=1.0, shuffle=True, seed=3)
    assert shuffled["step"].to_list() != series["step"].to_list()
    for stages in ("quartiles", [["early", 2, 9], ["late", 12, 20]]):
        check = _check(measure="ran_suite", condition="stage_change", direction="decrease", stages=stages,
                       compare="consecutive", alpha=0.5)
        in_order, reordered = evaluate(check, "r", series, True), evaluate(check, "r", shuffled, True)
        assert in_order.fired_steps and in_order.fired_steps == reordered.fired_steps
        assert in_order.evidence == reordered.evidence
    late = evaluate(replace(check, stages=[["early", 2, 9], ["late", 12, 20]]), "r", series, True)  # a list, as in TOML
    assert late.fired_steps == (12, 13, 15, 20)  # step 21 is in no stage
    assert "early 0.7667 " in late.evidence.detail  # steps 2-9: 46 of 60 trajectories, step 1 left out


def test_stage_change_needs_significance():
    rows = [(1, 8, 10), (2, 7, 10)]
    check = _check(measure="ran_suite", condition="stage_change", direction="decrease", stages="early_late")
    assert evaluate(check, "r", _rates(rows), True).fired_steps == ()


def test_trend_fires_on_a_steady_rise_only():
    rising = _scalars({s: 1.0 + 0.1 * s + (0.01 if s % 2 else -0.01) for s in range(1, 41)})
    check = _check(measure="metric:x", condition="trend", direction="increase", window=20, alpha=0.01, min_change=0.5)
    outcome = evaluate(check, "m", rising, False)
    assert outcome.fired_steps == tuple(range(20, 41))
    assert "slope 0.1" in outcome.evidence.detail
    flat = _scalars({s: 1.0 + (0.01 if s % 2 else -0.01) for s in range(1, 41)})
    assert evaluate(check, "m", flat, False).fired_steps == ()


def test_jump_against_the_trailing_mean():
    values = {s: 1.0 for s in range(1, 11)} | {11: 2.5, 12: 1.0, 13: 0.4}
    check = _check(measure="metric:x", condition="jump", factor=2.0, baseline=10)
    assert evaluate(check, "m", _scalars(values), False).fired_steps == (11, 13)
    up = _check(measure="metric:x", condition="jump", factor=2.0, baseline=10, direction="increase")
    assert evaluate(up, "m", _scalars(values), False).fired_steps == (11,)


def test_a_jump_s_evidence_is_a_step_that_fired_the_way_the_check_looks():
    # an increase at step 12 (x3), a larger drop at step 24 (x1/10) that an increase check ignores
    values = {s: 1.0 for s in range(1, 31)} | {12: 3.0, 24: 0.1}
    up = _check(measure="metric:x", condition="jump", factor=2.0, baseline=5, direction="increase")
    outcome = evaluate(up, "m", _scalars(values), False)
    assert outcome.fired_steps == (12,) and outcome.evidence.step == 12
    down = _check(measure="metric:x", condition="jump", factor=2.0, baseline=5, direction="decrease")
    assert evaluate(down, "m", _scalars(values), False).evidence.step == 24
    # the evidence says where the check fires, the way it looks: a drop is no "x2"
    either = _check(measure="metric:x", condition="jump", factor=2.0, baseline=5)
    assert [evaluate(c, "m", _scalars(values), False).evidence.threshold for c in (up, down, either)] == [
        "x2 of the previous 5 steps' mean", "x1/2 of the previous 5 steps' mean",
        "x2 or x1/2 of the previous 5 steps' mean"]


def test_a_jump_judges_no_step_below_zero():
    """A loss falling from -0.1 to -1.0 is no tenfold increase; a value crossing zero no drop."""
    values = {s: -0.1 for s in range(1, 15)} | {15: -1.0} | {s: 0.01 * (1 if s % 2 else -1) for s in range(16, 21)}
    check = _check(measure="metric:x", condition="jump", factor=3.0, baseline=5, direction="increase")
    outcome = evaluate(check, "m", _scalars(values), False)
    assert outcome.fired_steps == () and not outcome.judged
    assert outcome.evidence.detail.startswith("no step with a baseline above 0 and a value of 0 or more")
    positive = {s: 0.1 for s in range(1, 15)} | {15: 1.0}
    assert evaluate(check, "m", _scalars(positive), False).fired_steps == (15,)


def test_learning_rate_ratio_follows_the_config_history():
    metrics = pl.DataFrame({"run_id": "r", "step": [1, 2, 3, 4], "name": "critic/lr", "value": [5e-6] * 4})
    current = {"critic": {"optim": {"lr": 2.5e-6}}}
    history = ConfigHistory(current, ((1, {"critic": {"optim": {"lr": 5e-6}}}), (3, current)))
    ratio = metric_stats(metrics, history).filter(pl.col("measure") == "lr_ratio:critic/lr")
    assert ratio["x"].to_list() == pytest.approx([1.0, 1.0, 2.0, 2.0])
    without = metric_stats(metrics, ConfigHistory(current)).filter(pl.col("measure") == "lr_ratio:critic/lr")
    assert without["x"].to_list() == pytest.approx([2.0] * 4)


def test_warmup_steps_are_not_compared():
    metrics = pl.DataFrame({"run_id": "r", "step": [1, 2, 3], "name": "actor/lr", "value": [1e-7, 5e-7, 1e-6]})
    config = {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6, "lr_warmup_steps": 2}}}}
    ratio = metric_stats(metrics, ConfigHistory(config)).filter(pl.col("measure") == "lr_ratio:actor/lr")
    assert ratio["step"].to_list() == [3]


def test_a_streak_longer_than_the_run_is_not_judged():
    """No run of 500 steps fits in 10: the check cannot pass, so it is skipped (as jump and trend are)."""
    check = _check(measure="metric:x", condition="consecutive", above=1.0, steps=500)
    outcome = evaluate(check, "m", _scalars({s: 5.0 for s in range(1, 11)}), False)
    assert not outcome.judged and outcome.fired_steps == ()
    assert outcome.evidence.detail == "fewer than 500 steps with a value (10)"
    fits = _check(measure="metric:x", condition="consecutive", above=1.0, steps=10)
    assert evaluate(fits, "m", _scalars({s: 5.0 for s in range(1, 11)}), False).fired_steps == tuple(range(1, 11))


def test_a_windowed_threshold_judges_only_full_windows():
    """A floor pooled over 20 steps is never judged on one step's value, nor on a run shorter than 20."""
    values = {s: (0.01 if s == 1 else 1.0) for s in range(1, 41)}
    floor = _check(measure="metric:x", condition="threshold", below=0.1, window=20)
    outcome = evaluate(floor, "m", _scalars(values), False)
    assert outcome.fired_steps == () and outcome.judged
    assert outcome.values.filter(pl.col("value").is_not_null())["step"].to_list() == list(range(20, 41))
    assert outcome.evidence.detail == "window 20 steps"
    short = evaluate(floor, "m", _scalars({s: 0.01 for s in range(1, 11)}), False)
    assert not short.judged and short.fired_steps == () and short.evidence.detail == "no window of 20 steps"
    low = {s: 0.01 for s in range(1, 41)}
    assert evaluate(floor, "m", _scalars(low), False).fired_steps == tuple(range(20, 41))


def test_a_trend_over_a_short_window_is_read_on_students_t():
    """Four steps: the slope's p-value is scipy's linregress (Student's t, 2 degrees of freedom),
    not the normal's, which would call this rise significant at 0.05."""
    stats = pytest.importorskip("scipy.stats")
    values = {1: 0.0, 2: 1.6, 3: 1.0, 4: 2.6}
    check = _check(measure="metric:x", condition="trend", direction="increase", window=4, alpha=0.05)
    outcome = evaluate(check, "m", _scalars(values), False)
    fit = stats.linregress(list(values), list(values.values()))
    assert f"p = {fit.pvalue:.2g}" in outcome.evidence.detail
    assert fit.pvalue > 0.05 and outcome.fired_steps == ()
    assert math.erfc(abs(fit.slope / fit.stderr) / math.sqrt(2)) < 0.05
