"""Self-contained HTML pages: the report index, comparisons, and their building blocks.

Every page carries its CSS, figures (inline SVG) and data; it loads nothing over the network
and opens from disk. Output is deterministic: the same store and seed give the same bytes.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any, Iterable

import polars as pl

OVERVIEW_ID, COMPARISONS_ID, RUNS_ID = "report:overview", "report:comparisons", "report:runs"
"""Ids of the report page's own sections. Run ids are letters, digits, ``.``, ``_`` and ``-``, so a
``:`` keeps these apart from every run's section, and :func:`run_anchor`'s ``/`` keeps a run's
parts apart from every other run (``x/checks`` is no run ``x-checks``)."""


def run_anchor(run_id: str, part: str | None = None) -> str:
    """The id of a run's section on the report page (``sao-r6``), or of one part of it
    (``sao-r6/findings``)."""
    return run_id if part is None else f"{run_id}/{part}"


def comparison_anchor(name: str) -> str:
    """The id of a comparison's section on the report page (``comparison:0``)."""
    return f"comparison:{name}"


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1380px;margin:0 auto;padding:16px 24px 60px;box-sizing:border-box}
[id]{scroll-margin-top:40px}
nav.top{position:sticky;top:0;background:#263238;color:#eee;padding:6px 24px;z-index:5;font-size:13px}
nav.top a{color:#cfe8ff;margin-right:12px;text-decoration:none}
h1{font-size:24px}h2{border-bottom:2px solid #263238;padding-bottom:4px;margin-top:40px}h3{margin-top:26px}
table{border-collapse:collapse;margin:8px 0 4px;font-size:12.5px;background:#fff}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#eceff1}td.text,th.text{text-align:left}
tr.significant td{background:#fff8e1}
table.trajlens-checks td:last-child{white-space:normal;min-width:18em}
.note{color:#555;font-size:12.5px;margin:2px 0 10px}
figure{margin:12px 0;background:#fff;border:1px solid #e0e0e0;padding:6px}
figure svg{max-width:100%;height:auto}figcaption{font-size:12px;color:#555}
ul.findings li{margin:4px 0}ul.findings li.recomputed{color:#546e7a;font-style:italic}ul.findings a{font-size:12px;margin-left:6px}
details>summary{cursor:pointer;color:#1565c0}
.scroll{overflow-x:auto;max-width:100%}
.pill{display:inline-block;border-radius:8px;padding:0 6px;font-size:11px;color:#fff}
table.overview{width:100%;font-size:12px;line-height:1.3}table.overview td{white-space:normal;vertical-align:top}
table.overview td.trends{white-space:nowrap;padding:1px 4px}svg.trend{margin-right:3px;vertical-align:top}
table.overview a.more{font-size:11px;margin-left:4px}
.section-checks td{white-space:normal}.section-checks td:last-child{min-width:280px}
.chip{display:inline-block;border-radius:8px;padding:0 6px;margin:0 3px 2px 0;font-size:11.5px}
.chip.fail{background:#b71c1c;color:#fff}.chip.warn{background:#ffe082;color:#3e2723}
"""


def escape(text: Any) -> str:
    """HTML-escaped text of any value."""
    return html.escape("" if text is None else str(text))


_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""Characters written as JSON escapes inside a script element: with no ``<`` the HTML parser
cannot leave the element early (``</script>``) or enter its escaped states (``<!--<script``),
and the line separators are not line breaks to older JavaScript."""


def json_script(element_id: str, value: Any) -> str:
    """A ``<script type="application/json">`` element with id ``element_id`` holding ``value``
    as JSON that no text inside it can end or alter; ``JSON.parse`` of its text gives ``value``."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False).translate(_SCRIPT_UNSAFE)
    return f'<script type="application/json" id="{escape(element_id)}">{text}</script>'


def page(title: str, body: str, *, nav: Iterable[tuple[str, str]] = (), script: str = "", style: str = "") -> str:
    """A whole HTML document with inline style and script; ``nav`` is (href, label) pairs."""
    links = "".join(f'<a href="{escape(href)}">{escape(label)}</a>' for href, label in nav)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{escape(title)}</title><style>{STYLE}{style}</style></head>\n<body>"
        + (f'<nav class="top">{links}</nav>' if links else "")
        + f"<main>\n{body}\n</main>"
        + (f"<script>{script}</script>" if script else "")
        + "</body></html>\n"
    )


def number(value: Any, digits: int = 3) -> str:
    """A table cell's number: fixed digits for small values, grouped integers for large."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and abs(value) < 10 ** -digits:
            return f"{value:.1e}"
        return f"{value:,.{digits}f}" if abs(value) < 1000 else f"{value:,.0f}"
    return escape(value)


def table(frame: pl.DataFrame, *, row_class: str | None = None, digits: int = 3, limit: int | None = None,
          row_id: str | None = None) -> str:
    """A frame as an HTML table; ``row_class`` names a boolean column that marks rows, ``row_id``
    a column of ids (null: none) that a link can point at a row by (neither column shown)."""
    columns = [c for c in frame.columns if c not in (row_class, row_id)]
    head = "".join(f'<th class="{_align(frame, c)}">{escape(c)}</th>' for c in columns)
    rows = []
    shown = frame if limit is None else frame.head(limit)
    for row in shown.iter_rows(named=True):
        marked = ' class="significant"' if row_class and row.get(row_class) else ""
        if row_id is not None and row.get(row_id) is not None:
            marked += f' id="{escape(row[row_id])}"'
        cells = "".join(f'<td class="{_align(frame, c)}">{number(row[c], digits)}</td>' for c in columns)
        rows.append(f"<tr{marked}>{cells}</tr>")
    more = f'<p class="note">{frame.height - shown.height} more rows not shown.</p>' if shown.height < frame.height else ""
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
            f"{more}")


def _align(frame: pl.DataFrame, column: str) -> str:
    return "text" if frame.schema[column] in (pl.String, pl.Categorical) else "num"


def figure(anchor: str, svg: str, caption: str) -> str:
    """An inline SVG figure with an anchor and a caption (``svg`` as
    :meth:`trajlens.report.plots.Chart.svg` gives it: its ids unique on the page, its paths compacted)."""
    return (f'<figure id="{escape(anchor)}" class="chart">{svg}'
            f'<figcaption>{escape(caption)}</figcaption></figure>')
