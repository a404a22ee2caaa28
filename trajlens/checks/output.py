"""Check results as a terminal table, JUnit XML, JSON, and Markdown / HTML fragments for reports.

JUnit: one ``<testsuite>`` per run and one ``<testcase>`` per check, in the shape of the
``junit-10.xsd`` schema that Jenkins' xUnit plugin and most CI systems read. A failed
error-level check is a ``<failure>``, a skipped check ``<skipped>`` with its reason, and a
fired warning a passing test case whose ``<system-out>`` starts with ``WARNING`` (JUnit has no
warning state; ``--strict`` turns warnings into failures).
"""

from __future__ import annotations

import html
import json
import re
import socket
import textwrap
import xml.etree.ElementTree as ElementTree
from datetime import datetime, timezone
from typing import Any, Sequence

from trajlens.checks.evaluate import CheckResult, RunChecks
from trajlens.jsontext import json_values
from trajlens.steps import steps_text as spans
from trajlens.markdown import markdown_table

STATUS_LABELS: dict[str, str] = {"fail": "FAIL", "warn": "WARN", "pass": "pass", "skip": "skip"}


def render_table(run: RunChecks, width: int = 200) -> str:
    """A plain-text table: check, severity, status, steps fired, evidence. A cell too long for
    its column (the steps fired: at most :data:`STEPS_WIDTH`; the evidence: the rest of
    ``width``) goes on over the next lines, so no step, p-value or reason is cut."""
    header = ("check", "severity", "status", "fired at steps", "evidence")
    rows = [(r.name, r.check.severity, STATUS_LABELS[r.status], spans(r.fired_steps) or "-", r.evidence_text())
            for r in run.results]
    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) if rows else len(header[i]) for i in range(4)]
    widths[3] = min(widths[3], STEPS_WIDTH)
    evidence_width = max(width - sum(widths) - 2 * len(widths), 40)
    lines = []
    for row in (header, *rows):
        cells = [[cell] for cell in row[:3]] + [_wrap(row[3], widths[3]), _wrap(row[4], evidence_width)]
        for depth in range(max(map(len, cells))):
            parts = [(cell[depth] if depth < len(cell) else "").ljust(widths[i]) for i, cell in enumerate(cells[:4])]
            lines.append(("  ".join(parts) + "  " + (cells[4][depth] if depth < len(cells[4]) else "")).rstrip())
    counts = run.counts()
    lines.append("")
    lines.append(f"run {run.run_id} ({run.steps} step{'' if run.steps == 1 else 's'}): {counts['fail']} failed, {counts['warn']} warned, "
                 f"{counts['pass']} passed, {counts['skip']} skipped")
    return "\n".join(lines)


STEPS_WIDTH = 40
"""Characters of the steps-fired column; longer lists of steps go on over the next lines."""


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at blanks where it can be."""
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def result_record(result: CheckResult) -> dict[str, Any]:
    """One check's result as JSON-ready data."""
    leading = result.leading
    evidence = None if leading is None else leading.evidence
    return {
        "check": result.name,
        "measure": result.check.measure,
        "condition": result.check.condition,
        "severity": result.check.severity,
        "status": result.status,
        "description": result.check.description,
        "fired_steps": list(result.fired_steps),
        "alarms": {measure: list(steps) for measure, steps in result.alarms.items()},
        "reason": result.reason,
        "evidence": None if leading is None or evidence is None else _evidence_record(leading),
        "measures": [_evidence_record(outcome) for outcome in result.outcomes if outcome.evidence is not None],
        "summary": result.evidence_text(),
    }


def _evidence_record(outcome: Any) -> dict[str, Any]:
    """One measure's evidence as JSON-ready data: the measure, the step and value the evidence
    names with its interval, the rule and the detail (a wildcard check has one per measure)."""
    evidence = outcome.evidence
    return {"measure": outcome.measure, "step": evidence.step, "value": json_values(evidence.value),
            "low": json_values(evidence.low), "high": json_values(evidence.high),
            "threshold": evidence.threshold, "detail": evidence.detail, "fired_steps": list(outcome.fired_steps)}


def to_json(run: RunChecks, strict: bool = False) -> str:
    """The results as a JSON document: run, counts, whether the gate failed (with ``strict``, a
    warning that fired fails it, as the exit status says), and one record per check."""
    document = {"run_id": run.run_id, "source": run.source, "steps": run.steps, "counts": run.counts(),
                "strict": strict, "failed": run.failed(strict), "results": [result_record(r) for r in run.results]}
    return json.dumps(document, indent=1, default=_json_default) + "\n"


def _json_default(value: Any) -> Any:
    return str(value)


def junit_xml(run: RunChecks, elapsed: float = 0.0, strict: bool = False) -> str:
    """The results as JUnit XML (one test case per check); with ``strict``, a warning that fired
    is a failure there too, as it is for the exit status."""
    counts = run.counts()
    failures = counts["fail"] + (counts["warn"] if strict else 0)
    suites = ElementTree.Element("testsuites", name="trajlens check", tests=str(len(run.results)),
                                 failures=str(failures), errors="0", time=f"{elapsed:.3f}")
    suite = ElementTree.SubElement(
        suites, "testsuite", name=f"trajlens.checks.{run.run_id}", tests=str(len(run.results)),
        failures=str(failures), errors="0", skipped=str(counts["skip"]), time=f"{elapsed:.3f}",
        timestamp=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"), hostname=socket.gethostname())
    properties = ElementTree.SubElement(suite, "properties")
    for name, value in (("run_id", run.run_id), ("source", run.source), ("steps", str(run.steps))):
        ElementTree.SubElement(properties, "property", name=name, value=value)
    for result in run.results:
        case = ElementTree.SubElement(suite, "testcase", name=result.name, classname=f"trajlens.checks.{run.run_id}",
                                      time="0.000")
        text = _case_text(result)
        if result.status == "fail" or strict and result.status == "warn":
            failure = ElementTree.SubElement(case, "failure", type=result.check.condition,
                                             message=f"fired at steps {spans(result.fired_steps)}")
            failure.text = ("WARNING (--strict) " if result.status == "warn" else "") + text
        elif result.status == "skip":
            ElementTree.SubElement(case, "skipped", message=result.reason)
        else:
            out = ElementTree.SubElement(case, "system-out")
            out.text = ("WARNING " if result.status == "warn" else "") + text
    for element in suites.iter():  # a check's name or description, a channel's name, may hold any character
        element.text = element.text and _xml_text(element.text)
        for name, value in element.attrib.items():
            element.set(name, _xml_text(value))
    ElementTree.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters XML 1.0 cannot hold, escaped or not."""


def _xml_text(text: str) -> str:
    """``text`` with each character XML cannot hold written as its escape (``\\u0007``)."""
    return _NOT_XML.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _case_text(result: CheckResult) -> str:
    lines = [f"{result.check.description}" if result.check.description else result.name,
             f"measure {result.check.measure}, condition {result.check.condition}, severity {result.check.severity}"]
    if result.fired_steps:
        lines.append(f"fired at steps {spans(result.fired_steps)}")
    lines.append(result.evidence_text())
    return "\n".join(lines)


def checks_markdown(results: Sequence[CheckResult]) -> str:
    """A Markdown section body: one table row per check (for the report)."""
    rows = ([f"`{r.name}`", r.check.severity, STATUS_LABELS[r.status], spans(r.fired_steps) or "-", r.evidence_text()]
            for r in results)
    return "\n".join(markdown_table(["check", "severity", "status", "fired at steps", "evidence"], rows)) + "\n"


def checks_html(results: Sequence[CheckResult]) -> str:
    """An HTML table fragment: one row per check, with ``class`` set to its status (for the report)."""
    rows = []
    for r in results:
        cells = (r.name, r.check.severity, STATUS_LABELS[r.status], spans(r.fired_steps) or "-", r.evidence_text())
        rows.append(f'<tr class="check-{r.status}">' + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("check", "severity", "status", "fired at steps", "evidence"))
    return f'<table class="trajlens-checks"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>\n'


__all__ = ["checks_html", "checks_markdown", "junit_xml", "render_table", "result_record", "spans", "to_json"]
