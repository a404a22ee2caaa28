"""A verdict per drifting class: estimator artefact (or aggregation artefact), learning, or unexplained, with the
evidence that decided it.

Every number here is computed at the level of the behaviour class, from the per-step
``class_credit`` table and the per-trajectory class counts of :mod:`.api`.

Competing calls
    A call competes with a class when the policy chose between them. A *structural* class is
    one every trajectory calls the same number of times (at least once) at :data:`STRUCTURAL_STEPS`
    of the steps or more, steps of :data:`STRUCTURAL_TRAJECTORIES` trajectories or more in all,
    such as a final submit every trajectory makes: its count is not the
    policy's choice, so it takes no part in the competition. A class's *competing relative
    credit* at a step is its calls' mean scaled push minus the mean scaled push over the calls
    of every non-structural class (the step's mean |push| is the unit, as in ``class_credit``).
Drift window
    From ``k`` steps before the onset to the step at which the class's share (mean over k steps)
    has moved :data:`DRIFT_END` of the way from the first stage's share to the last stage's
    (at least ``k`` steps after the onset): the steps of the drift itself, not the noisy credit
    of a class the run has nearly stopped calling.
Cumulative push
    For each counterfactual (every estimator under the run's aggregation, and the run's
    estimator under every aggregation), the sum over the window's steps of the class's
    competing relative credit, signed by the drift's direction (+ growth, - decay), so a
    positive number pushed the class the way it went. Its 95% interval is a moving-block
    bootstrap over the window's steps (blocks of ``k``, as for r; :func:`block_indices`); a
    window of fewer than two blocks has none, so its push is with no side of the rule below.
Reward relevance
    The Pearson correlation of the class's count in a trajectory with the trajectory's reward,
    both centred within their step (so a trend of both over the run is not read as relevance),
    signed by the drift's direction, with a 95% Fisher interval (n = trajectories - steps). On a
    run with two or more reward channels, also with each channel's value; the relevance used is
    the one whose interval's lower end is highest (:func:`signed_relevance`).

A counterfactual is *centred* when the median over the window of its step's mean push, in
units of the step's mean |push|, is within +-:data:`CENTRED` of 0 and that push is not shifted
to one side (its signed median within +-:data:`SHIFTED`): it has a baseline, so its relative
credit says which calls it favours rather than which are long (REINFORCE without a baseline on
rewards in [0, 1] pushes every call up and is not centred, nor is unwhitened GAE under a critic
that values every state too high: it pushes every long call down). Only a centred
counterfactual can dissent.

The rule (:func:`decide`); "with" means the interval lies above 0, "against" below:

1. **estimator artefact** when the run's push is *with* the drift, the class's reward relevance
   is not *with* it, and some centred counterfactual pushes *against* the drift or pushes
   significantly less (its interval's top below the run's interval's bottom). The verdict
   names the counterfactuals that dissent (another estimator under the run's aggregation, or
   the run's estimator under another aggregation). It is an **aggregation artefact** when every
   dissenting counterfactual is the run's estimator under another aggregation: the loss
   aggregation, not the estimator, made the difference.
2. **learning** when the class's reward relevance is *with* the drift and the run's push is not
   against it: the class moved the way the run's reward, or one of its reward channels, asks;
   whether another estimator would have kept a channel is the reward-channel verdict (:mod:`.causes`).
3. **unexplained** otherwise (the run's push does not move with the drift, or no centred
   counterfactual pushed the class against it or significantly less, or none was recomputed,
   and reward does not explain it), with the reason.

When the run's own estimator is unknown, the counterfactual with the largest cumulative push
stands in for it and the finding says so.

A class displaced by the classes that drifted the other way (its share of the calls other than
theirs held: :mod:`.drift`, displacement) keeps the verdict of this rule; its reason adds which
classes displaced it (:func:`displacement_text`), and its line leads with them
(:func:`verdict_head`), so a fall that another drift caused is not read as a drift of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from trajlens.attribution.projection import PROJECTION_SCHEMA, project
from trajlens.attribution.statistics import SETTLED, centred_correlation
from trajlens.steps import steps_text

ARTEFACT = "estimator artefact"
AGGREGATION_ARTEFACT = "aggregation artefact"
LEARNING = "learning"
UNEXPLAINED = "unexplained"
VERDICTS: tuple[str, ...] = (ARTEFACT, AGGREGATION_ARTEFACT, LEARNING, UNEXPLAINED)
"""The verdicts a drift can get, in the order the rule tries them."""
ARTEFACTS: tuple[str, ...] = (ARTEFACT, AGGREGATION_ARTEFACT)
"""The verdicts that blame the run's training setup: its estimator, or its loss aggregation."""


def verdict_order(line: str) -> int:
    """Where a verdict line (``VERDICT: drift ...``) stands among a run's verdicts: an estimator
    artefact first, then an aggregation artefact, learning, unexplained (:data:`VERDICTS`); a
    line led by anything else (``displaced by think``) after them. ``trajlens attribute`` and the
    report's first screen list verdicts in this order."""
    head = line.split(":", 1)[0]
    return VERDICTS.index(head) if head in VERDICTS else len(VERDICTS)


CENTRED = 0.5
"""Largest median |step mean push| (in units of the step's mean |push|) of a centred counterfactual."""

SHIFTED = 0.25
"""Largest |median step mean push| (signed, in the same units) of a centred counterfactual. A
baseline that is off (a critic that values every state too high, or too low), or a token-weighted
aggregation of group-centred advantages where length and reward are correlated (where long
trajectories score lower, every step's token-weighted mean is negative), moves every step's mean push the same
way, where a centred one scatters around 0: a push whose median sits a quarter of the way to its
typical size on one side is that offset, not a preference."""


def is_centred(step_means: pl.Series) -> bool:
    """Whether a counterfactual's step mean pushes over a drift's window (``step_mean_scaled``)
    are those of a centred one: small (:data:`CENTRED`) and not shifted to one side
    (:data:`SHIFTED`)."""
    if step_means.is_empty():
        return True
    magnitude = float(step_means.abs().median() or 0.0)
    shift = abs(float(step_means.median() or 0.0))
    return magnitude <= CENTRED and shift <= SHIFTED

STRUCTURAL_STEPS = 0.9
"""Share of steps at which every trajectory must call a class equally often for it to be structural."""
STRUCTURAL_TRAJECTORIES = 20
"""Trajectories those steps must hold in all: two trajectories of a one-step run calling a class
equally often is chance, not structure."""

VERDICT_SCHEMA: dict[str, pl.DataType] = {
    "primary_class": pl.String, "direction": pl.String, "share_first": pl.Float64, "share_last": pl.Float64,
    "onset_step": pl.Int64, "verdict": pl.String, "reason": pl.String, "estimator": pl.String,
    "aggregation": pl.String, "own_known": pl.Boolean, "dissenting": pl.String, "window": pl.String,
    "push": pl.Float64, "push_low": pl.Float64, "push_high": pl.Float64, "relevance": pl.Float64,
    "relevance_low": pl.Float64, "relevance_high": pl.Float64, "structural": pl.String, "displaced_by": pl.String,
    "rest_first": pl.Float64, "rest_last": pl.Float64, "peak_steps": pl.String, "share_end": pl.Float64,
    "peak_share": pl.Float64,
}
"""One row per drifting class: the verdict, the run's estimator and aggregation, the decisive evidence
(the run's signed cumulative push and the signed reward relevance, with intervals)."""

EVIDENCE_SCHEMA: dict[str, pl.DataType] = {
    "primary_class": pl.String, "estimator": pl.String, "aggregation": pl.String, "own": pl.Boolean,
    "push": pl.Float64, "push_low": pl.Float64, "push_high": pl.Float64, "steps": pl.Int64,
}
"""One row per drifting class and counterfactual: the signed cumulative competing push with its interval."""


@dataclass(frozen=True)
class Push:
    """A signed cumulative push and its 95% interval."""

    value: float
    low: float
    high: float

    @property
    def with_drift(self) -> bool:
        return math.isfinite(self.low) and self.low > 0

    @property
    def against_drift(self) -> bool:
        return math.isfinite(self.high) and self.high < 0

    def text(self) -> str:
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return f"{self.value:+.1f} (no interval: too few steps)" if math.isfinite(self.value) else "n/a"
        return f"{self.value:+.1f} [{self.low:+.1f}, {self.high:+.1f}]"

    def correlation_text(self) -> str:
        """A reward relevance (a correlation) and its interval: ``+0.04 [+0.0013, +0.08]``, no bound
        that is not 0 printed as 0, since the verdicts read them unrounded (:func:`signed_text`)."""
        if not math.isfinite(self.value):
            return "n/a"
        return f"{signed_text(self.value)} [{signed_text(self.low)}, {signed_text(self.high)}]"


def signed_text(value: float) -> str:
    """A signed number of a correlation's scale to two decimals (``+0.04``), or two significant
    digits where two decimals would print a number that is not 0 as 0 (``+0.0013``)."""
    return f"{value:+.2f}" if value == 0 or not math.isfinite(value) or abs(value) >= 0.005 else f"{value:+.2g}"


@dataclass(frozen=True)
class Decision:
    verdict: str
    reason: str
    dissenting: tuple[str, ...]


def decide(own: Push, counterfactuals: dict[str, Push], relevance: Push,
           uncentred: frozenset[str] = frozenset(), aggregations: frozenset[str] = frozenset()) -> Decision:
    """The verdict of one drift from the run's push, the counterfactuals' and the reward relevance
    (all signed by the drift's direction); counterfactuals named in ``uncentred`` cannot dissent, those
    named in ``aggregations`` are the run's estimator under another loss aggregation.
    The module docstring states the rule."""
    relevant = relevance.with_drift
    centred = {label: p for label, p in counterfactuals.items() if label not in uncentred}
    opposing = tuple(label for label, p in centred.items() if p.against_drift)
    weaker = tuple(label for label, p in centred.items()
                   if not p.against_drift and math.isfinite(p.high) and math.isfinite(own.low) and p.high < own.low)
    if own.with_drift and not relevant and (opposing or weaker):
        parts = ([f"{', '.join(opposing)} pushed against it"] if opposing else []) + (
            [f"{', '.join(weaker)} pushed it significantly less"] if weaker else [])
        dissenting = opposing + weaker
        return Decision(AGGREGATION_ARTEFACT if set(dissenting) <= aggregations else ARTEFACT,
                        "the run's push moved with the drift and reward does not explain it; " + "; ".join(parts),
                        dissenting)
    if relevant and not own.against_drift:
        reason = "the class's count moves reward the way the class went"
        if opposing:
            reason += f" ({', '.join(opposing)} would have pushed against it)"
        return Decision(LEARNING, reason, ())
    if not own.with_drift:
        reason = ("the run's push went against the drift" if own.against_drift else
                  "the run's push did not clearly move with the drift")
        reason += "; " + ("reward relevance is with it" if relevant else "the class's reward relevance does not explain it")
        return Decision(UNEXPLAINED, reason, ())
    # other estimators not centred (the run's own under other aggregations is no rival to name)
    left_out = sorted(label for label in counterfactuals if label in uncentred and label not in aggregations)
    # no dissent: their intervals overlap the run's (a push "as hard" would claim more than that),
    # or an interval is missing (too few steps), which leaves nothing to compare
    unbounded = [label for label, p in centred.items()
                 if not (math.isfinite(p.high) and math.isfinite(own.low))]
    if not centred:
        compared = "no centred counterfactual was recomputed to compare it with"
    elif len(unbounded) == len(centred):
        compared = "no centred counterfactual could be compared with it (too few steps for an interval)"
    else:
        compared = "no centred counterfactual pushed against it or pushed it significantly less" + (
            f" ({', '.join(unbounded)}: too few steps for an interval)" if unbounded else "")
    return Decision(UNEXPLAINED, f"the run's push moved with the drift, but {compared}"
                    + (f" ({', '.join(left_out)}: not centred, so not compared)" if left_out else "")
                    + " and reward relevance does not explain it", ())


def block_indices(size: int, block: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """(draws, size) indices of a moving-block bootstrap over ``size`` consecutive steps."""
    block = max(1, min(block, size))
    starts = rng.integers(0, max(size - block + 1, 1), size=(draws, int(math.ceil(size / block))))
    index = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(draws, -1)[:, :size]
    return np.minimum(index, size - 1)


def structural_classes(trajectory_classes: pl.DataFrame, classes: list[str]) -> list[str]:
    """Classes every trajectory calls equally often (at least once) at :data:`STRUCTURAL_STEPS` of the
    steps, those steps holding :data:`STRUCTURAL_TRAJECTORIES` trajectories or more."""
    if trajectory_classes.height == 0:
        return []
    out = []
    for name in classes:
        column = f"count:{name}"
        if column not in trajectory_classes.columns:
            continue
        per_step = trajectory_classes.group_by("step").agg(
            ((pl.col(column).min() == pl.col(column).max()) & (pl.col(column).min() >= 1)).alias("fixed"), pl.len())
        fixed = per_step.filter("fixed")
        if per_step["fixed"].mean() >= STRUCTURAL_STEPS and fixed["len"].sum() >= STRUCTURAL_TRAJECTORIES:
            out.append(name)
    return out


def competing_credit(class_credit: pl.DataFrame, structural: list[str]) -> pl.DataFrame:
    """``class_credit`` with ``competing_mean`` (the mean scaled push of the step's non-structural
    calls) and ``competing_credit``: the class's mean scaled push minus ``competing_mean`` (null
    where the class has no call at the step)."""
    competing = (class_credit.filter(~pl.col("primary_class").is_in(structural))
                 .group_by("step", "estimator", "aggregation")
                 .agg((pl.col("push_sum_scaled").sum() / pl.col("calls").sum()).alias("competing_mean")))
    return class_credit.join(competing, on=["step", "estimator", "aggregation"], how="left").with_columns(
        pl.when(pl.col("calls") > 0).then(pl.col("push_sum_scaled") / pl.col("calls") - pl.col("competing_mean"))
        .otherwise(None).alias("competing_credit"))


def cumulative_push(series: np.ndarray, sign: float, block: int, draws: int, seed: int) -> Push:
    """Signed sum of a per-step series (NaN steps count 0) and its moving-block bootstrap
    interval; no interval (NaN) over fewer than two blocks of steps, where every resample would
    be the whole window again and the interval would have no width."""
    values = sign * np.nan_to_num(series.astype(float), nan=0.0)
    total = float(values.sum())
    if values.size < max(2, 2 * block):
        return Push(total, float("nan"), float("nan"))
    index = block_indices(values.size, block, draws, np.random.default_rng(seed))
    sums = values[index].sum(axis=1)
    low, high = np.quantile(sums, [0.025, 0.975])
    return Push(total, float(low), float(high))


def within_step_relevance(trajectory_classes: pl.DataFrame, name: str, target: str = "reward") -> tuple[float, float, float, int]:
    """Correlation of the class's count with ``target`` (the reward, or a ``channel:<name>`` column),
    both centred within their step; its Fisher interval."""
    return centred_correlation(trajectory_classes, f"count:{name}", target)


def signed_relevance(trajectory_classes: pl.DataFrame, name: str, sign: float) -> tuple[Push, str]:
    """The class's reward relevance signed by the drift: against the reward, and on a run with two or
    more reward channels against each channel too, the one whose interval's lower end is highest
    (a class that moves any channel the run rewards, the way it went, is reward-relevant)."""
    targets = ["reward"] + sorted(c for c in trajectory_classes.columns if c.startswith("channel:"))
    best, best_target = Push(float("nan"), float("nan"), float("nan")), "reward"
    for target in targets:
        r, low, high, _ = within_step_relevance(trajectory_classes, name, target)
        if not math.isfinite(low):
            continue
        candidate = Push(sign * r, *sorted((sign * low, sign * high)))
        if not math.isfinite(best.low) or candidate.low > best.low:
            best, best_target = candidate, target
    return best, best_target


class VerdictResult:
    """Verdict rows, evidence rows and the verdict line of each drifting class (by class)."""

    def __init__(self, frame: pl.DataFrame, evidence: pl.DataFrame, lines: dict[str, str], structural: list[str],
                 projection: pl.DataFrame):
        self.frame = frame
        self.evidence = evidence
        self.lines = lines
        self.structural = structural
        self.projection = projection


def drift_verdicts(
    drift: pl.DataFrame,
    class_credit: pl.DataFrame,
    trajectory_classes: pl.DataFrame,
    own_label: str | None,
    aggregation: str,
    k: int,
    bootstrap: int = 1000,
    seed: int = 0,
    structural: list[str] | None = None,
    not_computed: str | None = None,
    min_change: float = 0.1,
) -> VerdictResult:
    """A verdict per drifting class of ``drift`` (the frame of :func:`~.drift.attribute_drift`);
    ``structural`` the structural classes when already known (else found here); ``not_computed``
    the run's estimator when it is known but has no credit here (``own_label`` is then None);
    ``min_change`` the drift's worth of share (:class:`~.drift.DriftConfig`), which tells a
    drift that turned back (:func:`~.statistics.drift_reach`)."""
    classes = sorted(class_credit["primary_class"].unique().to_list()) if class_credit.height else []
    structural = structural_classes(trajectory_classes, classes) if structural is None else structural
    credit = competing_credit(class_credit, structural) if class_credit.height else class_credit
    rows, evidence, lines = [], [], {}
    labels = credit["estimator"].unique(maintain_order=True).to_list() if credit.height else []
    aggregations = credit["aggregation"].unique(maintain_order=True).to_list() if credit.height else []
    known = own_label in labels
    projected = project(credit, own_label, aggregation, structural, k, seed) if credit.height else \
        pl.DataFrame(schema=PROJECTION_SCHEMA)
    for first in drift.unique("primary_class", maintain_order=True).iter_rows(named=True):
        name, sign = first["primary_class"], (1.0 if first["direction"] == "grew" else -1.0)
        steps = np.array(sorted(credit["step"].unique().to_list()))
        window = steps[(steps >= first["onset_step"] - k) & (steps <= _drift_end(credit, trajectory_classes, name, steps, first, k, min_change))]
        pairs = [(label, aggregation) for label in labels]
        if known:
            pairs += [(own_label, mode) for mode in aggregations if mode != aggregation]
        pushes, uncentred = {}, set()
        for label, mode in pairs:
            part = credit.filter((pl.col("estimator") == label) & (pl.col("aggregation") == mode)
                                 & (pl.col("primary_class") == name) & pl.col("step").is_in(window.tolist()))
            if not is_centred(part["step_mean_scaled"]):
                uncentred.add((label, mode))
            lookup = dict(zip(part["step"].to_list(), part["competing_credit"].to_list()))
            series = np.array([np.nan if lookup.get(s) is None else lookup[s] for s in window], dtype=float)
            pushes[(label, mode)] = cumulative_push(series, sign, k, bootstrap, seed)
        if not pushes:
            continue
        own_key = (own_label, aggregation) if known else max(pushes, key=lambda key: pushes[key].value)
        own = pushes[own_key]
        others = {_label(key, aggregation, own_key): p for key, p in pushes.items() if key != own_key}
        relevance, relevance_target = signed_relevance(trajectory_classes, name, sign)
        decision = decide(own, others, relevance,
                          frozenset(_label(key, aggregation, own_key) for key in uncentred if key != own_key),
                          frozenset(_label(key, aggregation, own_key) for key in pushes
                                    if key != own_key and key[0] == own_key[0]))
        if first.get("displaced_by"):
            decision = Decision(decision.verdict, decision.reason + "; " + displacement_text(first), decision.dissenting)
        for key, p in pushes.items():
            evidence.append({"primary_class": name, "estimator": key[0], "aggregation": key[1], "own": key == own_key,
                             "push": p.value, "push_low": p.low, "push_high": p.high, "steps": int(window.size)})
        rows.append({
            "primary_class": name, "direction": first["direction"], "share_first": first["share_first"],
            "share_last": first["share_last"], "onset_step": first["onset_step"], "verdict": decision.verdict,
            "reason": decision.reason, "estimator": own_key[0], "aggregation": own_key[1], "own_known": known,
            "dissenting": ", ".join(decision.dissenting), "window": steps_text(window.tolist()),
            "push": own.value, "push_low": own.low, "push_high": own.high, "relevance": relevance.value,
            "relevance_low": relevance.low, "relevance_high": relevance.high, "structural": ", ".join(structural),
            "displaced_by": first.get("displaced_by") or "", "rest_first": first.get("rest_first"),
            "rest_last": first.get("rest_last"), "peak_steps": first.get("peak_steps") or "",
            "share_end": first.get("share_end"), "peak_share": first.get("peak_share"),
        })
        lines[name] = _line(rows[-1], own, others, relevance, decision, known, relevance_target, not_computed) + _projection_text(
            projected.filter(pl.col("primary_class") == name), sign, own_key[0])
    return VerdictResult(pl.DataFrame(rows, schema=VERDICT_SCHEMA), pl.DataFrame(evidence, schema=EVIDENCE_SCHEMA),
                         lines, structural, projected)


def drift_phrase(drift: Mapping[str, Any], evidence: str = "") -> str:
    """A drift row's change in words, as every verdict and finding says it: ``think grew 0.08 ->
    0.93 from step 60``; an excursion also where it went and where it came back to: ``think
    grew 0.06 -> 0.70 from step 62 (by steps 61-90), then fell back to 0.07``; a drift that
    turned back within the last stage (:func:`~trajlens.attribution.drift.late_turn`) how far it
    went first: ``think grew 0.08 -> 0.23 from step 60, to 0.61 by steps 74-78, then back to 0.00 at
    the run's end`` (its last k steps).

    ``evidence`` (the test of the change: ``all 800 trajectories ..., p < 0.001``) stands in the
    parentheses right after the change it tested, before what the share did next."""
    text = (f"{drift['primary_class']} {drift['direction']} {drift['share_first']:.2f} -> {drift['share_last']:.2f} "
            f"from step {drift['onset_step']}")
    if drift.get("peak_share") is not None:
        text += (f"{f' ({evidence})' if evidence else ''}, to {drift['peak_share']:.2f} by steps {drift['peak_steps']}, "
                 f"then back to {drift['share_end']:.2f} at the run's end")
    elif drift.get("peak_steps"):
        back = "fell" if drift["direction"] == "grew" else "rose"
        reach = f"by steps {drift['peak_steps']}" + (f"; {evidence}" if evidence else "")
        text += f" ({reach}), then {back} back to {drift['share_end']:.2f}"
    elif evidence:
        text += f" ({evidence})"
    return text


def drift_size(drift: Mapping[str, Any]) -> float:
    """How far a drift row's share moved, as the report ranks its findings: from the first stage
    to the last (an excursion's furthest stage), or to a late turn's furthest share when further."""
    size = abs(drift["share_last"] - drift["share_first"])
    peak = drift.get("peak_share")
    return size if peak is None else max(size, abs(peak - drift["share_first"]))


def verdict_head(verdict: str, displaced_by: str) -> str:
    """What a class's verdict line leads with: its verdict, or for a class that other drifts
    displaced, ``displaced by think``: that drift moved it, and the verdict of its own push
    follows as what the push alone would read (a line that led "learning: view decayed" and then
    said think had displaced it gave two rival causes)."""
    if not displaced_by:
        return verdict
    names = displaced_by.split(", ")
    return "displaced by " + (names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}")


def own_push_reason(verdict: str, reason: str, displaced_by: str) -> str:
    """The reason a verdict line gives: for a displaced class, prefixed with the verdict its own
    push alone reads (its reason ends with the displacement, :func:`displacement_text`)."""
    return f"read on its own push, {verdict}: {reason}" if displaced_by else reason


def displacement_text(drift: dict) -> str:
    """What a displaced class's verdict adds (:mod:`.drift`, displacement): which classes took its
    calls (or gave theirs up) and its share of the other calls, which held."""
    names = drift["displaced_by"].split(", ")
    others = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    moved = "grew" if drift["direction"] == "decayed" else "decayed"
    return (f"displaced by {others}: of the calls other than {others}'s, its share held "
            f"({drift['rest_first']:.2f} -> {drift['rest_last']:.2f}), so it {drift['direction']} as {others} {moved}")


def _projection_text(rows: pl.DataFrame, sign: float, own_label: str) -> str:
    """Would another estimator have stopped it: the projected final share under the estimators that
    would have moved the class least (:mod:`.projection`)."""
    if rows.height == 0:
        return ""
    own = rows.filter(pl.col("estimator") == own_label)
    others = rows.filter(pl.col("estimator") != own_label).sort(pl.col("projected_end") * sign).head(2)
    if own.height == 0 or others.height == 0:
        return ""
    first = own.row(0, named=True)
    shown = ", ".join(f"{r['estimator']} {r['projected_end']:.2f} [{r['projected_low']:.2f}, {r['projected_high']:.2f}]"
                      for r in others.iter_rows(named=True))
    text = (f"; projected final share of the competing calls from the run's first steps "
            f"({first['share_start']:.2f}): {shown}; under {own_label} {first['projected_end']:.2f} "
            f"(observed {first['share_end']:.2f})")
    if not reproduces(first):
        text += "; the projection does not reproduce the run under its own estimator, so read these as directions only"
    return text


REPRODUCED_SHARE = 0.5
"""The projection reproduces a run when, under the run's own estimator, it misses the observed final
share by at most this share of the observed change."""


def reproduces(own: dict) -> bool:
    """Whether the projection under the run's own estimator (a ``projection`` row) lands near what
    the run did: its counterfactuals are then more than directions."""
    change = abs(own["share_end"] - own["share_start"])
    return abs(own["projected_end"] - own["share_end"]) <= REPRODUCED_SHARE * change


DRIFT_END = SETTLED
"""Share of the way from the first stage's share to the last stage's at which the drift window
ends: where the drift settled (the point the onset is read back from)."""


def _drift_end(credit: pl.DataFrame, trajectory_classes: pl.DataFrame, name: str, steps: np.ndarray, drift: dict,
               k: int, min_change: float) -> int:
    """The step at which the class's share (mean over k steps) has moved :data:`DRIFT_END` of the
    way to the drift's reach (:func:`~.statistics.drift_reach`). The share is the one the drift was
    found on (:func:`~.statistics.step_shares` of the trajectories' counts: every classified call)."""
    from trajlens.attribution.statistics import drift_onset, step_shares

    if trajectory_classes.height and f"count:{name}" in trajectory_classes.columns:
        share = step_shares(trajectory_classes, steps, [name])[:, 0]  # as the drift was found
    else:  # no trajectories: the calls the credit counted
        reference = credit.filter((pl.col("estimator") == credit["estimator"][0])
                                  & (pl.col("aggregation") == credit["aggregation"][0]))
        counts = reference.filter(pl.col("primary_class") == name).select("step", "calls", "step_calls")
        lookup = {step: calls / total if total else 0.0 for step, calls, total in counts.iter_rows()}
        share = np.array([lookup.get(int(step), 0.0) for step in steps])
    end = drift_onset(steps, share, drift["share_first"], drift["share_last"], k, min_change, DRIFT_END)
    return max(end, int(drift["onset_step"]) + k)


def _label(key: tuple[str, str], aggregation: str, own_key: tuple[str, str]) -> str:
    """A counterfactual's name: the estimator under the run's aggregation, or the run's estimator's aggregation."""
    if key[0] == own_key[0]:
        return f"{key[0]} under {key[1]}"
    return key[0] if key[1] == aggregation else f"{key[0]} under {key[1]}"


def _line(row: dict, own: Push, others: dict[str, Push], relevance: Push, decision: Decision, known: bool,
          target: str = "reward", not_computed: str | None = None) -> str:
    """The verdict line: verdict first, then the drift and the evidence that decided it."""
    missing = "is not known" if not_computed is None else f"{not_computed} was not recomputed"
    who = f"{row['estimator']} / {row['aggregation']}" + ("" if known else f" (the run's estimator {missing}: "
                                                             "the counterfactual that pushed hardest stands in)")
    drift = drift_phrase(row)
    text = (f"{verdict_head(decision.verdict, row['displaced_by'])}: {drift}; cumulative push among the competing calls over "
            f"steps {row['window']}, signed by the drift, under {who}: {own.text()}")
    named = list(decision.dissenting) or sorted(others, key=lambda label: others[label].value)[:2]
    if named:
        text += "; " + ", ".join(f"{label}: {others[label].text()}" for label in named if label in others)
    relevance_text = relevance.correlation_text()
    where = "" if target == "reward" else f" (to the {target.removeprefix('channel:')} channel)"
    text += (f"; reward relevance signed by the drift {relevance_text}{where}; "
             f"{own_push_reason(decision.verdict, decision.reason, row['displaced_by'])}")
    if row["structural"]:
        text += f" (structural calls left out of the competition: {row['structural']})"
    return text
