"""Verdicts for the drifts that are not a behaviour class: response length, and a collapsing reward channel.

Response length
    A length drift is a change of the mean model tokens per trajectory between the first and
    the last quarter of the steps (:func:`trajlens.run.quarters.quarters`, the quarters of every
    early-vs-late comparison) that counts under the shipped check ``response_length_inflation``'s
    rule (:data:`LENGTH_RULE`: x1.25 or more either way, p < 0.05; :mod:`trajlens.run.change`,
    the rule the check and the report's length trend apply). Its evidence is the length bias of every
    loss aggregation under the run's estimator (``length_bias``: the elasticity of push per
    token on length, 95% bootstrap interval over steps) and the *length relevance*: the
    correlation of a trajectory's length with its reward, both centred within their step, signed
    by the drift's direction, with a Fisher interval. An aggregation is judged by its *weight
    elasticity* (:func:`judged_elasticity`: what its own weights make of length, net of what the
    advantages make of it under every aggregation alike). It is *biased* when that interval lies
    wholly beyond +-:data:`BIAS_BAND` (:func:`biased`, the flag the length-bias finding uses).
    Another aggregation is *fair* beside a biased one when its weight elasticity lies within the
    band, it is not biased, and its interval lies wholly on zero's side of the biased one's
    (:func:`fairer`): it would have weighed length measurably less, and not by a bias of its own.

    * **aggregation artefact**: the run's aggregation is biased, some other aggregation is
      fair beside it, and length relevance is not with the drift (the loss aggregation, not the
      estimator, is the cause: the finding names the aggregations that would not be biased);
    * **learning**: length relevance is with the drift and the run's aggregation is not biased;
    * **unexplained** otherwise.

    The finding splits the change into the calls made, the tokens per call and the tokens no call
    owns (:func:`length_mix`); an unexplained drift whose calls made account for
    :data:`CALLS_SHARE` of it or more says that it follows them (the classes' drifts have their
    own verdicts).
Reward channel
    A channel collapses when its step mean falls by half or more from the first quarter of the
    steps to the last (p < 0.001, each step a unit; :func:`channel_collapse`, which the report's channel
    findings use too), from the step its mean over five steps had fallen a quarter of the way
    (:func:`collapse_onset`). Its evidence is each estimator's *channel credit*: the Pearson
    correlation, over the trajectories of the run, of the channel's value centred in its
    group with the estimator's advantage, with a 95% bootstrap interval over groups; and the
    channel's *reward relevance*: the correlation of its value with the trajectory's reward, both
    centred within their step, with a Fisher interval. Both are signed by the collapse, so a
    positive number goes with it (:func:`channel_decision`):

    * **estimator artefact**: a counterfactual estimator's channel credit lies wholly above the
      run's (the finding names it, GDPO for a sum-then-normalise run: it "would have credited the
      channel and kept it" when its own credit goes against the collapse, else it "would have
      pushed it down less"). Reward relevance does not overrule it: the run's reward is the sum the estimator
      normalises, so a channel the sum outweighs is the case another estimator exists for;
    * **learning**: no compared estimator credits the channel more (they agree with the run's), the
      channel's reward relevance is with the collapse (within a step, trajectories with more of the
      channel earned less reward) and the run's estimator did not credit the channel (its credit's
      interval is not wholly above 0): the run traded the channel for reward;
    * **unexplained** otherwise (the run's estimator credited the channel and it fell anyway, or
      the estimators agree and reward does not ask for less of it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from trajlens.attribution.drift import DriftConfig
from trajlens.attribution.statistics import centred_correlation, onset_step, p_text
from trajlens.attribution.verdicts import AGGREGATION_ARTEFACT, ARTEFACT, LEARNING, UNEXPLAINED, Decision, Push
from trajlens.intervals import Spec
from trajlens.run.change import Change, ChangeRule, p_value, shipped_rule, stage_change, stage_ends
from trajlens.run.quarters import Quarters, quarters

BIAS_BAND = 0.2
"""Elasticity of push per token on length that counts as a length bias (either sign)."""
LENGTH_RULE = shipped_rule("response_length_inflation")
"""What change of the mean length between the first and the last quarter counts as drift: the
shipped check's (x1.25, p < 0.05), by which the report's length trend judges too, so the three agree."""
LENGTH_SUBJECT = "response length"
"""What a length drift's finding names after its verdict: "aggregation artefact: response length grew: ..."."""
CHANNEL_PREFIX = "reward channel "
"""What a channel collapse's finding names after its verdict, before the channel: "estimator
artefact: reward channel format collapsed: ..."."""
COLLAPSE_RULE = ChangeRule(alpha=0.001, min_ratio=2.0)
"""What fall of a reward channel's step means counts as a collapse: by half or more, p < 0.001."""


def quarter_units(steps: np.ndarray, values: np.ndarray, split: Quarters | None = None) -> pl.DataFrame:
    """``stage_index`` (0: the first quarter of the steps, ``split`` or those of ``steps``; 1: the
    last) and ``value`` of each unit in either quarter (a unit of a one-step run is in both)."""
    first, last = (split or quarters(steps)).masks(steps)
    values = np.asarray(values, dtype=float)
    return pl.DataFrame({"stage_index": np.r_[np.zeros(first.sum(), dtype=np.int64), np.ones(last.sum(), dtype=np.int64)],
                         "value": np.r_[values[first], values[last]]})


VALUE: Spec = ("value", pl.col("value"), pl.lit(1))
"""The mean of a unit's ``value`` (:func:`quarter_units`)."""


def length_change(trajectory_frame: pl.DataFrame) -> Change | None:
    """The response length's change, first quarter of the steps to last, when it counts under
    :data:`LENGTH_RULE` either way (trajectories as units)."""
    if "length" not in trajectory_frame.columns:
        return None
    split = quarters(trajectory_frame["step"].to_numpy())  # the run's steps, as the stage table cuts them
    trajectory_frame = trajectory_frame.filter(pl.col("length").cast(pl.Float64).is_finite())  # counted lengths only
    if trajectory_frame.height < 8:
        return None
    units = quarter_units(trajectory_frame["step"].to_numpy(), trajectory_frame["length"].to_numpy(), split)
    return stage_change(units, VALUE, False, LENGTH_RULE)


@dataclass(frozen=True)
class ClassTokens:
    """One class's part in a length change (:func:`length_mix`)."""

    name: str
    calls_first: float
    """Calls of the class per trajectory in the first quarter of the steps."""
    calls_last: float
    """... and in the last."""
    tokens_per_call: float
    """Model tokens each call owns, in the first quarter (the last where it made none)."""

    @property
    def calls_part(self) -> float:
        """What the change of its calls per trajectory alone did to the length: the calls' tokens
        held at ``tokens_per_call``."""
        return self.tokens_per_call * (self.calls_last - self.calls_first)


@dataclass(frozen=True)
class LengthMix:
    """A length change split by what the policy changed: how many calls of each class it made
    (:attr:`calls`), how long each call is, and the tokens no call owns (:func:`length_mix`).
    The three parts add up to ``last - first``, the change over the trajectories without a
    fallback call (``trajectories`` of the ``counted`` whose length counts)."""

    first: float
    last: float
    classes: tuple[ClassTokens, ...]
    """Largest ``calls_part`` first (by size)."""
    per_call: float
    """The change of tokens per call, at the last quarter's calls."""
    other: float
    """The change of the tokens no call owns: after a trajectory's last call, and the difference
    between its ``model_tokens`` and its response mask's count where the log gives both."""
    trajectories: int
    counted: int
    counted_change: float
    """The change over every counted trajectory: the length drift's own (:func:`length_change`)."""

    @property
    def calls(self) -> float:
        return sum(c.calls_part for c in self.classes)

    def follows_calls(self) -> bool:
        """Whether the calls made account for :data:`CALLS_SHARE` or more of the change, the same
        way, both over the trajectories split and over every counted one."""
        return all(change != 0 and self.calls / change >= CALLS_SHARE
                   for change in (self.last - self.first, self.counted_change))

    def evidence(self) -> str:
        """``of the -577 token change, the calls made account for -560 (edit -210: 1.50 -> 0.00 calls
        of 140 tokens, ...), tokens per call for -12 and other tokens for -5`` (calls per
        trajectory), led by the trajectories split when some are left out."""
        shown = [c for c in self.classes if abs(c.calls_part) >= 0.5][:SHOWN_CLASSES]
        parts = ", ".join(f"{c.name} {_signed_tokens(c.calls_part)}: {c.calls_first:.2f} -> {c.calls_last:.2f} "
                          f"calls of {c.tokens_per_call:.0f} tokens" for c in shown)
        subset = (f"over the {self.trajectories:,} of the two quarters' {self.counted:,} trajectories without a "
                  f"fallback call ({self.first:.0f} -> {self.last:.0f}), " if self.trajectories < self.counted else "")
        change = round(self.last) - round(self.first)  # as the drift's "671 -> 94" reads
        return (f"{subset}of the {change:+d} token change, the calls made account for {_signed_tokens(self.calls)}"
                f"{f' ({parts})' if parts else ''}, tokens per call for {_signed_tokens(self.per_call)} and other "
                f"tokens for {_signed_tokens(self.other)}")

    def reason(self) -> str:
        """What a length drift that follows the calls made comes from: ``it follows the calls made,
        which account for 97% of it (fewer edit, view and search calls most)``."""
        change = self.last - self.first
        movers = [c.name for c in self.classes if c.calls_part * change > 0 and abs(c.calls_part) >= 0.5]
        return (f"it follows the calls made, which account for {self.calls / change:.0%} of it "
                f"({'more' if change > 0 else 'fewer'} {_names(movers[:SHOWN_CLASSES])} calls most)")


CALLS_SHARE = 2 / 3
"""The part of a length change the calls made must account for (the same way) for the drift to
follow them: the unexplained verdict then says so (:func:`length_verdict`)."""
SHOWN_CLASSES = 3
"""Classes a length finding's evidence names (those whose calls moved the length most)."""


def _signed_tokens(tokens: float) -> str:
    return f"{round(tokens) + 0:+d}"  # rounded first: -0.3 tokens reads +0


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def length_mix(trajectory_frame: pl.DataFrame) -> LengthMix | None:
    """The response length's change from the first quarter of the steps to the last, split into
    the calls made, the tokens per call and the other tokens (:class:`LengthMix`; shift-share at the
    first quarter's tokens per call: ``n_L t_L - n_F t_F = t_F (n_L - n_F) + n_L (t_L - t_F)``
    per class, with ``n`` the calls per trajectory and ``t`` the tokens per call). Over the
    trajectories with a counted length and no fallback call (``tokens:<class>`` finite,
    :class:`~trajlens.attribution.api.CreditStream`); None without eight of them in each quarter."""
    names = [c.removeprefix("tokens:") for c in trajectory_frame.columns if c.startswith("tokens:")]
    if not names or "length" not in trajectory_frame.columns:
        return None
    split = quarters(trajectory_frame["step"].to_numpy())  # as length_change cuts them
    counted = trajectory_frame.select("step", pl.col("length").cast(pl.Float64),
                                      *(pl.col(f"count:{n}").cast(pl.Float64) for n in names),
                                      *(pl.col(f"tokens:{n}").cast(pl.Float64) for n in names))
    counted = counted.filter(pl.col("length").is_finite())  # the trajectories length_change reads
    frame = counted.filter(pl.all_horizontal(pl.exclude("step").is_finite()))
    masks = split.masks(frame["step"].to_numpy())
    if min(int(m.sum()) for m in masks) < 8:
        return None
    drift = split.means(counted["step"].to_numpy(), counted["length"].to_numpy())
    own = split.means(frame["step"].to_numpy(), frame["length"].to_numpy())
    length = frame["length"].to_numpy()
    counts = frame.select(f"count:{n}" for n in names).to_numpy()  # (T, K) calls of each class
    tokens = frame.select(f"tokens:{n}" for n in names).to_numpy()  # (T, K) the tokens they own
    first, last = masks
    per_call = [_tokens_per_call(tokens[q], counts[q]) for q in masks]
    classes, per_call_part = [], 0.0
    for k, name in enumerate(names):
        base = per_call[0][k] if math.isfinite(per_call[0][k]) else per_call[1][k]
        if not math.isfinite(base):
            continue  # no calls of the class in either quarter
        calls_first, calls_last = float(counts[first, k].mean()), float(counts[last, k].mean())
        classes.append(ClassTokens(name, calls_first, calls_last, float(base)))
        per_call_part += calls_last * float(per_call[1][k] - base) if calls_last else 0.0
    other = [float(length[q].mean() - tokens[q].sum(axis=1).mean()) for q in masks]
    classes.sort(key=lambda c: -abs(c.calls_part))
    in_quarters = sum(int(m.sum()) for m in split.masks(counted["step"].to_numpy()))
    return LengthMix(own.first, own.last, tuple(classes), per_call_part, other[1] - other[0],
                     int(first.sum() + last.sum()), in_quarters, drift.last - drift.first)


def _tokens_per_call(tokens: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(K,) the tokens each class's calls own over their number (NaN for a class without calls)."""
    calls = counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(calls > 0, tokens.sum(axis=0) / calls, np.nan)


def length_relevance(trajectory_frame: pl.DataFrame) -> tuple[float, float, float]:
    """Correlation of length with reward, both centred within their step, and its Fisher interval."""
    return centred_correlation(trajectory_frame, "length", "reward")[:3]


def judged_elasticity(row: dict) -> tuple[float, float, float]:
    """The elasticity (and interval) a ``length_bias`` row's aggregation is judged by: its weight
    elasticity, what its own weights make of length (:func:`~trajlens.attribution.statistics.length_bias`),
    where measured; else the whole elasticity. The advantages' own tie to length (long responses
    scoring lower) is the same under every aggregation: it would take every aggregation out of
    the band together, and the one that weighs tokens by length would no longer stand out."""
    weight = row.get("weight_elasticity")
    if weight is not None and math.isfinite(weight) and math.isfinite(row.get("weight_low", math.nan)):
        return weight, row["weight_low"], row["weight_high"]
    return row["elasticity"], row["elasticity_low"], row["elasticity_high"]


def biased(row: dict) -> bool:
    """Whether a ``length_bias`` row's judged elasticity interval (:func:`judged_elasticity`) lies
    wholly beyond +-:data:`BIAS_BAND`."""
    _, low, high = judged_elasticity(row)
    return math.isfinite(low) and (high < -BIAS_BAND or low > BIAS_BAND)


def fairer(row: dict, own: dict) -> bool:
    """Whether the aggregation of ``row`` is fair beside the biased ``own`` (module docstring): its
    judged elasticity (:func:`judged_elasticity`) within the band, not biased itself, its interval
    wholly on zero's side of own's."""
    value, low, high = judged_elasticity(row)
    own_value, own_low, own_high = judged_elasticity(own)
    if not (math.isfinite(low) and abs(value) <= BIAS_BAND) or biased(row):
        return False
    return low > own_high if own_value < 0 else high < own_low


def elasticity_text(row: dict) -> str:
    """A ``length_bias`` row's elasticity with its interval, and its weights' where measured."""
    whole = (row["elasticity"], row["elasticity_low"], row["elasticity_high"])
    judged = judged_elasticity(row)
    return _interval_text(*whole) + ("" if judged == whole else f" (its weights {_interval_text(*judged)})")


def _interval_text(value: float, low: float, high: float) -> str:
    # rounded first, so that a weight elasticity of -1e-17 reads 0.00, not -0.00
    return "{:.2f} [{:.2f}, {:.2f}]".format(*(round(x, 2) + 0.0 for x in (value, low, high)))


def length_verdict(trajectory_frame: pl.DataFrame, bias: pl.DataFrame, estimator: str | None,
                   aggregation: str) -> str | None:
    """The length drift's finding, verdict first (module docstring); None without a length drift."""
    change = length_change(trajectory_frame)
    if change is None:
        return None
    verb = "grew" if change.last > change.first else "shrank"
    sign = 1.0 if verb == "grew" else -1.0
    text = (f"{LENGTH_SUBJECT} {verb}: {change.first:.0f} -> {change.last:.0f} model tokens per trajectory "
            f"(first vs last quarter of steps, {p_text(change.p_value)})")
    r, low, high = length_relevance(trajectory_frame)
    relevance = (sign * r, *sorted((sign * low, sign * high))) if math.isfinite(low) else (float("nan"),) * 3
    relevant = math.isfinite(relevance[1]) and relevance[1] > 0
    against = math.isfinite(relevance[2]) and relevance[2] < 0
    rows = {row["aggregation"]: row for row in bias.filter(pl.col("estimator") == estimator).iter_rows(named=True)} \
        if estimator is not None and bias.height else {}
    own = rows.get(aggregation)
    relevance_text = Push(*relevance).correlation_text()
    mix = length_mix(trajectory_frame)
    mix_text = f"; {mix.evidence()}" if mix is not None else ""

    def unexplained(reason: str) -> str:
        return f"{mix.reason()}: {reason}" if mix is not None and mix.follows_calls() else reason

    if own is None:
        missing = ("the run's estimator is not known" if estimator is None else
                   f"the run's estimator {estimator} has no length bias measured under {aggregation}")
        return (f"{UNEXPLAINED}: {text}{mix_text}; length relevance signed by the drift {relevance_text}; "
                f"{unexplained(missing)}")
    fair = [mode for mode, row in rows.items() if mode != aggregation and fairer(row, own)] if biased(own) else []
    others = "; ".join(f"under {mode} it would be {elasticity_text(row)}" for mode, row in rows.items() if mode != aggregation)
    if fair and not relevant:
        verdict, reason = (AGGREGATION_ARTEFACT,
                           f"the loss aggregation {aggregation} weighs tokens by length, which {', '.join(fair)} would not")
    elif relevant and not biased(own):
        verdict, reason = LEARNING, (f"{'longer' if verb == 'grew' else 'shorter'} responses earn more reward, and the "
                                     "aggregation is not length-biased")
    else:
        verdict, reason = UNEXPLAINED, unexplained(
            "the aggregation is length-biased but length also earns reward" if relevant else
            "no unbiased aggregation to compare" if biased(own) else
            "the aggregation is not length-biased and " + ("reward went against the drift" if against else
                                                           "length earns no reward"))
    return (f"{verdict}: {text}{mix_text}; under {estimator} / {aggregation} the elasticity of push per token on length "
            f"is {elasticity_text(own)}; {others + '; ' if others else ''}length relevance signed by the drift "
            f"{relevance_text}; {reason}")


def channel_collapse(steps: np.ndarray, step_means: np.ndarray, split: Quarters | None = None) -> Change | None:
    """The change of a reward channel's step means (one per step of ``steps``, each a unit) from
    the first quarter of the run's steps (``split``; those of ``steps`` without it) to the last,
    when it collapsed: fell under :data:`COLLAPSE_RULE` (module docstring); None otherwise."""
    return stage_change(quarter_units(steps, step_means, split), VALUE, False, COLLAPSE_RULE, "decrease")


def no_collapse_sentence(channels: pl.DataFrame, trajectories: pl.DataFrame) -> str | None:
    """What attribution says of a run of two or more reward channels none of which collapsed: the
    rule, and the largest fall there was (first quarter of the steps to the last, with its
    p-value), so a fall the rule does not count is not read as none; None when no channel fell."""
    steps = channels["step"].to_numpy()
    split = quarters(trajectories["step"].to_numpy()) if trajectories.height else None
    falls = []
    for column in [c for c in channels.columns if c.startswith("mean:")]:
        ends = stage_ends(quarter_units(steps, channels[column].to_numpy(), split), VALUE, False)
        if ends is not None and ends[1]["value"] < ends[0]["value"]:
            falls.append((ends[0]["value"] - ends[1]["value"], column[5:], *ends))
    if not falls:
        return None
    _, name, first, last = max(falls, key=lambda fall: fall[0])
    return (f"no reward channel collapsed (fell by {1 - 1 / COLLAPSE_RULE.min_ratio:.0%} or more, at p < "
            f"{COLLAPSE_RULE.alpha:g}): the largest fall, {CHANNEL_PREFIX}{name} {first['value']:.2f} -> "
            f"{last['value']:.2f} ({p_text(p_value(first, last, False))}), falls short of it")


def collapse_onset(steps: np.ndarray, step_means: np.ndarray, change: Change) -> int:
    """The step from which a collapsed channel's step mean (one per step of ``steps``), averaged
    over :data:`ONSET_STEPS` steps, had fallen a quarter of the way from its first quarter's mean
    to its last (:func:`~trajlens.attribution.statistics.onset_step`, which dates a class drift
    toward its reach). Attribution and the report's channel finding both date a collapse by it."""
    known = np.isfinite(step_means)
    order = np.argsort(steps[known], kind="stable")
    return onset_step(steps[known][order], step_means[known][order], change.first, change.last, ONSET_STEPS)


ONSET_STEPS = DriftConfig.k
"""Steps a collapse's onset averages the channel's step means over: the default lag of drift
attribution, whatever lag a call asks for (the lag is credit's, not a smoothing to tune)."""


def channel_values(trajectories: pl.DataFrame, channel: str) -> pl.DataFrame:
    """``step, group_id, trajectory_id, reward, value``: the channel's value per trajectory (where
    it has one), from :func:`trajlens.run.channels.channel_values`."""
    from trajlens.run.channels import channel_values as every_channel

    keep = ("reward",) if "reward" in trajectories.columns else ()
    return every_channel(trajectories, keep).filter(pl.col("channel") == channel).drop("channel")


def channel_relevance(trajectories: pl.DataFrame, channel: str, sign: float = -1.0) -> Push:
    """The channel's reward relevance: the correlation of its value with the trajectory's reward, both
    centred within their step, signed by ``sign`` (-1 for a collapse), with its Fisher interval."""
    values = channel_values(trajectories, channel)
    r, low, high, _ = centred_correlation(values, "value", "reward") if "step" in values.columns else (float("nan"),) * 4
    return _signed((r, low, high), sign)


def _signed(value: tuple[float, float, float], sign: float) -> Push:
    return Push(sign * value[0], *sorted((sign * value[1], sign * value[2])))


def channel_credit(trajectories: pl.DataFrame, advantages: pl.DataFrame, channel: str, draws: int = 500,
                   seed: int = 0) -> tuple[float, float, float]:
    """Correlation of the channel's in-group-centred value with the advantage, and a bootstrap over groups."""
    values = (channel_values(trajectories, channel).select("trajectory_id", "group_id", "value")
              .join(advantages.select("trajectory_id", pl.col("advantage").cast(pl.Float64)), on="trajectory_id")
              .drop_nulls().filter(pl.col("advantage").is_finite())
              .with_columns((pl.col("value") - pl.col("value").mean().over("group_id")).alias("value")))
    if values.height < 4:
        return float("nan"), float("nan"), float("nan")
    x, y = values["value"].to_numpy(), values["advantage"].to_numpy()
    if x.std() == 0 or y.std() == 0:
        return float("nan"), float("nan"), float("nan")
    r = float(np.corrcoef(x, y)[0, 1])
    _, group = np.unique(values["group_id"].to_numpy(), return_inverse=True)
    sums = np.stack([np.bincount(group, weights=w) for w in (np.ones_like(x), x, y, x * x, y * y, x * y)], axis=1)
    rng = np.random.default_rng(seed)
    groups = sums.shape[0]
    # a resample of groups is a multiplicity per group; r of the resampled rows is a function of the sums
    totals = np.stack([np.bincount(rng.integers(0, groups, groups), minlength=groups) @ sums for _ in range(draws)])
    n, sx, sy, sxx, syy, sxy = totals.T
    with np.errstate(invalid="ignore", divide="ignore"):
        draws_r = (sxy - sx * sy / n) / np.sqrt((sxx - sx * sx / n) * (syy - sy * sy / n))
    finite = draws_r[np.isfinite(draws_r)]
    low, high = np.quantile(finite, [0.025, 0.975]) if finite.size else (float("nan"), float("nan"))
    return r, float(low), float(high)


def channel_decision(own: Push, others: dict[str, Push], relevance: Push) -> Decision:
    """The verdict of a collapsed channel from the run's channel credit, the compared estimators' and the
    channel's reward relevance, all signed by the collapse (positive: pushed the channel down).
    The module docstring states the rule."""
    keepers = tuple(sorted((label for label, p in others.items()
                            if math.isfinite(p.high) and math.isfinite(own.low) and p.high < own.low),
                           key=lambda label: others[label].value))
    if keepers:
        # "kept it" only of an estimator whose own credit goes against the collapse; of another,
        # what its interval shows: it would have pushed the channel down less than the run's did
        kept = [label for label in keepers if others[label].against_drift]
        less = [label for label in keepers if not others[label].against_drift]
        reasons = ([f"{', '.join(kept)} would have credited the channel and kept it"] if kept else []) + \
                  ([f"{', '.join(less)} would have pushed it down less"] if less else [])
        return Decision(ARTEFACT, ", and ".join(reasons), keepers)  # one clause: the first screen shows it whole
    if relevance.with_drift and not own.against_drift:
        return Decision(LEARNING, "no compared estimator credits the channel more, and within a step the trajectories "
                                  "with more of it earned less reward: the run traded the channel for reward", ())
    if own.against_drift:
        return Decision(UNEXPLAINED, "the run's estimator credited the channel, yet it fell", ())
    return Decision(UNEXPLAINED, "no compared estimator credits the channel more, and reward does not ask for less of it",
                    ())


def channel_verdicts(channels: pl.DataFrame, trajectories: pl.DataFrame, outcome: dict[str, pl.DataFrame],
                     estimator: str | None, not_computed: str | None = None) -> list[str]:
    """One finding per collapsed reward channel, verdict first (module docstring), from the step
    its collapse set in (:func:`collapse_onset`)."""
    if channels.height == 0:
        return []
    out = []
    steps = channels["step"].to_numpy()
    split = quarters(trajectories["step"].to_numpy()) if trajectories.height else None
    for column in [c for c in channels.columns if c.startswith("mean:")]:
        change = channel_collapse(steps, channels[column].to_numpy(), split)
        if change is None:
            continue
        name = column[5:]
        onset = collapse_onset(steps, channels[column].to_numpy(), change)
        text = (f"{CHANNEL_PREFIX}{name} collapsed: {change.first:.2f} -> {change.last:.2f} from step {onset} "
                f"(first vs last quarter of steps, step means, {p_text(change.p_value)})")
        credit = {label: channel_credit(trajectories, frame, name) for label, frame in outcome.items()}
        credit = {label: c for label, c in credit.items() if math.isfinite(c[1])}
        own = credit.get(estimator) if estimator is not None else None
        if own is None:
            missing = (f"the run's estimator {not_computed} was not recomputed" if not_computed is not None else
                       "the run's estimator is not known or gives no advantage per trajectory")
            out.append(f"{UNEXPLAINED}: {text}; {missing}")
            continue
        relevance = channel_relevance(trajectories, name)
        others = {label: _signed(c, -1.0) for label, c in credit.items() if label != estimator}
        decision = channel_decision(_signed(own, -1.0), others, relevance)
        shown = list(decision.dissenting[:3]) or sorted(others, key=lambda label: -credit[label][0])[:2]
        evidence = "; ".join(f"{label}: {credit[label][0]:+.2f} [{credit[label][1]:+.2f}, {credit[label][2]:+.2f}]"
                             for label in shown)
        relevance_text = relevance.correlation_text() if math.isfinite(relevance.low) else "n/a"
        out.append(f"{decision.verdict}: {text}; the channel's credit (correlation of its in-group value with the "
                   f"advantage) under {estimator} {own[0]:+.2f} [{own[1]:+.2f}, {own[2]:+.2f}]"
                   + (f"; {evidence}" if evidence else "")
                   + f"; its reward relevance signed by the collapse {relevance_text}; {decision.reason}")
    return out
