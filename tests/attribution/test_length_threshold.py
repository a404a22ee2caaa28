"""One threshold of a length drift on every surface: the shipped check ``response_length_inflation``,
the report's length trend and attribution's length drift fire on the same runs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from trajlens.attribution.causes import length_change
from trajlens.checks.conditions import evaluate
from trajlens.checks.spec import default_checks
from trajlens.checks.step_measures import scalar_stats
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


def _report_finds(growth: float) -> bool:
    rows = [{"metric": "mean:model_tokens", "stage": stage, "stage_index": index, "population_value": value,
             "value": value, "ci_low": value - 10, "ci_high": value + 10, "n_sampled": 80}
            for index, (stage, value) in enumerate((("Q1", FIRST), ("Q4", FIRST * (1 + growth))))]
    return any("model tokens per trajectory" in str(f) for f in stage_findings(pl.DataFrame(rows)))


@pytest.mark.parametrize(("growth", "drifts"), [(0.22, False), (0.24, False), (0.26, True), (0.40, True)])
def test_the_check_the_report_and_attribution_agree_on_a_length_drift(growth, drifts):
    steps, lengths = _lengths(growth)
    assert _check_fires(steps, lengths) is drifts
    assert _report_finds(growth) is drifts
    assert (length_change(pl.DataFrame({"step": steps, "length": lengths})) is not None) is drifts
