"""What counts as a change of a measure from one stage of a run to another: the one rule behind
the checks' stage comparisons (``condition = "stage_change"``), the report's stage trends and
attribution's drifts (class shares, response length).

A change counts when it is significant (the two-sided p-value of
:func:`trajlens.intervals.stage_p_value` between the two stages' :func:`~trajlens.intervals.pooled`
rows is below ``alpha``), at least ``min_change`` in absolute terms, and at least ``min_ratio``
as a ratio: the later value over the earlier for a rise, the earlier over the later for a fall.

The rule of a fact a shipped check watches is that check's (:func:`shipped_rule`): the report's
length, turns and suite-rate trends and attribution's length drift judge the first and the last
stage as ``response_length_inflation``, ``turns_inflation`` and ``suite_rate_decline`` do, in
either direction (a check fails on the direction it watches; a fall of the length is the same
fact, told the other way). Class shares, which no shipped stage check compares, are judged by
attribution's rule (:class:`trajlens.attribution.drift.DriftConfig`), in the report too.
"""

from __future__ import annotations

import math
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Literal, NamedTuple

import polars as pl

from trajlens.intervals import Spec, cohens_d, pooled, stage_p_value, sums

SHIPPED_CHECKS = Path(__file__).resolve().parents[1] / "checks" / "defaults.toml"
"""The checks trajlens ships (:func:`trajlens.checks.default_checks` loads and validates them)."""

Direction = Literal["increase", "decrease", "either"]


class ChangeRule(NamedTuple):
    """The least change between two stages that counts (module docstring)."""

    alpha: float
    min_change: float = 0.0
    min_ratio: float = 1.0
    min_effect: float = 0.0
    """Least size of a mean's change in units of its spread (Cohen's d, as ``trajlens compare``
    gives it, :func:`~trajlens.intervals.cohens_d`): for a measure with no natural unit or zero,
    such as the mean reward, whose values may be negative."""

    def describe(self, direction: str) -> str:
        """The rule in words, as the checks' evidence gives it: ``a significant increase (alpha
        0.05, ratio >= 1.25)``; only the bounds the rule sets are named."""
        bounds = [f"alpha {self.alpha:g}"]
        if self.min_change > 0:
            bounds.append(change_bound(self.min_change, direction))
        if self.min_ratio > 1:
            bounds.append(f"ratio >= {self.min_ratio:g}")
        if self.min_effect > 0:
            bounds.append(f"Cohen's d >= {self.min_effect:g}")
        return f"a significant {direction} ({', '.join(bounds)})"


def change_bound(min_change: float, direction: str) -> str:
    """The least change a rule asks for, signed as the change is printed (the later value minus
    the earlier, as every surface gives it): ``change >= 0.1``, or for a decrease ``change <= -0.1``."""
    return f"change >= {min_change:g}" if direction == "increase" else f"change <= {-min_change:g}"


class Change(NamedTuple):
    """A change that counts: the two stages' values and the p-value of the difference."""

    first: float
    last: float
    p_value: float
    effect: float | None = None
    """Cohen's d of the change, where the rule asks for one (:attr:`ChangeRule.min_effect`)."""

    @property
    def rose(self) -> bool:
        return self.last > self.first


def p_value(first: dict, last: dict, proportion: bool) -> float:
    """Two-sided p-value of the change between two :func:`~trajlens.intervals.pooled` rows
    (:func:`~trajlens.intervals.stage_p_value`); 1.0 where it cannot be told (a stage of one
    unit, or two stages without any spread): no change is shown, as ``trajlens compare`` shows none."""
    p = stage_p_value(first, last, proportion)
    return p if p is not None else 1.0


def ratio(later: float, earlier: float, direction: Literal["increase", "decrease"]) -> float:
    """How many times the value grew (``increase``: later over earlier) or fell (``decrease``:
    earlier over later); infinite from nothing to something, 1.0 from nothing to nothing."""
    numerator, denominator = (later, earlier) if direction == "increase" else (earlier, later)
    if denominator <= 0:
        return math.inf if numerator > 0 else 1.0
    return numerator / denominator


def counts(rule: ChangeRule, first: float, last: float, p: float, direction: Direction = "either") -> bool:
    """Whether a change from ``first`` to ``last`` (p-value ``p``) counts under ``rule`` in
    ``direction`` (``either``: the way it went)."""
    way: Literal["increase", "decrease"] = (
        ("increase" if last > first else "decrease") if direction == "either" else direction)
    signed = last - first if way == "increase" else first - last
    return p < rule.alpha and signed > 0 and signed >= rule.min_change and ratio(last, first, way) >= rule.min_ratio


def judged(first: dict, last: dict, proportion: bool, rule: ChangeRule, direction: Direction = "either") -> Change | None:
    """The change from one pooled row to another when it counts under ``rule`` in ``direction``;
    None when it does not, or when a side has no value."""
    if first["value"] is None or last["value"] is None:
        return None
    p = p_value(first, last, proportion)
    if not counts(rule, first["value"], last["value"], p, direction):
        return None
    d = None
    if rule.min_effect > 0:
        d = cohens_d(last["value"] - first["value"], first.get("variance"), first["n_effective"],
                     last.get("variance"), last["n_effective"])
        if d is None or abs(d) < rule.min_effect:
            return None
    return Change(first["value"], last["value"], p, d)


def stage_rows(units: pl.DataFrame, spec: Spec, proportion: bool, stage: str = "stage_index") -> pl.DataFrame:
    """The :func:`~trajlens.intervals.pooled` rows of the measure ``spec`` over the units of each
    stage (the rows of ``units``, each with its ``stage``), in stage order."""
    return pooled(sums(units, [spec], by=(stage,)).sort(stage), proportion)


def stage_ends(units: pl.DataFrame, spec: Spec, proportion: bool, stage: str = "stage_index") -> tuple[dict, dict] | None:
    """The :func:`~trajlens.intervals.pooled` rows of the measure ``spec`` over the units of the
    first and of the last stage (the rows of ``units``, each with its ``stage``); None without two
    stages holding a unit of it."""
    if units.height == 0:
        return None
    stages = stage_rows(units, spec, proportion, stage)
    if stages.height < 2:
        return None
    first, last = stages.row(0, named=True), stages.row(-1, named=True)
    if not first["n"] or not last["n"]:
        return None
    return first, last


def stage_change(units: pl.DataFrame, spec: Spec, proportion: bool, rule: ChangeRule,
                 direction: Direction = "either", stage: str = "stage_index") -> Change | None:
    """The change of ``spec`` from the first stage of ``units`` to the last when it counts under
    ``rule`` in ``direction`` (:func:`stage_ends`, :func:`judged`)."""
    ends = stage_ends(units, spec, proportion, stage)
    return judged(*ends, proportion, rule, direction) if ends is not None else None


@lru_cache(maxsize=1)
def _shipped() -> dict[str, dict]:
    return tomllib.loads(SHIPPED_CHECKS.read_text())["checks"]


def shipped_check(check: str) -> dict:
    """The table of the shipped check ``check`` (a copy): the thresholds the report reads where
    it tells the fact that check watches."""
    if check not in _shipped():
        raise KeyError(f"no shipped check {check!r}")
    return dict(_shipped()[check])


def shipped_rule(check: str) -> ChangeRule:
    """The rule of the shipped ``stage_change`` check ``check`` (its ``alpha``, ``min_change``
    and ``min_ratio``): what the report's trends and attribution judge the fact it watches by."""
    table = shipped_check(check)
    if table.get("condition") != "stage_change" or "alpha" not in table:
        raise KeyError(f"no shipped stage_change check {check!r} stating its alpha")
    return ChangeRule(float(table["alpha"]), float(table.get("min_change", 0.0)), float(table.get("min_ratio", 1.0)))


__all__ = ["Change", "ChangeRule", "counts", "judged", "p_value", "ratio", "shipped_check", "shipped_rule", "stage_change",
           "stage_ends"]
