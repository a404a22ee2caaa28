"""The report's figures: "no data" rather than a blank frame, a legend entry for every kind of
mark, axes that do not blow up values constant by construction, and the real N in titles."""

from __future__ import annotations

import polars as pl
import pytest

from trajlens.report import plots

CLASSES = ("think", "edit", "test_suite")


def measures(steps: int = 3, per_step: int = 2) -> pl.DataFrame:
    """Hand-made trajectory measures: trajectory i of step s makes s+1 think calls, 2 edits, 1 suite run."""
    rows = []
    for step in range(steps):
        for index in range(per_step):
            counts = {"think": step + 1, "edit": 2, "test_suite": 1}
            total = sum(counts.values())
            rows.append({"step": step, "trajectory_id": f"{step}-{index}", "n_calls": total, "num_turns": total,
                         "model_tokens": 100 * (index + 1),
                         **{f"count_{c}": counts[c] for c in CLASSES},
                         **{f"share_{c}": counts[c] / total for c in CLASSES}})
    return pl.DataFrame(rows)


RATES = pl.DataFrame({
    "stage": ["early", "early", "late", "late"], "stage_index": [0, 0, 1, 1],
    "metric": ["share:think", "rate:ran_suite"] * 2, "value": [0.1, 0.6, 0.5, 0.4],
    "ci_low": [0.05, 0.5, 0.4, 0.3], "ci_high": [0.2, 0.7, 0.6, 0.5],
    "n_sampled": [80] * 4, "population_value": [0.12, 0.58, 0.48, 0.41], "n_population": [400] * 4,
})


def diagnostics(whitened_mean: float = 1e-9) -> pl.DataFrame:
    return pl.DataFrame({
        "estimator": ["gae_raw"] * 3 + ["gae_whitened"] * 3, "step": [0, 1, 2] * 2,
        "mean": [0.2, -0.3, -0.1, whitened_mean, -whitened_mean, whitened_mean],
        "std": [0.5, 0.4, 0.6, 1.0, 1.0, 1.0],
        "all_negative": [False, True, False, False, False, False], "count": [64] * 6,
    })


def _texts(chart) -> list[str]:
    return [text.get_text() for axis in chart.figure.axes for text in axis.texts]


def _legend_labels(axis) -> list[str]:
    legend = axis.get_legend()
    return [text.get_text() for text in legend.get_texts()] if legend else []


def _labelled_marks(axis) -> set[str]:
    """Labels of every drawn mark that wants a legend entry (matplotlib leaves out empty labels and those starting with '_')."""
    artists = [*axis.lines, *axis.collections, *axis.containers, *axis.patches]
    return {label for artist in artists if (label := str(artist.get_label())) and not label.startswith("_")}


@pytest.mark.parametrize("draw", [
    lambda: plots.class_shares_by_step(measures().clear(), "r"),
    lambda: plots.class_shares_per_trajectory(measures().clear(), "r"),
    lambda: plots.distributions(measures().clear(), "r"),
    lambda: plots.stage_rates(RATES.clear(), ["share:think"], "r"),
    lambda: plots.advantage_batches(diagnostics().clear(), "r"),
], ids=["class_shares_by_step", "class_shares_per_trajectory", "distributions", "stage_rates", "advantage_batches"])
def test_empty_figures_say_no_data(draw):
    chart = draw()
    assert "no data" in _texts(chart)
    assert all(not axis.lines and not axis.patches and not axis.collections for axis in chart.figure.axes)


def test_a_single_step_says_so_rather_than_drawing_one_column():
    chart = plots.class_shares_by_step(measures(steps=1), "r")
    assert "no data" in _texts(chart) and "one step" in chart.figure.axes[0].get_title()


def test_every_kind_of_mark_has_a_legend_entry():
    by_step = plots.class_shares_by_step(measures(), "r", alarms=[plots.Alarm("think_share", "error", 1)])
    axis = by_step.figure.axes[0]
    assert set(_legend_labels(axis)) == _labelled_marks(axis) == {*CLASSES, "error: think_share (from step 1)"}

    rates = plots.stage_rates(RATES, ["share:think", "rate:ran_suite"], "r")
    axis = rates.figure.axes[0]
    labels = _legend_labels(axis)
    assert labels[:2] == ["share:think", "rate:ran_suite"] and set(labels[2:]) == {"95% interval", "whole stage"}
    assert set(_legend_labels(axis)) == _labelled_marks(axis)

    batches = plots.advantage_batches(diagnostics(), "r")
    top = batches.figure.axes[0]
    assert set(_legend_labels(top)) == _labelled_marks(top) == {"gae_raw", "gae_whitened", "all-negative batch"}

    spread = plots.distributions(measures(), "r")
    for axis in spread.figure.axes:
        assert set(_legend_labels(axis)) == _labelled_marks(axis) and "trajectories" in _legend_labels(axis)

    boxes = plots.class_shares_per_trajectory(measures(), "r")
    assert _legend_labels(boxes.figure.axes[0]) == ["quartiles, median"]


def test_values_constant_by_construction_do_not_fill_the_axis():
    whitened_only = diagnostics().filter(pl.col("estimator") == "gae_whitened")
    (only,) = plots.advantage_batches(whitened_only, "r").figure.axes  # every batch mean 0: no flat mean panel
    assert only.get_ylabel() == "batch std" and "every batch mean is 0" in only.get_title()
    low, high = only.get_ylim()
    assert high - low >= plots.MIN_SPAN
    # A real swing keeps its own scale.
    top, _ = plots.advantage_batches(diagnostics(), "r").figure.axes
    assert top.get_ylim()[1] - top.get_ylim()[0] < 1.0


def test_titles_carry_the_real_n():
    frame = measures(steps=3, per_step=2)
    assert "(N=6 trajectories, 30 calls)" in plots.class_shares_by_step(frame, "r").figure.axes[0].get_title()
    assert "(N=6 trajectories with calls)" in plots.class_shares_per_trajectory(frame, "r").figure.axes[0].get_title()
    assert [axis.get_title() for axis in plots.distributions(frame, "r").figure.axes] == [
        "turns per trajectory (N=6)", "model tokens per trajectory (N=6)"]
    assert plots.advantage_batches(diagnostics(), "r").figure.axes[0].get_title() == "r (3 steps, N=384 units)"
