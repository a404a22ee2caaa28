"""Findings of a run's report: sentences about what the run does, each with its weight and evidence.

A :class:`Finding` is the sentence itself (a ``str``, so it prints and compares as one) with
how much it matters (:data:`IMPORTANCE`), where its evidence is in the run's section, and
whether it is about the run as trained or about a counterfactual recomputation (advantages an
estimator the run did not train with would have given it). The overview ranks findings by
importance; a finding is only written when it says something about the run (a share that
stays at zero is not a finding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from trajlens.attribution.drift import share_rule
from trajlens.attribution.verdicts import ARTEFACT, verdict_order
from trajlens.classify.rules import VERIFICATION_CLASSES
from trajlens.run.change import Change, ChangeRule, judged, ratio, shipped_rule, stage_change, stage_ends
from trajlens.steps import spans_text

AS_TRAINED = "as trained"
RECOMPUTED = "recomputed"

IMPORTANCE: dict[str, int] = {
    "learning_rate": 90,
    "outcome": 80,
    "format_errors": 45,
    "critic": 70,
    "length": 75,
    "dead_groups": 72,
    "saturated_channel": 70,
    "behaviour": 60,
    "reward": 55,
    "advantage_as_trained": 65,
    "channel": 35,
    "explained_variance": 30,
    "advantage_recomputed": 25,
    "advantage_std": 20,
    "token_arrays": 40,
    "attribution_artefact": 85,
    "attribution_learning": 45,
    "attribution_unexplained": 22,
    "attribution_unavailable": 10,
    "estimator_inputs": 15,
    "split": 50,
    "single_step": 5,
    "no_trajectories": 5,
}
"""Weight of a finding by its kind: the overview lists a run's findings heaviest first."""


CHECK_WEIGHT: dict[str, int] = {"fail": 30, "warn": 15}
"""Added to a finding's weight when a shipped check on the same thing fires (by its status)."""

FINDING_CHECKS: dict[str, tuple[str, ...]] = {
    "learning_rate": ("learning_rate_mismatch",),
    "critic": ("critic_starved", "critic_grad_norm_run"),
    "explained_variance": ("critic_explained_variance_unwhitened",),
    "saturated_channel": ("reward_channel_rel_gain", "reward_channel_std"),
    "advantage_as_trained": ("all_negative_streak", "advantage_std_jump", "advantage_bimodal"),
}
"""The shipped checks that look at what a finding of each kind says."""


class Finding(str):
    """A finding's sentence, with its kind, weight, evidence anchor, what it is about, the
    shipped checks that look at the same thing, and the stage metric it speaks of (``subject``:
    ``share:think``, ``mean:model_tokens``; None when it names none)."""

    kind: str
    importance: float
    evidence: str | None
    about: str
    checks: tuple[str, ...]
    subject: str | None
    headline: str
    """The finding as a first screen shows it: the sentence itself, or a shorter one that leaves
    the evidence to the run's section."""

    def __new__(cls, text: str, kind: str, evidence: str | None = None, about: str = AS_TRAINED, *,
                checks: tuple[str, ...] | None = None, bonus: float = 0.0, subject: str | None = None,
                headline: str | None = None) -> "Finding":
        finding = super().__new__(cls, text)
        finding.kind = kind
        finding.importance = IMPORTANCE[kind] + bonus
        finding.evidence = evidence
        finding.about = about
        finding.checks = FINDING_CHECKS.get(kind, ()) if checks is None else checks
        finding.subject = subject
        finding.headline = text if headline is None else headline
        return finding


def weight(finding: str, fired: dict[str, str] | None = None) -> float:
    """What ``finding`` weighs: its importance, and more when a check on the same thing fires
    (``fired``: check name -> fail or warn); a plain string, of unknown weight, nothing."""
    if not isinstance(finding, Finding):
        return 0.0
    fired = fired or {}
    return finding.importance + max((CHECK_WEIGHT[fired[c]] for c in finding.checks if c in fired), default=0)


VERDICT_KINDS: tuple[str, ...] = ("attribution_artefact", "attribution_learning", "attribution_unexplained")
"""The kinds of finding that are attribution verdicts."""


def ranked(findings: list[str], fired: dict[str, str] | None = None) -> list[str]:
    """Findings heaviest first (:func:`weight`); plain strings last. The attribution verdicts
    take the places their weights earn among the other findings, in the order ``trajlens
    attribute`` lists them (:func:`~trajlens.attribution.verdicts.verdict_order`): a drift learned
    as a consequence (longer responses once a channel collapsed) never leads the artefact behind it."""
    order = sorted(findings, key=lambda f: -weight(f, fired))
    places = [i for i, f in enumerate(order) if isinstance(f, Finding) and f.kind in VERDICT_KINDS]
    verdicts = sorted((order[i] for i in places), key=verdict_order)
    for place, verdict in zip(places, verdicts):
        order[place] = verdict
    return order


@dataclass(frozen=True)
class StageTrend:
    """A stage metric worth a finding when its change from the first stage to the last counts
    under ``rule`` (:mod:`trajlens.run.change`): the rule the checks or attribution judge the
    same fact by, so the report shows the drifts they see and no other."""

    metric: str
    label: str
    kind: str
    rule: ChangeRule
    digits: int = 3
    checks: tuple[str, ...] = ()
    """The shipped checks that watch the same metric, in the direction of ``watched``."""
    watched: int = 1
    """The way the checks watch the metric move: 1 up (think share, length), -1 down (the suite
    rate). A trend the other way is a finding of its own, not the one a firing check weighs up."""

    @property
    def least(self) -> float:
        """The least change that counts, as :func:`size_bonus` measures a change: in units of
        spread for a rule of effect sizes, relative (the ratio less one) for a rule of ratios,
        absolute otherwise."""
        if self.rule.min_effect > 0:
            return self.rule.min_effect
        return self.rule.min_ratio - 1 if self.rule.min_ratio > 1 else self.rule.min_change

    def size(self, change: Change) -> float:
        """A change that counts, as :attr:`least` measures it."""
        if self.rule.min_effect > 0:
            return abs(change.effect or 0.0)
        if self.rule.min_ratio > 1:
            return ratio(change.last, change.first, "increase" if change.rose else "decrease") - 1
        return abs(change.last - change.first)


REWARD_RULE = ChangeRule(alpha=0.05, min_effect=0.2)
"""When the mean reward's change between the first and last stage counts: significant at 95% and
at least a fifth of its spread (Cohen's d 0.2, a small effect). Rewards have no common unit and
may be negative (a -1 / +1 verdict, a penalty), so no ratio or fixed change can say it."""


STAGE_TRENDS: tuple[StageTrend, ...] = (
    StageTrend("mean:model_tokens", "model tokens per trajectory", "length", shipped_rule("response_length_inflation"),
               digits=0, checks=("response_length_inflation",)),
    StageTrend("share:think", "think share", "behaviour", share_rule(), checks=("think_share", "think_runs_growing")),
    StageTrend("ran_suite", "runs the full suite", "behaviour", shipped_rule("suite_rate_decline"),
               checks=("suite_rate_decline", "suite_rate_floor"), watched=-1),
    StageTrend("mean:num_turns", "turns per trajectory", "behaviour", shipped_rule("turns_inflation"), digits=1,
               checks=("turns_inflation",)),
    StageTrend("reward", "mean reward", "reward", REWARD_RULE),
    StageTrend("resolved", "resolved rate", "reward", shipped_rule("suite_rate_decline")),
)
"""Stage metrics that make a finding when they drift, each judged by the rule of the check
that watches it (a class share by attribution's, as the drifts it attributes). The outcome
(:data:`~trajlens.classify.stages.OUTCOME_METRICS`: mean reward, resolved rate), which no check
compares between stages, is judged by its own rule: the mean reward by :data:`REWARD_RULE`
(at 95%, a fifth of its spread or more), the resolved rate as the checks judge the suite rate
(ten points or more, at 95%)."""


MAX_TREND_BONUS = 15.0
"""Most weight a stage trend (or a drift attribution judged) gains by its size (at four times its least change)."""


def size_bonus(change: float, least: float) -> float:
    """The weight a change gains by its size: :data:`MAX_TREND_BONUS` at four times ``least``."""
    return min(MAX_TREND_BONUS, MAX_TREND_BONUS * change / least / 4)


SUITE_METRIC, SUITE_CLASS = "ran_suite", "test_suite"


def verification_shift(measures: pl.DataFrame, specs: dict[str, Any],
                       among: tuple[str, ...] = VERIFICATION_CLASSES) -> str | None:
    """Where verification moved: the class of ``among`` whose share of the verification calls
    (``verification:<class>``, pooled over the whole first and last stage of ``measures``) rose
    most among those whose rise counts under attribution's class-share rule (:func:`share_rule`:
    the same change of a share of calls that makes a drift), as "verification moved to C: a -> b
    of verification calls"; None when no rise counts. Beside a falling suite rate it says what
    took the suite's place (the suite habit decaying into ``python -c`` checks); alone, it is a
    finding of its own."""
    rises = []
    for klass in among:
        found = stage_change(measures, specs[f"verification:{klass}"], True, share_rule(), "increase")
        if found is not None:
            rises.append((found.last - found.first, klass, found.first, found.last))
    if not rises:
        return None
    _, klass, first, last = max(rises)
    return f"verification moved to {klass}: {first:.3f} -> {last:.3f} of verification calls"


def stage_findings(rates: pl.DataFrame, measures: pl.DataFrame) -> list[Finding]:
    """First stage -> last stage of each :data:`STAGE_TRENDS` metric whose change counts under
    its rule, over the whole stages (``measures``: the stage report's trajectories, with their
    ``stage_index``, and ``reward`` and ``resolved`` for the outcome trends; ``rates``: its table,
    with the outcome's rows (:func:`~trajlens.classify.stages.outcome_rates`), for the last
    stage's sample and interval; a metric without rows is not judged). A falling suite rate
    says which other verification took its place (:func:`verification_shift`, when one did);
    without such a fall, a shift of the verification mix is a finding of its own."""
    from trajlens.classify.per_trajectory import OUTCOME_SPECS, behaviour_specs
    from trajlens.classify.stages import MEAN_MEASURES

    specs = {spec[0]: spec for spec in (*behaviour_specs(MEAN_MEASURES), *OUTCOME_SPECS)}
    findings = []
    shift = verification_shift(measures, specs)
    for trend in STAGE_TRENDS:
        rows = rates.filter(pl.col("metric") == trend.metric)
        if rows.is_empty():
            continue
        proportion = rows["kind"][0] != "mean"
        ends = stage_ends(measures, specs[trend.metric], proportion)
        found = judged(*ends, proportion, trend.rule) if ends is not None else None
        if ends is None or found is None:
            continue
        stage_of = {row["stage_index"]: row for row in rows.iter_rows(named=True)}
        first, last = stage_of[ends[0]["stage_index"]], stage_of[ends[1]["stage_index"]]
        d = trend.digits
        sampled = "" if None in (last["value"], last["ci_low"], last["ci_high"]) else (
            f" (N={last['n_sampled']} sample: {last['value']:.{d}f} [{last['ci_low']:.{d}f}, {last['ci_high']:.{d}f}])")
        text = f"{trend.label}: {found.first:.{d}f} in {first['stage']} -> {found.last:.{d}f} in {last['stage']}{sampled}"
        if trend.metric == SUITE_METRIC and not found.rose:
            replaced = verification_shift(measures, specs, tuple(c for c in VERIFICATION_CLASSES if c != SUITE_CLASS))
            text, shift = (f"{text}; {replaced}" if replaced else text), None
        watched = found.rose == (trend.watched > 0)
        findings.append(Finding(text, trend.kind, "stage", checks=trend.checks if watched else (), subject=trend.metric,
                                bonus=size_bonus(trend.size(found), trend.least)))
    if shift is not None:
        findings.append(Finding(shift, "behaviour", "stage"))
    return findings


MAX_LISTED_STREAKS = 20
"""Streaks of all-negative (or all-positive) batches a finding lists before counting the rest."""


def _streak_text(streaks: tuple[tuple[int, int], ...]) -> str:
    listed = spans_text(streaks[:MAX_LISTED_STREAKS])
    more = len(streaks) - MAX_LISTED_STREAKS
    return listed + (f" and {more:,} more streaks" if more > 0 else "")


def advantage_findings(diagnostics: pl.DataFrame, own_label: str | None) -> list[Finding]:
    """Sign streaks and std peaks of the recomputed advantages, each said of the run as trained
    (``own_label``, the estimator it trained with) or of a counterfactual recomputation."""
    from trajlens.estimators import sign_streaks

    findings = []
    for (estimator,), part in diagnostics.partition_by("estimator", as_dict=True, maintain_order=True).items():
        part = part.sort("step")
        own = estimator == own_label
        head = (f"as trained ({estimator})" if own
                else f"recomputed under {estimator} (not what this run trained with)")
        about, kind = (AS_TRAINED, "advantage_as_trained") if own else (RECOMPUTED, "advantage_recomputed")
        streaks = sign_streaks(part["step"].to_list(), part["all_negative"].to_list(), part["all_positive"].to_list())
        signs = [f"all-{sign} batches at steps {_streak_text(spans)}"
                 for sign, spans in (("negative", streaks.negative_streaks), ("positive", streaks.positive_streaks)) if spans]
        if signs:
            findings.append(Finding(f"{head}: {'; '.join(signs)}", kind, "figure-advantage_batches", about))
        std = part["std"]
        if std.len() > 4 and std.max() > 3 * std.median():
            peak = part.row(int(std.arg_max()), named=True)
            findings.append(Finding(f"{head}: advantage std peaks at {peak['std']:.2f} at step {peak['step']} "
                                    f"(median {std.median():.2f})", "advantage_std", "figure-advantage_batches", about))
    return findings


DEAD_GROUP_FINDING = 0.2
"""Share of dead groups (all rewards of a group equal) from which it is a finding."""


def attribution_findings(store: Any, run_id: str) -> list[Finding]:
    """The verdicts of the run's saved attribution (``trajlens attribute``), one finding each,
    an artefact weighing most: "estimator artefact: think grew 0.08 -> 0.93 from step 60 (...)".
    Nothing for a run not attributed."""
    from trajlens.attribution.drift import DriftConfig
    from trajlens.attribution.render import headline, subject_lines
    from trajlens.attribution.saved import load_attribution
    from trajlens.attribution.verdicts import drift_size

    saved = load_attribution(store, run_id)
    if saved is None:
        return []
    # A displaced class's drift is the size of the drift that displaced it, not a finding of its own size.
    changes = {f"share:{row['primary_class']}": 0.0 if row.get("displaced_by") else drift_size(row)
               for row in saved.verdicts.iter_rows(named=True)} if saved.verdicts is not None else {}
    findings = []
    for subject, line in subject_lines(saved):
        verdict = line.split(":", 1)[0]
        kind = ("attribution_artefact" if "artefact" in verdict else
                "attribution_learning" if verdict == "learning" else "attribution_unexplained")
        # A verdict is about a drift: it weighs at least what the drift itself does, and more the larger it is.
        drift = IMPORTANCE[DRIFT_KINDS[(subject or "").partition(":")[0]]]
        bonus = max(drift - IMPORTANCE[kind], 0) + size_bonus(changes.get(subject or "", 0.0), DriftConfig().min_change)
        # the checks that watch a reward channel weigh its verdict up, as they weigh its saturation
        # finding; those that watch the advantages the run trained with weigh up a drift those
        # advantages caused (an all-negative streak is how a decaying critic pushes a class down)
        checks = (FINDING_CHECKS[DRIFT_KINDS["channel"]] if (subject or "").startswith("channel:") else
                  FINDING_CHECKS["advantage_as_trained"] if verdict == ARTEFACT else ())
        # a length or channel verdict carries every estimator's evidence: the first screen shows its drift and reason
        short = line if subject is None or subject.startswith("share:") else headline(line)
        findings.append(Finding(line, kind, "attribution", subject=subject, bonus=bonus, checks=checks, headline=short))
    return findings


def drift_findings(measures: pl.DataFrame, staged: pl.DataFrame, run_id: str) -> list[Finding]:
    """Each class whose share of calls drifted, found as attribution finds what it attributes
    (:func:`trajlens.attribution.drift.class_drifts`: the same test, onset and displacement), for
    a run not attributed yet: "think grew 0.07 -> 0.48 from step 83 (all 800 trajectories of the
    first and last stage, p < 0.001); not attributed yet (...)": the test is on every trajectory
    of the two stages, which the sentence says, since the stage report beside it tests the
    stages' samples. ``measures``: the run's ``trajectory_measures`` (``step``,
    ``count_<class>``); ``staged``: each step's ``stage_index``. A displaced class says what
    displaced it and weighs as the consequence it is, not by its own size (as
    :func:`attribution_findings` weighs it)."""
    from trajlens.attribution.drift import DriftConfig, class_drifts
    from trajlens.attribution.statistics import p_text
    from trajlens.attribution.verdicts import displacement_text, drift_phrase, drift_size
    from trajlens.steps import steps_text

    config = DriftConfig()
    findings = []
    drifts = class_drifts(class_counts(measures), staged, config)
    if drifts.is_empty():
        return []
    # the trajectories the drift test pools: the first stage's and the last's, or an excursion's furthest stage's
    stages = measures.select("step").join(staged, on="step").group_by("stage_index").agg(
        pl.col("step").min().alias("first"), pl.col("step").max().alias("last"), pl.len()).sort("stage_index")
    counts = {steps_text(range(first, last + 1)): n for first, last, n in stages.select("first", "last", "len").iter_rows()}
    first_stage, last_stage = stages["len"][0], stages["len"][-1]
    for row in drifts.iter_rows(named=True):
        if row["peak_steps"] and row["peak_share"] is None:
            tested = f"all {first_stage + counts[row['peak_steps']]:,} trajectories of the first stage and those steps"
        else:
            tested = f"all {first_stage + last_stage:,} trajectories of the first and last stage"
        text = drift_phrase(row, f"{tested}, {p_text(row['change_p'])}")
        if row["displaced_by"]:
            text += f"; {displacement_text(row)}"
        text += f"; not attributed yet (`trajlens attribute --run {run_id}` tells learning from an estimator artefact)"
        change = 0.0 if row["displaced_by"] else drift_size(row)
        findings.append(Finding(text, "behaviour", "stage", subject=f"share:{row['primary_class']}",
                                bonus=size_bonus(change, config.min_change), headline=f"{drift_phrase(row)} (not attributed)"))
    return findings


def class_counts(measures: pl.DataFrame) -> pl.DataFrame:
    """``step`` and ``count:<class>`` of each trajectory of ``trajectory_measures`` (its
    ``count_<class>`` columns), as attribution counts a trajectory's calls."""
    return measures.select("step", *(pl.col(c).cast(pl.Float64).fill_null(0.0).alias("count:" + c.removeprefix(COUNT_PREFIX))
                                     for c in measures.columns if c.startswith(COUNT_PREFIX)))


COUNT_PREFIX = "count_"
"""The prefix of ``trajectory_measures``' per-class call counts (``count_think``)."""


DRIFT_KINDS: dict[str, str] = {"share": "behaviour", "mean": "length", "channel": "saturated_channel", "": "behaviour"}
"""The kind of finding the drift a verdict speaks of is, by its subject (``share:think``,
``mean:model_tokens``, ``channel:format``)."""


def with_verdicts(trends: list[Finding], verdicts: list[Finding]) -> list[Finding]:
    """The stage trends and the attribution verdicts, one finding per fact: a trend whose metric
    a verdict speaks of (think's share, the response length) is folded into that verdict, which
    says why it moved, and keeps the trend's stage figures, the checks that watch either and the
    greater of the two weights (a drift left unexplained is still the drift it was). Reward
    channel findings fold into a channel's verdict alike."""
    by_subject = {t.subject: t for t in trends if t.subject is not None}
    folded, explained = [], set()
    for verdict in verdicts:
        trend = by_subject.get(verdict.subject) if verdict.subject not in explained else None
        if trend is None:
            folded.append(verdict)
            continue
        explained.add(verdict.subject)
        folded.append(Finding(f"{verdict}; by stage, {trend}", verdict.kind, verdict.evidence, verdict.about,
                              checks=tuple(dict.fromkeys(trend.checks + verdict.checks)), subject=verdict.subject,
                              bonus=max(trend.importance, verdict.importance) - IMPORTANCE[verdict.kind],
                              headline=verdict.headline))  # the stage figures repeat the drift: the section has them
    return [t for t in trends if t.subject not in explained] + folded


def dead_group_finding(summary: list[Any]) -> list[Finding]:
    """The dead-group share of the run's summary, when a group-relative advantage is zero for a
    notable part of it."""
    table = next((s for s in summary if s.key == "dead_groups"), None)
    if table is None or table.frame.is_empty():
        return []
    row = table.frame.row(0, named=True)
    if row["share"] < DEAD_GROUP_FINDING:
        return []
    return [Finding(f"dead groups: {row['dead_groups']:,} of {row['groups']:,} groups ({row['share']:.0%}, "
                    f"95% [{row['ci_low']:.0%}, {row['ci_high']:.0%}]) have equal rewards, so a group-relative "
                    "advantage tells none of their rollouts apart", "dead_groups", "summary-dead_groups")]


FORMAT_ERROR_FINDING = 0.1
"""Share of trajectories with a format error from which it is a finding."""


def outcome_finding(summary: list[Any]) -> list[Finding]:
    """What a one-step log's attempts came to: the resolved rate, how resolved and unresolved
    attempts differ in turns, and how the unresolved ones ended (their exit statuses); without
    resolved verdicts, the exit statuses alone. Then format errors, when a notable share of
    attempts has one."""
    outcome = next((s for s in summary if s.key == "outcome"), None)
    exits = next((s for s in summary if s.key == "exit_status"), None)
    if outcome is None:
        return []
    rows = outcome.frame.filter(pl.col("measure") == "resolved rate")
    findings = []
    if rows.height:
        rate = rows.row(0, named=True)
        text = (f"resolved {rate['value']:.0%} of {rate['n']:,} attempts "
                f"(95% [{rate['ci_low']:.0%}, {rate['ci_high']:.0%}])")
        contrast = next((s for s in summary if s.key == "outcome_contrast"), None)
        turns = contrast.frame.filter(pl.col("measure") == "turns") if contrast is not None else None
        if turns is not None and turns.height and turns["resolved"][0] is not None and turns["unresolved"][0] is not None:
            text += (f"; resolved attempts took {turns['resolved'][0]:.1f} turns on average, "
                     f"unresolved {turns['unresolved'][0]:.1f}")
        ended = _exits_text(exits, "unresolved")
        if ended:
            text += f"; exit status of the unresolved: {ended}"
        findings.append(Finding(text, "outcome", "summary-outcome"))
    elif exits is not None and exits.frame.height:
        findings.append(Finding(f"no resolved verdicts in the log; exit status: {_exits_text(exits, None)}",
                                "outcome", "summary-exit_status"))
    errors = outcome.frame.filter(pl.col("measure") == "trajectories with a format error")
    calls = outcome.frame.filter(pl.col("measure") == "format errors / tool calls")
    if errors.height and errors["value"][0] >= FORMAT_ERROR_FINDING:
        findings.append(Finding(
            f"format errors in {errors['value'][0]:.0%} of {errors['n'][0]:,} attempts "
            f"({calls['value'][0]:.1%} of {calls['n'][0]:,} tool calls made, the rejected ones included)",
            "format_errors", "summary-outcome"))
    return findings


def _exits_text(exits: Any, outcome: str | None) -> str:
    """The exit statuses of the attempts of ``outcome`` (None: all), most common first."""
    if exits is None:
        return ""
    frame = exits.frame if outcome is None else exits.frame.filter(pl.col("outcome") == outcome)
    counts = frame.group_by("exit status").agg(pl.col("trajectories").sum()).sort(
        "trajectories", "exit status", descending=[True, False])
    return ", ".join(f"{status} {n:,}" for status, n in counts.iter_rows())
