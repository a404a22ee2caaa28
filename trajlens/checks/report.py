"""The shipped checks in the report: the checks section of a run in the HTML report
(registered in :mod:`trajlens.report.sections`), and the results the report's plots mark."""

from __future__ import annotations

from typing import Any

_EVALUATED: dict[tuple[str, str, tuple[int, int]], Any] = {}
"""The last runs' evaluations by store, run and the run directory's stamp: the report's plots
and its checks section (called with the store and run alone) share one."""


def logged_feeds(store: Any, run_id: str) -> tuple[Any, ...]:
    """The shipped checks' ``logged_advantage_diff`` measures of a stored run, to feed the
    report's advantage pass (:func:`trajlens.run.choices.report_advantages` with ``logged``)
    and hand to :func:`shipped_checks` with its result."""
    from trajlens.checks.data import Needs, stored_run_info
    from trajlens.checks.spec import default_checks
    from trajlens.checks.step_measures import LoggedAdvantages

    info = stored_run_info(store.path, run_id)
    return tuple(LoggedAdvantages(candidate, info.history.current, estimator_column=info.estimator)
                 for candidate in Needs.of(default_checks()).logged)


def shipped_checks(store: Any, run_id: str, measures: Any = None, advantages: Any = None) -> Any:
    """The shipped checks evaluated on a stored run (a :class:`~trajlens.checks.evaluate.RunChecks`),
    once per stored version of the run: the report's plots and its checks section share them.

    ``measures`` (the run's per-trajectory measures of its classified calls) and ``advantages``
    (a :class:`~trajlens.run.choices.ReportAdvantages` computed with ``extremes``, its ``logged``
    those of :func:`logged_feeds`): what the report has already computed, which the checks take
    instead of computing it again.
    """
    from trajlens.checks.data import Precomputed
    from trajlens.checks.evaluate import check_run
    from trajlens.run.choices import run_stamp

    key = (str(store.path), run_id, run_stamp(store, run_id) or (0, 0))
    if key not in _EVALUATED or measures is not None or advantages is not None:
        given = None
        if measures is not None or advantages is not None:
            extremes = None if advantages is None else advantages.extremes
            diagnostics = None if extremes is None else advantages.diagnostics.join(
                extremes, on=["estimator", "step"], how="left")
            logged = {} if advantages is None else {feed.candidate: feed for feed in advantages.logged}
            given = Precomputed(measures, diagnostics, tuple(advantages.choices) if diagnostics is not None else (),
                                logged)
        while len(_EVALUATED) >= 2:
            _EVALUATED.pop(next(iter(_EVALUATED)))
        _EVALUATED[key] = check_run(key[0], run_id=run_id, precomputed=given)
    return _EVALUATED[key]


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
