"""The registry of check conditions: one declaration per condition a check file may name.

A :class:`ConditionKind` says everything the rest of the checks ask of a condition: its name
(``condition = "..."`` in a check file), the function that evaluates it, the optional fields it
reads, the fields it requires, and the fields of which it needs at least one. The check file
parser (:mod:`trajlens.checks.spec`) reads which fields a condition takes from here, and
:func:`trajlens.checks.conditions.evaluate` dispatches through it, so a new condition is one
function ``(check, measure, series, proportion) -> Outcome`` in a module of its own plus one
line in :data:`CONDITION_KINDS`.

The function is named as ``"module:attribute"`` and imported on first use, so parsing a check
file does not import the evaluators (nor they the parser: they import :class:`~.spec.Check`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class ConditionKind:
    """One condition a check may name."""

    name: str
    function: str
    """``"module:attribute"`` of ``(check, measure, series, proportion) -> Outcome``."""
    reads: tuple[str, ...] = ()
    """Optional check fields the condition reads (besides the fields every check has)."""
    requires: tuple[str, ...] = ()
    """Check fields a check with this condition must give."""
    one_of: tuple[str, ...] = ()
    """Check fields of which the check must give at least one."""
    compares_stages: bool = False
    """Whether it judges a stage against another: it fires on a stage's steps, not from an onset."""

    @property
    def fields(self) -> tuple[str, ...]:
        """Every condition-specific field the condition takes."""
        return tuple(dict.fromkeys((*self.requires, *self.one_of, *self.reads)))

    def evaluator(self) -> Callable[..., Any]:
        module, _, attribute = self.function.partition(":")
        return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]


_CONDITIONS = "trajlens.checks.conditions"

CONDITION_KINDS: tuple[ConditionKind, ...] = (
    ConditionKind("threshold", f"{_CONDITIONS}:threshold", reads=("window", "significant"), one_of=("above", "below")),
    ConditionKind("consecutive", f"{_CONDITIONS}:consecutive", reads=("window",), requires=("steps",),
                  one_of=("above", "below")),
    ConditionKind("stage_change", f"{_CONDITIONS}:stage_change", requires=("direction",),
                  reads=("alpha", "stages", "compare", "min_change", "min_ratio"), compares_stages=True),
    ConditionKind("trend", f"{_CONDITIONS}:trend", requires=("direction", "window"), reads=("alpha", "min_change")),
    ConditionKind("jump", f"{_CONDITIONS}:jump", requires=("factor",), reads=("window", "direction", "baseline")),
)
"""Every condition, in the order the docs list them."""

KINDS: dict[str, ConditionKind] = {kind.name: kind for kind in CONDITION_KINDS}

__all__ = ["CONDITION_KINDS", "KINDS", "ConditionKind"]
