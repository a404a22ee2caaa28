"""The per-step quantities a check can read, and how each is computed from a batch of steps.

A measure name is a family and, for most families, a parameter: ``share:think``,
``mean:num_turns``, ``advantage:gae_raw:all_negative``, ``metric:critic/grad_norm``. The
families are declared in :data:`MEASURE_FAMILIES`; the estimator labels advantage measures can
name are declared in :data:`ADVANTAGE_LABELS`.

Every measure is kept per step as the sums of a ratio estimator over units (trajectories,
reward groups, or the step itself for a logged scalar): :mod:`trajlens.intervals`, the one
estimate every surface prints. Any set of steps (a window, a stage) pools by adding rows. A
logged scalar is one unit per step, so a window of ``k`` steps gives the mean of ``k`` values
with the spread between steps as its error. Every step batch is computed from its own rows
only, which is what lets ``--watch`` add steps incrementally.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Sequence

import polars as pl

from trajlens.classify.per_trajectory import AVERAGED_MEASURES, MEAN_SUPPORT, OUTCOME_SPECS, behaviour_specs
from trajlens.classify.rules import BEHAVIOUR_CLASSES, VERIFICATION_CLASSES
from trajlens.estimators.identify import CANDIDATES as IDENTIFY_CANDIDATES
from trajlens.estimators.identify import MATCH_TOLERANCE
from trajlens.estimators.spec import EstimatorChoice
from trajlens.intervals import Bounds, Spec, sums
# Logged LRs that ``lr_ratio:`` compares with the configuration in force at each step: the same
# table the report's scalar findings read.
from trajlens.run.config import LEARNING_RATES, configured_lr, critic_grad_clip_of
from trajlens.run.splits import TRAIN_SPLIT

if TYPE_CHECKING:
    from trajlens.estimators.trained import TrainedWith

STAT_COLUMNS: tuple[str, ...] = ("measure", "step", "x", "n", "units", "sxx", "sxn", "snn")
"""Columns of a step-statistics frame (see the module docstring)."""

STAT_SCHEMA = {"measure": pl.String, "step": pl.Int64, "x": pl.Float64, "n": pl.Float64, "units": pl.Int64,
               "sxx": pl.Float64, "sxn": pl.Float64, "snn": pl.Float64}


@dataclass(frozen=True)
class MeasureFamily:
    """A family of measures sharing a computation."""

    prefix: str
    """The measure name up to the first ':' (the whole name for families without a parameter)."""
    doc: str
    """What the measure is, per step."""
    source: str
    """What the run must provide: 'tool_calls', 'trajectories', 'channels', 'advantages',
    'logged_advantages', 'step_metrics', 'learning_rates' or 'critic_clip'."""
    proportion: bool
    """Whether the value is a proportion (Wilson interval) rather than a mean (normal interval)."""
    parameter: str = ""
    """What follows the ':' ('' for none)."""
    choices: tuple[str, ...] | None = None
    """Allowed parameters; None when the run decides (channels, metric names)."""
    wildcard: bool = False
    """Whether the parameter may be '*': every channel or metric the run has."""


MEAN_TRAJECTORY_MEASURES: tuple[str, ...] = AVERAGED_MEASURES
"""Per-trajectory measures of :func:`trajlens.classify.per_trajectory` a ``mean:`` measure can average."""

DIAGNOSTIC_STATS: tuple[str, ...] = (
    "mean", "std", "skew", "kurtosis", "bimodality", "positive_share", "all_negative", "all_positive", "max_sigma",
)
"""Statistics of a step's advantage batch (see :func:`trajlens.run.choices.advantage_diagnostics`);
``max_sigma`` is the largest |A - mean| / std over the batch."""
STAT_SUPPORT: dict[str, Bounds] = {
    "std": (0.0, None), "kurtosis": (-2.0, None), "bimodality": (0.0, 1.0), "positive_share": (0.0, 1.0),
    "max_sigma": (0.0, None),
}
"""Where each statistic of an advantage batch can lie (see :mod:`trajlens.estimators.diagnostics`:
excess kurtosis is -2 or more, the bimodality coefficient at most 1); the mean and skew have no bound."""
YES_NO_STATS: tuple[str, ...] = ("all_negative", "all_positive")
"""Statistics of a step's advantage batch that are yes or no: pooled over steps, a share of steps
(a proportion, with its Wilson interval, as ``trajlens compare`` gives it)."""


def _labels_from_registry() -> tuple[EstimatorChoice, ...]:
    """One label per report variant of the estimator registry (the labels the report uses too)."""
    from trajlens.estimators.registry import REPORT_VARIANTS

    labels = []
    for spec, variant in REPORT_VARIANTS:
        options = ", ".join(f"{k}={v}" for k, v in variant.options.items())
        doc = spec.summary + (f" ({options})" if options and len(spec.variants()) > 1 else "")
        labels.append(replace(variant, doc=doc))
    return tuple(labels)


ADVANTAGE_LABELS: tuple[EstimatorChoice, ...] = _labels_from_registry()
"""Estimator labels for ``advantage:<label>:<stat>``, read from the estimator registry's report
variants (:mod:`trajlens.estimators.registry`); ``run`` means the run's own (see :func:`run_label`)."""
LABELS: dict[str, EstimatorChoice] = {label.label: label for label in ADVANTAGE_LABELS}
RUN_LABEL = "run"


AUTO_CANDIDATE = "auto"
LOGGED_ADVANTAGE_CHOICES: tuple[str, ...] = (AUTO_CANDIDATE, *(c.label for c in IDENTIFY_CANDIDATES))
"""What ``logged_advantage_diff:`` compares against: ``auto`` or one candidate of
:data:`trajlens.estimators.identify.CANDIDATES` (the convention a check declares)."""


CRITIC_GRAD_NORM = "critic/grad_norm"
CRITIC_GRAD_CLIP_METRIC = "critic/grad_clip"

MEASURE_FAMILIES: tuple[MeasureFamily, ...] = (
    MeasureFamily("share", "Calls of a behaviour class / all behaviour calls, pooled over the step's trajectories "
                  "(share:think is the think share).", "tool_calls", True, "class", BEHAVIOUR_CLASSES),
    MeasureFamily("verification", "Calls of a verification class / all verification calls (the verification mix).",
                  "tool_calls", True, "class", VERIFICATION_CLASSES),
    MeasureFamily("uses", "Share of trajectories with at least one call of the class.", "tool_calls", True,
                  "class", BEHAVIOUR_CLASSES),
    MeasureFamily("ran_suite", "Share of trajectories that ran the whole test suite (the suite-run rate).",
                  "tool_calls", True),
    MeasureFamily("mean", "Mean over the step's trajectories of a per-trajectory measure (think_longest_run, "
                  "num_turns, model_tokens, edits_per_turn, readback_share, ...).", "tool_calls", False,
                  "measure", MEAN_TRAJECTORY_MEASURES),
    MeasureFamily("reward", "Mean scalar reward of the step's trajectories.", "trajectories", False),
    MeasureFamily("resolved", "Share of the step's trajectories with a verdict that solved their task.", "trajectories", True),
    MeasureFamily("rel_gain", "A reward channel's mean over groups of (max - min) in the group (groups of 2+).",
                  "channels", False, "channel", None, True),
    MeasureFamily("channel_std", "A reward channel's std over the step's trajectories (unbiased; NaN left out).",
                  "channels", False, "channel", None, True),
    MeasureFamily("channel_collinearity", "Largest absolute Pearson correlation between two reward channels over the "
                  "step's trajectories.", "channels", False),
    MeasureFamily("advantage", "A statistic of the step's recomputed advantage batch: label:stat, label one of "
                  "ADVANTAGE_LABELS or 'run' (the run's own estimator).", "advantages", False, "label:stat"),
    MeasureFamily("metric", "A logged training scalar (critic/grad_norm, critic/vf_explained_var, ...).",
                  "step_metrics", False, "name", None, True),
    MeasureFamily("lr_ratio", "Logged LR / the LR configured at that step (config history when ingested), after "
                  "any warm-up.", "learning_rates", False, "metric", tuple(r.metric for r in LEARNING_RATES), True),
    MeasureFamily("critic_clip_ratio", "critic/grad_norm / the critic's grad clip: how many times each update "
                  "was shrunk.", "critic_clip", False),
    MeasureFamily("logged_advantage_diff", "Largest |logged - recomputed| advantage of the step, relative to "
                  "the step's max(1, max |logged|), under a candidate of trajlens.estimators.identify: `auto` (the "
                  "candidates the run's config declares; when it declares none, the one the logged advantages of its "
                  "first training step match, the run's estimator as the report and attribution name it, else every "
                  "one; the closest single candidate at the step is taken) or a candidate's "
                  "label (trl_grpo_group, trl_grpo_batch, verl_grpo, ...).", "logged_advantages", False,
                  "candidate", LOGGED_ADVANTAGE_CHOICES),
)
FAMILIES: dict[str, MeasureFamily] = {family.prefix: family for family in MEASURE_FAMILIES}

FAMILY_SUPPORT: dict[str, Bounds] = {
    "rel_gain": (0.0, None), "channel_std": (0.0, None), "channel_collinearity": (0.0, 1.0),
    "lr_ratio": (0.0, None), "critic_clip_ratio": (0.0, None), "logged_advantage_diff": (0.0, None),
}
"""Where the measures of a family that are means can lie (a spread, a ratio of sizes, an absolute
correlation); the reward and a logged metric have no bound trajlens can know."""


def measure_support(name: str) -> Bounds | None:
    """Where the measure ``name`` (as the checks name it) can lie, or None: the checks' and
    compare's means cut their intervals there (:func:`trajlens.intervals.pooled`)."""
    family, _, parameter = name.partition(":")
    if family == "mean":
        return MEAN_SUPPORT.get(name)
    if family == "advantage":
        return STAT_SUPPORT.get(parameter.rpartition(":")[2])
    return FAMILY_SUPPORT.get(family)


@dataclass(frozen=True)
class MeasureName:
    """A parsed measure name."""

    family: MeasureFamily
    parameter: str

    @property
    def wildcard(self) -> bool:
        return self.parameter == "*"

    @property
    def proportion(self) -> bool:
        """Whether the value is a proportion (Wilson interval) rather than a mean: the family's
        kind, or a yes/no statistic of the advantage batch (:data:`YES_NO_STATS`)."""
        if self.family.prefix == "advantage":
            return self.parameter.partition(":")[2] in YES_NO_STATS
        return self.family.proportion


def parse_measure(name: str) -> MeasureName:
    """Split ``name`` into its family and parameter; raises ValueError with the reason."""
    prefix, _, parameter = name.partition(":")
    family = FAMILIES.get(prefix)
    if family is None:
        raise ValueError(f"unknown measure {name!r} (families: {', '.join(FAMILIES)})")
    if not family.parameter:
        if parameter:
            raise ValueError(f"measure {prefix!r} takes no parameter, found {name!r}")
        return MeasureName(family, "")
    if not parameter:
        raise ValueError(f"measure {prefix!r} needs a {family.parameter}: {prefix}:<{family.parameter}>")
    if parameter == "*":
        if not family.wildcard:
            raise ValueError(f"measure {prefix!r} takes no '*'")
        return MeasureName(family, parameter)
    if family.prefix == "advantage":
        label, _, stat = parameter.partition(":")
        if label != RUN_LABEL and label not in LABELS:
            raise ValueError(f"unknown estimator label {label!r} (labels: {RUN_LABEL}, {', '.join(LABELS)})")
        if stat not in DIAGNOSTIC_STATS:
            raise ValueError(f"unknown advantage statistic {stat!r} (statistics: {', '.join(DIAGNOSTIC_STATS)})")
    elif family.choices is not None and parameter not in family.choices:
        raise ValueError(f"unknown {family.parameter} {parameter!r} for {prefix} (one of {', '.join(family.choices)})")
    return MeasureName(family, parameter)


ONE_VALUE_PER_STEP: frozenset[str] = frozenset(
    {"channel_std", "channel_collinearity", "advantage", "metric", "lr_ratio", "critic_clip_ratio",
     "logged_advantage_diff"})
"""Families with a single value per step: no interval unless steps are pooled (window > 1)."""


def measure_problem(name: str, condition: str, *, significant: bool = False, window: int = 1) -> str | None:
    """Why ``name`` cannot be checked (with ``condition``), or None."""
    try:
        parsed = parse_measure(name)
    except ValueError as error:
        return str(error)
    if significant and window == 1 and parsed.family.prefix in ONE_VALUE_PER_STEP:
        return (f"{name} has one value per step and so no interval for 'significant'; "
                "pool steps with window = N (N > 1)")
    return None


# --- configuration in force at each step -------------------------------------------------------

@dataclass(frozen=True)
class ConfigHistory:
    """The run's configuration and, when the run recorded one, what it was from which step on."""

    current: dict
    """The run's configuration (``runs.config``)."""
    entries: tuple[tuple[int, dict], ...] = ()
    """(from_step, config) in step order; empty when only the current config is known."""

    def at(self, step: int) -> dict:
        """The configuration in force at ``step``."""
        chosen = self.current if not self.entries else self.entries[0][1]
        for from_step, config in self.entries:
            if from_step <= step:
                chosen = config
        return chosen

    @property
    def has_history(self) -> bool:
        return len(self.entries) > 0


def run_label(config: dict, estimator_column: str | None = None, identified: Any = None) -> EstimatorChoice | None:
    """The estimator, under its label and options, the run trained with: what
    :func:`trajlens.estimators.trained_with` reads from its config and its ``runs.estimator``
    value (``estimator_column``), or from ``identified`` (an
    :class:`~trajlens.estimators.identify.Identification` of its logged advantages) when both are
    silent. A label of :data:`LABELS` where one recomputes the same thing."""
    from trajlens.estimators.trained import trained_with

    return own_label(trained_with(config, estimator_column, identified))


def own_label(trained: TrainedWith) -> EstimatorChoice | None:
    """:func:`run_label` of what :func:`~trajlens.estimators.trained_with` answered."""
    own = trained.choice
    return None if own is None else own.among(ADVANTAGE_LABELS) or own


def declared_source(trained: TrainedWith) -> str:
    """How the run's declared estimator is known: ``from its config``, or ``from its
    runs.estimator=NAME`` where that column stood in for the config's ``algorithm.adv_estimator``."""
    from trajlens.estimators.trained import ESTIMATOR_COLUMN

    return f"from its {ESTIMATOR_COLUMN}={trained.stand_in}" if trained.stand_in else "from its config"


# --- statistics of a batch of steps -----------------------------------------------------------

def empty_stats() -> pl.DataFrame:
    return pl.DataFrame(schema=STAT_SCHEMA)


def _ratio_stats(frame: pl.DataFrame, measure: str, x: pl.Expr, n: pl.Expr, units: str = "step") -> pl.DataFrame:
    """Sufficient statistics per step of units with numerator ``x`` and denominator ``n``."""
    return _ratio_stats_of(frame, [(measure, x, n)], units)


def _ratio_stats_of(frame: pl.DataFrame, specs: Sequence[Spec], units: str = "step") -> pl.DataFrame:
    """:func:`_ratio_stats` of several measures (name, numerator, denominator) in one grouping:
    :func:`trajlens.intervals.sums` per step."""
    return sums(frame.with_columns(pl.col(units).alias("step")), specs, by=("step",)).select(STAT_COLUMNS)


def scalar_stats(frame: pl.DataFrame) -> pl.DataFrame:
    """Statistics of one value per (measure, step): one unit each."""
    value = pl.col("value").cast(pl.Float64)
    return frame.drop_nulls("value").select(
        pl.col("measure"), pl.col("step").cast(pl.Int64), value.alias("x"), pl.lit(1.0).alias("n"),
        pl.lit(1, dtype=pl.Int64).alias("units"), (value**2).alias("sxx"), value.alias("sxn"), pl.lit(1.0).alias("snn"),
    )


def behaviour_stats(trajectories: pl.DataFrame, tool_calls: pl.DataFrame) -> pl.DataFrame:
    """share:, verification:, uses:, ran_suite and mean: measures of the given steps."""
    from trajlens.classify import classify_calls, trajectory_measures

    if trajectories.is_empty() or tool_calls.is_empty():
        return empty_stats()
    return trajectory_measure_stats(trajectory_measures(classify_calls(tool_calls), trajectories))


def trajectory_measure_stats(measures: pl.DataFrame) -> pl.DataFrame:
    """share:, verification:, uses:, ran_suite and mean: measures from the per-trajectory
    measures of classified calls (:func:`trajlens.classify.trajectory_measures`)."""
    if measures.is_empty():
        return empty_stats()
    return _ratio_stats_of(measures, behaviour_specs())


def measure_stats_of(measures: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    """:func:`trajectory_measure_stats` of the measures ``names`` alone (a frame holding only the
    columns they read will do)."""
    specs = [spec for spec in behaviour_specs() if spec[0] in set(names)]
    return _ratio_stats_of(measures, specs) if specs and not measures.is_empty() else empty_stats()


def outcome_stats(trajectories: pl.DataFrame) -> pl.DataFrame:
    """``reward`` and ``resolved`` per step (:data:`~trajlens.classify.per_trajectory.OUTCOME_SPECS`)."""
    if trajectories.is_empty():
        return empty_stats()
    return pl.concat([_ratio_stats(trajectories, *spec) for spec in OUTCOME_SPECS])


def channel_stats(trajectories: pl.DataFrame) -> pl.DataFrame:
    """rel_gain: (over groups of two or more), channel_std: per channel, and channel_collinearity."""
    if trajectories.is_empty():
        return empty_stats()
    from trajlens.run.channels import channel_values

    long = channel_values(trajectories)
    if long.is_empty():
        return empty_stats()
    largest = most_correlated(channel_correlations(long))
    return pl.concat([channel_value_stats(long), *([collinearity_stats(largest)] if largest.height else [])])


def channel_value_stats(long: pl.DataFrame) -> pl.DataFrame:
    """The rel_gain: and channel_std: statistics of the channel values ``long``
    (:func:`trajlens.run.channels.channel_values`), without their collinearity."""
    parts = [rel_gain_stats(group_gains(long))]
    spread = long.group_by("step", "channel").agg(pl.col("value").fill_nan(None).std().alias("value"))
    parts.append(scalar_stats(spread.select("step", pl.concat_str(pl.lit("channel_std:"), "channel").alias("measure"),
                                            "value")))
    return pl.concat(parts)


def rel_gain_stats(gains: pl.DataFrame) -> pl.DataFrame:
    """The ``rel_gain:<channel>`` statistics of each step from the groups' gains
    (:func:`group_gains`): each group one unit, its gain the numerator."""
    parts = [_ratio_stats(part, f"rel_gain:{channel}", pl.col("gain"), pl.lit(1))
             for (channel,), part in gains.partition_by("channel", as_dict=True, maintain_order=True).items()]
    return pl.concat(parts) if parts else empty_stats()


def step_rel_gains(gains: pl.DataFrame) -> pl.DataFrame:
    """``step``, ``channel``, ``rel_gain``: each channel's ``rel_gain:<channel>`` at each step, as
    the checks judge it (:func:`rel_gain_stats`), in step order; what the report's channel figure draws."""
    stats = rel_gain_stats(gains)
    return stats.select(pl.col("step"), pl.col("measure").str.strip_prefix("rel_gain:").alias("channel"),
                        (pl.col("x") / pl.col("n")).alias("rel_gain")).sort("step", maintain_order=True)


COLLINEARITY = "channel_collinearity"
"""The measure of how far two reward channels move together: the largest |r| of a pair at a step."""


def channel_correlations(long: pl.DataFrame) -> pl.DataFrame:
    """``step``, ``channel_a``, ``channel_b``, ``value``: the |Pearson r| of each pair of channels
    over each step's trajectories (:func:`trajlens.run.channels.channel_values`), null where it
    is undefined (a channel that does not vary); a step's ``channel_collinearity`` is its largest.
    Empty with fewer than two channels."""
    wide = long.pivot("channel", index=["step", "trajectory_id"], values="value", aggregate_function="first")
    channels = [c for c in wide.columns if c not in ("step", "trajectory_id")]
    pairs = [(a, b) for i, a in enumerate(channels) for b in channels[i + 1:]]
    schema = {"step": pl.Int64, "channel_a": pl.String, "channel_b": pl.String, "value": pl.Float64}
    if not pairs:
        return pl.DataFrame(schema=schema)
    per_step = wide.group_by("step", maintain_order=True).agg(
        pl.corr(a, b).abs().fill_nan(None).alias(f"{i}") for i, (a, b) in enumerate(pairs))
    return pl.concat([
        per_step.select(pl.col("step").cast(pl.Int64), pl.lit(a).alias("channel_a"), pl.lit(b).alias("channel_b"),
                        pl.col(f"{i}").cast(pl.Float64).alias("value"))
        for i, (a, b) in enumerate(pairs)
    ]).sort("step", maintain_order=True)


def most_correlated(correlations: pl.DataFrame) -> pl.DataFrame:
    """Of :func:`channel_correlations`, the pair with the largest |r| at each step (ties to the
    first by name), in step order: its ``value`` is the step's ``channel_collinearity``."""
    return (correlations.drop_nulls("value")
            .sort("step", "value", "channel_a", "channel_b", descending=[False, True, False, False])
            .unique("step", keep="first", maintain_order=True))


def collinearity_stats(largest: pl.DataFrame) -> pl.DataFrame:
    """The ``channel_collinearity`` statistics of each step, from :func:`most_correlated`."""
    return scalar_stats(largest.select("step", "value", pl.lit(COLLINEARITY).alias("measure")))


def channel_gains(trajectories: pl.DataFrame) -> pl.DataFrame:
    """Each reward channel's gain (max - min) in each group of two or more trajectories
    (``step``, ``group_id``, ``channel``, ``gain``), in order of appearance: the terms of ``rel_gain``."""
    from trajlens.run.channels import channel_values

    return group_gains(channel_values(trajectories))


def group_gains(long: pl.DataFrame) -> pl.DataFrame:
    """:func:`channel_gains` from the channel values already read
    (:func:`trajlens.run.channels.channel_values`)."""
    # Groups in order of appearance, so each step's mean over them sums in the same order every time.
    return long.group_by("step", "group_id", "channel", maintain_order=True).agg(
        (pl.col("value").max() - pl.col("value").min()).alias("gain"), pl.len().alias("size"),
    ).filter(pl.col("size") >= 2).drop("size")


def metric_stats(step_metrics: pl.DataFrame, history: ConfigHistory) -> pl.DataFrame:
    """metric:<name> for every logged scalar, lr_ratio: and critic_clip_ratio where configured."""
    if step_metrics.is_empty():
        return empty_stats()
    metrics = step_metrics.select("step", "name", "value").drop_nulls("value")
    parts = [scalar_stats(metrics.select("step", pl.concat_str(pl.lit("metric:"), "name").alias("measure"), "value"))]
    for rate in LEARNING_RATES:
        logged = metrics.filter(pl.col("name") == rate.metric)
        rows = []
        for step, value in logged.select("step", "value").iter_rows():
            config = history.at(step)
            configured, warmup = configured_lr(config, rate)
            if not _positive(configured) or (isinstance(warmup, int) and step <= warmup):
                continue
            rows.append({"measure": f"lr_ratio:{rate.metric}", "step": step, "value": value / configured})
        if rows:
            parts.append(scalar_stats(pl.DataFrame(rows)))
    norms = metrics.filter(pl.col("name") == CRITIC_GRAD_NORM).select("step", "value")
    clips = dict(metrics.filter(pl.col("name") == CRITIC_GRAD_CLIP_METRIC).select("step", "value").iter_rows())
    rows = []
    for step, norm in norms.iter_rows():
        clip = clips.get(step)
        if not _positive(clip):
            config = history.at(step)
            clip = critic_grad_clip_of(config)
        if _positive(clip):
            rows.append({"measure": "critic_clip_ratio", "step": step, "value": norm / clip})
    if rows:
        parts.append(scalar_stats(pl.DataFrame(rows)))
    return pl.concat(parts)


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def advantage_stats(run_id: str, trajectories: pl.DataFrame, tokens: pl.DataFrame | None,
                    labels: Sequence[EstimatorChoice], run: EstimatorChoice | None,
                    carry: dict[str, dict[str, Any]] | None = None,
                    scans: list[Any] | None = None) -> tuple[pl.DataFrame, list[str]]:
    """advantage:<label>:<stat> for each label (and advantage:run:<stat> for the run's own).

    Returns the statistics and, per label the data cannot give, the reason. ``carry``: what an
    estimator carries from step to step (gdpo_dynamic's moving averages), per label, kept by
    the caller from one batch to the next so that the values do not depend on the batches.
    ``scans``: filled with each training step's GAE scans (:data:`trajlens.run.stepwise.StepScans`,
    in step order), for :meth:`LoggedAdvantages.add` to take rather than run again.
    """
    from trajlens.errors import TrajlensError
    from trajlens.run.advantages import RunFrames, require_inputs
    from trajlens.run.stepwise import batch_choice_diagnostics

    train = trajectories.filter(pl.col("split") == TRAIN_SPLIT)
    if train.is_empty():
        return empty_stats(), ["no training trajectories"]
    frames = RunFrames(run_id, train, None if tokens is None or tokens.is_empty() else tokens)
    parts, reasons = [], []
    computable, lacking = [], []
    for label in labels:
        try:
            require_inputs(run_id, label.estimator, frames, label.options)
        except TrajlensError as error:
            reasons.append(f"{label.label}: {error}")
            lacking.append(label)
            continue
        computable.append(label)
    steps = train.get_column("step").unique(maintain_order=True)
    if lacking and steps.len() > 1:
        # a step that lacks an input (its token file missing) costs that step alone, not its
        # batch: the labels the batch cannot give are tried step by step
        stats, reasons = _step_by_step(run_id, train, frames.tokens, steps.to_list(), lacking, run, carry)
        parts.append(stats)
    # every label in one pass over the batch (GAE's raw and whitened labels share one scan)
    errors: dict[str, Exception] = {}
    found = batch_choice_diagnostics(run_id, train.sort("step", maintain_order=True),
                                     None if frames.tokens is None else frames.tokens.to_arrow(), computable,
                                     carry=carry if carry is not None else {}, errors=errors, extremes=True,
                                     scans=scans)
    by_label = {part["estimator"][0]: part for part in found if part.height}
    for label in computable:
        if label.label in errors:
            reasons.append(f"{label.label}: {errors[label.label]}")
    stacked = pl.concat(list(by_label.values()), how="diagonal_relaxed") if by_label else None
    if stacked is not None:
        parts.append(diagnostic_stats(stacked, [c for c in computable if c.label not in errors], run))
    return (pl.concat(parts) if parts else empty_stats()), reasons


def _step_by_step(run_id: str, train: pl.DataFrame, tokens: pl.DataFrame | None, steps: list[int],
                  labels: Sequence[EstimatorChoice], run: EstimatorChoice | None,
                  carry: dict[str, dict[str, Any]] | None) -> tuple[pl.DataFrame, list[str]]:
    """:func:`advantage_stats` of each step of a batch on its own, in step order."""
    parts, reasons = [], []
    for step in steps:
        rows = train.filter(pl.col("step") == step)
        step_tokens = None if tokens is None else tokens.join(rows.select("trajectory_id"), on="trajectory_id",
                                                               how="semi")
        stats, problems = advantage_stats(run_id, rows, step_tokens, labels, run, carry)
        parts.append(stats)
        reasons += [problem for problem in problems if problem not in reasons]
    return pl.concat(parts, how="diagonal_relaxed"), reasons


def diagnostic_stats(diagnostics: pl.DataFrame, labels: Sequence[EstimatorChoice],
                     run: EstimatorChoice | None) -> pl.DataFrame:
    """advantage:<label>:<stat> (and advantage:run:<stat> for the run's own) from per-step
    diagnostics stacked with an ``estimator`` column and the batch's ``min`` and ``max``
    (:func:`trajlens.run.stepwise.batch_choice_diagnostics` with ``extremes``)."""
    parts = []
    for label in labels:
        rows = diagnostics.filter(pl.col("estimator") == label.label).with_columns(
            # largest |A - mean| / std, from the batch's extremes
            (pl.max_horizontal(pl.col("max") - pl.col("mean"), pl.col("mean") - pl.col("min")) / pl.col("std"))
            .alias("max_sigma"))
        names = [label.label] + ([RUN_LABEL] if run is not None and run.label == label.label else [])
        for name in names:
            long = rows.select("step", *[pl.col(s).cast(pl.Float64) for s in DIAGNOSTIC_STATS]).unpivot(
                index="step", variable_name="stat", value_name="value")
            long = long.filter(pl.col("value").is_finite()).select(
                "step", pl.concat_str(pl.lit(f"advantage:{name}:"), "stat").alias("measure"), "value")
            parts.append(scalar_stats(long))
    return pl.concat(parts) if parts else empty_stats()


def logged_candidates(candidate: str, config: dict, estimator_column: str | None = None) -> tuple[Any, ...]:
    """The candidates a ``logged_advantage_diff:<candidate>`` measure compares: the one labelled
    so, or for ``auto`` those whose estimator the run's config (or its ``runs.estimator``:
    ``estimator_column``) declares (every one without)."""
    from trajlens.estimators.registry import declared_estimators

    if candidate == AUTO_CANDIDATE:
        declared = declared_estimators(config, estimator_column)
        return tuple(c for c in IDENTIFY_CANDIDATES if c.estimator in declared) or IDENTIFY_CANDIDATES
    return tuple(c for c in IDENTIFY_CANDIDATES if c.label == candidate)


class LoggedAdvantages:
    """``logged_advantage_diff:<candidate>`` of a run fed a batch of whole steps at a time
    (:meth:`add`): per step, the closest compared candidate's largest |logged - recomputed|
    relative to the step's max(1, max |logged|), as :func:`trajlens.estimators.identify_advantages`
    measures a match; over everything fed, its verdict (:attr:`note`) or why there is none
    (:attr:`problem`).

    ``candidate`` is a label of :data:`~trajlens.estimators.identify.CANDIDATES`, or ``auto``:
    the candidates whose estimator the run's config declares
    (:func:`~trajlens.estimators.registry.declared_estimators`). When it declares none, the run's
    estimator as :class:`trajlens.run.identify.LoggedEstimator` names it (with those
    indistinguishable from it on the step that decided), so a run whose logged advantages change
    convention later departs there, as it does from the estimator the report names; every
    candidate when the first step matches none. A step's value does not depend on the batch it
    came in, so the checks' batches and the report's advantage pass (which reads the token arrays
    once for its own recomputations and this) give the same values and verdict.
    """

    def __init__(self, candidate: str, config: dict, identifier: Any = None, estimator_column: str | None = None
                 ) -> None:
        self.candidate = candidate
        self.measure = f"logged_advantage_diff:{candidate}"
        self.config = config
        self.chosen = logged_candidates(candidate, config, estimator_column)
        self._compared = _logged_identifier(self.chosen, config)
        self._identify = candidate == AUTO_CANDIDATE and len(self.chosen) == len(IDENTIFY_CANDIDATES)
        """Whether the candidates compared are still to be narrowed to the run's identified estimator."""
        self._identifier = identifier
        """The run's :class:`~trajlens.run.identify.LoggedEstimator`, shared with the checks' own
        label when they pass it; one of its own otherwise."""
        self._others: Any = None
        """Every candidate, fed the steps where the compared ones depart: what they match instead."""
        self._error = ""
        self._trained = False
        self._stats: list[pl.DataFrame] = []
        self._found: Any = None
        """The verdict as last read (or its error), until the next batch is fed."""

    @property
    def token_columns(self) -> tuple[str, ...]:
        """The token columns it reads: the logged advantages beside the columns its candidates'
        estimators recompute from (:func:`trajlens.run.stepwise.choice_token_columns`), and
        every candidate's when it may try them all."""
        from trajlens.run.identify import logged_token_columns

        return logged_token_columns(IDENTIFY_CANDIDATES if self._widens else self.chosen)

    @property
    def _widens(self) -> bool:
        """Whether every candidate is tried where the compared ones depart (they are not all of
        them): what the logged advantages match instead. It reads their columns too, so the
        answer does not depend on what else the caller read."""
        return len(self.chosen) < len(IDENTIFY_CANDIDATES)

    def add(self, trajectories: pl.DataFrame, tokens: pl.DataFrame | None,
            scans: Sequence[Any] | None = None) -> pl.DataFrame:
        """Compare a batch of whole steps (the run's trajectories, any split, and their token
        rows or None); returns the statistics of its steps with logged values. ``scans``: each
        step's GAE scans that the caller (the report's advantage pass) ran on the batch, of
        training trajectories alone (:data:`trajlens.run.stepwise.StepScans`, in step order)."""
        from functools import partial

        from trajlens.estimators import EstimatorInputError
        from trajlens.run.identify import by_step, flat_step

        self._found = None
        train = trajectories.filter(pl.col("split") == TRAIN_SPLIT)
        if train.is_empty() or self._error:
            return empty_stats()
        self._trained = True
        # the columns it reads, whatever else the caller read: the checks and the report see the same
        tokens = None if tokens is None or tokens.is_empty() else tokens.select(
            c for c in self.token_columns if c in tokens.columns)
        if self._identify:
            self._narrow_to_identified(train, tokens)
        found = []
        try:
            for index, (part, part_tokens) in enumerate(by_step(train, tokens)):
                ran = partial(flat_step, scans=scans[index]) if scans and train.height == trajectories.height else None
                relative = self._compared.add(part, part_tokens, ran)
                if relative is None or relative.is_empty():  # nothing logged, or no model token to compare
                    continue
                found.append(relative)
                if float(relative["relative"].max()) > MATCH_TOLERANCE and self._widens:
                    self._others = self._others or _logged_identifier(IDENTIFY_CANDIDATES, self.config)
                    self._others.add(part, part_tokens, ran)
        except EstimatorInputError as error:
            # the steps before the error keep their values, however the run was cut into batches
            self._error = str(error).removeprefix("identify_advantages: ")
        if not found:
            return empty_stats()
        values = pl.concat(found).select("step", pl.lit(self.measure).alias("measure"), pl.col("relative").alias("value"))
        stats = scalar_stats(values)
        self._stats.append(stats)
        return stats

    def stats_of(self, steps: pl.Series) -> pl.DataFrame:
        """The statistics of ``steps`` (an imploded column) among those fed so far."""
        if len(self._stats) > 1:
            self._stats[:] = [pl.concat(self._stats)]  # once, not per batch asked
        return self._stats[0].filter(pl.col("step").is_in(steps)) if self._stats else empty_stats()

    def _narrow_to_identified(self, train: pl.DataFrame, tokens: pl.DataFrame | None) -> None:
        """Compare the run's estimator as its logged advantages name it
        (:class:`trajlens.run.identify.LoggedEstimator`, fed this batch), and those
        indistinguishable from it on the step that decided; every candidate while no step has
        decided, and when it matches none."""
        from trajlens.estimators import EstimatorInputError
        from trajlens.run.identify import LoggedEstimator

        if self._identifier is None:
            self._identifier = LoggedEstimator(self.config)
        try:
            found = self._identifier.add(train, lambda step: None if tokens is None else
                                         tokens.filter(pl.col("step") == step))
        except EstimatorInputError:
            self._identify = False
            return
        self._identify = not self._identifier.done
        if found is not None and found.matched:
            named = {fit.candidate.label for fit in (found.best, *found.equivalent)}
            self.chosen = tuple(c for c in IDENTIFY_CANDIDATES if c.label in named)
            self._compared = _logged_identifier(self.chosen, self.config)

    @property
    def _verdict(self) -> Any:
        """The verdict over everything fed so far (or the error that stopped it), computed again
        once a batch is fed: ``trajlens check --watch`` reads it after each."""
        from trajlens.estimators import EstimatorInputError

        if self._found is None:
            if self._error:
                self._found = EstimatorInputError(self._error)
            else:
                try:
                    self._found = self._compared.result()
                except EstimatorInputError as error:
                    self._found = EstimatorInputError(str(error).removeprefix("identify_advantages: "))
        return self._found

    @property
    def problem(self) -> str:
        """Why there are no values (no training trajectories, nothing logged or recomputable);
        empty when there are. Read once everything is fed."""
        if not self._trained:
            return "the run has no training trajectories"
        return str(self._verdict) if isinstance(self._verdict, Exception) else ""

    @property
    def note(self) -> str | None:
        """The verdict over everything fed: the closest candidate compared and where it departs,
        and when it departs, what matches there instead. Read once everything is fed."""
        found = self._verdict
        if not self._trained or isinstance(found, Exception):
            return None
        return found.verdict if found.matched else f"{found.verdict}; {self._closest_of_all()}"

    def _closest_of_all(self) -> str:
        """What the logged advantages match where the compared candidates depart."""
        from trajlens.estimators import EstimatorInputError

        if self._others is None:
            return "no other candidate comes closer"
        try:
            found = self._others.result()
        except EstimatorInputError:
            return "no other candidate could be recomputed"
        if found.matched:
            return f"they match {found.best.candidate.label} instead: {found.verdict}"
        return f"closest of all candidates: {found.best.candidate.label} ({found.best.max_abs_diff:.1e})"


def _logged_identifier(candidates: tuple[Any, ...], config: dict) -> Any:
    """An :class:`~trajlens.estimators.identify.Identifier` of ``candidates`` on the run layer's
    flat step kernels, deciding from each batch's facts, maxima alone (no medians)."""
    from trajlens.estimators.identify import Identifier
    from trajlens.run.identify import flat_step

    return Identifier(config=config, candidates=candidates, flat_step=flat_step, medians=False)


def parse_config(text: str | None) -> dict:
    """A run's JSON config as a dict ({} when absent or not an object)."""
    try:
        config = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return config if isinstance(config, dict) else {}


def render_markdown() -> str:
    """The measure and label tables of ``docs/checks.md``, generated from the declarations above."""
    lines = ["| measure | per step | interval | needs |", "|---|---|---|---|"]
    for family in MEASURE_FAMILIES:
        name = f"`{family.prefix}:<{family.parameter}>`" if family.parameter else f"`{family.prefix}`"
        kind = ("Wilson (design effect)" if family.proportion else
                f"normal; Wilson for {', '.join(YES_NO_STATS)}" if family.prefix == "advantage" else "normal")
        lines.append(f"| {name} | {family.doc} | {kind} | {family.source} |")
    lines += ["", "| label | estimator | options | what it is |", "|---|---|---|---|"]
    for label in ADVANTAGE_LABELS:
        options = ", ".join(f"{k}={v}" for k, v in label.options.items()) or "-"
        lines.append(f"| `{label.label}` | `{label.estimator}` | {options} | {label.doc} |")
    return "\n".join(lines) + "\n"


__all__ = ["ADVANTAGE_LABELS", "ConfigHistory", "DIAGNOSTIC_STATS", "LEARNING_RATES",
           "MEASURE_FAMILIES", "MeasureFamily", "MeasureName", "STAT_COLUMNS", "parse_measure", "render_markdown",
           "run_label"]


if __name__ == "__main__":
    print(render_markdown(), end="")
