"""A comparison written to disk: ``comparison.csv``, ``comparison.md`` and ``comparison.html``."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from trajlens.compare import describe
from trajlens.report import html


def comparison_markdown(comparison: pl.DataFrame, top: int = 5) -> str:
    """The comparison as Markdown: the largest differences in words, then the table."""
    if comparison.is_empty():
        return "No measure is present on both sides.\n"
    a, b = comparison["a"][0], comparison["b"][0]
    from trajlens.compare._stats import benjamini_hochberg

    comparison, repeated = html.distinct_measures(comparison)
    lines = [f"# {b} against {a}", "", *(f"- {s}" for s in describe(comparison, top)), "",
             f"95% intervals; differences are B - A; q is the p-value adjusted for the {comparison.height} rows "
             "by Benjamini-Hochberg (false discovery rate)."
             + (f" Not repeated: {'; '.join(repeated)}." if repeated else ""), "",
             "| measure | A | B | B - A [95%] | test | p | q (BH) | effect |", "|---|---|---|---|---|---|---|---|"]
    q_values = benjamini_hochberg(comparison["p_value"].to_list())
    for row, q_value in zip(comparison.iter_rows(named=True), q_values):
        def cell(value, low, high):
            if value is None:
                return ""
            return f"{value:.4g}" + (f" [{low:.4g}, {high:.4g}]" if low is not None and high is not None else "")
        p = "" if row["p_value"] is None else f"{row['p_value']:.2g}"
        q = "" if q_value is None else f"{q_value:.2g}"
        effect = "" if row["effect_size"] is None else f"{row['effect']} {row['effect_size']:+.2f}"
        lines.append(f"| {row['measure']} | {cell(row['a_value'], row['a_low'], row['a_high'])} | "
                     f"{cell(row['b_value'], row['b_low'], row['b_high'])} | "
                     f"{cell(row['difference'], row['difference_low'], row['difference_high'])} | {row['test']} | "
                     f"{p} | {q} | {effect} |")
    return "\n".join(lines) + "\n"


def _report_index(out: Path) -> Path | None:
    """The ``index.html`` of the report a comparison folder sits in (``REPORT/compare/NAME``)."""
    for parent in list(out.resolve().parents)[:3]:
        if (parent / "index.html").is_file():
            return parent / "index.html"
    return None


def write_comparison(comparison: pl.DataFrame, out: Path | str, top: int = 5) -> list[Path]:
    """Write the three files into folder ``out`` (created); returns their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "comparison.csv"
    comparison.drop("phrase").write_csv(csv, float_precision=6)
    markdown = out / "comparison.md"
    markdown.write_text(comparison_markdown(comparison, top))
    page = out / "comparison.html"
    title = f"{comparison['b'][0]} against {comparison['a'][0]}" if comparison.height else "comparison"
    index = _report_index(out)
    nav = [(os.path.relpath(index, out), "back to the report")] if index is not None else []
    page.write_text(html.page(title, f"<h1>{html.escape(title)}</h1>"
                              + html.comparison_section("comparison", comparison, describe(comparison, top)),
                              nav=nav))
    return [csv, markdown, page]
