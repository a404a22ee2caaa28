"""Findings from training scalars and reward channels: the engineering lessons of the seed runs.

- a logged learning rate that disagrees with the configured one (a resume that restored the
  scheduler and overrode a changed LR);
- a critic whose gradient is shrunk by its clip on most steps (the starved r6 critic);
- explained variance that never leaves a low band;
- a reward channel whose rel_gain (mean over groups of max - min) falls to almost nothing: its
  group advantage carries no signal, because the channel saturated or because it collapsed.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import polars as pl

from trajlens.report.findings import FINDING_CHECKS, Finding
from trajlens.run.change import shipped_check
from trajlens.run.quarters import Quarters, quarters
from trajlens.run.splits import TRAIN_SPLIT
from trajlens.steps import steps_text

SATURATED_REL_GAIN = float(shipped_check("reward_channel_rel_gain")["below"])
"""A rel_gain under this leaves a channel without signal: the shipped check ``reward_channel_rel_gain``'s line."""
CHANNEL_CHANGE = 0.25
"""Least relative change of a channel's rel_gain, first quarter to last, that is a finding when the
channel keeps its signal: a quarter, the size the length and turns checks count. No check
compares a channel's rel_gain between stages, so the size alone decides. A channel whose rel_gain
barely moved says nothing about the run."""


def _metric(store: Any, run_id: str, name: str) -> pl.DataFrame:
    return (store.table("step_metrics").filter((pl.col("run_id") == run_id) & (pl.col("name") == name)
                                               & pl.col("value").is_not_null())
            .select("step", "value").sort("step").collect())


CRITIC_CLIP_MEASURE = "critic_clip_ratio"
"""The checks' measure of the critic's grad_norm over the clip in force at that step."""
CRITIC_GRAD_NORM_MEASURE = "metric:critic/grad_norm"

SCALARS_EVIDENCE = "scalars"
"""The anchor of a run's training-scalar table in its section of ``index.html``."""
SCALARS_TITLE = "Training scalars"
SCALARS_NOTE = ("The step scalars the critic findings read, over the steps that give each: the critic's grad_norm "
                "over the clip in force at that step (as the checks measure it; above 1 it was clipped) and its "
                "explained variance.")
EXPLAINED_VARIANCE = "critic/vf_explained_var"


class TrainingScalars(NamedTuple):
    """A run's critic scalars, read once for its findings and its table (:func:`run_scalars`)."""

    critic_ratio: pl.Series | None
    """Per step, the critic's grad_norm over its clip (the checks' :data:`CRITIC_CLIP_MEASURE`)."""
    explained: pl.Series | None
    """Per step, the logged ``critic/vf_explained_var``."""

    @property
    def table(self) -> pl.DataFrame:
        """One row per scalar the run has: steps, least, median and largest value, and for the
        grad_norm ratio the steps it was clipped on."""
        rows = [{"scalar": name, "steps": series.len(), "min": series.min(), "median": series.median(),
                 "max": series.max(), "clipped steps": clipped}
                for name, series, clipped in (
                    ("critic grad_norm / its clip", self.critic_ratio,
                     None if self.critic_ratio is None else int((self.critic_ratio > 1.0).sum())),
                    (EXPLAINED_VARIANCE, self.explained, None))
                if series is not None]
        return pl.DataFrame(rows, schema={"scalar": pl.String, "steps": pl.Int64, "min": pl.Float64,
                                          "median": pl.Float64, "max": pl.Float64, "clipped steps": pl.Int64})


def critic_ratio(checks: Any) -> pl.Series | None:
    """Per step, the critic's grad_norm over the clip in force, as ``checks`` (the run's evaluated
    shipped checks, or None) measured it; None where they did not."""
    results = checks.results if checks is not None else []
    ratios = [o.values["value"] for r in results if r.check.measure == CRITIC_CLIP_MEASURE for o in r.outcomes
              if not o.values.is_empty()]
    return ratios[0] if ratios else None


def run_scalars(store: Any, run_id: str, checks: Any) -> TrainingScalars:
    """The run's critic scalars: the grad_norm ratio from ``checks`` (:func:`critic_ratio`), the
    explained variance from its step metrics."""
    explained = _metric(store, run_id, EXPLAINED_VARIANCE)["value"]
    return TrainingScalars(critic_ratio(checks), None if explained.is_empty() else explained)


def scalar_findings(store: Any, run_id: str, checks: Any, scalars: TrainingScalars | None = None) -> list[Finding]:
    """Learning-rate mismatches (from ``checks``, the run's evaluated shipped checks, a
    :class:`~trajlens.checks.evaluate.RunChecks` or None), critic clipping and explained
    variance (``scalars``, read from the run when None), as sentences."""
    scalars = run_scalars(store, run_id, checks) if scalars is None else scalars
    findings = lr_findings(checks) + critic_findings(checks, scalars)
    explained = scalars.explained
    if explained is not None:
        findings.append(Finding(
            f"{EXPLAINED_VARIANCE} {explained.min():.2f} to {explained.max():.2f} "
            f"(median {explained.median():.2f})", "explained_variance", SCALARS_EVIDENCE))
    return findings


def critic_findings(checks: Any, scalars: TrainingScalars | None = None) -> list[Finding]:
    """How far the critic's gradient is shrunk by its clip, from the checks' per-step ratios
    (:func:`critic_ratio`, or ``scalars.critic_ratio``: the clip logged at each step, else the one
    configured then), with the steps where a shipped check on the critic's grad_norm fires, read
    from ``checks``."""
    results = checks.results if checks is not None else []
    ratio = critic_ratio(checks) if scalars is None else scalars.critic_ratio
    if ratio is None:
        return []
    clipped = int((ratio > 1.0).sum())
    alarms = "".join(f"; {r.name} fires at steps {steps_text(r.fired_steps)}" for r in results
                     if r.check.measure == CRITIC_GRAD_NORM_MEASURE and r.fired_steps)
    # How much it matters is the checks' to say: a critic starved by its clip, or a grad norm that
    # stays high, is a finding of weight; a grad norm sitting at its clip with no check firing
    # (median 1.00x, clipped on half the steps, on runs where nothing happened) is context.
    firing = any(r.name in FINDING_CHECKS["critic"] and r.status in ("fail", "warn") for r in results)
    return [Finding(f"critic grad_norm / its clip: median {ratio.median():.2f}x, clipped on {clipped:,} of "
                    f"{ratio.len():,} steps ({clipped / ratio.len():.0%})" + alarms, "critic" if firing else "explained_variance",
                    SCALARS_EVIDENCE)]


LR_CHECK_MEASURE = "lr_ratio:*"
"""The checks' measure of a logged LR over the LR configured at that step."""


def lr_findings(checks: Any) -> list[Finding]:
    """Each logged LR that the shipped learning-rate check finds off its configured value, on the
    check's own steps and per-step ratios (the configuration in force at each step, after warm-up):
    read from ``checks``, the run's evaluated shipped checks (None: they could not be evaluated)."""
    findings: list[Finding] = []
    for result in checks.results if checks is not None else []:
        if result.check.measure != LR_CHECK_MEASURE:
            continue
        for outcome in result.outcomes:
            if not outcome.fired_steps or outcome.values.is_empty():
                continue
            metric = outcome.measure.partition(":")[2]
            off = outcome.values.filter(pl.col("step").is_in(list(outcome.fired_steps)))
            findings.append(Finding(
                f"{metric} logged at {off['value'].median():.2f}x the LR configured at each step on steps "
                f"{steps_text(list(outcome.fired_steps))} (check {result.name} fires on {len(outcome.fired_steps)} "
                f"of the {outcome.evaluated_steps} steps it checks)", "learning_rate", "checks"))
    return findings


CHANNEL_QUARTER_COLUMNS: dict[str, Any] = {
    "channel": pl.String, "rel_gain first quarter": pl.Float64, "rel_gain last quarter": pl.Float64,
    "step mean first quarter": pl.Float64, "step mean last quarter": pl.Float64}
"""The columns of :func:`channel_quarters`."""


class RunChannels(NamedTuple):
    """A run's reward channels, read once for its channel findings and its channel table."""

    gains: pl.DataFrame
    """Each channel's gain per group (:func:`trajlens.checks.step_measures.channel_gains`)."""
    step_means: pl.DataFrame
    """Each channel's step mean (:func:`trajlens.run.channels.channel_step_means`)."""
    quarters: Quarters
    """The first and last quarter of the steps of the trajectories reported."""
    table: pl.DataFrame
    """:func:`channel_quarters`: each channel's rel_gain and step mean in the first and last quarter."""


def run_channels(store: Any, run_id: str, split: str = TRAIN_SPLIT) -> RunChannels | None:
    """The reward channels of the run's trajectories of ``split`` (those its section reports);
    None for a run of fewer than two channels (nothing competes) or of one step (no first and
    last quarter to compare)."""
    from trajlens.checks.step_measures import group_gains
    from trajlens.run.channels import channel_step_means, channel_values
    from trajlens.run.partitions import scan_run_table

    trajectories = (scan_run_table(store, run_id, "trajectories").filter(pl.col("split") == split)
                    .select("step", "group_id", "trajectory_id", "reward_channels").collect())
    if trajectories["step"].n_unique() < 2:
        return None  # one step: no first and last quarter to compare
    long = channel_values(trajectories)
    gains = group_gains(long).sort("channel", maintain_order=True)  # the channels' order
    if gains.is_empty() or gains["channel"].n_unique() < 2:
        return None
    run_quarters = quarters(trajectories["step"].to_numpy())  # the run's steps, as its stage table cuts them
    step_means = channel_step_means(long)
    return RunChannels(gains, step_means, run_quarters, channel_quarters(gains, step_means, run_quarters))


def channel_quarters(gains: pl.DataFrame, step_means: pl.DataFrame, split: Quarters) -> pl.DataFrame:
    """Each channel's rel_gain and step mean over the first and the last quarter of ``split``,
    as ``trajlens channels`` says them: rel_gain by :func:`~trajlens.run.channels.rel_gain_quarters`,
    the step mean (its ``mean`` column) averaged over the quarter's steps; in the channels' order
    (:data:`CHANNEL_QUARTER_COLUMNS`). The channel findings quote these numbers; the run's
    section shows them."""
    from trajlens.run.channels import rel_gain_quarters

    rows = []
    for channel in gains["channel"].unique(maintain_order=True).to_list():
        means = step_means.filter(pl.col("channel") == channel).sort("step")
        mean = split.means(means["step"].to_numpy(), means["mean"].cast(pl.Float64).fill_null(math.nan).to_numpy())
        rows.append((channel, *rel_gain_quarters(gains, split, channel), *mean))
    return pl.DataFrame(rows, schema=CHANNEL_QUARTER_COLUMNS, orient="row")


def channel_findings(store: Any, run_id: str, split: str = TRAIN_SPLIT, channels: RunChannels | None = None) -> list[Finding]:
    """rel_gain of each reward channel, over the trajectories of ``split`` (those the run's
    section reports), in the first and last quarter of the run's steps
    (:func:`trajlens.run.quarters.quarters`), as :func:`channel_quarters` gives it
    (``channels``: :func:`run_channels`, when read already). A rel_gain under
    :data:`SATURATED_REL_GAIN` in the last quarter leaves the channel's group advantage without
    signal: the finding says whether the channel had none from the first quarter (a format
    reward every trajectory meets: the shipped checks fail on it from the first steps),
    *collapsed* (its step mean fell by half or more, attribution's
    :func:`~trajlens.attribution.causes.channel_collapse`, from the step attribution says) or
    *saturated* (every trajectory of a group scores alike, and the channel did not collapse). A
    channel that keeps its signal is a finding when its rel_gain moved by :data:`CHANNEL_CHANGE`
    or more. Each links to the run's channel table, which shows its numbers."""
    from trajlens.attribution.causes import CHANNEL_PREFIX

    channels = channels if channels is not None else run_channels(store, run_id, split)
    if channels is None:
        return []
    findings = []
    for row in channels.table.iter_rows(named=True):
        channel, early, late = row["channel"], row["rel_gain first quarter"], row["rel_gain last quarter"]
        if math.isnan(early) or math.isnan(late):
            continue  # the channel is missing from the first or the last quarter
        note = _no_signal_note(channels, row) if late < SATURATED_REL_GAIN else ""
        if not note and (early == 0 or abs(late - early) / abs(early) < CHANNEL_CHANGE):
            continue
        findings.append(Finding(
            f"{CHANNEL_PREFIX}{channel}: rel_gain {early:.2f} in the first quarter -> {late:.2f} in the last{note}",
            "saturated_channel" if note else "channel", CHANNELS_EVIDENCE, subject=f"channel:{channel}"))
    return findings


CHANNELS_EVIDENCE = "channels"
"""The part of a run's section that holds its channel table (:func:`channel_quarters`)."""
CHANNELS_TITLE = "Reward channels"
"""The title of a run's channel table, in its section and its stage report."""
CHANNELS_NOTE = ("Each reward channel's rel_gain (mean over groups of max - min: the signal a group baseline "
                 "sees) and its step mean, over the first and the last quarter of the steps, as "
                 "trajlens channels gives them.")


def _no_signal_note(channels: RunChannels, row: dict[str, Any]) -> str:
    """Why a channel's rel_gain is without signal in the last quarter (``row``: its row of
    :func:`channel_quarters`), with its step means in the first and the last quarter: it had
    none in the first either (its rel_gain there is under the line too: the checks fail from
    the first steps), it collapsed (attribution's definition) or, when neither, it saturated."""
    from trajlens.attribution.causes import channel_collapse, collapse_onset

    means = channels.step_means.filter(pl.col("channel") == row["channel"]).sort("step")
    steps, values = means["step"].to_numpy(), means["mean"].cast(pl.Float64).fill_null(math.nan).to_numpy()
    collapse = channel_collapse(steps, values, channels.quarters)
    how = ("without signal from the first quarter" if row["rel_gain first quarter"] < SATURATED_REL_GAIN else
           f"collapsed from step {collapse_onset(steps, values, collapse)}" if collapse is not None else "saturated")
    return (f" ({how}: its step mean {row['step mean first quarter']:.2f} -> {row['step mean last quarter']:.2f}; "
            "its group advantage carries no signal)")
