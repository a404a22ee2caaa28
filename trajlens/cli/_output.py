"""Writing a command's ``--out`` file, in the format its extension names.

Every command that writes a file takes ``--out PATH`` and reads the format from the suffix:
``.csv``, ``.json``, ``.parquet``, ``.md`` or ``.html`` for a table, ``.md`` or ``.html`` for a
document. The folder and suffix are checked before any work; the file is written to a partial
name and renamed into place, so a failure leaves nothing behind.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from trajlens.errors import ConfigError

if TYPE_CHECKING:
    import polars as pl


@dataclass(frozen=True)
class OutputFormat:
    """A file format ``--out`` can write."""

    suffix: str
    description: str
    tables: bool
    """Whether a table (a DataFrame) can be written in it."""
    documents: bool
    """Whether a Markdown document (a report) can be written in it."""


OUTPUT_FORMATS: dict[str, OutputFormat] = {
    format.suffix: format
    for format in (
        OutputFormat(".csv", "CSV; nested cells (lists, structs) as JSON text", tables=True, documents=False),
        OutputFormat(".json", "a JSON array of row objects", tables=True, documents=False),
        OutputFormat(".parquet", "Parquet, nested columns kept", tables=True, documents=False),
        OutputFormat(".md", "Markdown", tables=True, documents=True),
        OutputFormat(".html", "a standalone HTML page", tables=True, documents=True),
    )
}
TABLE_SUFFIXES: tuple[str, ...] = tuple(s for s, f in OUTPUT_FORMATS.items() if f.tables)
DOCUMENT_SUFFIXES: tuple[str, ...] = tuple(s for s, f in OUTPUT_FORMATS.items() if f.documents)


def check_output(path: Path, suffixes: tuple[str, ...] | None = None) -> None:
    """Fail before any work when ``path`` cannot be written, or its suffix is not one of ``suffixes``."""
    problems = []
    if path.is_dir():
        problems.append(f"--out {path}: is a folder; expected a file name")
    elif not path.parent.is_dir():
        problems.append(f"--out {path}: folder {path.parent} does not exist")
    if suffixes and path.suffix.lower() not in suffixes:
        problems.append(f"--out {path}: expected a file ending in {', '.join(suffixes)}")
    if problems:
        raise ConfigError(problems)


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Write through ``write(partial)`` and rename into place; remove the partial on failure."""
    partial = path.with_name(path.name + ".partial")
    try:
        write(partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def write_output(path: Path, *, frame: "pl.DataFrame | None" = None, document: str | None = None) -> None:
    """Write a table (``frame``) or a Markdown ``document`` to ``path`` by its extension."""
    suffix = path.suffix.lower()
    check_output(path, TABLE_SUFFIXES if frame is not None else DOCUMENT_SUFFIXES)
    if frame is not None:
        write_atomically(path, lambda partial: _write_frame(frame, partial, suffix))
    elif document is not None:
        text = document if suffix == ".md" else _html_page(f"<pre>{html.escape(document)}</pre>")
        write_atomically(path, lambda partial: partial.write_text(text, encoding="utf-8"))


def _write_frame(frame: "pl.DataFrame", path: Path, suffix: str) -> None:
    import polars as pl

    try:
        if suffix == ".parquet":
            frame.write_parquet(path)
        elif suffix == ".json":
            path.write_text(json.dumps(frame.to_dicts(), default=str, ensure_ascii=False) + "\n", encoding="utf-8")
        elif suffix == ".csv":
            flat_frame(frame).write_csv(path)
        elif suffix == ".md":
            path.write_text(_markdown_table(flat_frame(frame)), encoding="utf-8")
        elif suffix == ".html":
            path.write_text(_html_page(_html_table(flat_frame(frame))), encoding="utf-8")
    except pl.exceptions.PolarsError as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError([f"--out {path.with_suffix(suffix).name}: cannot write the result ({reason})"]) from None


def flat_frame(frame: "pl.DataFrame") -> "pl.DataFrame":
    """``frame`` with every nested column (list, array, struct) as JSON text, for flat formats."""
    import polars as pl

    nested = [name for name, dtype in frame.schema.items() if dtype.is_nested() or dtype == pl.Object]
    if not nested:
        return frame
    return frame.with_columns(
        pl.Series(name, [None if value is None else _json_cell(value) for value in frame[name].to_list()],
                  dtype=pl.String)
        for name in nested
    )


def _json_cell(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _cell_text(value: Any) -> str:
    return "" if value is None else str(value)


def _markdown_table(frame: "pl.DataFrame") -> str:
    def row(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"

    lines = [row(frame.columns), row(["---"] * frame.width)]
    lines.extend(row([_cell_text(value) for value in values]) for values in frame.iter_rows())
    return "\n".join(lines) + "\n"


def _html_table(frame: "pl.DataFrame") -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for name in frame.columns)
    body = "\n".join("<tr>" + "".join(f"<td>{html.escape(_cell_text(v))}</td>" for v in values) + "</tr>"
                     for values in frame.iter_rows())
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


CONSOLE_WIDTH = 120
"""Widest line a console table aims for; a header wider than its column wraps at its spaces."""


def console_table(frame: "pl.DataFrame", *, rows: int | None = None, width: int = CONSOLE_WIDTH) -> str:
    """``frame`` as a plain-text table for the terminal.

    Headers wrap only at spaces (and at ``_`` when a name has no space), never inside a word, so
    a column is at least as wide as the longest word of its header. A float column whose nonzero
    values lie within three orders of magnitude (and between 0.001 and a million) is fixed, with
    enough decimals for three significant digits of its smallest value; any other column gives
    each value three significant digits, in scientific notation below 0.001 (``8.9e-08``,
    ``4.9e-04``), so that small values never all read "0.00".
    ``rows`` keeps the first rows and says how many more there are.
    """
    import polars as pl

    shown = frame if rows is None else frame.head(rows)
    columns = []
    for name in frame.columns:
        series = shown[name]
        if series.dtype in (pl.Float32, pl.Float64):
            cells = _float_cells(series.to_list())
        else:
            cells = ["" if value is None else _one_line(value) for value in series.to_list()]
        columns.append((name, cells))
    spare = max(width - 2 * (len(columns) - 1), len(columns))
    widths = []
    for name, cells in columns:
        cell_width = max((len(cell) for cell in cells), default=0)
        word_width = max(len(word) for word in _header_words(name))
        widths.append(max(cell_width, word_width, min(len(name), max(cell_width, spare // max(len(columns), 1)))))
    headers = [_wrap_header(name, w) for (name, _), w in zip(columns, widths)]
    height = max((len(h) for h in headers), default=0)
    numeric = [frame.schema[name].is_numeric() for name, _ in columns]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.rjust(w) if right else cell.ljust(w)
                         for cell, w, right in zip(cells, widths, numeric)).rstrip()

    lines = [line([h[i] if i < len(h) else "" for h in headers]) for i in range(height)]
    lines.append("  ".join("-" * w for w in widths))
    lines += [line([cells[i] for _, cells in columns]) for i in range(shown.height)]
    if shown.height < frame.height:
        lines.append(f"({frame.height - shown.height} more rows)")
    return "\n".join(lines)


def _one_line(value: Any) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:59] + "…"


def _float_cells(values: list[float | None]) -> list[str]:
    import math

    finite = [abs(v) for v in values if v is not None and math.isfinite(v) and v != 0]
    if not finite:
        return ["" if v is None else f"{v:g}" for v in values]
    smallest, largest = min(finite), max(finite)
    if largest / smallest >= 1e3 or smallest < 1e-3 or largest >= 1e6:
        return ["" if v is None else _general(v) for v in values]
    decimals = max(0, min(6, 2 - math.floor(math.log10(smallest))))
    return ["" if v is None else f"{v:,.{decimals}f}" for v in values]


def _general(value: float) -> str:
    """Three significant digits, in scientific notation below 0.001 and from a million up."""
    import math

    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.1e}" if abs(value) < 1e-3 or abs(value) >= 1e6 else f"{value:.3g}"


def _header_words(name: str) -> list[str]:
    words = name.split()
    if len(words) == 1 and "_" in name:
        parts = name.split("_")
        words = [part + "_" for part in parts[:-1]] + [parts[-1]]
    return words


def _wrap_header(name: str, width: int) -> list[str]:
    if len(name) <= width:
        return [name]
    joiner = " " if " " in name else ""
    lines: list[str] = []
    for word in _header_words(name):
        if lines and len(lines[-1]) + len(joiner) + len(word) <= width:
            lines[-1] += joiner + word
        else:
            lines.append(word)
    return lines


def _html_page(body: str) -> str:
    return f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>trajlens</title></head>\n<body>\n{body}\n</body></html>\n'


__all__ = ["CONSOLE_WIDTH", "DOCUMENT_SUFFIXES", "OUTPUT_FORMATS", "TABLE_SUFFIXES", "OutputFormat", "check_output",
           "console_table", "flat_frame", "write_atomically", "write_output"]
