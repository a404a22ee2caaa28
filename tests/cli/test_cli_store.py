"""The ingest and sql commands as a user runs them: a real process, exit codes, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def trajlens(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "trajlens", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_ingest_then_sql(tmp_path, tiny_run_dir):
    done = trajlens("ingest", tiny_run_dir, "--store", tmp_path / "store")
    assert done.returncode == 0, done.stderr
    assert "ingested 1 run(s)" in done.stdout and "tiny" in done.stdout
    query = "SELECT step, count(*) AS n FROM trajectories WHERE step >= $lo GROUP BY step ORDER BY step"
    done = trajlens("sql", tmp_path / "store", query, "--param", "lo=2")
    assert done.returncode == 0, done.stderr
    assert "│ 2    ┆ 4   │" in done.stdout


def test_sql_writes_csv(tmp_path, tiny_run_dir):
    trajlens("ingest", tiny_run_dir, "--store", tmp_path / "store")
    out = tmp_path / "counts.csv"
    done = trajlens("sql", tmp_path / "store", "SELECT tool_name, count(*) AS n FROM tool_calls GROUP BY 1 ORDER BY 1", "--out", out)
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines() == ["tool_name,n", "bash,8", "think,8"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("ingest", "{tmp}/missing", "--store", "{tmp}/store"), "missing: no such file or directory"),
        (("sql", "{tmp}/nowhere", "SELECT 1"), "no such store directory"),
        (("sql", "{store}", "SELECT nope FROM runs"), "query failed"),
        (("sql", "{store}", "SELECT 1", "--param", "novalue"), "expected NAME=VALUE"),
        (("sql", "{store}", "{tmp}/missing.sql"), "no such query file"),
    ],
)
def test_user_errors_are_one_line_without_traceback(tmp_path, tiny_run_dir, args, message):
    store = tmp_path / "store"
    trajlens("ingest", tiny_run_dir, "--store", store)
    done = trajlens(*(a.format(tmp=tmp_path, store=store) for a in args))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_corrupt_parquet_from_cli(tmp_path, tiny_run_dir):
    victim = sorted((tiny_run_dir / "tool_calls").rglob("*.parquet"))[0]
    victim.write_bytes(b"PAR1 not really")
    done = trajlens("ingest", tiny_run_dir, "--store", tmp_path / "store")
    assert done.returncode == 1
    assert str(victim) in done.stderr and "not a readable Parquet file" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "store" / "runs").exists() or not any((tmp_path / "store" / "runs").iterdir())


def test_usage_errors_show_usage_not_a_traceback():
    done = trajlens("ingest")
    assert done.returncode == 2
    assert "Missing argument" in done.stderr and "Traceback" not in done.stderr
