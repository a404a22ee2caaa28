"""What ``trajlens sql`` and ``trajlens shell`` are given: bytes that are not UTF-8, an unknown
saved query name, an unknown dot command: each a one-line error and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import run_cli

import trajlens
from trajlens.cli.sql import saved_queries

# A byte that is not UTF-8 reaches Python's argv as a lone surrogate (surrogateescape).
NOT_UTF8 = "\udcff"


@pytest.fixture
def store(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    return tmp_path / "store"


def _one_error_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize("args, message", [
    (("sql", "{store}", f"SELECT 'a{NOT_UTF8}' AS x"),
     "error: query: expected UTF-8 text, found the byte 0xff at character 9"),
    (("sql", "{store}", "SELECT $x AS x", "--param", f"x={NOT_UTF8}"),
     "error: parameter x: expected UTF-8 text, found the byte 0xff at character 0"),
    (("advantages", "{store}", "--run", "tiny", "--estimator", "grpo", "--label", f"g{NOT_UTF8}"),
     "error: --label: expected UTF-8 text, found the byte 0xff at character 1"),
    (("attribute", "{store}", "--run", "tiny", "--estimator", f"g{NOT_UTF8}=grpo"),
     "error: --estimator: expected UTF-8 text, found the byte 0xff at character 1"),
], ids=["sql", "param", "label", "estimator-label"])
def test_text_that_is_not_utf8_is_one_line(store, args, message):
    done = run_cli(*(arg.format(store=store) for arg in args))
    assert done.returncode == 1
    assert _one_error_line(done) == message
    assert "advantage_batches" not in trajlens.open(store).tables()  # nothing saved under a mangled label


def test_an_unknown_saved_query_lists_the_known_ones(store):
    done = run_cli("sql", store, "think_share_by_stepp")
    assert done.returncode == 1
    line = _one_error_line(done)
    assert line.startswith("error: unknown saved query think_share_by_stepp; known: ")
    assert line.endswith(", ".join(saved_queries()))
    assert "think_share_by_step" in saved_queries()


@pytest.mark.parametrize("args, message", [
    (("SELECT count(*) AS n FROM runs", "--param", "x=1"),
     "error: query failed: a value is given for $x, but the query takes no parameters"),
    (("SELECT $run_id AS r, $s AS s", "--param", "run=tiny", "--param", "s:int=1"),
     "error: query failed: a value is given for $run, but the query takes $run_id, $s"),
    (("SELECT $run_id AS r", ), "error: query failed: the query takes $run_id; no value is given for $run_id"),
], ids=["unused", "misspelt", "unbound"])
def test_a_parameter_the_query_does_not_take_or_lacks_is_named(store, args, message):
    done = run_cli("sql", store, *args)
    assert done.returncode == 1
    assert _one_error_line(done) == message


@pytest.mark.parametrize("out", [None, "x.json", "x.csv"])
@pytest.mark.parametrize("select, column", [("'infinity'::DATE AS d", "d"), ("1 AS n, '-infinity'::TIMESTAMP AS t", "t")])
def test_a_date_beyond_any_calendar_is_named_not_a_panic(store, tmp_path, select, column, out):
    written = [] if out is None else ["--out", tmp_path / out]
    done = run_cli("sql", store, f"SELECT {select}", *written)
    assert done.returncode == 1
    assert f"column {column!r}" in _one_error_line(done) and "panicked" not in done.stderr
    assert not (tmp_path / (out or "none")).exists()
    assert run_cli("sql", store, f"SELECT {select.split(' AS ')[0].split(', ')[-1]}::VARCHAR AS v").returncode == 0


def test_a_saved_query_and_plain_sql_still_run(store):
    assert run_cli("sql", store, "runs_overview").returncode == 0
    assert run_cli("sql", store, "SELECT count(*) AS n FROM runs").returncode == 0


def test_shell_unknown_dot_command_fails_and_the_rest_still_runs(store):
    done = run_cli("shell", store, stdin=".bogus\nSELECT 41 + 1 AS answer;\n")
    assert done.returncode == 1
    assert _one_error_line(done).startswith("error: unknown dot command .bogus. ")
    assert "42" in done.stdout


@pytest.mark.parametrize("command, status", [(".help", 0), (".tables", 0), (".schema", 1), (".nope", 1)])
def test_shell_dot_commands_exit_status(store, command, status):
    done = run_cli("shell", store, "--command", command)
    assert done.returncode == status, done.stderr
    assert bool(done.stderr.strip()) == bool(status)


@pytest.mark.parametrize("text, answers", [
    ("-- the answer;\nSELECT 42 AS a;\n", ["42"]),  # a ';' in a comment ends nothing
    ("SELECT 42 AS a; SELECT 43 AS b;\n", ["42", "43"]),  # two statements on one line
    ("SELECT 'x;\ny' AS s, 42 AS a;\n", ["42"]),  # nor does a ';' in a string
    ("SELECT 42 /* not; the end */ AS a;\n", ["42"]),
    ("SELECT 41 AS a;\nSELECT 42 AS b", ["41", "42"]),  # the last statement needs no ';'
    ("SELECT 42 AS a;\n-- the end", ["42"]),  # nor is a closing comment a statement
])
def test_shell_splits_statements_as_sql_does(store, text, answers):
    done = run_cli("shell", store, stdin=text)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("shape: (1, ") == len(answers)  # one result per statement
    assert all(f" {answer}  │" in done.stdout for answer in answers)


def test_shell_runs_a_shipped_query_file(store):
    text = (Path(__file__).resolve().parents[2] / "queries" / "runs_overview.sql").read_text()
    done = run_cli("shell", store, stdin=text)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet", ".md"])
def test_a_result_written_a_batch_at_a_time_is_the_whole_result(store, tmp_path, monkeypatch, suffix):
    """``sql --out`` holds one batch of rows at a time: what it writes is what writing the whole
    result at once writes."""
    import polars as pl

    from trajlens.cli._output import write_output
    from trajlens.store import handle

    query = "SELECT trajectory_id, step, response_mask FROM tokens ORDER BY step, trajectory_id"
    whole = trajlens.open(store).sql(query)
    write_output(tmp_path / f"whole{suffix}", frame=whole)
    monkeypatch.setattr(handle, "NESTED_BATCH_ROWS", 3)  # the token arrays: a nested result
    assert len(list(trajlens.open(store).sql_batches(query))) == -(-whole.height // 3) > 2
    done = run_cli("sql", store, query, "--out", tmp_path / f"batched{suffix}")
    assert done.returncode == 0 and done.stdout == f"wrote {whole.height} rows to {tmp_path / f'batched{suffix}'}\n"
    if suffix == ".parquet":
        assert pl.read_parquet(tmp_path / "batched.parquet").equals(whole)
    else:
        assert (tmp_path / f"batched{suffix}").read_bytes() == (tmp_path / f"whole{suffix}").read_bytes()


def test_a_printed_result_longer_than_rows_gives_its_first_rows_and_its_length(store, monkeypatch):
    from trajlens.store import handle

    monkeypatch.setattr(handle, "QUERY_BATCH_ROWS", 2)
    height = trajlens.open(store).sql("SELECT count(*) AS n FROM tool_calls")["n"][0]
    done = run_cli("sql", store, "SELECT call_index FROM tool_calls", "--rows", "3")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and height > 3
    assert lines[0] == f"shape: ({height}, 1)" and len(lines) == 1 + 5 + 3 + 1 + 1
    assert lines[-1] == f"the first 3 of {height:,} rows; --rows N prints more, --out FILE writes them all"
    short = run_cli("sql", store, "SELECT 1 AS a")
    assert short.stdout.splitlines()[0] == "shape: (1, 1)" and "the first" not in short.stdout


@pytest.mark.parametrize("rows", [0, -1, 2.5, True])
def test_batches_of_no_rows_are_refused_before_the_query(store, rows):
    from trajlens.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^rows: expected a whole number of 1 or more, found "):
        next(trajlens.open(store).sql_batches("SELECT * FROM trajectories", rows=rows))
    batches = list(trajlens.open(store).sql_batches("SELECT * FROM trajectories", rows=1))
    assert {batch.height for batch in batches} == {1}
