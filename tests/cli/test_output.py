"""``--out`` reads the format from the extension, on every command that writes a file."""

from __future__ import annotations

import html
import json
import re

import polars as pl
import pytest

import trajlens
from trajlens.cli._app import main


@pytest.fixture
def store(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    return tmp_path / "store"


def run_cli(capsys, *args) -> tuple[int, str, str]:
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


SAMPLE = ("sample", "{store}", "--run", "tiny", "--stages", "first:1-1,second:2-2", "--n", "2")


def test_sample_writes_the_report_or_its_rates_by_extension(store, tmp_path, capsys):
    written = {}
    for suffix in (".md", ".html", ".csv", ".json", ".parquet"):
        path = tmp_path / f"r{suffix}"
        status, out, err = run_cli(capsys, *(a.format(store=store) for a in SAMPLE), "--out", path)
        assert status == 0, err
        assert out.strip().endswith(f"wrote {path}")
        written[suffix] = path
    markdown = written[".md"].read_text()
    assert "| tiny | first | 1–1 |" in markdown
    page = written[".html"].read_text()
    # the Markdown's tables as HTML tables, not its text
    assert page.startswith("<!DOCTYPE html>") and "| tiny |" not in page
    assert "<td>tiny</td>\n<td>first</td>\n<td>1–1</td>" in page
    assert page.count("<table>") == sum(line.startswith("| ---") for line in markdown.splitlines()) >= 2
    rates = pl.read_parquet(written[".parquet"])
    assert {"stage", "population_value"} <= set(rates.columns) and set(rates["stage"]) == {"first", "second"}
    assert len(json.loads(written[".json"].read_text())) == rates.height
    assert pl.read_csv(written[".csv"]).height == rates.height
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize(
    "args",
    [
        SAMPLE,
        ("sql", "{store}", "SELECT * FROM runs"),
        ("view", "{store}", "--run", "tiny", "--trajectory", "1-a-0"),
    ],
    ids=lambda args: args[0],
)
@pytest.mark.parametrize(
    "name, message",
    [("r.txt", "expected a file ending in"), ("missing/r.html", "does not exist"), (".", "is a folder")],
)
def test_a_bad_out_is_one_line_and_writes_nothing(store, tmp_path, capsys, args, name, message):
    out = tmp_path / name
    status, _, err = run_cli(capsys, *(a.format(store=store) for a in args), "--out", out)
    assert status == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --out ") and message in lines[0], err
    assert lines[0].count("--out ") == 1, "one problem, said once"
    assert not out.is_file() and not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    "args, flag",
    [
        (("check", "{store}", "--run", "tiny", "--json"), "--json"),
        (("check", "{store}", "--run", "tiny", "--junit"), "--junit"),
        (("attribute", "{store}", "--run", "tiny", "--json"), "--json"),
        (("advantages", "{store}", "--run", "tiny", "--identify", "--json"), "--json"),
        (("sql", "{store}", "SELECT * FROM runs", "--out"), "--out"),
        (("compare", "{store}", "tiny:1-1", "tiny:2-2", "--no-advantages", "--out"), "--out"),
        (("report", "{store}", "--out"), "--out"),
        (("ingest", "{store}/../tiny-run", "--store"), "--store"),
    ],
    ids=lambda value: value if isinstance(value, str) else f"{value[0]}-{value[-1]}",
)
def test_a_dash_for_an_output_is_refused_in_one_line_and_makes_no_file(store, tmp_path, capsys, monkeypatch, args, flag):
    """``check --json -`` wrote a file named ``-`` and said "wrote -"; each output, a file or a
    folder, now refuses it before any work: the commands write their outputs whole, beside their
    own lines on standard output."""
    monkeypatch.chdir(tmp_path)
    status, _, err = run_cli(capsys, *(a.format(store=store) for a in args), "-")
    lines = err.strip().splitlines()
    assert status != 0
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag} -: {flag} writes a ") and "standard output" in lines[0], err
    assert not (tmp_path / "-").exists() and not list(tmp_path.glob("*.partial*"))


def test_view_writes_html_only(store, tmp_path, capsys):
    status, _, err = run_cli(capsys, "view", store, "--run", "tiny", "--trajectory", "1-a-0", "--out", tmp_path / "t.md")
    assert status == 1 and "expected a file ending in .html" in err


def test_attribute_out_reads_the_extension(store, tmp_path, capsys):
    status, _, err = run_cli(capsys, "attribute", store, "--run", "tiny", "--out", tmp_path / "r.txt")
    assert status == 1 and "expected a file ending in" in err
    assert not (tmp_path / "r.txt").exists()
    status, _, err = run_cli(capsys, "attribute", store, "--run", "tiny", "--out", tmp_path / "missing" / "r.md")
    assert status == 1 and "does not exist" in err and not (tmp_path / "missing").exists()


@pytest.mark.parametrize("suffix", [".md", ".csv"])
def test_attribute_out_writes_by_extension(store, tmp_path, capsys, suffix):
    out = tmp_path / f"attribution{suffix}"
    status, _, err = run_cli(capsys, "attribute", store, "--run", "tiny", "--out", out)
    assert status == 0, err
    if suffix == ".md":
        assert out.read_text().startswith("#")
    else:
        table = pl.read_csv(out)
        assert {"primary_class", "estimator"} <= set(table.columns) and table.height > 0


def test_console_table_writes_values_of_different_magnitudes_in_scientific_notation():
    import polars as pl

    from trajlens.cli._output import console_table

    text = console_table(pl.DataFrame({"candidate": ["grpo", "rloo"], "max_abs_diff": [8.9e-08, 4.9e-04],
                                       "share": [0.25, 0.5]}))
    lines = text.splitlines()
    assert lines[2].split() == ["grpo", "8.9e-08", "0.250"]
    assert lines[3].split() == ["rloo", "4.9e-04", "0.500"]


def test_console_table_headers_wrap_between_words_only():
    import polars as pl

    from trajlens.cli._output import console_table

    frame = pl.DataFrame({"step": [1], "bimodality": [0.5], "all_negative": [True], "p adjusted": [0.01]})
    lines = console_table(frame, width=20).splitlines()
    dashes = lines.index(next(line for line in lines if line.startswith("-")))
    headers = [word for line in lines[:dashes] for word in line.split()]
    assert "bimodality" in headers and {"all_", "negative"} <= set(headers) and {"p", "adjusted"} <= set(headers)
    assert console_table(frame.head(0).vstack(frame).vstack(frame), rows=1).endswith("(1 more rows)")


def test_json_output_writes_an_undefined_number_as_null(store, tmp_path, capsys):
    """JSON has no NaN: a strict parser refuses NaN and Infinity, at any depth."""
    path = tmp_path / "n.json"
    query = "SELECT 'nan'::DOUBLE AS x, '-inf'::DOUBLE AS y, 1.5::DOUBLE AS z, ['nan'::DOUBLE, 2.0] AS l"
    status, _, err = run_cli(capsys, "sql", store, query, "--out", path)
    assert status == 0, err

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    assert json.loads(path.read_text(), parse_constant=refuse) == [{"x": None, "y": None, "z": 1.5, "l": [None, 2.0]}]


def test_an_html_document_shows_text_from_runs_and_users_as_written():
    """Stage names, run ids and commands in a document's cells: no emphasis, link or image is
    made of them, and HTML in them is text."""
    from trajlens.markdown import markdown_html, markdown_table

    cells = ["__x__", "*late*", "![i](http://e.example/p.png)", "[l](javascript:alert(1))", "<script>x</script>",
             "a|b"]
    page = markdown_html("\n".join(markdown_table(["text"], [[cell] for cell in cells])))
    assert [html.unescape(cell) for cell in re.findall(r"<td>(.*?)</td>", page)] == cells
    assert "<img" not in page and "<a " not in page and "<script" not in page


def test_a_partial_folder_whose_writer_was_killed_is_removed_by_the_next_write(tmp_path):
    """A write killed outright (SIGKILL) cannot clean up: the next write of the same folder removes
    what it left; one whose writer still runs is kept."""
    import os
    import subprocess
    import sys

    from trajlens.cli._output import folder_output

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f".out.{dead.stdout.strip()}-0123abcd.partial"
    live = tmp_path / f".out.{os.getpid()}-4567cdef.partial"
    for folder in (left, live):
        (folder / "step").mkdir(parents=True)
    with folder_output(tmp_path / "out") as partial:
        (partial / "a.txt").write_text("a")
    assert (tmp_path / "out" / "a.txt").read_text() == "a"
    assert not left.exists() and live.exists()
