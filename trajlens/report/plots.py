"""Plots of a run's behaviour and advantages, rendered to PNG files with matplotlib (Agg)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

# Colours per behaviour class, fixed so every plot of every run reads the same.
CLASS_COLOURS: dict[str, str] = {
    "submit": "#4c4c4c",
    "test_suite": "#1b9e77",
    "test_targeted": "#66c2a5",
    "quick_check": "#d95f02",
    "run_script": "#fc8d62",
    "edit": "#7570b3",
    "view": "#8da0cb",
    "search": "#a6d854",
    "think": "#e7298a",
    "other": "#bdbdbd",
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def class_shares_by_step(measures: pl.DataFrame, path: Path, title: str) -> Path:
    """Stacked shares of behaviour classes per step (calls pooled over the step's trajectories)."""
    plt = _pyplot()
    classes = [c for c in CLASS_COLOURS if f"count_{c}" in measures.columns]
    per_step = measures.group_by("step").agg([pl.col(f"count_{c}").sum() for c in classes]).sort("step")
    total = per_step.select(pl.sum_horizontal([f"count_{c}" for c in classes])).to_series()
    figure, axis = plt.subplots(figsize=(9, 4.2))
    bottom = None
    steps = per_step["step"].to_numpy()
    for klass in classes:
        share = (per_step[f"count_{klass}"] / total).fill_nan(0.0).to_numpy()
        axis.fill_between(steps, 0 if bottom is None else bottom, share if bottom is None else bottom + share,
                          step="mid", color=CLASS_COLOURS[klass], label=klass, linewidth=0)
        bottom = share if bottom is None else bottom + share
    axis.set(xlabel="training step", ylabel="share of tool calls", title=title, ylim=(0, 1),
             xlim=(steps.min(), steps.max()) if len(steps) > 1 else None)
    axis.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    return _save(figure, path)


def stage_rates(rates: pl.DataFrame, metrics: list[str], path: Path, title: str) -> Path:
    """Sample rates with 95% intervals per stage, population values as crosses."""
    plt = _pyplot()
    chosen = rates.filter(pl.col("metric").is_in(metrics)).drop_nulls(["value", "ci_low", "ci_high"])
    stages = chosen.select("stage", "stage_index").unique().sort("stage_index")["stage"].to_list()
    figure, axis = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / max(len(metrics), 1)
    for i, metric in enumerate(metrics):
        rows = chosen.filter(pl.col("metric") == metric).sort("stage_index")
        if rows.is_empty():
            continue
        x = [stages.index(s) + (i - (len(metrics) - 1) / 2) * width for s in rows["stage"]]
        value = rows["value"].to_numpy()
        lower = (value - rows["ci_low"].to_numpy()).clip(min=0.0)
        upper = (rows["ci_high"].to_numpy() - value).clip(min=0.0)
        klass = metric.split(":")[-1]
        axis.bar(x, value, width=width * 0.9, color=CLASS_COLOURS.get(klass, "#999999"), label=metric)
        axis.errorbar(x, value, yerr=[lower, upper], fmt="none", ecolor="black", capsize=2, linewidth=0.8)
        axis.scatter(x, rows["population_value"].to_numpy(), marker="x", color="black", s=18, zorder=3)
    axis.set_xticks(range(len(stages)), stages)
    axis.set(ylabel="rate (bars: sample with 95% CI; x: population)", title=title)
    axis.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _save(figure, path)


def advantage_batches(diagnostics: pl.DataFrame, path: Path, title: str) -> Path:
    """Per-step advantage mean and std per estimator; all-negative batches marked."""
    plt = _pyplot()
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    for estimator, part in diagnostics.partition_by("estimator", as_dict=True, maintain_order=True).items():
        part = part.sort("step")
        name = estimator[0] if isinstance(estimator, tuple) else estimator
        top.plot(part["step"], part["mean"], label=name, linewidth=1)
        bottom.plot(part["step"], part["std"], label=name, linewidth=1)
        negative = part.filter(pl.col("all_negative"))
        top.scatter(negative["step"], negative["mean"], color="red", s=14, zorder=3)
    top.axhline(0.0, color="black", linewidth=0.6)
    top.set(ylabel="batch mean advantage", title=title)
    bottom.set(xlabel="training step", ylabel="batch std")
    top.legend(fontsize=8, frameon=False)
    return _save(figure, path)


def _save(figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(figure)
    return path
