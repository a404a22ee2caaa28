"""A run at a glance, for one-step harness logs as much as for RL runs: :func:`run_summary`.

Outcome (resolved rate and reward with intervals), the verification mix (including
``run_script``), each class's share of a trajectory's calls with its spread, turn and length
distributions, format errors, dead groups (all rewards of a group equal, so a group-relative
advantage is zero for all of them), and the most common commands of each class. Each part is
a :class:`SummaryTable`, which the Markdown and HTML reports render alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from trajlens.checks.step_measures import outcome_stats
from trajlens.classify.calls import HIDDEN_TEXT, deciding_actions
from trajlens.classify.per_trajectory import MEAN_SUPPORT, behaviour_specs
from trajlens.classify.rules import BEHAVIOUR_CLASSES, REDIRECT_RULE, VERIFICATION_CLASSES
from trajlens.compare.table import estimates as measure_estimates
from trajlens.intervals import Spec, added, pooled_rows, repeat_key, sums

TOP_COMMANDS = 5
"""Commands listed per class."""
COMMAND_CHARS = 72
"""Characters of a command's words shown in the most-common-commands table (longer ones are cut with …)."""


@dataclass(frozen=True)
class SummaryTable:
    """A titled table with a one-line note on how to read it."""

    key: str
    title: str
    note: str
    frame: pl.DataFrame


def run_summary(store: Any, run_id: str, measures: pl.DataFrame, split: str | None = None) -> list[SummaryTable]:
    """The summary tables of one run (``measures`` from :func:`trajlens.classify.per_trajectory`),
    on the trajectories of ``split`` (None: all)."""
    from trajlens.run.partitions import scan_run_table

    scanned = scan_run_table(store, run_id, "trajectories")
    if split is not None:
        scanned = scanned.filter(pl.col("split") == split)
    trajectories = scanned.select(
        "run_id", "step", "trajectory_id", "group_id", "reward", "resolved", "exit_status").collect()
    tables = [_outcome(trajectories, measures), _exit_status(trajectories), _outcome_contrast(trajectories, measures), _verification_mix(measures),
              _class_spread(measures), _distributions(measures), _dead_groups(trajectories)]
    tables.append(_top_commands(store, run_id, trajectories.select("trajectory_id")))
    return [t for t in tables if t is not None]


OUTCOME_ROWS: tuple[tuple[str, str, str], ...] = (
    ("resolved", "resolved rate", "Wilson"),
    ("reward", "mean reward", "normal"),
    ("format_errors", "format errors / tool calls", "Wilson, design effect"),
    ("with_format_error", "trajectories with a format error", "Wilson"),
)
"""The outcome table's rows: (measure, name, interval); ``resolved`` and ``reward`` are the
checks' measures of those names, summed over the run's steps."""
_FORMAT_ERRORS: tuple[Spec, ...] = (
    ("format_errors", pl.col("n_format_errors"), pl.col("n_calls") + pl.col("n_format_errors")),
    ("with_format_error", pl.col("n_format_errors") > 0, pl.lit(1)),
)


def _outcome(trajectories: pl.DataFrame, measures: pl.DataFrame) -> SummaryTable:
    """The resolved rate, the mean reward and the format errors, each the one pooled estimate
    of :mod:`trajlens.intervals` over the trajectories (what ``trajlens check`` and ``trajlens
    compare`` give the run)."""
    stats = pl.concat([added(outcome_stats(trajectories)), sums(measures, _FORMAT_ERRORS)], how="diagonal_relaxed")
    estimates = pooled_rows(stats, ("resolved", "format_errors", "with_format_error"))
    rows = [(name, row["value"], row["low"], row["high"], int(row["n"]), interval)
            for measure, name, interval in OUTCOME_ROWS
            if (row := estimates.get(measure)) is not None and row["value"] is not None]
    frame = pl.DataFrame(rows, schema={"measure": pl.String, "value": pl.Float64, "ci_low": pl.Float64,
                                       "ci_high": pl.Float64, "n": pl.Int64, "interval": pl.String}, orient="row")
    return SummaryTable("outcome", "Outcome and format errors",
                        "95% intervals; format errors as a share of calls on the effective sample size (calls "
                        "are clustered in trajectories).", frame)


def _exit_status(trajectories: pl.DataFrame) -> SummaryTable | None:
    """How the attempts ended, by outcome (resolved, unresolved, or unknown without a verdict),
    when the log has exit statuses."""
    if trajectories["exit_status"].null_count() == trajectories.height:
        return None
    frame = trajectories.select(
        pl.col("exit_status").fill_null("not logged").alias("exit status"),
        pl.when(pl.col("resolved").is_null()).then(pl.lit("unknown"))
        .when(pl.col("resolved")).then(pl.lit("resolved")).otherwise(pl.lit("unresolved")).alias("outcome"),
    ).group_by("exit status", "outcome").agg(pl.len().cast(pl.Int64).alias("trajectories")).sort(
        "trajectories", "exit status", "outcome", descending=[True, False, False])
    return SummaryTable("exit_status", "Exit status by outcome",
                        "How each attempt ended (the harness's exit status), by its verdict.", frame)


CONTRAST_MEASURES: tuple[tuple[str, str], ...] = (
    ("mean:num_turns", "turns"), ("mean:n_calls", "tool calls"), ("mean:model_tokens", "model tokens"),
    ("mean:n_format_errors", "format errors"), ("ran_suite", "ran the full suite"), ("mean:n_edits", "edits"),
    ("mean:edits_per_turn", "edits per turn"), ("mean:readback_share", "read-back share"),
    ("mean:first_verification_position", "first verification (position)"),
    *((f"share:{c}", f"{c} share") for c in BEHAVIOUR_CLASSES),
)
"""The checks' behaviour measures set side by side for resolved and unresolved trajectories:
(measure, name)."""


def _outcome_contrast(trajectories: pl.DataFrame, measures: pl.DataFrame) -> SummaryTable | None:
    """Every behaviour measure for resolved and unresolved trajectories side by side (means with
    95% intervals of :mod:`trajlens.intervals`), when the log has both outcomes."""
    if trajectories["resolved"].drop_nulls().n_unique() < 2:
        return None
    joined = measures.join(trajectories.select("trajectory_id", "resolved"), on="trajectory_id").drop_nulls("resolved")
    wanted = {measure for measure, _ in CONTRAST_MEASURES}
    specs = [spec for spec in behaviour_specs() if spec[0] in wanted]
    sides = {resolved: pooled_rows(sums(joined.filter(pl.col("resolved") == resolved), specs),
                                   [name for name, _, _ in specs if not name.startswith("mean:")], MEAN_SUPPORT.get)
             for resolved in (True, False)}
    rows: list[tuple] = []
    same: list[str] = []
    first_named: dict[tuple, str] = {}  # the numbers shown (intervals.repeat_key) -> the measure first shown with them
    for measure, name in CONTRAST_MEASURES:
        cells: list[Any] = [name]
        for resolved in (True, False):
            row = sides[resolved].get(measure) or {"value": None, "low": None, "high": None, "units": 0}
            cells += [row["value"], row["low"], row["high"], int(row["units"])]
        if cells[1] is None and cells[5] is None:
            continue
        key = repeat_key((cells[1], cells[5]), cells[1:])
        if key in first_named:
            same.append(f"{name} as {first_named[key]}")  # one count under two names (one call per turn)
            continue
        if key is not None:
            first_named[key] = name
        rows.append(tuple(cells))
    if not rows:
        return None
    frame = pl.DataFrame(rows, schema={"measure": pl.String, "resolved": pl.Float64, "resolved low": pl.Float64,
                                       "resolved high": pl.Float64, "n resolved": pl.Int64,
                                       "unresolved": pl.Float64, "unresolved low": pl.Float64,
                                       "unresolved high": pl.Float64, "n unresolved": pl.Int64}, orient="row")
    frame = frame.with_columns((pl.col("resolved") - pl.col("unresolved")).alias("resolved - unresolved"))
    return SummaryTable("outcome_contrast", "Resolved against unresolved",
                        "Each behaviour measure over resolved and over unresolved trajectories, with 95% "
                        "intervals (the checks' and compare's: Wilson on the effective size for shares, normal "
                        "for means): what the successful attempts did differently." + (f" The same values, not repeated: {'; '.join(same)}." if same else ""), frame)


def _verification_mix(measures: pl.DataFrame) -> SummaryTable:
    rows = []
    total = int(measures["n_verification"].sum())
    estimates = measure_estimates([f"verification:{klass}" for klass in VERIFICATION_CLASSES], measures)
    for klass in VERIFICATION_CLASSES:
        estimate = estimates[f"verification:{klass}"]
        if estimate is not None:
            rows.append((klass, int(measures[f"count_{klass}"].sum()), estimate.value, estimate.low, estimate.high,
                         estimate.n))
    frame = pl.DataFrame(rows, schema={"class": pl.String, "calls": pl.Int64, "share": pl.Float64,
                                       "ci_low": pl.Float64, "ci_high": pl.Float64, "n_effective": pl.Float64},
                         orient="row")
    note = (f"Share of {total:,} verification calls; 95% Wilson intervals on the effective sample size "
            "(calls are clustered in trajectories)." if total else "No verification calls.")
    return SummaryTable("verification", "Verification mix", note, frame)


def quartiles(values: pl.Series) -> tuple[float, float, float]:
    """The first quartile, median and third quartile of ``values`` (nulls left out; linear
    interpolation), as every table and figure of the report gives them."""
    values = values.drop_nulls().cast(pl.Float64)
    return tuple(float(values.quantile(q, "linear")) for q in (0.25, 0.5, 0.75))  # type: ignore[return-value]


def _class_spread(measures: pl.DataFrame) -> SummaryTable:
    """Each class's share of the run's calls (the pooled ``share:<class>`` that ``compare`` and the
    runs side by side show) beside the spread of its share over the trajectories."""
    with_calls = measures.filter(pl.col("n_calls") > 0)
    estimates = measure_estimates([f"share:{klass}" for klass in BEHAVIOUR_CLASSES], measures)
    rows = []
    for klass in BEHAVIOUR_CLASSES:
        share = with_calls[f"share_{klass}"].drop_nulls()
        pooled_share = estimates[f"share:{klass}"]
        if share.is_empty() or share.sum() == 0 or pooled_share is None:
            continue
        rows.append((klass, pooled_share.value, *quartiles(share), float(share.max()),
                     int((with_calls[f"count_{klass}"] > 0).sum())))
    frame = pl.DataFrame(rows, schema={"class": pl.String, "share of calls": pl.Float64, "q1": pl.Float64,
                                       "median": pl.Float64, "q3": pl.Float64, "max": pl.Float64,
                                       "trajectories_using": pl.Int64}, orient="row")
    return SummaryTable("class_spread", "Class shares per trajectory",
                        "Each class's share of the run's tool calls (as compared between runs), then the "
                        f"quartiles and the maximum of its share of one trajectory's calls, over {with_calls.height} "
                        "trajectories with calls.", frame)


def _distributions(measures: pl.DataFrame) -> SummaryTable:
    rows = []
    for column in ("num_turns", "n_calls", "model_tokens", "reasoning_tokens"):
        values = measures[column].drop_nulls().cast(pl.Float64)
        if values.is_empty():
            continue
        rows.append((column, values.len(), float(values.min()), *quartiles(values), float(values.max()),
                     float(values.mean())))
    frame = pl.DataFrame(rows, schema={"measure": pl.String, "n": pl.Int64, "min": pl.Float64, "q1": pl.Float64,
                                       "median": pl.Float64, "q3": pl.Float64, "max": pl.Float64,
                                       "mean": pl.Float64}, orient="row")
    return SummaryTable("distributions", "Turns and length per trajectory", "Quartiles over trajectories.", frame)


def _dead_groups(trajectories: pl.DataFrame) -> SummaryTable | None:
    groups = trajectories.filter(pl.col("reward").is_not_null() & pl.col("reward").is_not_nan()).group_by("step", "group_id").agg(
        pl.len().alias("size"), (pl.col("reward").max() - pl.col("reward").min()).alias("spread"))
    groups = groups.filter(pl.col("size") > 1)
    if groups.is_empty():
        return None
    dead = groups.filter(pl.col("spread") == 0)
    # the share of groups that are dead, each group one unit: the one estimate of trajlens.intervals
    estimate = pooled_rows(sums(groups, [("dead", pl.col("spread") == 0, pl.lit(1))]), ("dead",))["dead"]
    frame = pl.DataFrame({"groups": [groups.height], "dead_groups": [dead.height], "share": [estimate["value"]],
                          "ci_low": [estimate["low"]], "ci_high": [estimate["high"]],
                          "trajectories_in_dead_groups": [int(dead["size"].sum())]})
    return SummaryTable("dead_groups", "Dead groups",
                        "Groups of two or more rewarded rollouts whose rewards are all equal: nothing tells their "
                        "rollouts apart, and a group-relative advantage is zero for each in exact arithmetic. In "
                        "float32, as trainers compute it, the group mean of equal rewards can miss them by a "
                        "rounding step, and dividing by a standard deviation near zero (plus eps) can make that an "
                        "advantage well away from zero that the whole group shares (verl's GRPO gives -0.106 to each of "
                        "eight rewards of 5/3, +0.106 to each of eight of 4/3).", frame)


def _command_words(text: pl.Expr, redirected: pl.Series) -> pl.Expr:
    """The words a command is listed by: the first two words of its text (three for a module run,
    ``python -m pytest``), the markers of hidden text left out, ``>`` after them when an output
    redirection gave the action its class (``cat >``, ``git diff >``)."""
    words = text.str.strip_chars().str.split(" ").list.eval(
        pl.element().filter((pl.element() != "") & ~pl.element().str.contains(HIDDEN_TEXT)))
    count = pl.when(words.list.get(1, null_on_oob=True) == "-m").then(3).otherwise(2)
    listed = words.list.head(count).list.join(" ")
    return pl.when(pl.lit(redirected).fill_null(False)).then(pl.concat_str(listed, pl.lit(" >"))).otherwise(listed)


def _top_commands(store: Any, run_id: str, trajectory_ids: pl.DataFrame) -> SummaryTable | None:
    """The most common commands of each class, over the calls of ``trajectory_ids``: the words
    (:func:`_command_words`) of the action that gave a call its class (``pytest tests`` of
    ``cd /repo && timeout 60 pytest tests | tail``), else of the command, else the tool's name."""
    from trajlens.run.partitions import scan_run_table

    calls = scan_run_table(store, run_id, "tool_calls").select(
        "trajectory_id", "call_index", "tool_name", "command").join(
        trajectory_ids.lazy(), on="trajectory_id", how="semi")
    if "call_classes" not in store.tables():
        return None
    classes = store.table("call_classes").filter(pl.col("run_id") == run_id).select(
        "trajectory_id", "call_index", "primary_class")
    joined = calls.join(classes, on=["trajectory_id", "call_index"]).drop_nulls("primary_class").collect()
    if joined.is_empty():
        return None
    decided = deciding_actions(joined["command"], joined["primary_class"])
    words = pl.coalesce(pl.lit(decided["action"]), pl.col("command").str.split("\n").list.first())
    head = joined.with_columns(_command_words(words, decided["rule"] == REDIRECT_RULE).alias("words")).select(
        "primary_class", pl.when(pl.col("words") != "").then("words").otherwise("tool_name").alias("command"))
    counted = head.group_by("primary_class", "command").agg(pl.len().alias("calls")).sort(
        "primary_class", "calls", "command", descending=[False, True, False])
    top = counted.group_by("primary_class", maintain_order=True).head(TOP_COMMANDS)
    order = {c: i for i, c in enumerate(BEHAVIOUR_CLASSES)}
    top = top.sort(pl.col("primary_class").replace_strict(order, default=len(order)), "calls", "command",
                   descending=[False, True, False]).rename({"primary_class": "class"})
    # counted by their whole words, shown cut: two commands never share a row because their starts do
    shown = pl.when(pl.col("command").str.len_chars() > COMMAND_CHARS).then(
        pl.concat_str(pl.col("command").str.slice(0, COMMAND_CHARS - 1), pl.lit("…"))).otherwise("command")
    return SummaryTable("top_commands", "Most common commands per class",
                        "The first two words of the action that gave each call its class, as the rules read "
                        "it (wrappers such as timeout and env left out; `>` when an output redirection made it an "
                        f"edit), else of the command, else the tool's name; {TOP_COMMANDS} per class; words "
                        f"longer than {COMMAND_CHARS} characters are cut with …", top.with_columns(shown))
