"""Report fragments of an :class:`~trajlens.attribution.AttributionResult`: Markdown and HTML."""

from __future__ import annotations

import html
import math
from typing import Any

import polars as pl

from trajlens.attribution.causes import CHANNEL_PREFIX, LENGTH_SUBJECT
from trajlens.attribution.verdicts import drift_phrase, own_push_reason, verdict_head, verdict_order
from trajlens.markdown import markdown_table


def _number(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:+.{digits}f}" if isinstance(value, float) else str(value)


def _drift_table(result: Any) -> list[list[str]]:
    rows = [["class", "change", "onset", "estimator", "r [95%]", "relative credit (scaled) at pivotal steps [95%]"]]
    for row in result.drift.iter_rows(named=True):
        rows.append([
            row["primary_class"], f"{row['share_first']:.2f} -> {row['share_last']:.2f}"
            + (f" ({row['peak_share']:.2f} at {row['peak_steps']})" if row.get("peak_share") is not None else "")
            + (f" -> {row['share_end']:.2f}" if row["peak_steps"] else ""), str(row["onset_step"]),
            row["estimator"] + (" (run's)" if row["own"] else ""),
            f"{_number(row['r'])} [{_number(row['r_low'])}, {_number(row['r_high'])}]",
            f"{_number(row['window_relative_credit'])} [{_number(row['window_low'])}, {_number(row['window_high'])}] "
            f"at {row['pivotal_steps']}",
        ])
    return rows


def _superstition(result: Any, top: int = 5) -> tuple[str, list[list[str]]]:
    """The superstition table's title and rows: the run's estimator's classes when it was computed,
    else every estimator's, the title saying which."""
    own = result.own.label
    frame = result.class_summary
    if own is not None and own in frame["estimator"]:
        title = f"Superstition (the run's estimator, {own})"
        frame = frame.filter(pl.col("estimator") == own)
    else:
        missing = result.own.not_computed
        title = ("Superstition (every estimator; the run's is not known)" if missing is None else
                 f"Superstition (every estimator; the run's, {missing}, was not computed)")
    aggregation = result.own.aggregation if result.own.aggregation in result.aggregations else result.aggregations[0]
    frame = frame.filter(pl.col("aggregation") == aggregation).sort("superstition", descending=True, nulls_last=True).head(top)
    rows = [["stage", "class", "estimator", "relative credit (scaled)", "reward relevance [95%]", "superstition"]]
    for row in frame.iter_rows(named=True):
        rows.append([str(row["stage"]), row["primary_class"], row["estimator"], _number(row["relative_credit_scaled"]),
                     f"{_number(row['reward_relevance'])} [{_number(row['relevance_low'])}, {_number(row['relevance_high'])}]",
                     _number(row["superstition"])])
    return title, rows


def verdict_lines(result: Any) -> list[str]:
    """One short line per drifting class, verdict first: "estimator artefact: think grew 0.08 -> 0.93 from
    step 60 (gae_raw / token-mean)"; the length and reward-channel verdicts after them."""
    return [line for _, line in subject_lines(result)]


def headline(line: str) -> str:
    """A response-length or reward-channel verdict (:mod:`.causes`) as a first screen shows it: the
    verdict and the drift, then the reason, without the evidence between them (every aggregation's
    elasticity, every estimator's credit), which the full line keeps. Each such line is
    ``VERDICT: drift; evidence; ...; reason``."""
    head, _, rest = line.partition("; ")
    return f"{head}; {rest.rsplit('; ', 1)[-1]}" if rest else line


def subject_lines(result: Any) -> list[tuple[str | None, str]]:
    """:func:`verdict_lines` with what each is about, as a stage metric: ``share:<class>`` for a
    class's drift, ``mean:model_tokens`` for the response length's, ``channel:<name>`` for a
    reward channel's (None for any other). An artefact first (:func:`verdict_order`), the class
    drifts before the length and channel verdicts within a verdict."""
    verdicts = getattr(result, "verdicts", None)
    lines: list[tuple[str | None, str]] = []
    if verdicts is not None and verdicts.height:
        for row in verdicts.iter_rows(named=True):
            drift = drift_phrase(row)
            head = verdict_head(row["verdict"], row.get("displaced_by") or "")
            reason = own_push_reason(row["verdict"], row["reason"], row.get("displaced_by") or "")
            lines.append((f"share:{row['primary_class']}",
                          f"{head}: {drift} ({row['estimator']} / {row['aggregation']}: {reason})"))
    for line in getattr(result, "cause_verdicts", []) or []:
        about = line.partition(": ")[2]
        if about.startswith(LENGTH_SUBJECT):
            lines.append(("mean:model_tokens", line))
        elif about.startswith(CHANNEL_PREFIX):
            lines.append((f"channel:{about[len(CHANNEL_PREFIX):].split(' ', 1)[0]}", line))
        else:
            lines.append((None, line))
    return sorted(lines, key=lambda pair: verdict_order(pair[1]))


def attribution_markdown(result: Any) -> str:
    """A Markdown section led by the verdicts: findings in words, the drift table and the most superstitious classes."""
    lines = [f"## Attribution: {result.run_id}", ""]
    verdicts = verdict_lines(result)
    if verdicts:
        lines += ["Verdicts:", ""] + [f"- {v}" for v in verdicts] + [""]
    lines += [f"- {f}" for f in result.findings] + [""]
    if result.notes:
        lines += ["Notes:", ""] + [f"- {n}" for n in result.notes] + [""]
    for title, rows in (("Drift", _drift_table(result)), _superstition(result)):
        if len(rows) > 1:
            lines += [f"### {title}", "", *markdown_table(rows[0], rows[1:]), ""]
    return "\n".join(lines)


def attribution_html(result: Any) -> str:
    """The same section as an HTML fragment (no ``<html>``/``<body>``), text escaped."""
    parts = [f"<section class=\"attribution\"><h2>Attribution: {html.escape(result.run_id)}</h2>"]
    verdicts = verdict_lines(result)
    if verdicts:
        parts += ["<p>Verdicts:</p><ul class=\"verdicts\">"] + [f"<li>{html.escape(v)}</li>" for v in verdicts] + ["</ul>"]
    parts.append("<ul>")
    parts += [f"<li>{html.escape(f)}</li>" for f in result.findings] + ["</ul>"]
    if result.notes:
        parts += ["<p>Notes:</p><ul>"] + [f"<li>{html.escape(n)}</li>" for n in result.notes] + ["</ul>"]
    for title, rows in (("Drift", _drift_table(result)), _superstition(result)):
        if len(rows) > 1:
            parts.append(f"<h3>{html.escape(title)}</h3><table><thead><tr>"
                         + "".join(f"<th>{html.escape(c)}</th>" for c in rows[0]) + "</tr></thead><tbody>")
            parts += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:]]
            parts.append("</tbody></table>")
    parts.append("</section>")
    return "".join(parts)
