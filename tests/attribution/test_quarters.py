"""The first and the last quarter of the steps: one definition (trajlens.run.quarters), used by
attribution's changes and projection and by the report's findings and trends."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from trajlens.run.quarters import quarters

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("count", "first", "last"),
                         [(1, 1, 1), (2, 1, 1), (4, 1, 1), (7, 2, 1), (8, 2, 2), (9, 3, 2), (12, 3, 3), (135, 34, 33),
                          (200, 50, 50)])
def test_the_quarters_are_the_first_and_last_stage_of_the_quartiles(count, first, last):
    steps = np.arange(1, count + 1)
    split = quarters(steps)
    assert split.first.tolist() == list(range(1, first + 1))
    assert split.last.tolist() == list(range(count - last + 1, count + 1))


def test_the_first_quarter_is_the_stage_report_s_q1_and_the_checks():
    """One cut (trajlens.steps.stage_index): the stage table's Q1 and Q4, the checks' stage
    comparison and every first-vs-last-quarter finding take the same steps."""
    from trajlens.checks.conditions import _stage_ranges
    from trajlens.checks.spec import Check
    from trajlens.classify.stages import assign_stages

    steps = list(range(3, 138))  # 135 steps, as sao-r6
    staged = assign_stages(pl.DataFrame({"run_id": "r", "step": steps}), "quartiles")
    check = Check(name="c", measure="ran_suite", condition="stage_change", direction="decrease")
    ranges = {name: list(members) for name, members in _stage_ranges(check.stages, tuple(steps))}
    split = quarters(steps)
    assert staged.filter(pl.col("stage") == "Q1")["step"].to_list() == ranges["Q1"] == split.first.tolist()
    assert staged.filter(pl.col("stage") == "Q4")["step"].to_list() == ranges["Q4"] == split.last.tolist()


def test_steps_with_gaps_and_many_rows_count_distinct_steps():
    # 8 distinct steps 0, 10, ..., 70, three rows (trajectories) each, in no order
    rows = np.random.default_rng(0).permutation(np.repeat(np.arange(0, 80, 10), 3))
    split = quarters(rows)
    assert (split.first.tolist(), split.last.tolist()) == ([0, 10], [60, 70])
    first, last = split.masks(rows)
    assert sorted(rows[first].tolist()) == [0, 0, 0, 10, 10, 10]
    assert sorted(rows[last].tolist()) == [60, 60, 60, 70, 70, 70]


def test_one_step_is_both_quarters_and_no_step_is_neither():
    one = quarters([5, 5, 5])
    assert (one.first.tolist(), one.last.tolist()) == ([5], [5])
    empty = quarters(np.array([], dtype=np.int64))
    assert empty.first.size == empty.last.size == 0
    assert all(math.isnan(m) for m in empty.means([], []))


def test_quarter_means_leave_out_missing_values():
    steps = [1, 2, 3, 4, 5, 6, 7, 8]
    values = [1.0, float("nan"), 5.0, 5.0, 5.0, 5.0, 3.0, 4.0]
    assert quarters(steps).means(steps, values) == (1.0, 3.5)
    assert math.isnan(quarters(steps).means(steps, [float("nan")] * 2 + [1.0] * 6).first)


def test_the_projection_ends_on_the_last_quarter_of_the_steps():
    """Nine steps with gaps: the share the run ended with is the mean over the last two steps (Q4)."""
    from trajlens.attribution.projection import project

    steps = [1, 2, 3, 5, 8, 13, 21, 34, 55]
    think_calls = [1, 1, 2, 2, 3, 3, 4, 6, 9]
    rows = [{"estimator": "grpo", "aggregation": "token_mean", "primary_class": name, "step": step, "calls": calls,
             "competing_credit": 0.0, "push_sum_scaled": 0.0, "push_sumsq_scaled": 0.0}
            for step, think in zip(steps, think_calls) for name, calls in (("think", think), ("edit", 10 - think))]
    projection = project(pl.DataFrame(rows), "grpo", "token_mean", [], k=1)
    think = projection.filter(pl.col("primary_class") == "think").row(0, named=True)
    assert think["share_end"] == pytest.approx((6 / 10 + 9 / 10) / 2)


def test_the_projection_pools_the_calls_of_its_stages_as_every_other_share_does():
    """Steps of unequal size: the start and end shares are the class's calls over all calls of
    the stage (what the drift finding and the checks show), not the mean of per-step shares; with
    no credit the projection stays at the start share, pooled with the same weights."""
    from trajlens.attribution.projection import project

    steps = [1, 2, 3, 4, 5, 6, 7, 8]
    think_calls = [1, 3, 2, 2, 3, 3, 2, 9]
    all_calls = [10, 5, 10, 10, 10, 10, 40, 10]
    rows = [{"estimator": "grpo", "aggregation": "token_mean", "primary_class": name, "step": step, "calls": calls,
             "competing_credit": 0.0, "push_sum_scaled": 0.0, "push_sumsq_scaled": 0.0}
            for step, think, total in zip(steps, think_calls, all_calls)
            for name, calls in (("think", think), ("edit", total - think))]
    think = project(pl.DataFrame(rows), "grpo", "token_mean", [], k=2).filter(
        pl.col("primary_class") == "think").row(0, named=True)
    assert think["share_start"] == pytest.approx((1 + 3) / (10 + 5))
    assert think["share_end"] == pytest.approx((2 + 9) / (40 + 10))
    assert think["projected_end"] == pytest.approx(think["share_start"], rel=1e-9)


def test_no_other_module_of_the_report_or_attribution_cuts_steps_into_quarters():
    """A quarter computed by hand (``n // 4``) beside trajlens.run.quarters is a second definition."""
    found = [f"{path.relative_to(ROOT)}:{number}"
             for folder in ("trajlens/report", "trajlens/attribution") for path in sorted((ROOT / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"//\s*4\b", line)]
    assert not found
