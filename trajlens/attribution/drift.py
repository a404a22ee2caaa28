"""Drift attribution: which behaviour grew or decayed, from when, and which estimator's credit predicts it.

For each class whose share of calls changes significantly from the first stage to the last
(the checks' ``share:<class>`` stage test, the trajectories as units: a two-proportion t
on the calls each stage's spread between trajectories is worth, read on Student's t, p < ``alpha``; and an absolute
change of at least ``min_change``):

onset
    The first step t at which the mean share over steps t..t+k-1 has moved a quarter of the
    way from the first stage's share to the last stage's.
pivotal steps
    The run's own estimator's all-negative (for a growing class) or all-positive (decaying)
    batches from 2k steps before the onset to k steps after; else the steps in that window at
    which the class had the highest relative credit of all classes under the run's estimator.
lagged regression
    For each estimator, at the run's aggregation: x_t the class's scaled relative credit at
    step t, y_t the change of its share from step t to step t+k; the least-squares slope
    (closed form, cov(x, y) / var(x): one regressor needs no solver), Pearson r with a
    moving-block bootstrap interval over steps (blocks of k steps, so the overlap of
    neighbouring y_t is kept; no statistics library offers that bootstrap, so it is written here).
    r is the same whether both series are signed by the drift's direction or not, so r > 0
    means the credit moved *with* the drift, for a growth (high credit, rising share) and a decay
    (low credit, falling share) alike. The estimator named is the one with the largest r, and
    it *predicts* the drift exactly when the lower end of r's 95% interval, as printed (two
    decimals), is above 0 (:func:`predicts`); otherwise the finding says it "does not clearly
    predict" it.
counterfactual credit
    Each estimator's scaled relative credit of the same calls over the pivotal steps, with a
    95% normal interval from the calls' spread.
displacement
    A class can drift only because others took its calls, or gave theirs up: when think grows
    from 0.08 to 0.90 of the calls, every other class's share falls though the policy chose
    among them as before. A drifting class is *displaced by* the classes that drifted the other
    way when its share of the calls *other than theirs* (and other than the structural ones)
    held, first stage to last: the 95% interval of that share's change holds 0 and lies within
    +-``min_change`` (:func:`held`; a share of too few calls is not shown to hold). Its
    verdict says so, and the report weighs it as a consequence, not a finding of its own size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import polars as pl

from trajlens.attribution.statistics import Z95
from trajlens.attribution.statistics import drift_onset, step_shares
from trajlens.attribution.verdicts import block_indices, competing_credit
from trajlens.intervals import Spec, newcombe
from trajlens.run.change import Change, ChangeRule, judged, stage_ends, stage_rows
from trajlens.steps import steps_text


@dataclass(frozen=True)
class DriftConfig:
    """Settings of drift attribution."""

    k: int = 5
    """Lag: the share change over the next k steps is related to the credit at step t."""
    alpha: float = 0.001
    """Significance level of the first-vs-last-stage share change."""
    min_change: float = 0.1
    """Smallest absolute share change that counts as drift."""
    min_excursion: float = 0.2
    """Smallest absolute share change, out and back, that counts as an excursion (a share that
    went and came back between the first stage and the last): its furthest stage is searched
    among several, and a run wanders, so it must be larger than a drift."""
    bootstrap: int = 1000
    """Bootstrap replicates for the interval of r."""
    seed: int = 0

    def problems(self) -> list[str]:
        """What is wrong with these settings, one line each (none: they can be used)."""
        found = []
        if not _whole(self.k) or self.k < 1:
            found.append(f"k: expected a lag of at least 1 step, found {self.k!r}")
        if not _number(self.alpha) or not 0 < self.alpha < 1:
            found.append(f"alpha: expected a significance level between 0 and 1, found {self.alpha!r}")
        if not _number(self.min_change) or not 0 <= self.min_change <= 1:
            found.append(f"min_change: expected a share change between 0 and 1, found {self.min_change!r}")
        if not _number(self.min_excursion) or not 0 <= self.min_excursion <= 1:
            found.append(f"min_excursion: expected a share change between 0 and 1, found {self.min_excursion!r}")
        if not _whole(self.bootstrap) or self.bootstrap < 1:
            found.append(f"bootstrap: expected at least 1 replicate, found {self.bootstrap!r}")
        if not _whole(self.seed):
            found.append(f"seed: expected an integer, found {self.seed!r}")
        return found


def _whole(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
        and math.isfinite(value)


DRIFT_SCHEMA = {
    "primary_class": pl.String, "direction": pl.String, "share_first": pl.Float64, "share_last": pl.Float64,
    "change_p": pl.Float64, "onset_step": pl.Int64, "estimator": pl.String, "own": pl.Boolean, "aggregation": pl.String,
    "r": pl.Float64, "r_low": pl.Float64, "r_high": pl.Float64, "slope": pl.Float64, "lag_steps": pl.Int64,
    "pivotal_steps": pl.String, "pivot_kind": pl.String, "window_relative_credit": pl.Float64,
    "window_low": pl.Float64, "window_high": pl.Float64, "displaced_by": pl.String, "rest_first": pl.Float64,
    "rest_last": pl.Float64, "peak_steps": pl.String, "share_end": pl.Float64, "peak_share": pl.Float64,
}
"""One row per drifting class and estimator. ``displaced_by``: the classes that displaced it
(comma-separated; empty when none did), with its share of the calls other than theirs in the
first and the last stage (``rest_first``, ``rest_last``; null when it was not displaced).
``peak_steps``: for an excursion, the steps of the stage where ``share_last`` was reached; for a
drift that turned back late, the k steps where it went furthest (``peak_share``, null
otherwise); empty for a drift from the first stage to the last that held. ``share_end``: the
last stage's share, or where a late turn came back to over the last k steps."""


class DriftResult:
    """Drift rows (one per drifting class and estimator) and the findings in words."""

    def __init__(self, frame: pl.DataFrame, findings: list[str]) -> None:
        self.frame = frame
        self.findings = findings


def attribute_drift(
    class_credit: pl.DataFrame,
    step_flags: pl.DataFrame,
    own_label: str | None,
    aggregation: str,
    config: DriftConfig = DriftConfig(),
    structural: list[str] | tuple[str, ...] = (),
    trajectory_counts: pl.DataFrame | None = None,
) -> DriftResult:
    """Drift rows and sentences from the per-step ``class_credit`` and ``step_flags`` tables.

    With ``structural`` classes (:func:`~.verdicts.structural_classes`), relative credit is taken
    among the competing calls only: the class's mean scaled push minus that of the step's
    non-structural calls (:func:`~.verdicts.competing_credit`). ``trajectory_counts`` (``step``
    and ``count:<class>`` per trajectory, as the credit stream keeps them): the stage shares and
    their test take the trajectories as units, exactly as the checks' ``share:<class>``
    stage_change does; without them, the steps of ``class_credit`` are the units."""
    credit = class_credit.filter(pl.col("aggregation") == aggregation)
    if structural and credit.height:
        credit = competing_credit(credit, list(structural)).with_columns(
            pl.col("competing_credit").alias("relative_credit_scaled"), pl.col("competing_mean").alias("step_mean_scaled"))
    labels = credit["estimator"].unique(maintain_order=True).to_list()
    if credit.height == 0 or not labels:
        return DriftResult(pl.DataFrame(schema=DRIFT_SCHEMA), ["no credit to attribute"])
    reference = own_label if own_label in labels else labels[0]
    shares = (credit.filter(pl.col("estimator") == reference)
              .select("step", "stage", "stage_index", "primary_class", "calls", "step_calls").sort("step"))
    steps = np.array(sorted(shares["step"].unique().to_list()))
    classes = sorted(shares["primary_class"].unique().to_list())
    rows, findings = [], []
    if trajectory_counts is not None and trajectory_counts.height:
        staged = shares.select("step", "stage_index").unique()
        units = trajectory_units(trajectory_counts, staged, classes)
        share = step_shares(trajectory_counts, steps, classes)
    else:
        units = _step_units(shares, classes)
        share = _share_matrix(shares, steps, classes)
    for drift, onset in drifts_with_onsets(units, share, steps, classes, config, structural):
        name, first, last = drift.name, drift.first, drift.last
        direction = drift.direction
        pivotal, kind = _pivotal_steps(credit, step_flags, reference, name, steps, onset, direction, config.k)
        per_estimator = []
        for label in labels:
            x = _credit_series(credit, label, name, steps)
            r, low, high, slope = _lagged(x, share[:, classes.index(name)], config)
            window = _window_credit(credit, label, name, pivotal)
            row = {"primary_class": name, "direction": direction, "share_first": first, "share_last": last,
                   "change_p": drift.p_value, "onset_step": int(onset), "estimator": label, "own": label == own_label,
                   "aggregation": aggregation, "r": r, "r_low": low, "r_high": high, "slope": slope,
                   "lag_steps": config.k, "pivotal_steps": steps_text(pivotal), "pivot_kind": kind, **window,
                   **drift.displacement, **_reach(drift)}
            rows.append(row)
            per_estimator.append(row)
        findings.append(_sentence(name, per_estimator, own_label, steps))
    if not rows and shares["stage_index"].n_unique() < 2:
        where = f"step {steps[0]}" if steps.size == 1 else f"steps {steps[0]}-{steps[-1]}"
        findings.append(f"the run has one stage ({where}): a drift needs two, so there is none to attribute")
    elif not rows:
        findings.append(no_drift_sentence(units, classes, config))
    return DriftResult(pl.DataFrame(rows, schema=DRIFT_SCHEMA), findings)


def _share_matrix(shares: pl.DataFrame, steps: np.ndarray, classes: list[str]) -> np.ndarray:
    out = np.zeros((steps.size, len(classes)))
    position = {s: i for i, s in enumerate(steps)}
    for step, name, calls, total in shares.select("step", "primary_class", "calls", "step_calls").iter_rows():
        if total:
            out[position[step], classes.index(name)] = calls / total
    return out


def no_drift_sentence(units: pl.DataFrame, classes: Sequence[str], config: DriftConfig) -> str:
    """What attribution says of a run none of whose class shares drifted: the rule, and the
    largest change there was (first stage to last, with its p-value), so a move the rule does
    not count is not read as no move at all."""
    from trajlens.attribution.statistics import p_text
    from trajlens.run.change import p_value

    said = (f"no class share drifted ({config.min_change:.2f} or more between the first and the last stage, "
            f"at p < {config.alpha:g}): no drift to attribute")
    ends = {name: found for name in classes if (found := _first_and_last(units, name)) is not None}
    moves = [(abs(last["value"] - first["value"]), name) for name, (first, last) in ends.items()]
    size, name = max(moves, default=(0.0, ""))
    if size == 0:
        return said
    first, last = ends[name]
    moved = f"{name} {first['value']:.2f} -> {last['value']:.2f} ({p_text(p_value(first, last, True))})"
    return f"{said}; the largest change, {moved}, falls short of it"


def trajectory_units(trajectory_counts: pl.DataFrame, staged: pl.DataFrame, classes: Sequence[str]) -> pl.DataFrame:
    """``stage_index``, ``step``, ``primary_class``, ``x`` (the unit's calls of the class), ``n``
    (all its calls): one row per trajectory of ``trajectory_counts`` (``step`` and ``count:<class>``; every
    one, with or without calls, as the checks count them) in a step of ``staged`` (``step``,
    ``stage_index``), and class of ``classes``."""
    counted = [c for c in trajectory_counts.columns if c.startswith("count:")]
    rows = trajectory_counts.join(staged.select("step", "stage_index"), on="step", how="inner").with_columns(
        pl.sum_horizontal(counted).alias("n") if counted else pl.lit(0.0).alias("n"))
    return pl.concat([
        rows.select("stage_index", "step", pl.lit(name).alias("primary_class"),
                    (pl.col(f"count:{name}") if f"count:{name}" in counted else pl.lit(0.0)).cast(pl.Float64).alias("x"),
                    pl.col("n").cast(pl.Float64))
        for name in classes])


def _step_units(shares: pl.DataFrame, classes: list[str]) -> pl.DataFrame:
    """:func:`trajectory_units` with the steps of ``shares`` (per-step class credit) as the units."""
    totals = shares.group_by("stage_index", "step").agg(pl.col("step_calls").first())
    per_class = shares.group_by("stage_index", "step", "primary_class").agg(pl.col("calls").sum())
    return pl.concat([
        totals.join(per_class.filter(pl.col("primary_class") == name).drop("primary_class"), on=["stage_index", "step"],
                    how="left")
        .select("stage_index", "step", pl.lit(name).alias("primary_class"),
                pl.col("calls").fill_null(0).cast(pl.Float64).alias("x"),
                pl.col("step_calls").cast(pl.Float64).alias("n"))
        for name in classes])


class ShareDrift(NamedTuple):
    """A class whose share of calls drifted between the first stage and the last, or went and
    came back (:func:`share_drifts`)."""

    name: str
    first: float
    last: float
    """The last stage's share, or an excursion's furthest stage's (the share a late turn reached
    is ``peak_share``)."""
    p_value: float
    displacement: dict[str, object]
    """:data:`NOT_DISPLACED`, or the classes that displaced it with its share of the calls
    other than theirs (``displaced_by``, ``rest_first``, ``rest_last``)."""
    peak_steps: str = ""
    """An excursion's furthest stage (``61-90``): its share moved there and came back by the
    last stage (:func:`_excursion`); a late turn's furthest k steps (:func:`late_turn`). Empty
    for a drift from the first stage to the last that held."""
    share_end: float | None = None
    """The last stage's share: ``last``, or where an excursion came back to (a late turn: over
    the run's last k steps)."""
    peak_share: float | None = None
    """A late turn's furthest share, over ``peak_steps`` (:func:`late_turn`); None otherwise."""

    @property
    def direction(self) -> str:
        return "grew" if self.last > self.first else "decayed"


def share_drifts(units: pl.DataFrame, classes: Sequence[str], config: DriftConfig = DriftConfig(),
                 structural: Sequence[str] = ()) -> list[ShareDrift]:
    """The classes whose share of calls drifted (the stage test of :func:`_stage_change` over
    ``units``, :func:`trajectory_units`), the largest drift first, each with its displacement."""
    changes = {name: change for name in classes if (change := _stage_change(units, name, config))}
    displaced = _displacements(units, changes, structural, config)
    drifts = [ShareDrift(name, *change, displaced.get(name, NOT_DISPLACED), share_end=change[1])
              for name, change in changes.items()]
    drifts += [excursion for name in classes if name not in changes and (excursion := _excursion(units, name, config))]
    return sorted(drifts, key=lambda drift: -abs(drift.last - drift.first))


def _excursion(units: pl.DataFrame, name: str, config: DriftConfig) -> ShareDrift | None:
    """A class whose share moved from the first stage to a later one and came back by the last
    (think 0.06 in Q1, 0.70 in Q3, 0.07 in Q4): both moves are significant at ``config.alpha``
    and at least ``config.min_excursion``, out and back; the stage furthest from the first one
    is the drift's reach. The first-to-last test cannot see it, yet it is the habit a run took up and dropped.
    None when no stage between the first and the last is such a stage."""
    rows = units.filter(pl.col("primary_class") == name)
    stages = stage_rows(rows, _share(name), True).to_dicts()
    if len(stages) < 3 or not stages[0]["n"] or not stages[-1]["n"]:
        return None
    first, last = stages[0], stages[-1]
    rule = ChangeRule(alpha=config.alpha, min_change=config.min_excursion)
    best: tuple[Change, int] | None = None
    for row in stages[1:-1]:
        out = judged(first, row, True, rule) if row["n"] else None
        if out is None or judged(row, last, True, rule, "decrease" if out.rose else "increase") is None:
            continue
        if best is None or abs(out.last - out.first) > abs(best[0].last - best[0].first):
            best = (out, row["stage_index"])
    if best is None:
        return None
    change, index = best
    steps = rows.filter(pl.col("stage_index") == index)["step"]
    return ShareDrift(name, change.first, change.last, change.p_value, NOT_DISPLACED,
                      steps_text(range(int(steps.min()), int(steps.max()) + 1)), last["value"])


def drifts_with_onsets(units: pl.DataFrame, share: np.ndarray, steps: np.ndarray, classes: Sequence[str],
                       config: DriftConfig, structural: Sequence[str]) -> list[tuple[ShareDrift, int]]:
    """:func:`share_drifts`, each with its onset (:func:`~.statistics.onset_step` on the class's
    column of ``share``, the per-step shares at ``steps``): what attribution attributes and what
    :func:`class_drifts` reports before it does."""
    found = []
    for drift in share_drifts(units, classes, config, structural):
        column = share[:, list(classes).index(drift.name)]
        onset = drift_onset(steps, column, drift.first, drift.last, config.k, config.min_change)
        found.append((late_turn(units, drift, steps, onset, config), onset))
    return found


def late_turn(units: pl.DataFrame, drift: ShareDrift, steps: np.ndarray, onset: int, config: DriftConfig) -> ShareDrift:
    """``drift`` with where it went and came back to, when it turned back within the last stage:
    think's share rose to 0.61 over steps 74-78 and was 0 from step 79, so its last quarter's
    0.23 hides both the rise and the fall. Of the runs of k steps (of ``steps``) from the onset
    on that end in the last stage, the one whose share, pooled over its units (``units``), went
    furthest the drift's way (steps without calls count for nothing, not as a share of 0) lies at
    least ``config.min_excursion`` beyond the last stage's share, and the run's last k steps came
    back from it by as much, significant at ``config.alpha`` (:func:`~trajlens.run.change.judged`,
    as an excursion's stages). ``drift`` itself otherwise, and for an excursion (which has its
    reach already)."""
    k = max(config.k, 1)
    if drift.peak_steps or steps.size < 2 * k:
        return drift
    sign = 1.0 if drift.last > drift.first else -1.0
    per_step = (units.filter(pl.col("primary_class") == drift.name).group_by("step").agg(pl.col("x").sum(), pl.col("n").sum())
                .join(pl.DataFrame({"step": steps}).with_row_index("at"), on="step"))
    calls, total = np.zeros(steps.size), np.zeros(steps.size)
    at_step = per_step["at"].to_numpy()
    calls[at_step], total[at_step] = per_step["x"].to_numpy(), per_step["n"].to_numpy()
    window_total = np.convolve(total, np.ones(k), "valid")  # [i]: steps[i:i + k]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(window_total > 0, np.convolve(calls, np.ones(k), "valid") / window_total, np.nan)
    last_stage = units.filter(pl.col("stage_index") == pl.col("stage_index").max())["step"].min()
    after = np.flatnonzero(steps[:means.size] >= onset)
    after = after[after + k <= steps.size - k]  # the furthest k steps end before the last k steps begin
    after = after[steps[after + k - 1] >= last_stage]  # and within the last stage: a turn the stages hide
    after = after[np.isfinite(means[after])]
    if after.size == 0:
        return drift
    at = int(after[np.argmax(sign * means[after])])
    peak_steps, end_steps = steps[at:at + k], steps[-k:]
    rows = units.filter((pl.col("primary_class") == drift.name) & pl.col("step").is_in(np.r_[peak_steps, end_steps]))
    rows = rows.with_columns(pl.col("step").is_in(end_steps).cast(pl.Int64).alias("stage_index"))
    ends = stage_ends(rows, _share(drift.name), True)
    if ends is None or sign * (ends[0]["value"] - drift.last) < config.min_excursion:
        return drift
    rule = ChangeRule(alpha=config.alpha, min_change=config.min_excursion)
    back = judged(*ends, True, rule, "decrease" if sign > 0 else "increase")
    if back is None:
        return drift
    span = steps_text(range(int(peak_steps[0]), int(peak_steps[-1]) + 1))  # as an excursion's stage reads
    return drift._replace(peak_steps=span, share_end=back.last, peak_share=back.first)


def class_drifts(trajectory_counts: pl.DataFrame, staged: pl.DataFrame, config: DriftConfig = DriftConfig()) -> pl.DataFrame:
    """The drifting classes of a run from its trajectories' class counts alone, before any
    advantage is recomputed: what :func:`attribute_drift` finds to attribute, with the same
    test, onset and displacement (``primary_class``, ``direction``, ``share_first``,
    ``share_last``, ``change_p``, ``onset_step`` and the displacement columns), the largest
    first. ``trajectory_counts``: ``step`` and ``count:<class>`` per trajectory; ``staged``:
    ``step`` and ``stage_index``."""
    from trajlens.attribution.verdicts import structural_classes

    classes = sorted(c.removeprefix("count:") for c in trajectory_counts.columns
                     if c.startswith("count:") and trajectory_counts[c].sum())
    schema = {name: DRIFT_SCHEMA[name] for name in CLASS_DRIFT_COLUMNS}
    if not classes:
        return pl.DataFrame(schema=schema)  # no calls: nothing to drift
    steps = np.array(sorted(trajectory_counts["step"].unique().to_list()))
    units = trajectory_units(trajectory_counts, staged, classes)
    share = step_shares(trajectory_counts, steps, classes)
    rows = []
    structural = structural_classes(trajectory_counts, classes)
    for drift, onset in drifts_with_onsets(units, share, steps, classes, config, structural):
        rows.append({"primary_class": drift.name, "direction": drift.direction, "share_first": drift.first,
                     "share_last": drift.last, "change_p": drift.p_value, "onset_step": int(onset), **drift.displacement,
                     **_reach(drift)})
    return pl.DataFrame(rows, schema=schema)


CLASS_DRIFT_COLUMNS: tuple[str, ...] = ("primary_class", "direction", "share_first", "share_last", "change_p",
                                        "onset_step", "displaced_by", "rest_first", "rest_last", "peak_steps",
                                        "share_end", "peak_share")


def _reach(drift: ShareDrift) -> dict[str, object]:
    """The drift rows' ``peak_steps``, ``share_end`` and ``peak_share``."""
    return {"peak_steps": drift.peak_steps, "share_end": drift.share_end, "peak_share": drift.peak_share}


def _stage_change(units: pl.DataFrame, name: str, config: DriftConfig) -> tuple[float, float, float] | None:
    """The class's share of calls in the first and the last stage, and the p-value of the change,
    when it drifted: :func:`trajlens.run.change.stage_change` (the checks' stage test) under the
    rule of ``config`` (:func:`share_rule`), over :func:`trajectory_units`. Calls of one
    trajectory (or step) are not independent draws: each stage counts as many calls as the
    spread between its units allows."""
    ends = _first_and_last(units, name)
    found = judged(*ends, True, share_rule(config)) if ends is not None else None
    return (found.first, found.last, found.p_value) if found is not None else None


def share_rule(config: DriftConfig = DriftConfig()) -> ChangeRule:
    """What change of a class's share of calls counts as drift: ``config.min_change`` or more,
    significant at ``config.alpha``. The report's share trends judge by it too."""
    return ChangeRule(alpha=config.alpha, min_change=config.min_change)


def _share(name: str) -> Spec:
    """The share ``x / n`` of :func:`trajectory_units`' rows of class ``name``."""
    return (name, pl.col("x"), pl.col("n"))


def _first_and_last(units: pl.DataFrame, name: str) -> tuple[dict, dict] | None:
    """The share of class ``name`` in ``units`` (:func:`trajectory_units`' rows, or rows of one
    class) pooled over the first and over the last stage (:func:`~trajlens.run.change.stage_ends`);
    None without two stages with calls."""
    return stage_ends(units.filter(pl.col("primary_class") == name), _share(name), True)


def held(first: dict, last: dict, within: float) -> bool:
    """Whether a share held from one pooled stage row to another: the 95% interval of the change
    (Newcombe's, :func:`~trajlens.intervals.newcombe`, as a comparison gives it) holds 0, so no
    change is seen, and lies inside +-``within``, so a change the drift test would count is
    ruled out. A share of few calls has a wide interval, so it is not shown to hold; a share of 0
    or 1 (the class is all there is, or nothing, of the calls left) has nothing to hold."""
    if any(row["value"] is None or not 0 < row["value"] < 1 for row in (first, last)):
        return False
    low, high = newcombe(first, last)
    return low is not None and high is not None and -within < low <= 0 <= high < within


NOT_DISPLACED: dict[str, object] = {"displaced_by": "", "rest_first": None, "rest_last": None}


def _displacements(units: pl.DataFrame, changes: dict[str, tuple[float, float, float]], structural: Sequence[str],
                   config: DriftConfig) -> dict[str, dict[str, object]]:
    """The drifting classes displaced by those that drifted the other way (see the module
    docstring), each with the classes that displaced it and its share of the calls other than
    theirs and the structural ones in the first and the last stage. A class's rows of
    :func:`trajectory_units` are in the same order as every other class's (one row per unit each)."""
    by_class = {name: units.filter(pl.col("primary_class") == name) for name in units["primary_class"].unique()}
    found: dict[str, dict[str, object]] = {}
    for name, (first, last, _) in changes.items():
        grew = last > first
        others = sorted(o for o, (a, b, _) in changes.items() if o != name and (b > a) != grew and o not in structural)
        if not others:
            continue
        rows = by_class[name]
        left_out = [by_class[c]["x"] for c in dict.fromkeys((*others, *structural)) if c in by_class and c != name]
        rest = rows.with_columns((pl.col("n") - pl.sum_horizontal(left_out)).alias("n"))
        ends = _first_and_last(rest, name)
        if ends is not None and held(*ends, config.min_change):
            found[name] = {"displaced_by": ", ".join(others), "rest_first": ends[0]["value"], "rest_last": ends[1]["value"]}
    return found


def _credit_series(credit: pl.DataFrame, label: str, name: str, steps: np.ndarray) -> np.ndarray:
    part = credit.filter((pl.col("estimator") == label) & (pl.col("primary_class") == name))
    lookup = dict(zip(part["step"].to_list(), part["relative_credit_scaled"].to_list()))
    return np.array([lookup.get(s, np.nan) if lookup.get(s) is not None else np.nan for s in steps], dtype=float)


def _lagged(x: np.ndarray, share: np.ndarray, config: DriftConfig) -> tuple[float, float, float, float]:
    k = config.k
    if x.size <= k + 3:
        return (float("nan"),) * 4
    y = share[k:] - share[:-k]
    xs = x[:-k]
    keep = np.isfinite(xs) & np.isfinite(y)
    xs, y = xs[keep], y[keep]
    if xs.size < 4 or xs.std() == 0 or y.std() == 0:
        return (float("nan"),) * 4
    centred = xs - xs.mean()
    slope = float(centred @ (y - y.mean()) / (centred @ centred))
    r = float(np.corrcoef(xs, y)[0, 1])
    index = block_indices(xs.size, max(k, 1), config.bootstrap, np.random.default_rng(config.seed))
    draws = _rows_correlation(xs[index], y[index])
    draws = draws[np.isfinite(draws)]
    low, high = np.quantile(draws, [0.025, 0.975]) if draws.size else (float("nan"), float("nan"))
    return r, float(low), float(high), slope


def _rows_correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of ``a`` with the same row of ``b`` (NaN without spread)."""
    ac = a - a.mean(axis=1, keepdims=True)
    bc = b - b.mean(axis=1, keepdims=True)
    denominator = np.sqrt((ac**2).sum(axis=1) * (bc**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (ac * bc).sum(axis=1) / denominator, np.nan)


def _pivotal_steps(credit: pl.DataFrame, step_flags: pl.DataFrame, reference: str, name: str, steps: np.ndarray,
                   onset: int, direction: str, k: int) -> tuple[list[int], str]:
    lo, hi = onset - 2 * k, onset + k
    flag = "all_negative" if direction == "grew" else "all_positive"
    if step_flags.height and flag in step_flags.columns:
        streak = step_flags.filter((pl.col("estimator") == reference) & pl.col(flag) & pl.col("step").is_between(lo, hi))
        if streak.height:
            return sorted(streak["step"].to_list()), flag.replace("_", "-") + " batches"
    window = credit.filter((pl.col("estimator") == reference) & pl.col("step").is_between(lo, hi) & (pl.col("calls") > 0))
    best = window.sort("relative_credit_scaled", descending=direction == "grew").group_by("step", maintain_order=True).first()
    top = sorted(best.filter(pl.col("primary_class") == name)["step"].to_list())
    if top:
        extreme = "highest" if direction == "grew" else "lowest"
        first, last = max(lo, int(steps.min())), min(hi, int(steps.max()))
        return top, f"the steps of {first}-{last} around the onset where it had the {extreme} relative credit of all classes"
    return [s for s in steps.tolist() if onset - k <= s < onset], "steps before the onset"


def _window_credit(credit: pl.DataFrame, label: str, name: str, steps: list[int]) -> dict[str, float]:
    part = credit.filter((pl.col("estimator") == label) & (pl.col("primary_class") == name)
                         & pl.col("step").is_in(steps) & (pl.col("calls") > 0))
    if part.height == 0:
        return {"window_relative_credit": float("nan"), "window_low": float("nan"), "window_high": float("nan")}
    n = part["calls"].to_numpy().astype(float)
    total = part["push_sum_scaled"].to_numpy()
    squares = part["push_sumsq_scaled"].to_numpy()
    step_mean = part["step_mean_scaled"].to_numpy()
    mean = float((total - n * step_mean).sum() / n.sum())  # mean over the calls of (scaled push - step mean)
    within = np.maximum(squares - total**2 / n, 0.0).sum()
    se = math.sqrt(within) / n.sum()
    return {"window_relative_credit": mean, "window_low": mean - Z95 * se, "window_high": mean + Z95 * se}


def predicts(r_low: float) -> bool:
    """The rule for "predicts": the lower end of r's 95% interval, rounded to the two decimals a
    finding prints, is above 0 (so a printed "[0.00, ...]" never reads as predicting)."""
    return math.isfinite(r_low) and round(r_low, 2) > 0


def _sentence(name: str, rows: list[dict], own_label: str | None, steps: np.ndarray) -> str:
    first = rows[0]
    text = (f"{name} share {first['share_first']:.2f} -> {first['share_last']:.2f} ({first['direction']}) "
            f"from step {first['onset_step']}")
    own = next((r for r in rows if r["own"]), None)
    if own is not None and not own["pivotal_steps"]:
        text += (f"; under the run's estimator ({own['estimator']}) no step precedes the onset, so no credit "
                 "before the drift can be shown")
    elif own is not None and math.isfinite(own["window_relative_credit"]):
        text += (f"; under the run's estimator ({own['estimator']}) its calls' relative credit was "
                 f"{own['window_relative_credit']:+.2f} [{own['window_low']:+.2f}, {own['window_high']:+.2f}] at "
                 f"steps {own['pivotal_steps']} ({own['pivot_kind']})")
    predictive = [r for r in rows if math.isfinite(r["r"])]
    if predictive:
        best = max(predictive, key=lambda r: r["r"])  # r > 0: credit moved with the drift, growth or decay
        verb = "predicts" if predicts(best["r_low"]) else "does not clearly predict"
        text += (f"; {best['estimator']} credit {verb} the {'growth' if best['direction'] == 'grew' else 'decay'} "
                 f"over the next {best['lag_steps']} steps, r = {best['r']:.2f} [{best['r_low']:.2f}, {best['r_high']:.2f}]")
    others = [r for r in rows if not r["own"] and math.isfinite(r["window_relative_credit"])]
    if others:
        text += "; the same calls under " + ", ".join(
            f"{r['estimator']}: {r['window_relative_credit']:+.2f} [{r['window_low']:+.2f}, {r['window_high']:+.2f}]"
            for r in others)
    return text + " (relative credit in units of the step's mean |push|)"
