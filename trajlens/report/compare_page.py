"""A comparison written to disk: ``comparison.csv``, ``comparison.md`` and ``comparison.html``,
and :func:`comparison_section`, the comparison as it appears in a page.

The HTML table is narrow enough for a 1,400 px window without scrolling sideways: each side's
value carries its interval and n on a second line, and the test's name is in the caption.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from trajlens.compare import adjustment_note, describe, p_text, title
from trajlens.intervals import MEAN_TEST, PROPORTION_TEST
from trajlens.report import html
from trajlens.markdown import markdown_table


def comparison_markdown(comparison: pl.DataFrame, top: int = 5) -> str:
    """The comparison as Markdown: the largest differences in words, then the table."""
    if comparison.is_empty():
        return "No measure is present on both sides.\n"
    header = ["measure", "A", "B", "B - A [95%]", "test", "p", "p adjusted", "effect"]
    rows = []
    for row in comparison.iter_rows(named=True):
        p = p_text(row["p_value"])
        adjusted = p_text(row["p_adjusted"]) + (" *" if row["p_adjusted"] is not None and row["significant"] else "")
        effect = "" if row["effect_size"] is None else f"{row['effect']} {row['effect_size']:+.2f}"
        rows.append([_measure_name(row), _interval_text(row["a_value"], row["a_low"], row["a_high"]),
                     _interval_text(row["b_value"], row["b_low"], row["b_high"]),
                     _interval_text(row["difference"], row["difference_low"], row["difference_high"]),
                     str(row["test"]), p, adjusted, effect])
    lines = [f"# {title(comparison)}", "", *(f"- {s}" for s in describe(comparison, top)), "",
             f"95% intervals; differences are B - A; {adjustment_note(comparison)}.", "",
             *markdown_table(header, rows)]
    return "\n".join(lines) + "\n"


TESTS_NOTE = (f"{PROPORTION_TEST.capitalize()} test for rates and shares, {MEAN_TEST} test for means (each "
              "statistic read on Student's t with Welch-Satterthwaite degrees of freedom), as trajlens check tests "
              "stages.")
"""What the comparison's p-values are, as the note under its sentences says it: by the names the
comparison's ``test`` column gives them (:data:`trajlens.intervals.PROPORTION_TEST`, ``MEAN_TEST``)."""


def comparison_section(anchor: str, comparison: pl.DataFrame, sentences: list[str], *, limit: int | None = None) -> str:
    """A comparison as an HTML section: its largest differences in words, then the sorted table,
    rows significant after the adjustment highlighted."""
    if comparison.is_empty():
        return f'<section id="{html.escape(anchor)}"><p>No measure is present on both sides.</p></section>'
    a, b = comparison["a"][0], comparison["b"][0]
    words = "".join(f"<li>{html.escape(s)}</li>" for s in sentences)
    head = "".join(f'<th class="{align}">{name}</th>' for name, align in (
        ("measure", "text"), ("A [95%], n", "num"), ("B [95%], n", "num"), ("B &minus; A [95%]", "num"),
        ("p", "num"), ("p adjusted", "num"), ("effect", "num")))
    shown = comparison if limit is None else comparison.head(limit)
    rows = []
    for row in shown.iter_rows(named=True):
        marked = ' class="significant"' if row["significant"] else ""
        cells = [
            f'<td class="text">{html.escape(row["measure"])}{_same_as(row["same_as"])}</td>',
            f'<td class="num">{_value_cell(row["a_value"], row["a_low"], row["a_high"], row["a_n"])}</td>',
            f'<td class="num">{_value_cell(row["b_value"], row["b_low"], row["b_high"], row["b_n"])}</td>',
            f'<td class="num">{_value_cell(row["difference"], row["difference_low"], row["difference_high"])}</td>',
            f'<td class="num">{_p(row["p_value"])}</td>',
            f'<td class="num">{_p(row["p_adjusted"])}</td>',
            f'<td class="num">{_effect(row["effect"], row["effect_size"])}</td>',
        ]
        rows.append(f"<tr{marked}>{''.join(cells)}</tr>")
    more = (f'<p class="note">{comparison.height - shown.height} more rows not shown.</p>'
            if shown.height < comparison.height else "")
    return (
        f'<section id="{html.escape(anchor)}"><h3>A = {html.escape(a)}, B = {html.escape(b)}</h3>'
        f'<ul class="findings">{words}</ul>'
        f'<p class="note">95% intervals; n is the effective size the checks use (trajectories for rates, calls for '
        f'call shares, each shrunk by how much they cluster; steps for advantage statistics). {TESTS_NOTE} '
        f'{html.escape(adjustment_note(comparison))}; highlighted rows have an adjusted p &lt; 0.05. '
        f"Sorted by effect size (Cohen's h for proportions, d for means).</p>"
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        f"{more}</section>"
    )


def _interval_text(value: float | None, low: float | None, high: float | None) -> str:
    """A value with its interval, as Markdown shows it; empty when there is no value."""
    if value is None:
        return ""
    return f"{value:.4g}" + (f" [{low:.4g}, {high:.4g}]" if low is not None and high is not None else "")


def _measure_name(row: dict) -> str:
    return row["measure"] + (f" (same as {row['same_as']})" if row["same_as"] else "")


def _same_as(names: str | None) -> str:
    """The measures a row stands for as well, one a line (a cell does not wrap)."""
    if not names:
        return ""
    return "<small>" + "".join(f"<br>= {html.escape(name)}" for name in names.split(", ")) + "</small>"


def _value_cell(value: float | None, low: float | None, high: float | None, n: float | None = None) -> str:
    if value is None:
        return ""
    interval = f"[{html.number(low)}, {html.number(high)}]" if low is not None and high is not None else ""
    size = f"n = {int(round(n)):,}" if n is not None else ""
    below = ", ".join(part for part in (interval, size) if part)
    return html.number(value) + (f'<br><small>{below}</small>' if below else "")


def _effect(name: str, size: float | None) -> str:
    return "" if size is None else f"{html.escape(name)}<br>{size:+.2f}"


def _p(value: float | None) -> str:
    return html.escape(p_text(value))


def write_comparison(comparison: pl.DataFrame, out: Path | str, top: int = 5, *, index: str | None = None) -> list[Path]:
    """Write the three files into folder ``out`` (created); returns their paths. ``index`` is
    the report's ``index.html`` as seen from ``out``, linked from the page's top bar."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "comparison.csv"
    comparison.drop("phrase").write_csv(csv)  # every digit: the full table, as --json and --csv give it
    markdown = out / "comparison.md"
    markdown.write_text(comparison_markdown(comparison, top))
    page = out / "comparison.html"
    heading = title(comparison)
    nav = [(index, "report index")] if index else []
    page.write_text(html.page(heading, f"<h1>{html.escape(heading)}</h1>"
                              + comparison_section("comparison", comparison, describe(comparison, top)), nav=nav))
    return [csv, markdown, page]
