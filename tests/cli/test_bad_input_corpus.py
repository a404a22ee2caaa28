"""A corpus of bad store, SQL and CLI inputs, generated here at test time.

Every case runs the real command line in-process (``trajlens.cli.main``) and must end in one
of two ways: exit 0 with the right result, or exit 1 (2 for usage errors) with exactly one
line on stderr and no traceback, the store byte-for-byte unchanged. A traceback would escape
``main`` and fail the test.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import polars as pl
import pytest

import trajlens
from tinyrun import tiny_run
from trajlens.cli import main
from trajlens.store.layout import RunDirWriter

STORE = "{store}"
TMP = "{tmp}"
BASE = "{base}"  # the inputs the store was first ingested from


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    status: int
    message: str = ""
    """A substring of the one-line error (status 1 or 2), or of stdout (status 0)."""
    check: Callable[[Path, Path], None] | None = field(default=None, compare=False)
    """For status 0: ``check(tmp, store)`` asserts the result."""


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != ".lock"):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


REFUSED = "query refused"
HOSTILE_SQL: dict[str, str] = {
    "copy_to_tmp": "COPY (SELECT 1) TO '{tmp}/leak.csv'",
    "copy_over_run_file": "COPY (SELECT 1 AS x) TO '{store}/runs/tiny/runs/part-0.parquet' (FORMAT parquet)",
    "copy_table_out": "COPY trajectories TO '{tmp}/trajectories.csv'",
    "export_database": "EXPORT DATABASE '{tmp}/exported'",
    "attach_new_file": "ATTACH '{tmp}/new.duckdb' AS other",
    "attach_store_db": "ATTACH '{store}/trajlens.duckdb' AS mine",
    "attach_memory": "ATTACH ':memory:' AS scratch",
    "detach": "DETACH memory",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "set_external_access": "SET enable_external_access = true",
    "set_threads": "SET threads = 1",
    "reset": "RESET lock_configuration",
    "pragma": "PRAGMA version",
    "create_table": "CREATE TABLE t AS SELECT 1",
    "create_view": "CREATE VIEW v AS SELECT 1",
    "drop_view": "DROP VIEW trajectories",
    "insert": "INSERT INTO runs SELECT * FROM runs",
    "update": "UPDATE trajectories SET reward = 0",
    "delete": "DELETE FROM trajectories",
    "alter": "ALTER VIEW trajectories RENAME TO t2",
    "checkpoint": "CHECKPOINT",
    "vacuum": "VACUUM",
    "call": "CALL duckdb_settings()",
    "transaction": "BEGIN TRANSACTION",
    "use": "USE memory",
    "create_secret": "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
}
FILE_READING_SQL: dict[str, str] = {
    "read_text": "SELECT * FROM read_text('/etc/passwd')",
    "read_blob": "SELECT * FROM read_blob('/etc/hostname')",
    "glob_root": "SELECT * FROM glob('/*')",
    "read_csv": "SELECT * FROM read_csv('/etc/passwd')",
    "read_json": "SELECT * FROM read_json('{tmp}/x.json')",
    "read_store_parquet": "SELECT * FROM read_parquet('{store}/runs/tiny/runs/part-0.parquet')",
    "read_other_store": "SELECT * FROM read_parquet('{tmp}/other/**/*.parquet')",
    "replacement_scan": "SELECT * FROM '{store}/runs/tiny/runs/part-0.parquet'",
    "parquet_metadata": "SELECT * FROM parquet_metadata('{store}/runs/tiny/runs/part-0.parquet')",
    "sniff_csv": "SELECT * FROM sniff_csv('/etc/passwd')",
}
FAILING_SQL: dict[str, tuple[str, str]] = {
    "empty": ("", "expected one SQL statement, found 0"),
    "only_semicolon": (";", "expected one SQL statement, found 0"),
    "only_comment": (" -- nothing", "expected one SQL statement, found 0"),
    "two_statements": ("SELECT 1; SELECT 2", "expected one SQL statement, found 2"),
    "syntax": ("SELEC 1", "query failed"),
    "unknown_table": ("SELECT * FROM nope", "query failed"),
    "unknown_column": ("SELECT nope FROM runs", "query failed"),
    "call_classes_early": ("SELECT * FROM call_classes", "`trajlens classify STORE` creates it"),
    "measures_early": ("SELECT * FROM trajectory_measures", "`trajlens classify STORE` creates it"),
    "stage_rates_early": ("SELECT * FROM stage_rates", "`trajlens sample STORE --run RUN"),
    "stage_changes_early": ("SELECT * FROM stage_changes", "`trajlens sample STORE --run RUN"),
    "advantages_early": ("SELECT * FROM advantage_batches", "`trajlens advantages STORE"),
    "division_by_zero_cast": ("SELECT CAST('x' AS INTEGER)", "query failed"),
    "error_function": ("SELECT error('boom')", "query failed"),
    "unterminated_string": ("SELECT 'abc", "query failed"),
    "missing_parameter": ("SELECT $absent", "query failed"),
    "deep_nesting": ("SELECT " + "(" * 2000 + "1" + ")" * 2000, "query failed"),
}


def _rows(expected: list[tuple]) -> Callable[[Path, Path], None]:
    def check(tmp: Path, store: Path) -> None:
        frame = pl.read_csv(tmp / "result.csv")
        assert [tuple(row) for row in frame.iter_rows()] == expected

    return check


def sql_cases() -> list[Case]:
    cases = []
    for name, query in HOSTILE_SQL.items():
        cases.append(Case(f"sql-{name}", ("sql", STORE, query), 1, REFUSED))
    for name, query in FILE_READING_SQL.items():
        cases.append(Case(f"sql-{name}", ("sql", STORE, query), 1, "not files"))
    for name, (query, message) in FAILING_SQL.items():
        cases.append(Case(f"sql-{name}", ("sql", STORE, query), 1, message))
    # The same queries as a shared .sql file
    for name, query in {**HOSTILE_SQL, **FILE_READING_SQL}.items():
        cases.append(Case(f"sqlfile-{name}", ("sql", STORE, f"@{query}"), 1, "query refused"))
    out = f"{TMP}/result.csv"
    cases += [
        Case("param-text-default", ("sql", STORE, "SELECT count(*) AS n FROM runs WHERE run_id = $id", "-p", "id=123", "--out", out),
             0, "wrote 1 rows", _rows([(0,)])),
        Case("param-typed-int", ("sql", STORE, "SELECT count(*) AS n FROM trajectories WHERE step = $s", "-p", "s:int=2", "--out", out),
             0, "wrote 1 rows", _rows([(4,)])),
        Case("param-text-matches", ("sql", STORE, "SELECT run_id FROM runs WHERE run_id = $id", "-p", "id=tiny", "--out", out),
             0, "wrote 1 rows", _rows([("tiny",)])),
        Case("param-injection-bound", ("sql", STORE, "SELECT count(*) AS n FROM runs WHERE run_id = $id", "-p", "id=x' OR '1'='1", "--out", out),
             0, "wrote 1 rows", _rows([(0,)])),
        Case("param-float", ("sql", STORE, "SELECT count(*) AS n FROM trajectories WHERE reward > $r", "-p", "r:float=0.5", "--out", out),
             0, "wrote 1 rows", _rows([(4,)])),
        Case("param-bool", ("sql", STORE, "SELECT count(*) AS n FROM trajectories WHERE resolved = $b", "-p", "b:bool=true", "--out", out),
             0, "wrote 1 rows", _rows([(4,)])),
        Case("param-json-list", ("sql", STORE, "SELECT len($l) AS n", "-p", "l:json=[1,2,3]", "--out", out),
             0, "wrote 1 rows", _rows([(3,)])),
        Case("param-text-number-against-int", ("sql", STORE, "SELECT count(*) FROM trajectories WHERE step = $s", "-p", "s=2"),
             0, "4"),
        Case("param-no-equals", ("sql", STORE, "SELECT 1", "-p", "novalue"), 1, "expected NAME=VALUE"),
        Case("param-empty-name", ("sql", STORE, "SELECT 1", "-p", "=1"), 1, "expected NAME=VALUE"),
        Case("param-bad-name", ("sql", STORE, "SELECT 1", "-p", "1x=2"), 1, "expected NAME=VALUE"),
        Case("param-bad-int", ("sql", STORE, "SELECT $a", "-p", "a:int=three"), 1, "not an int"),
        Case("param-nan-float", ("sql", STORE, "SELECT $a", "-p", "a:float=nan"), 1, "expected a finite number"),
        Case("param-bad-bool", ("sql", STORE, "SELECT $a", "-p", "a:bool=maybe"), 1, "not a bool"),
        Case("param-bad-json", ("sql", STORE, "SELECT $a", "-p", "a:json={"), 1, "not a json"),
        Case("param-unknown-type", ("sql", STORE, "SELECT $a", "-p", "a:date=2020-01-01"), 1, "unknown type 'date'"),
        Case("param-twice", ("sql", STORE, "SELECT $a", "-p", "a=1", "-p", "a=2"), 1, "a is given twice"),
        Case("param-unused", ("sql", STORE, "SELECT 1", "-p", "a=1"), 1, "query failed"),
        Case("out-missing-folder", ("sql", STORE, "SELECT 1", "--out", f"{TMP}/no/such/x.csv"), 1, "does not exist"),
        Case("out-is-folder", ("sql", STORE, "SELECT 1", "--out", TMP), 1, "is a folder"),
        Case("out-bad-suffix", ("sql", STORE, "SELECT 1", "--out", f"{TMP}/x.txt"), 1, "expected a file ending in"),
        Case("out-nested-csv", ("sql", STORE, "SELECT trajectory_id, reward_channels FROM trajectories ORDER BY 1 LIMIT 1",
                                "--out", out), 0, "wrote 1 rows", _nested_csv),
        Case("out-nested-md", ("sql", STORE, "SELECT reward_channels FROM trajectories LIMIT 2", "--out", f"{TMP}/r.md"), 0, "wrote 2 rows"),
        Case("out-nested-html", ("sql", STORE, "SELECT reward_channels FROM trajectories LIMIT 2", "--out", f"{TMP}/r.html"), 0, "wrote 2 rows"),
        Case("out-nested-json", ("sql", STORE, "SELECT reward_channels FROM trajectories LIMIT 2", "--out", f"{TMP}/r.json"), 0, "wrote 2 rows"),
        Case("out-nested-parquet", ("sql", STORE, "SELECT * FROM tokens", "--out", f"{TMP}/r.parquet"), 0, "wrote 8 rows"),
        Case("store-missing", ("sql", f"{TMP}/nowhere", "SELECT 1"), 1, "no such store directory"),
        Case("store-is-file", ("sql", f"{TMP}/a-file", "SELECT 1"), 1, "found a file"),
        Case("store-empty-folder", ("sql", f"{TMP}/empty", "SELECT 1"), 1, "not a trajlens store"),
        Case("query-file-missing", ("sql", STORE, f"{TMP}/missing.sql"), 1, "no such query file"),
        Case("query-file-binary", ("sql", STORE, f"{TMP}/binary.sql"), 1, "expected UTF-8 text"),
        Case("saved-query-by-name", ("sql", STORE, "runs_overview"), 0, "tiny"),
        Case("shell-refuses-copy", ("shell", STORE, "-c", "COPY runs TO '{tmp}/x.csv';"), 1, REFUSED),
        Case("shell-reads", ("shell", STORE, "-c", "SELECT count(*) AS n FROM tool_calls;"), 0, "16"),
        Case("shell-missing-store", ("shell", f"{TMP}/nowhere"), 1, "no such store directory"),
    ]
    return cases


def _nested_csv(tmp: Path, store: Path) -> None:
    lines = (tmp / "result.csv").read_text().splitlines()
    assert lines[0] == "trajectory_id,reward_channels"
    cell = pl.read_csv(tmp / "result.csv")["reward_channels"][0]
    assert json.loads(cell) == [{"name": "correct", "value": 0.0}, {"name": "format", "value": 1.0}]


ODD_STORE_NAMES = ("s[1]", "a*b", "s?", "it's", "{a,b}", "$x", "sp ace", "ünï", "semi;colon", "back\\slash")
BAD_RUN_IDS = {
    "empty": "",
    "trailing-newline": "tiny\n",
    "newline-inside": "ti\nny",
    "over-long": "x" * 300,
    "parent": "..",
    "dot": ".",
    "hidden": ".hidden",
    "slash": "a/b",
    "absolute": "/etc",
    "space": "a b",
    "leading-dash": "-x",
    "nul": "a\x00b",
    "quote": "it's",
    "unicode": "ünï",
}


def ingest_cases() -> list[Case]:
    cases = []
    for name, run_id in BAD_RUN_IDS.items():
        cases.append(Case(f"ingest-run-id-{name}", ("ingest", f"{TMP}/src", "--store", STORE, f"--run={run_id}"), 1, "field 'run_id'"))
    cases += [
        Case("ingest-store-is-file", ("ingest", f"{TMP}/src", "--store", f"{TMP}/a-file"), 1, "found a file"),
        Case("ingest-store-is-input", ("ingest", f"{TMP}/src", "--store", f"{TMP}/src"), 1, "inside the input"),
        Case("ingest-store-inside-input", ("ingest", f"{TMP}/src", "--store", f"{TMP}/src/store"), 1, "inside the input"),
        Case("ingest-input-inside-store", ("ingest", f"{STORE}/runs/tiny", "--store", STORE), 1, "inside the store"),
        Case("ingest-missing-source", ("ingest", f"{TMP}/missing", "--store", STORE), 1, "no such file or directory"),
        Case("ingest-run-for-two-sources", ("ingest", f"{TMP}/src", f"{TMP}/other-src", "--store", STORE, "--run", "x"), 1,
             "a single run source"),
        Case("ingest-collision-other-source", ("ingest", f"{TMP}/other-src", "--store", STORE, "--run", "tiny"), 1,
             "already in"),
        Case("ingest-collision-replace", ("ingest", f"{TMP}/other-src", "--store", STORE, "--run", "tiny", "--replace"), 0,
             "ingested 1 run(s)", _counts({"tiny": 8})),
        Case("ingest-same-source-again", ("ingest", f"{BASE}/src", "--store", STORE), 0,
             ": none new; 1 unchanged: tiny", _counts({"tiny": 8})),
        Case("ingest-second-run", ("ingest", f"{TMP}/other-src", "--store", STORE, "--run", "second"), 0, "ingested 1 run(s)",
             _counts({"tiny": 8, "second": 8})),
        Case("ingest-one-bad-of-two", ("ingest", f"{TMP}/runs-with-bad", "--store", STORE), 1, "not a readable Parquet file"),
        Case("ingest-slug-collision", ("ingest", f"{TMP}/a-b.jsonl", "--store", f"{TMP}/slugs"), 1, "already in"),
        Case("ingest-no-sources", ("ingest", "--store", STORE), 2, "Missing argument"),
        Case("ingest-unknown-option", ("ingest", f"{TMP}/src", "--store", STORE, "--bogus"), 2, "No such option"),
    ]
    for name in ODD_STORE_NAMES:
        cases.append(Case(f"ingest-odd-store-{name}", ("ingest", f"{TMP}/src", "--store", f"{TMP}/odd/{name}"), 0,
                          "ingested 1 run(s)", _odd_store(name)))
    return cases


def _counts(expected: dict[str, int]) -> Callable[[Path, Path], None]:
    def check(tmp: Path, store: Path) -> None:
        frame = trajlens.open(store).sql("SELECT run_id, count(*) AS n FROM trajectories GROUP BY 1")
        assert dict(frame.iter_rows()) == expected

    return check


def _odd_store(name: str) -> Callable[[Path, Path], None]:
    def check(tmp: Path, store: Path) -> None:
        odd = trajlens.open(tmp / "odd" / name)
        # A decoy store whose name the odd one matches as a glob must never be read.
        assert odd.sql("SELECT count(*) AS n FROM trajectories")["n"].to_list() == [8]
        assert odd.trajectories.collect().height == 8
        import duckdb

        # DuckDB reads '\\' in a database path as a separator: open a plainly named copy; the
        # views inside name the store's files by absolute path.
        shutil.copyfile(tmp / "odd" / name / "trajlens.duckdb", tmp / "plain.duckdb")
        connection = duckdb.connect(str(tmp / "plain.duckdb"), read_only=True)
        assert connection.execute("SELECT count(*) FROM trajectories").fetchone() == (8,)
        connection.close()

    return check


CASES = sql_cases() + ingest_cases()


def test_corpus_is_large_enough():
    assert len(CASES) >= 100
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A store with the tiny run, and the inputs the cases name; copied for each case."""
    root = tmp_path_factory.mktemp("corpus")
    for name, run_id in (("src", "tiny"), ("other-src", "tiny")):
        run = tiny_run(run_id)
        with RunDirWriter(root / name, run.runs) as writer:
            writer.write_run(run)
    (root / "runs-with-bad").mkdir()
    shutil.copytree(root / "src", root / "runs-with-bad" / "good")
    run = tiny_run("bad")
    with RunDirWriter(root / "runs-with-bad" / "bad", run.runs) as writer:
        writer.write_run(run)
    sorted((root / "runs-with-bad" / "bad" / "tool_calls").rglob("*.parquet"))[0].write_bytes(b"garbage")
    # Two metrics files whose names slug to the same run id, 'a-b'.
    (root / "a b.jsonl").write_text('{"_step": 1, "actor/lr": 1e-6}\n')
    (root / "a-b.jsonl").write_text('{"_step": 1, "actor/lr": 2e-6}\n')
    trajlens.ingest([root / "a b.jsonl"], root / "slugs")
    trajlens.ingest([root / "src"], root / "store")
    (root / "a-file").write_text("not a store")
    (root / "empty").mkdir()
    (root / "binary.sql").write_bytes(b"SELECT \xff\xfe")
    # Decoy stores that a glob over an odd store path would match (s[1] matches s1, a*b matches aXb).
    decoy = tiny_run("decoy")
    decoy_dir = root / "decoy-run"
    with RunDirWriter(decoy_dir, decoy.runs) as writer:
        writer.write_run(decoy)
    (root / "odd").mkdir()
    for name in ("s1", "aXb", "sQ", "a"):
        trajlens.ingest([decoy_dir], root / "odd" / name)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_case_ends_cleanly(case, base, tmp_path, capsys):
    if case.args[0] == "ingest":  # a case that may write gets its own copy of everything
        tmp = tmp_path / "w"
        shutil.copytree(base, tmp, symlinks=True)
        # Copies keep the original's views until opened; open them so both digests compare the same.
        for opened in (tmp / "store", tmp / "slugs"):
            trajlens.open(opened)
    else:  # queries share the inputs: the digests below prove they changed nothing
        tmp = base
    store = tmp / "store"
    args = [a.replace(STORE, str(store)).replace(TMP, str(tmp)).replace(BASE, str(base)) for a in case.args]
    if args[:1] == ["sql"] and args[2].startswith("@"):  # the query as a shared file
        (tmp / "shared.sql").write_text("-- a query someone shared\n" + args[2][1:])
        args[2] = str(tmp / "shared.sql")
    stores = [p for p in (store, tmp / "slugs") if p.exists()]
    before = {p: tree_digest(p) for p in stores}
    status = main(args)
    captured = capsys.readouterr()
    assert status == case.status, captured.err
    assert "Traceback" not in captured.err
    if case.status == 0:
        assert case.message in captured.out
        if case.check is not None:
            case.check(tmp, store)
        assert not (tmp / "leak.csv").exists()
        return
    lines = [line for line in captured.err.splitlines() if line.strip()]
    if case.status == 1:
        assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
        assert case.message in lines[0]
    else:  # a usage error: one line too, saying where the command's help is
        assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0].endswith(" --help)"), captured.err
        assert case.message in lines[0]
    for path, digest in before.items():
        assert tree_digest(path) == digest, f"{path} changed"
    for leaked in ("leak.csv", "trajectories.csv", "exported", "new.duckdb", "x.csv"):
        assert not (tmp / leaked).exists()
    assert not (tmp / "src" / "store").exists()
