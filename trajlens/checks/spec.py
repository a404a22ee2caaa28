"""Check specifications: what a check measures, when it fires, and how bad that is.

A check file is TOML with one table per check under ``[checks]``::

    [checks.think_share]
    description = "Think calls crowd out actions (the r6 collapse)"
    measure = "share:think"          # see trajlens.checks.step_measures.MEASURE_FAMILIES
    condition = "threshold"          # threshold | consecutive | stage_change | trend | jump
    above = 0.15
    window = 1                       # steps pooled into each step's value
    severity = "error"               # error | warning

Every field is declared once in :data:`FIELDS`, with the conditions that take it and its
meaning; :func:`parse_checks` reads a file against that table and collects every problem
into one :class:`CheckConfigError`, one line each naming the file, the check and the field.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from trajlens.checks.kinds import KINDS
from trajlens.classify.stages import NAMED_STAGINGS, stage_range_problems
from trajlens.errors import ConfigError
from trajlens.run.change import SHIPPED_CHECKS

CONDITIONS: tuple[str, ...] = tuple(KINDS)
"""Names of the conditions of :data:`trajlens.checks.kinds.CONDITION_KINDS`."""
SEVERITIES: tuple[str, ...] = ("error", "warning")
DIRECTIONS: tuple[str, ...] = ("increase", "decrease")
COMPARISONS: tuple[str, ...] = ("consecutive", "first_to_last")
NAMED_STAGES: tuple[str, ...] = tuple(NAMED_STAGINGS)
MAX_SPAN = 1_000_000
"""The most steps a ``window``, a ``consecutive`` run (``steps``) or a jump's ``baseline`` spans:
far beyond any run, and small enough for every array and rolling window the conditions build."""
MAX_STEP = 2**63 - 1
"""The largest step number (``after_step``, a stage's first and last step): ingest's bound on a step."""


TREND_MIN_WINDOW = 3
"""The fewest steps a trend's window may span: a slope fitted to fewer has no residual to test it by."""


class CheckConfigError(ConfigError):
    """A check file with invalid checks; ``problems`` holds one line per problem."""


@dataclass(frozen=True)
class ConfigPredicate:
    """Restricts a check to the steps whose configuration has ``path`` equal to ``equals``."""

    path: tuple[str, ...]
    """Dotted key path into the run's configuration, e.g. ``algorithm.whiten_advantages``."""
    equals: Any
    """The value the key must have for the check to apply at a step."""

    def describe(self) -> str:
        value = str(self.equals).lower() if isinstance(self.equals, bool) else repr(self.equals)
        return f"{'.'.join(self.path)} == {value}"


@dataclass(frozen=True)
class Check:
    """One declared check. Fields that a condition does not use stay ``None``."""

    name: str
    """Name of the check: the key under ``[checks]``; the test-case name in JUnit."""
    measure: str
    """Per-step quantity the condition reads (``share:think``, ``metric:critic/grad_norm``, ...).
    A ``*`` parameter (``rel_gain:*``) checks every channel or metric the run has."""
    condition: str
    """``threshold``: the value is above ``above`` or below ``below``. ``consecutive``: that
    holds on ``steps`` consecutive steps. ``stage_change``: the value changed between stages
    in ``direction``, significant at ``alpha``. ``trend``: the least-squares slope over the
    last ``window`` steps is significant at ``alpha`` in ``direction``. ``jump``: the value is
    ``factor`` times (or 1/``factor`` of) its mean over the previous ``baseline`` steps."""
    severity: str = "error"
    """``error`` fails the run (exit 1); ``warning`` is reported and fails only with --strict."""
    description: str = ""
    """One sentence on what firing means."""
    window: int = 1
    """Steps pooled into each step's value (rates pool their counts, scalars average); for a
    trend, the steps its slope spans (:data:`TREND_MIN_WINDOW` or more)."""
    above: float | None = None
    """Fire when the value is above this (threshold, consecutive)."""
    below: float | None = None
    """Fire when the value is below this (threshold, consecutive)."""
    significant: bool = False
    """Threshold: fire only when the whole 95% interval is beyond the threshold."""
    steps: int | None = None
    """Consecutive: how many steps in a row must be beyond the threshold."""
    direction: str | None = None
    """Stage change, trend: ``increase`` or ``decrease``."""
    alpha: float = 0.05
    """Stage change, trend: significance level of the two-sided test."""
    stages: str | tuple[tuple[str, int, int], ...] = "quartiles"
    """Stage change: ``quartiles``, ``early_late`` or a list of [name, first_step, last_step]."""
    compare: str = "consecutive"
    """Stage change: compare ``consecutive`` stages or only ``first_to_last``."""
    min_change: float = 0.0
    """Stage change, trend: smallest absolute change that counts (over the window for trend)."""
    min_ratio: float = 1.0
    """Stage change: smallest ratio later/earlier (increase) or earlier/later (decrease)."""
    factor: float | None = None
    """Jump: ratio to the trailing mean that counts as a jump."""
    baseline: int = 10
    """Jump: steps in the trailing mean."""
    after_step: int | None = None
    """Ignore steps up to and including this one (warm-up)."""
    when: ConfigPredicate | None = None
    """Apply only on steps whose configuration matches (``when = {path = ..., equals = ...}``)."""
    skip_when_absent: bool = False
    """Skip the check on a run whose measure is 0 at every step: a habit the run never had (no
    test suite in a math or safety task) has no floor to fall below."""
    source: str = ""
    """File the check was read from."""

    def __post_init__(self) -> None:
        # stages as the tuple its type says, also when a Check made in Python is given a list
        if not isinstance(self.stages, str):
            object.__setattr__(self, "stages", tuple(tuple(stage) for stage in self.stages))
        if self.condition == "trend" and self.window < TREND_MIN_WINDOW:  # a check file says so sooner, by field
            raise CheckConfigError([f"check {self.name!r}: a trend's window spans {TREND_MIN_WINDOW} steps or more "
                                    f"(a slope with a residual), got {self.window}"])

    @property
    def sign(self) -> str:
        """The threshold as text: ``> 0.15``, ``< 0.4`` or ``outside [a, b]``."""
        if self.above is not None and self.below is not None:
            return f"outside [{self.below:g}, {self.above:g}]"
        return f"> {self.above:g}" if self.above is not None else f"< {self.below:g}" if self.below is not None else ""


@dataclass(frozen=True)
class FieldSpec:
    """A key of a check table and its type. Which conditions take it, and require it, is declared
    by the conditions (:data:`trajlens.checks.kinds.CONDITION_KINDS`); ``common`` fields every
    check takes."""

    name: str
    kinds: tuple[type, ...]
    common: bool = False

    def taken_by(self, condition: str) -> bool:
        return self.common or self.name in KINDS[condition].fields

    def required_by(self, condition: str | None) -> bool:
        return self.name in ("measure", "condition") or (condition in KINDS and self.name in KINDS[condition].requires)


FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("measure", (str,), common=True),
    FieldSpec("condition", (str,), common=True),
    FieldSpec("severity", (str,), common=True),
    FieldSpec("description", (str,), common=True),
    FieldSpec("window", (int,)),
    FieldSpec("above", (int, float)),
    FieldSpec("below", (int, float)),
    FieldSpec("significant", (bool,)),
    FieldSpec("steps", (int,)),
    FieldSpec("direction", (str,)),
    FieldSpec("alpha", (int, float)),
    FieldSpec("stages", (str, list)),
    FieldSpec("compare", (str,)),
    FieldSpec("min_change", (int, float)),
    FieldSpec("min_ratio", (int, float)),
    FieldSpec("factor", (int, float)),
    FieldSpec("baseline", (int,)),
    FieldSpec("after_step", (int,), common=True),
    FieldSpec("when", (dict,), common=True),
    FieldSpec("skip_when_absent", (bool,), common=True),
)
FIELD_BY_NAME: dict[str, FieldSpec] = {spec.name: spec for spec in FIELDS}


def parse_checks(document: Mapping[str, Any], source: str) -> tuple[Check, ...]:
    """Checks from a parsed TOML document; raises :class:`CheckConfigError` listing every problem."""
    from trajlens.checks.step_measures import measure_problem

    problems: list[str] = []
    unknown_top = [key for key in document if key != "checks"]
    problems += [f"{source}: field '{key}': expected only a [checks] table, found '{key}'" for key in unknown_top]
    tables = document.get("checks", {})
    if not isinstance(tables, Mapping):
        raise CheckConfigError(problems + [f"{source}: field 'checks': expected a table of checks, found {type(tables).__name__}"])
    checks = []
    for name, table in tables.items():
        where = f"{source}: check '{name}'"
        if not isinstance(table, Mapping):
            problems.append(f"{where}: expected a table of fields, found {type(table).__name__}")
            continue
        found = _check_fields(name, table, source, problems)
        if found is None:
            # the measure is judged even when another field is wrong: every problem is told at once
            measure = table.get("measure")
            problem = measure_problem(measure, str(table.get("condition"))) if isinstance(measure, str) else None
            if problem:
                problems.append(f"{where}: field 'measure': {problem}")
            continue
        problem = measure_problem(found.measure, found.condition, significant=found.significant, window=found.window)
        if problem:
            problems.append(f"{where}: field 'measure': {problem}")
            continue
        checks.append(found)
    if problems:
        raise CheckConfigError(problems)
    if not checks:
        raise CheckConfigError([f"{source}: field 'checks': expected at least one check, found none"])
    return tuple(checks)


def load_checks(path: Path | str) -> tuple[Check, ...]:
    """Read a TOML check file (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CheckConfigError([f"{path}: cannot read the check file ({error.strerror or error})"]) from None
    except UnicodeDecodeError as error:
        line = error.object[:error.start].count(b"\n") + 1
        raise CheckConfigError([f"{path}: line {line}: expected UTF-8 text (TOML), found the byte "
                                f"0x{error.object[error.start]:02x}"]) from None
    try:
        document = tomllib.loads(text)
    except ValueError as error:  # TOMLDecodeError, or an integer past Python's digit limit
        raise CheckConfigError([f"{path}: not valid TOML ({error})"]) from None
    return parse_checks(document, str(path))


DEFAULTS_FILE = SHIPPED_CHECKS


def default_checks() -> tuple[Check, ...]:
    """The checks trajlens ships (``trajlens check --print-defaults`` prints the file)."""
    return load_checks(DEFAULTS_FILE)


def _check_fields(name: str, table: Mapping[str, Any], source: str, problems: list[str]) -> Check | None:
    where = f"{source}: check '{name}'"
    before = len(problems)
    condition = table.get("condition")
    unknown_condition = condition is not None and condition not in CONDITIONS
    if unknown_condition:
        problems.append(f"{where}: field 'condition': expected one of {', '.join(CONDITIONS)}, found {condition!r}")
        condition = None  # which fields it takes or needs cannot be told; every field's type still can
    values: dict[str, Any] = {}
    for key, value in table.items():
        spec = FIELD_BY_NAME.get(key)
        if spec is None:
            problems.append(f"{where}: field '{key}': unknown field (fields: {', '.join(FIELD_BY_NAME)})")
            continue
        if condition is not None and not spec.taken_by(condition):
            problems.append(f"{where}: field '{key}': not used by condition '{condition}'")
            continue
        if isinstance(value, bool) and bool not in spec.kinds or not isinstance(value, spec.kinds):
            kinds = " or ".join(_TYPE_NAMES[k] for k in spec.kinds)
            problems.append(f"{where}: field '{key}': expected {kinds}, found {_found(value)}")
            continue
        values[key] = value
    if unknown_condition:
        if isinstance(values.get("severity"), str) and values["severity"] not in SEVERITIES:
            problems.append(f"{where}: field 'severity': expected {' or '.join(SEVERITIES)}, found {_found(values['severity'])}")
        return None
    for spec in FIELDS:
        if spec.required_by(condition) and spec.name not in table:
            problems.append(f"{where}: field '{spec.name}': required, found nothing")
    if "condition" in values:  # the values given are judged whatever else is wrong: every problem at once
        _check_values(values, where, problems, table.keys())
    if len(problems) > before:
        return None
    if "stages" in values and isinstance(values["stages"], list):
        values["stages"] = tuple((str(n), int(a), int(b)) for n, a, b in values["stages"])
    if "when" in values:
        values["when"] = ConfigPredicate(tuple(values["when"]["path"].split(".")), values["when"]["equals"])
    for key in ("above", "below", "alpha", "min_change", "min_ratio", "factor"):
        if key in values:
            values[key] = float(values[key])
    return Check(name=name, source=source, **values)


def _check_values(values: dict[str, Any], where: str, problems: list[str], given: Collection[str]) -> None:
    """The problems of the well-typed ``values`` of a check; ``given``: every field the file gives
    (one given with a wrong type is already a problem, not also a missing one)."""
    def bad(key: str, expected: str) -> None:
        problems.append(f"{where}: field '{key}': expected {expected}, found {_found(values[key])}")

    condition = values["condition"]
    if values.get("severity", "error") not in SEVERITIES:
        bad("severity", " or ".join(SEVERITIES))
    for key in ("window", "steps", "baseline"):
        if key not in values:
            continue
        if not 1 <= values[key] <= MAX_SPAN:
            bad(key, f"a whole number of steps, at least 1 and at most {MAX_SPAN}")
        elif key == "window" and condition == "trend" and values[key] < TREND_MIN_WINDOW:
            bad(key, f"at least {TREND_MIN_WINDOW} steps for a trend (a slope with a residual), at most {MAX_SPAN}")
    if "after_step" in values and not 0 <= values["after_step"] <= MAX_STEP:
        bad("after_step", "a step number, at least 0 and at most 2**63-1")
    infinite = {key for key in ("above", "below", "min_change", "factor", "min_ratio")
                if key in values and not _finite(values[key])}
    for key in sorted(infinite, key=list(values).index):
        bad(key, "a finite number")
    if "alpha" in values and not 0 < values["alpha"] < 1:
        bad("alpha", "a significance level between 0 and 1")
    if "factor" in values and "factor" not in infinite and values["factor"] <= 1:
        bad("factor", "a ratio above 1")
    if "min_ratio" in values and "min_ratio" not in infinite and values["min_ratio"] < 1:
        bad("min_ratio", "a ratio of at least 1")
    if "direction" in values and values["direction"] not in DIRECTIONS:
        bad("direction", " or ".join(DIRECTIONS))
    if "compare" in values and values["compare"] not in COMPARISONS:
        bad("compare", " or ".join(COMPARISONS))
    one_of = KINDS[condition].one_of
    if one_of and not any(key in given for key in one_of):
        problems.append(f"{where}: field '{one_of[0]}': a {condition} check needs {' or '.join(map(repr, one_of))}, "
                        "found neither")
    if "above" in values and "below" in values and not infinite & {"above", "below"} \
            and values["below"] > values["above"]:
        bad("below", f"a value not above 'above' ({values['above']:g}); the check fires outside [below, above]")
    stages = values.get("stages")
    if isinstance(stages, str) and stages not in NAMED_STAGES:
        bad("stages", f"{' or '.join(NAMED_STAGES)}, or a list of [name, first_step, last_step]")
    elif isinstance(stages, list) and not all(
            isinstance(s, list) and len(s) == 3 and isinstance(s[0], str)
            and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_STEP for v in s[1:])
            and s[1] <= s[2] for s in stages):
        bad("stages", "a list of [name, first_step, last_step] with 0 <= first_step <= last_step <= 2**63-1")
    elif isinstance(stages, list):
        problems += [f"{where}: field 'stages': {problem.removeprefix('stages: ')}"
                     for problem in stage_range_problems(stages)]
        if len(stages) == 1:
            bad("stages", "at least two stages to compare")
    when = values.get("when")
    if when is not None and (set(when) != {"path", "equals"} or not isinstance(when.get("path"), str) or not when["path"]):
        bad("when", "a table {path = \"dotted.key\", equals = value}")


def _found(value: object, limit: int = 80) -> str:
    """``value`` as the repr a problem line shows: one line, at most ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _finite(value: int | float) -> bool:
    """Whether ``value`` is a finite number a float holds (TOML integers have no bound)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


_TYPE_NAMES = {str: "text", int: "a whole number", float: "a number", bool: "true or false", list: "a list",
               dict: "a table"}


__all__ = ["CONDITIONS", "Check", "CheckConfigError", "ConfigPredicate", "DEFAULTS_FILE", "FIELDS", "SEVERITIES",
           "default_checks", "load_checks", "parse_checks"]
