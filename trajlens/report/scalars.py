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
from typing import Any

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


def scalar_findings(store: Any, run_id: str, checks: Any) -> list[Finding]:
    """Learning-rate mismatches (from ``checks``, the run's evaluated shipped checks, a
    :class:`~trajlens.checks.evaluate.RunChecks` or None), critic clipping and explained
    variance, as sentences."""
    findings = lr_findings(checks) + critic_findings(checks)
    explained = _metric(store, run_id, "critic/vf_explained_var")
    if not explained.is_empty():
        findings.append(Finding(
            f"critic/vf_explained_var {explained['value'].min():.2f} to {explained['value'].max():.2f} "
            f"(median {explained['value'].median():.2f})", "explained_variance", "scalars"))
    return findings


CRITIC_CLIP_MEASURE = "critic_clip_ratio"
"""The checks' measure of the critic's grad_norm over the clip in force at that step."""
CRITIC_GRAD_NORM_MEASURE = "metric:critic/grad_norm"


def critic_findings(checks: Any) -> list[Finding]:
    """How far the critic's gradient is shrunk by its clip, from the checks' per-step ratios
    (the clip logged at each step, else the one configured then), with the steps where a shipped
    check on the critic's grad_norm fires: read from ``checks``, as :func:`lr_findings` reads them."""
    results = checks.results if checks is not None else []
    ratios = [o.values for r in results if r.check.measure == CRITIC_CLIP_MEASURE for o in r.outcomes
              if not o.values.is_empty()]
    if not ratios:
        return []
    ratio = ratios[0]["value"]
    clipped = float((ratio > 1.0).mean() or 0.0)
    alarms = "".join(f"; {r.name} fires at steps {steps_text(r.fired_steps)}" for r in results
                     if r.check.measure == CRITIC_GRAD_NORM_MEASURE and r.fired_steps)
    # How much it matters is the checks' to say: a critic starved by its clip, or a grad norm that
    # stays high, is a finding of weight; a grad norm sitting at its clip with no check firing
    # (median 1.0x, clipped on half the steps, on runs where nothing happened) is context.
    firing = any(r.name in FINDING_CHECKS["critic"] and r.status in ("fail", "warn") for r in results)
    return [Finding(f"critic grad_norm / its clip: median {ratio.median():.1f}x, clipped on {clipped:.0%} of steps"
                    + alarms, "critic" if firing else "explained_variance", "scalars")]


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
                f"{steps_text(list(outcome.fired_steps))} ({len(outcome.fired_steps)} of {outcome.evaluated_steps} "
                f"steps checked; check {result.name})", "learning_rate", "checks"))
    return findings


def channel_findings(store: Any, run_id: str, split: str = TRAIN_SPLIT) -> list[Finding]:
    """rel_gain of each reward channel, over the trajectories of ``split`` (those the run's
    section reports), in the first and last quarter of the run's steps
    (:func:`trajlens.run.quarters.quarters`). A rel_gain under :data:`SATURATED_REL_GAIN` in the
    last quarter leaves the channel's group advantage without signal: the finding says whether
    the channel had none from the first quarter (a format reward every trajectory meets: the
    shipped checks fail on it from the first steps), *collapsed* (its step mean fell by half or
    more, attribution's :func:`~trajlens.attribution.causes.channel_collapse`) or *saturated*
    (every trajectory of a group scores alike, and the channel did not collapse). A channel that keeps its signal is a
    finding when its rel_gain moved by :data:`CHANNEL_CHANGE` or more."""
    from trajlens.attribution.causes import CHANNEL_PREFIX
    from trajlens.checks.step_measures import channel_gains
    from trajlens.run.channels import rel_gain_quarters
    from trajlens.run.partitions import scan_run_table

    trajectories = (scan_run_table(store, run_id, "trajectories").filter(pl.col("split") == split)
                    .select("step", "group_id", "trajectory_id", "reward_channels").collect())
    if trajectories["step"].n_unique() < 2:
        return []  # one step: no first and last quarter to compare
    gains = channel_gains(trajectories).sort("channel", maintain_order=True)  # the channels' order
    if gains.is_empty() or gains["channel"].n_unique() < 2:
        return []
    run_quarters = quarters(trajectories["step"].to_numpy())  # the run's steps, as its stage table cuts them
    findings = []
    for channel in gains["channel"].unique(maintain_order=True).to_list():
        early, late = rel_gain_quarters(gains, run_quarters, channel)
        if math.isnan(early) or math.isnan(late):
            continue  # the channel is missing from the first or the last quarter
        note = _no_signal_note(trajectories, str(channel), run_quarters, early) if late < SATURATED_REL_GAIN else ""
        if not note and (early == 0 or abs(late - early) / abs(early) < CHANNEL_CHANGE):
            continue
        findings.append(Finding(
            f"{CHANNEL_PREFIX}{channel}: rel_gain {early:.2f} in the first quarter -> {late:.2f} in the last{note}",
            "saturated_channel" if note else "channel", "summary-outcome", subject=f"channel:{channel}"))
    return findings


def _no_signal_note(trajectories: pl.DataFrame, channel: str, run_quarters: Quarters, early: float) -> str:
    """Why a channel's rel_gain is without signal in the last quarter, with its step means in the
    first and the last quarter: it had none in the first either (``early``, its rel_gain there, is
    under the line too: the checks fail from the first steps), it collapsed (attribution's
    definition) or, when neither, it saturated."""
    from trajlens.attribution.causes import channel_collapse
    from trajlens.run.channels import channel_step_means, channel_values

    means = channel_step_means(channel_values(trajectories)).filter(pl.col("channel") == channel).sort("step")
    steps, values = means["step"].to_numpy(), means["mean"].to_numpy()
    collapse = channel_collapse(steps, values, run_quarters)
    first, last = (collapse.first, collapse.last) if collapse is not None else run_quarters.means(steps, values)
    how = ("without signal from the first quarter" if early < SATURATED_REL_GAIN else
           "collapsed" if collapse is not None else "saturated")
    return f" ({how}: its step mean {first:.2f} -> {last:.2f}; its group advantage carries no signal)"
