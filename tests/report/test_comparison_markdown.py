"""``comparison.md`` keeps one cell per column whatever a measure or label holds: a ``|`` (the
measure of two estimator labels, ``advantage:gae_raw|gae_whitened:std``) is escaped as in
``trajlens sql --out x.md``, by the one Markdown row writer."""

from __future__ import annotations

import re

import polars as pl
import pytest
from cli_run import run_cli

from trajlens.compare import compare
from trajlens.report.compare_page import comparison_markdown
from trajlens.markdown import markdown_row

pytestmark = pytest.mark.slow

COLUMNS = 8
"""Columns of the comparison's Markdown table."""

# GitHub's table rule: a cell ends at a "|" that no backslash escapes.
_CELL_END = re.compile(r"(?<!\\)\|")


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of each row of the Markdown table in ``markdown``, as a Markdown reader splits them."""
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in _CELL_END.split(line)[1:-1]] for line in rows]


def test_a_measure_of_two_labels_keeps_its_row_in_eight_cells(sample_store):
    table = compare(sample_store, "sao-r6:gae_raw", "sao-r6:gae_whitened")
    rows = table_rows(comparison_markdown(table))
    assert len(rows) == table.height + 2  # the header and its rule
    assert {len(row) for row in rows} == {COLUMNS}
    measures = [row[0] for row in rows[2:]]
    assert "advantage:gae_raw\\|gae_whitened:std" in measures


def test_a_pipe_or_line_break_in_any_cell_is_kept_inside_it(sample_store):
    table = compare(sample_store, "sao-r6:Q1", "sao-r6:Q4", advantages=False).head(3)
    table = table.with_columns(pl.Series("measure", ["a|b", "two\nlines", "end|"]),
                               pl.lit("z | test").alias("test"))
    rows = table_rows(comparison_markdown(table))
    assert {len(row) for row in rows} == {COLUMNS}
    assert [row[0] for row in rows[2:]] == ["a\\|b", "two lines", "end\\|"]
    assert {row[4] for row in rows[2:]} == {"z \\| test"}


def test_sql_markdown_and_the_comparison_write_rows_alike(sample_store, tmp_path):
    out = tmp_path / "pipes.md"
    done = run_cli("sql", sample_store.path, "SELECT 'a|b' AS \"x|y\", 'two' || chr(10) || 'lines' AS z", "--out", out)
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines()[0] == markdown_row(["x|y", "z"]) == "| x\\|y | z |"
    assert out.read_text().splitlines()[2] == markdown_row(["a|b", "two\nlines"]) == "| a\\|b | two lines |"


def test_html_in_a_cell_is_shown_never_rendered():
    """A command from a log holding a tag, comment or autolink renders as its text; a ``<`` that
    opens none (redirections, heredocs) is left as written."""
    mistune = pytest.importorskip("mistune")
    from trajlens.markdown import markdown_table

    commands = ["echo <script>alert(1)</script>", "<!-- hidden -->", "<http://example.com>", "cat <<'EOF' > f 2<&1"]
    text = "\n".join(markdown_table(["command"], [[c] for c in commands]))
    assert "cat <<'EOF' > f 2<&1" in text
    page = mistune.create_markdown(plugins=["table"])(text)
    cells = re.findall(r"<td>(.*?)</td>", page)
    assert cells == ["echo &lt;script&gt;alert(1)&lt;/script&gt;", "&lt;!-- hidden --&gt;", "&lt;http://example.com&gt;",
                     "cat &lt;&lt;'EOF' &gt; f 2&lt;&amp;1"]
