"""Markdown tables whose cells hold any text: the one writer of a table row that every Markdown
output (``--out x.md``, ``comparison.md``, stage reports, the report's pages, attribution and
check summaries) goes through.

It stands below everything else in trajlens and imports nothing from it."""

from __future__ import annotations

from collections.abc import Iterable


def markdown_cell(text: str) -> str:
    """``text`` as one Markdown table cell: a ``|`` escaped (``\\|``) so that it does not end the
    cell, a line break as a space so that it does not end the row."""
    return text.replace("|", "\\|").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def markdown_row(cells: Iterable[str]) -> str:
    """One row of a Markdown table, each cell through :func:`markdown_cell`."""
    return "| " + " | ".join(markdown_cell(cell) for cell in cells) + " |"


def markdown_table(header: list[str], rows: Iterable[Iterable[str]]) -> list[str]:
    """The lines of a Markdown table: ``header``, its rule, then ``rows``."""
    return [markdown_row(header), markdown_row(["---"] * len(header)), *(markdown_row(row) for row in rows)]
