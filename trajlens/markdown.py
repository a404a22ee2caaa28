"""Markdown tables whose cells hold any text: the one writer of a table row that every Markdown
output (``--out x.md``, ``comparison.md``, stage reports, the report's pages, attribution and
check summaries) goes through.

It stands below everything else in trajlens and imports nothing from it."""

from __future__ import annotations

import re
from collections.abc import Iterable


def markdown_cell(text: str) -> str:
    """``text`` as one Markdown table cell: a ``|`` escaped (``\\|``) so that it does not end the
    cell, a line break as a space so that it does not end the row, and a ``<`` that could open an
    HTML tag, comment or autolink escaped (``\\<``): a command from a log (``echo <script>``) is
    shown, never rendered. A ``<`` before anything else (``2<&1``, ``<<'EOF'``) stays as it is."""
    text = _TAG_START.sub(r"\\<", text.replace("|", "\\|"))
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def markdown_row(cells: Iterable[str]) -> str:
    """One row of a Markdown table, each cell through :func:`markdown_cell`."""
    return "| " + " | ".join(markdown_cell(cell) for cell in cells) + " |"


def markdown_table(header: list[str], rows: Iterable[Iterable[str]]) -> list[str]:
    """The lines of a Markdown table: ``header``, its rule, then ``rows``."""
    return [markdown_row(header), markdown_row(["---"] * len(header)), *(markdown_row(row) for row in rows)]


def markdown_html(document: str) -> str:
    """A Markdown ``document`` as trajlens writes one (headings, lists, code spans, its tables) in
    HTML, for ``--out x.html``. Text from runs and users stays as it is written: HTML in it is
    shown as text, and so are emphasis, links and images (a stage called ``__x__`` is not made
    bold, ``![x](http://...)`` fetches nothing)."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    return parser.disable(["emphasis", "link", "image", "autolink"]).render(document)


def markdown_anchor(heading: str) -> str:
    """The fragment a Markdown renderer gives a heading (GitHub's rule: lower case, every
    character but letters, digits, ``-``, ``_`` and spaces dropped, spaces as ``-``), for a
    link to it: ``## My.Run_1`` is ``#myrun_1``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
