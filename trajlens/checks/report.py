"""The checks section of a run in the HTML report (registered in :mod:`trajlens.report.sections`)."""

from __future__ import annotations

from typing import Any


def run_section(store: Any, run_id: str) -> str | None:
    """The shipped checks evaluated on ``run_id``, as an HTML table; None when none applies."""
    from trajlens.checks.evaluate import check_run
    from trajlens.checks.output import checks_html

    checked = check_run(store.path, run_id=run_id)
    evaluated = [r for r in checked.results if r.status != "skip"]
    if not evaluated:
        return None
    fired = [r for r in evaluated if r.fired_steps]
    summary = (f"<p>{len(evaluated)} of the shipped checks apply to this run; {len(fired)} fired "
               f"(<code>trajlens check STORE --run {run_id}</code> gives the same, with exit status, JUnit and JSON).</p>\n")
    return summary + checks_html(checked.results)
