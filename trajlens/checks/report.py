"""The shipped checks in the report: the checks section of a run in the HTML report
(registered in :mod:`trajlens.report.sections`), and the results the report's plots mark."""

from __future__ import annotations

import functools
from typing import Any


def shipped_checks(store: Any, run_id: str) -> Any:
    """The shipped checks evaluated on a stored run (a :class:`~trajlens.checks.evaluate.RunChecks`),
    once per stored version of the run: the report's plots and its checks section share them."""
    from trajlens.run.choices import run_stamp

    return _evaluated(str(store.path), run_id, run_stamp(store, run_id) or (0, 0))


@functools.lru_cache(maxsize=2)
def _evaluated(store: str, run_id: str, stamp: tuple[int, int]) -> Any:
    from trajlens.checks.evaluate import check_run

    return check_run(store, run_id=run_id)


def run_section(store: Any, run_id: str) -> str | None:
    """The shipped checks evaluated on ``run_id``, as an HTML table; None when none applies."""
    from trajlens.checks.output import checks_html

    checked = shipped_checks(store, run_id)
    evaluated = [r for r in checked.results if r.status != "skip"]
    if not evaluated:
        return None
    fired = [r for r in evaluated if r.fired_steps]
    summary = (f"<p>{len(evaluated)} of the shipped checks apply to this run; {len(fired)} fired "
               f"(<code>trajlens check STORE --run {run_id}</code> gives the same, with exit status, JUnit and JSON).</p>\n")
    return summary + checks_html(checked.results)
