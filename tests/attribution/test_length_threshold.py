"""One rule of a length drift on every surface: the shipped check ``response_length_inflation``,
the report's length trend and attribution's length drift fire on the same runs (:mod:`trajlens.run.change`)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from trajlens.attribution.causes import length_change
from trajlens.checks.conditions import evaluate
from trajlens.checks.spec import default_checks
from trajlens.checks.step_measures import scalar_stats
from staged_runs import staged
from trajlens.report.findings import stage_findings

STEPS, PER_STEP, FIRST = 40, 16, 1000.0


def _lengths(growth: float) -> tuple[np.ndarray, np.ndarray]:
    """Model tokens per trajectory: FIRST over the first half of the steps, FIRST * (1 + growth)
    over the second, with a little spread within and between steps."""
    steps = np.repeat(np.arange(1, STEPS + 1), PER_STEP)
    spread = np.tile(np.linspace(-20.0, 20.0, PER_STEP), STEPS) + 10.0 * np.sin(steps)
    return steps, FIRST * np.where(steps > STEPS // 2, 1.0 + growth, 1.0) + spread


def _check_fires(steps: np.ndarray, lengths: np.ndarray) -> bool:
    (check,) = (c for c in default_checks() if c.name == "response_length_inflation")
    per_step = pl.DataFrame({"step": steps, "value": lengths}).group_by("step").agg(pl.col("value").mean()).sort("step")
    series = scalar_stats(per_step.with_columns(pl.lit("m").alias("measure")))  # the check reads each step's mean
    return bool(evaluate(check, "m", series, False).fired_steps)


def _report_finds(steps: np.ndarray, lengths: np.ndarray) -> bool:
    frame = pl.DataFrame({"run_id": "r", "step": steps, "trajectory_id": [f"t{i}" for i in range(steps.size)],
                          "model_tokens": lengths})
    return any("model tokens per trajectory" in str(f) for f in stage_findings(*staged(frame)))


@pytest.mark.parametrize(("growth", "drifts"), [(0.22, False), (0.24, False), (0.26, True), (0.40, True)])
def test_the_check_the_report_and_attribution_agree_on_a_length_drift(growth, drifts):
    steps, lengths = _lengths(growth)
    assert _check_fires(steps, lengths) is drifts
    assert _report_finds(steps, lengths) is drifts
    assert (length_change(pl.DataFrame({"step": steps, "length": lengths})) is not None) is drifts


@pytest.mark.parametrize("growth", [0.26, 0.40])
def test_a_growth_too_noisy_to_be_significant_is_a_drift_on_no_surface(growth):
    """Lengths that spread far more than they grow, within a step and from step to step: the
    means rise by a quarter or more, but not significantly (the check's alpha), so the check,
    the report and attribution all see no drift; the report once showed one, judging the size alone."""
    steps = np.repeat(np.arange(1, 9), 4)
    noise = np.tile([-100.0, -30.0, 30.0, 100.0], 8) + np.where(steps % 2, -800.0, 800.0)
    lengths = FIRST * np.where(steps > 6, 1.0 + growth, 1.0) + noise
    assert not _check_fires(steps, lengths)
    assert not _report_finds(steps, lengths)
    assert length_change(pl.DataFrame({"step": steps, "length": lengths})) is None


def test_a_shrinking_length_is_judged_by_the_same_ratio():
    """A fall counts from the ratio a rise does (x1.25: the mean falls to 0.8 of itself or
    less) in the report and in attribution; the check watches growth alone."""
    for fall, drifts in ((0.78, True), (0.82, False)):
        steps, lengths = _lengths(fall - 1.0)
        assert _report_finds(steps, lengths) is drifts
        assert (length_change(pl.DataFrame({"step": steps, "length": lengths})) is not None) is drifts
        assert not _check_fires(steps, lengths)
