"""The report's figures: "no data" rather than a blank frame, a legend entry for every kind of
mark, axes that do not blow up values constant by construction, and the real N in titles."""

from __future__ import annotations

import polars as pl
import pytest

from trajlens.report import plots
from trajlens.report.overview import Trend

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


def test_a_run_of_one_step_draws_its_batches_as_points_at_that_step():
    """A line through one point draws nothing: each estimator's batch is a marker, at step 0 alone."""
    one = diagnostics().filter(pl.col("step") == 0)
    top, bottom = plots.advantage_batches(one, "r").figure.axes
    for axis in (top, bottom):
        assert [line.get_marker() for line in axis.get_lines() if line.get_label() in ("gae_raw", "gae_whitened")
                ] == ["o", "o"]
    assert list(bottom.get_xticks()) == [0] and top.get_title().startswith("r (1 step, ")
    # many steps keep plain lines
    assert {line.get_marker() for line in plots.advantage_batches(diagnostics(), "r").figure.axes[1].get_lines()} == {"None"}


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


def test_a_class_one_trajectory_in_many_uses_is_drawn_in_its_row():
    """Its box and whiskers have no width (every other share is 0): the trajectory beyond them is drawn."""
    frame = measures(steps=3, per_step=4)
    frame = frame.with_columns(pl.when(pl.col("trajectory_id") == "0-0").then(0.25).otherwise(0.0).alias("share_quick_check"))
    chart = plots.class_shares_per_trajectory(frame, "r")
    axis = chart.figure.axes[0]
    row = [label.get_text() for label in axis.get_yticklabels()].index("quick_check") + 1
    drawn = [line for line in axis.lines if len(line.get_xdata()) and list(line.get_ydata()) == [row]]
    assert [list(line.get_xdata()) for line in drawn if line.get_marker() == "o"] == [[0.25]]


def test_values_constant_by_construction_do_not_fill_the_axis():
    whitened_only = diagnostics(whitened_mean=0.01).filter(pl.col("estimator") == "gae_whitened")
    top, bottom = plots.advantage_batches(whitened_only, "r").figure.axes
    low, high = top.get_ylim()
    assert high - low >= plots.MIN_SPAN and low < 0 < high
    low, high = bottom.get_ylim()
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
    assert plots.advantage_batches(diagnostics(), "r").figure.axes[0].get_title() == "r (3 steps, N=192 units per estimator)"


def test_the_advantage_title_counts_one_estimator_s_batches_in_what_it_counts():
    """Two estimators of a run describe the same trajectories: the N is one estimator's, not the
    sum of both; estimators that count different things (model tokens, trajectories) say each."""
    tokens = {"gae_raw": "model tokens", "gae_whitened": "model tokens"}
    title = plots.advantage_batches(diagnostics(), "r", tokens).figure.axes[0].get_title()
    assert title == "r (3 steps, N=192 model tokens per estimator)"
    outcome = diagnostics().filter(pl.col("estimator") == "gae_raw").with_columns(
        pl.lit("grpo").alias("estimator"), pl.lit(4, pl.Int64).alias("count"))
    mixed = pl.concat([diagnostics(), outcome])
    title = plots.advantage_batches(mixed, "r", {**tokens, "grpo": "trajectories"}).figure.axes[0].get_title()
    assert title.replace("\n", " ") == "r (3 steps, N=192 model tokens or 12 trajectories per estimator)"
    alone = plots.advantage_batches(outcome, "r", {"grpo": "trajectories"}).figure.axes[0].get_title()
    assert alone == "r (3 steps, N=12 trajectories)"


def test_a_batch_mean_zero_by_construction_is_not_drawn():
    whitened_only = diagnostics().filter(pl.col("estimator") == "gae_whitened")  # means of 1e-9
    (std,) = plots.advantage_batches(whitened_only, "r").figure.axes
    assert std.get_ylabel() == "batch std" and "batch mean 0 at every step" in std.get_title()
    assert len(plots.advantage_batches(diagnostics(), "r").figure.axes) == 2  # a real mean keeps its panel


def test_ids_are_unique_across_figures_of_one_page():
    import re

    page = plots.class_shares_by_step(measures(), "r").svg() + plots.advantage_batches(diagnostics(), "r").svg()
    page += plots.class_shares_by_step(measures(), "s").svg()
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) > 50 and len(ids) == len(set(ids))
    references = re.findall(r'(?:href="#|url\(#)([^")]+)', page)
    assert references and set(references) <= set(ids)
    assert page.count('<svg style="max-width:100%;height:auto"') == 3
    again = plots.class_shares_by_step(measures(), "r").svg()
    assert again in page  # the same figure gives the same bytes


def test_long_titles_wrap_within_the_figure():
    title = "causal-grpo-length-with-a-long-name: behaviour class shares per training step of the run"
    lines = plots.class_shares_by_step(measures(), title).figure.axes[0].get_title().splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 9.0 * 0.75 * plots.TITLE_CHARACTERS_PER_INCH


def test_hover_columns_carry_each_step_in_the_svg_and_span_the_steps(tmp_path):
    """Each step's invisible column holds its values as the SVG's tooltip, is left out of the PNG
    (and back for the SVG), and widens the x axis half a step beyond the first and last step."""
    trends = {"reward": Trend([(0, 0.25), (1, 0.5), (2, 0.75)], 0.25, 0.75),
              "model tokens": Trend([(0, 100.0), (1, 150.0), (2, 90.0)], 100.0, 90.0)}
    chart = plots.reward_and_length_by_step(trends, "r")
    assert len(chart.hover_only) == 6
    low, high = chart.figure.axes[0].get_xlim()
    assert low <= -0.5 and high >= 2.5
    chart.png(tmp_path / "r.png")
    assert all(column.get_visible() for column in chart.hover_only)
    svg = chart.svg()
    assert "<title>step 1: mean reward 0.5</title>" in svg and "<title>step 2: mean model tokens 90</title>" in svg


def test_a_figure_is_laid_out_once_and_saved_alike_as_png_then_svg(tmp_path):
    chart = plots.class_shares_by_step(measures(), "r")
    chart.png(tmp_path / "r.png")
    placed = [axis.get_position().bounds for axis in chart.figure.axes]
    assert chart.figure.get_layout_engine().__class__.__name__ != "ConstrainedLayoutEngine"
    chart.svg()
    assert [axis.get_position().bounds for axis in chart.figure.axes] == placed
    fresh = plots.class_shares_by_step(measures(), "r")
    fresh.png(tmp_path / "again.png")
    assert (tmp_path / "again.png").read_bytes() == (tmp_path / "r.png").read_bytes()
    assert placed[0] != (0.125, 0.11, 0.775, 0.77)  # the constrained layout moved the axes from matplotlib's default


def test_every_behaviour_class_has_a_colour():
    from trajlens.classify import BEHAVIOUR_CLASSES

    assert list(plots.CLASS_COLOURS) == list(BEHAVIOUR_CLASSES)


def test_stacked_shares_are_the_share_measures_over_all_calls():
    """A step's stack is ``share:<class>`` (its calls over ``n_calls``), as the overview and the
    checks pool it, also when a class has no column of its own."""
    from trajlens.classify.per_trajectory import behaviour_specs
    from trajlens.intervals import sums

    frame = measures().with_columns(pl.col("n_calls") + 1)  # one call of a class the frame has no column for
    chart = plots.class_shares_by_step(frame, "r")
    tip = next(text for text in chart.tips.values() if text.startswith("step 0:"))
    specs = [spec for spec in behaviour_specs(()) if spec[0] in {f"share:{c}" for c in CLASSES}]
    pooled = sums(frame.filter(pl.col("step") == 0), specs)
    for klass in CLASSES:
        row = pooled.filter(pl.col("measure") == f"share:{klass}")
        value = row["x"].item() / row["n"].item()
        assert f"{klass} {value:.2f}" in tip, tip
    assert "(10 calls, 2 trajectories)" in tip


def test_a_long_run_s_stack_pools_the_calls_of_each_bin_of_steps(monkeypatch):
    """Over MAX_DRAWN_STEPS steps, each drawn point is a bin of consecutive steps whose share is
    the bin's calls of the class over all its calls, not a mean of its steps' shares."""
    monkeypatch.setattr(plots, "MAX_DRAWN_STEPS", 2)
    # steps 0 and 1 share a bin: think is 1 of 2 calls, then 1 of 10 (pooled 2/12, not (0.5 + 0.1) / 2)
    think, edit = {0: 1, 1: 1, 2: 3, 3: 1}, {0: 1, 1: 9, 2: 1, 3: 3}
    frame = pl.DataFrame([{"step": step, "trajectory_id": f"t{step}", "n_calls": think[step] + edit[step],
                           "num_turns": 1, "model_tokens": 100, "count_think": think[step], "count_edit": edit[step],
                           "share_think": think[step] / (think[step] + edit[step]),
                           "share_edit": edit[step] / (think[step] + edit[step])} for step in range(4)])
    chart = plots.class_shares_by_step(frame, "r")
    assert "steps pooled in 2 bins" in chart.figure.axes[0].get_title()
    tips = sorted(text for text in chart.tips.values() if text.startswith("steps "))
    assert tips == [f"steps 0-1: edit {10 / 12:.2f}, think {2 / 12:.2f} (12 calls, 2 trajectories)",
                    f"steps 2-3: edit {4 / 8:.2f}, think {4 / 8:.2f} (8 calls, 2 trajectories)"], tips


def test_reward_channels_by_step_gives_each_channel_its_mean_and_rel_gain(tmp_path):
    """One panel per channel, in the channels' order: its step mean and, on the right axis, its
    rel_gain per step (the mean of its groups' gains, as the checks' rel_gain:<channel>)."""
    from trajlens.checks.step_measures import step_rel_gains

    means = pl.DataFrame({"step": [1, 1, 2, 2], "channel": ["format", "correctness"] * 2, "mean": [0.75, 4.0, 0.25, 5.0]})
    gains = pl.DataFrame({"step": [1, 1, 1, 2, 2, 2], "group_id": ["a", "b", "a", "c", "d", "c"],
                          "channel": ["format", "format", "correctness", "format", "format", "correctness"],
                          "gain": [1.0, 0.5, 4.0, 0.25, 0.0, 3.0]})
    per_step = step_rel_gains(gains)
    assert per_step.filter(pl.col("channel") == "format")["rel_gain"].to_list() == [0.75, 0.125]
    chart = plots.reward_channels_by_step(means, per_step, "r: reward channels per step")
    panels = [axis for axis in chart.figure.axes if axis.get_ylabel().endswith("step mean")]
    assert [axis.get_ylabel() for axis in panels] == ["format\nstep mean", "correctness\nstep mean"]
    assert [list(line.get_ydata()) for line in panels[0].get_lines()] == [[0.75, 0.25]]
    twins = [axis for axis in chart.figure.axes if axis.get_ylabel() == "rel_gain"]
    assert [list(line.get_ydata()) for line in twins[0].get_lines()] == [[0.75, 0.125]]
    assert "<title>step 2: format mean 0.25, rel_gain 0.125</title>" in chart.svg()
    chart.png(tmp_path / "channels.png")
    assert (tmp_path / "channels.png").stat().st_size > 10_000


def test_a_stage_comparison_is_a_band_over_its_stage_and_lines_at_one_step_stay_apart():
    """A check that compares stages fired on the later stage's steps, not from an onset: a band over
    them. Two checks that fired at one step get different dash patterns, the error drawn over the warning."""
    alarms = [plots.Alarm("all_negative_streak", "error", 1), plots.Alarm("advantage_std_jump", "warning", 1),
              plots.Alarm("turns_inflation", "warning", 2, 3)]
    axis = plots.class_shares_by_step(measures(steps=4), "r", alarms=alarms).figure.axes[0]
    assert set(_legend_labels(axis)) >= {"warning: turns_inflation (stage of steps 2-3)",
                                          "error: all_negative_streak (from step 1)", "warning: advantage_std_jump (from step 1)"}
    band = next(p for p in axis.patches if p.get_label().startswith("warning: turns_inflation"))
    corners = band.get_path().transformed(band.get_patch_transform()).vertices  # x in steps
    assert (min(corners[:, 0]), max(corners[:, 0])) == (1.5, 3.0)  # from its first step's column edge to its last step
    lines = {line.get_label(): line for line in axis.get_lines() if line.get_label().startswith(("error", "warning"))}
    error, warning = lines["error: all_negative_streak (from step 1)"], lines["warning: advantage_std_jump (from step 1)"]
    assert error.get_zorder() > warning.get_zorder() and error._dash_pattern != warning._dash_pattern
