"""The one rule of a change between two stages (:mod:`trajlens.run.change`), as the checks, the
report and attribution apply it."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from trajlens.run.change import ChangeRule, counts, p_value, shipped_rule, stage_change, stage_ends


def _units(first: list[float], last: list[float]) -> pl.DataFrame:
    return pl.DataFrame({"stage_index": [0] * len(first) + [1] * len(last), "value": [*first, *last]})


VALUE = ("value", pl.col("value"), pl.lit(1))


def test_a_rise_and_a_fall_count_by_the_same_ratio():
    rule = ChangeRule(alpha=0.05, min_ratio=1.25)
    assert counts(rule, 100.0, 125.0, 0.01) and not counts(rule, 100.0, 124.0, 0.01)
    assert counts(rule, 100.0, 80.0, 0.01) and not counts(rule, 100.0, 81.0, 0.01)
    assert not counts(rule, 100.0, 200.0, 0.05)  # not significant at alpha
    assert not counts(rule, 100.0, 200.0, 0.01, "decrease")  # a check watching a fall


def test_two_stages_without_spread_show_no_change_on_any_surface():
    """Every trajectory of a stage alike: the stage test cannot tell, so no change is shown, as
    ``trajlens compare`` shows none (p left blank, not significant)."""
    from trajlens.compare.table import Measure, _row
    from trajlens.intervals import pooled, sums

    units = _units([3.0] * 8, [4.0] * 8)
    rows = pooled(sums(units, [VALUE], by=("stage_index",)).sort("stage_index"), False).to_dicts()
    assert p_value(rows[0], rows[1], False) == 1.0
    assert stage_change(units, VALUE, False, ChangeRule(alpha=0.05, min_ratio=1.25)) is None
    compared = _row(Measure("mean:num_turns", "mean", ""), rows[0], rows[1])
    assert compared["p_value"] is None and not compared["significant"]


def test_a_significant_change_is_the_checks_stage_test():
    from trajlens.intervals import pooled, stage_p_value, sums

    rng = np.random.default_rng(0)
    units = _units(list(rng.normal(100, 10, 40)), list(rng.normal(140, 10, 40)))
    found = stage_change(units, VALUE, False, shipped_rule("response_length_inflation"))
    rows = pooled(sums(units, [VALUE], by=("stage_index",)).sort("stage_index"), False).to_dicts()
    assert found is not None and found.rose
    assert found.p_value == stage_p_value(rows[0], rows[1], False)


def test_the_rule_of_a_shipped_check_is_read_from_its_table():
    assert shipped_rule("response_length_inflation") == ChangeRule(alpha=0.05, min_change=0.0, min_ratio=1.25)
    assert shipped_rule("suite_rate_decline") == ChangeRule(alpha=0.05, min_change=0.1, min_ratio=1.0)
    with pytest.raises(KeyError):
        shipped_rule("think_share")  # a threshold check compares no stages


@pytest.mark.parametrize(("t", "df"), [(0.0, 3), (0.7, 1), (2.0, 2), (1.96, 6.5), (3.3, 14), (5.0, 40), (8.0, 300),
                                        (4.0, 5e4), (5.0, 1e6), (30.0, 1e7)])
def test_the_t_p_value_is_students(t, df):
    stats = pytest.importorskip("scipy.stats")
    from trajlens.intervals import student_t_p_value

    assert student_t_p_value(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-8)


def test_two_stages_of_two_trajectories_are_no_evidence_of_a_fall():
    """Every trajectory ran the suite in the first stage and none in the last, two against two:
    the normal reading would call it p = 0.046; on Student's t (2 + 2 - 2 degrees of freedom) it is 0.18."""
    units = _units([1.0, 1.0], [0.0, 0.0])
    ran = ("ran_suite", pl.col("value"), pl.lit(1))
    first, last = stage_ends(units, ran, True)
    assert p_value(first, last, True) == pytest.approx(0.1835, abs=1e-4)
    assert stage_change(units, ran, True, ChangeRule(alpha=0.05)) is None
    many = _units([1.0] * 40, [0.0] * 40)
    assert stage_change(many, ran, True, ChangeRule(alpha=0.05)) is not None


def test_a_mean_over_few_units_is_read_with_welchs_degrees_of_freedom():
    stats = pytest.importorskip("scipy.stats")
    first, last = [650.0, 700.0, 610.0, 660.0], [820.0, 790.0, 880.0, 835.0]
    units = _units(first, last)
    ends = stage_ends(units, VALUE, False)
    welch = stats.ttest_ind(last, first, equal_var=False)
    assert p_value(*ends, False) == pytest.approx(welch.pvalue, rel=1e-9)


def test_a_call_share_over_few_trajectories_takes_its_degrees_of_freedom_from_them():
    """Eight trajectories a stage whose calls cluster (their shares differ): the variance of each
    stage's share is estimated from its eight trajectories, so each side has seven degrees of
    freedom (Welch-Satterthwaite over 1 / n_eff), not the hundred-odd its calls would give."""
    stats = pytest.importorskip("scipy.stats")
    from trajlens.intervals import pooled, stage_z, sums

    calls = [10, 12, 9, 11, 10, 8, 12, 10]
    first, last = [5, 2, 6, 1, 7, 2, 3, 4], [1, 0, 2, 0, 1, 3, 0, 1]
    units = pl.DataFrame({"stage_index": [0] * 8 + [1] * 8, "x": first + last, "n": calls + calls})
    share = ("share", pl.col("x"), pl.col("n"))
    a, b = pooled(sums(units, [share], by=("stage_index",)).sort("stage_index"), True).to_dicts()
    assert a["n_effective"] < a["n"] and b["n_effective"] < b["n"]  # the calls cluster
    v1, v2 = 1 / a["n_effective"], 1 / b["n_effective"]
    df = (v1 + v2) ** 2 / (v1 * v1 / 7 + v2 * v2 / 7)
    assert df < 14.01
    assert p_value(a, b, True) == pytest.approx(2 * stats.t.sf(abs(stage_z(a, b, True)), df), rel=1e-8)


def test_the_mean_reward_counts_by_its_effect_size_whatever_its_sign():
    """Rewards of -1 and +1: a mean going -0.6 -> -0.2 is a large change that no ratio can see
    (both negative), and a significant change of a twentieth of the spread is too small to count."""
    from trajlens.intervals import cohens_d
    from trajlens.report.findings import REWARD_RULE
    from trajlens.run.change import judged

    rng = np.random.default_rng(0)
    negative = _units(list(rng.choice([-1.0, 1.0], 400, p=[0.8, 0.2])), list(rng.choice([-1.0, 1.0], 400, p=[0.6, 0.4])))
    first, last = stage_ends(negative, VALUE, False)
    assert first["value"] < last["value"] < 0
    assert stage_change(negative, VALUE, False, ChangeRule(alpha=0.05, min_ratio=1.25)) is None  # the ratio rule
    found = judged(first, last, False, REWARD_RULE)
    assert found is not None and found.rose
    # 20,000 rewards a stage: a shift of 0.05 of the spread is significant, and too small
    draws = rng.normal(0.0, 1.0, 40_000)
    small = _units(list(draws[:20_000]), list(draws[20_000:] + 0.05))
    first, last = stage_ends(small, VALUE, False)
    d = cohens_d(last["value"] - first["value"], first["variance"], first["n_effective"], last["variance"],
                 last["n_effective"])
    assert p_value(first, last, False) < 0.05 and abs(d) < REWARD_RULE.min_effect
    assert judged(first, last, False, REWARD_RULE) is None
