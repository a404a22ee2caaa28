"""Self-contained HTML pages: the report index, comparisons, and their building blocks.

Every page carries its CSS, figures (inline SVG) and data; it loads nothing over the network
and opens from disk. Output is deterministic: the same store and seed give the same bytes.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, Iterable

import polars as pl

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


def table(frame: pl.DataFrame, *, row_class: str | None = None, digits: int = 3, limit: int | None = None) -> str:
    """A frame as an HTML table; ``row_class`` names a boolean column that marks rows."""
    columns = [c for c in frame.columns if c != row_class]
    head = "".join(f'<th class="{_align(frame, c)}">{escape(c)}</th>' for c in columns)
    rows = []
    shown = frame if limit is None else frame.head(limit)
    for row in shown.iter_rows(named=True):
        marked = ' class="significant"' if row_class and row.get(row_class) else ""
        cells = "".join(f'<td class="{_align(frame, c)}">{number(row[c], digits)}</td>' for c in columns)
        rows.append(f"<tr{marked}>{cells}</tr>")
    more = f'<p class="note">{frame.height - shown.height} more rows not shown.</p>' if shown.height < frame.height else ""
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
            f"{more}")


def _align(frame: pl.DataFrame, column: str) -> str:
    return "text" if frame.schema[column] in (pl.String, pl.Categorical) else "num"


_SVG_REFERENCE = re.compile(r'(\bid="|url\(#|href="#)')


def unique_ids(svg: str, prefix: str) -> str:
    """``svg`` with every element id, and every reference to one, prefixed by ``prefix``: many
    inline figures on one page then share no id."""
    return _SVG_REFERENCE.sub(lambda match: match.group(1) + prefix, svg)


def figure(anchor: str, svg: str, caption: str) -> str:
    """An inline SVG figure with an anchor and a caption (its ids prefixed by the anchor)."""
    return (f'<figure id="{escape(anchor)}" class="chart">{unique_ids(svg, escape(anchor) + "-")}'
            f'<figcaption>{escape(caption)}</figcaption></figure>')


SAME_VALUE_COLUMNS: tuple[str, ...] = ("a_value", "a_low", "a_high", "a_n", "b_value", "b_low", "b_high", "b_n")
"""A per-trajectory mean with the same values in all of these as an earlier one repeats it."""


def distinct_measures(comparison: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The comparison without per-trajectory means (``mean:``) that repeat an earlier mean's
    values (two names of one count, such as calls and turns in a log of one call per turn), and a
    note per dropped row."""
    if comparison.is_empty():
        return comparison, []
    is_mean = pl.col("measure").str.starts_with("mean:")
    keyed = comparison.with_row_index("__row").with_columns(
        pl.when(is_mean).then(pl.col("__row").min().over([is_mean, *SAME_VALUE_COLUMNS])).otherwise(pl.col("__row"))
        .alias("__first"))
    dropped = keyed.filter(pl.col("__row") != pl.col("__first"))
    first_name = dict(keyed.select("__row", "measure").iter_rows())
    notes = [f"{row['measure']} has the same values as {first_name[row['__first']]}" for row in dropped.iter_rows(named=True)]
    return keyed.filter(pl.col("__row") == pl.col("__first")).drop("__row", "__first"), notes


SIGNIFICANCE = 0.05
"""False discovery rate below which a comparison row is highlighted."""


def comparison_section(anchor: str, comparison: pl.DataFrame, sentences: list[str], *, limit: int | None = None) -> str:
    """A comparison: its largest differences in words, then the sorted table."""
    if comparison.is_empty():
        return f'<section id="{escape(anchor)}"><p>No measure is present on both sides.</p></section>'
    a, b = comparison["a"][0], comparison["b"][0]
    comparison, repeated = distinct_measures(comparison)
    def interval(prefix: str) -> list[str]:
        return [f"{number(v)} [{number(lo)}, {number(hi)}]" if v is not None else ""
                for v, lo, hi in comparison.select(f"{prefix}value" if prefix != "difference" else "difference",
                                                   f"{prefix}_low" if prefix == "difference" else f"{prefix}low",
                                                   f"{prefix}_high" if prefix == "difference" else f"{prefix}high")
                .iter_rows()]

    shown = comparison.select(
        "measure", "test", pl.col("a_n").round(0).cast(pl.Int64).alias("A n"),
        pl.col("b_n").round(0).cast(pl.Int64).alias("B n"), "p_value", "effect", "effect_size",
    ).with_columns(pl.Series("A [95%]", interval("a_")), pl.Series("B [95%]", interval("b_")),
                   pl.Series("B - A [95%]", interval("difference")))
    effects = [f"{effect.removeprefix('Cohen' + chr(39) + 's ')} {size:+.2f}" if size is not None else ""
               for effect, size in comparison.select("effect", "effect_size").iter_rows()]
    shown = shown.with_columns(pl.Series("effect (Cohen)", effects)).select(
        "measure", "test", "A [95%]", "A n", "B [95%]", "B n", "B - A [95%]", "p_value", "effect (Cohen)")
    from trajlens.compare._stats import benjamini_hochberg

    q_values = benjamini_hochberg(comparison["p_value"].to_list())
    shown = shown.with_columns(pl.Series("q (BH)", q_values, dtype=pl.Float64)).with_columns(
        (pl.col("q (BH)") < SIGNIFICANCE).fill_null(False).alias("significant"))
    shown = shown.select(*[c for c in shown.columns if c not in ("effect (Cohen)", "significant")],
                         "effect (Cohen)", "significant")
    words = "".join(f"<li>{escape(s)}</li>" for s in sentences)
    return (
        f'<section id="{escape(anchor)}"><h3>A = {escape(a)}, B = {escape(b)}</h3>'
        f'<ul class="findings">{words}</ul>'
        '<p class="note">95% intervals; n is trajectories (effective calls for call shares, steps for advantage '
        f'statistics). p-values are adjusted for the {comparison.height} rows by Benjamini-Hochberg (q, false '
        f'discovery rate); highlighted rows have q &lt; {SIGNIFICANCE:g}. '
        + (f'Not repeated: {escape("; ".join(repeated))}. ' if repeated else "") +
        'Sorted by effect size (Cohen\'s h for proportions, d for means).</p>'
        + table(shown, row_class="significant", limit=limit) + "</section>"
    )
