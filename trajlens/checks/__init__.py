"""Habit regression checks: declared conditions on per-step measures of a run, for CI and live runs.

    from trajlens.checks import check_run, default_checks, load_checks
    result = check_run("sample_data/sao-r6")            # the shipped checks
    for r in result.results:
        print(r.name, r.status, r.fired_steps)

Checks are data (:mod:`trajlens.checks.spec`, ``defaults.toml``); measures are declared in
:mod:`trajlens.checks.step_measures`; :mod:`trajlens.checks.output` writes the table, JUnit XML,
JSON and the Markdown/HTML fragments; :mod:`trajlens.checks.watch` follows a live run.
"""

from __future__ import annotations

from trajlens.checks.evaluate import CheckResult, RunChecks, check_run, evaluate_checks
from trajlens.checks.step_measures import ADVANTAGE_LABELS, MEASURE_FAMILIES, parse_measure
from trajlens.checks.output import checks_html, checks_markdown, junit_xml, to_json
from trajlens.checks.spec import Check, CheckConfigError, default_checks, load_checks, parse_checks

__all__ = [
    "ADVANTAGE_LABELS",
    "Check",
    "CheckConfigError",
    "CheckResult",
    "MEASURE_FAMILIES",
    "RunChecks",
    "check_run",
    "checks_html",
    "checks_markdown",
    "default_checks",
    "evaluate_checks",
    "junit_xml",
    "load_checks",
    "parse_checks",
    "parse_measure",
    "to_json",
]
