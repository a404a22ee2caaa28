"""An ``--out`` reached through a link is judged where the write lands: a link to a store's own
folder or file is refused like the folder itself. A folder output that cannot be made is refused
before the work, with the line a later failure would give.

A folder that refuses files is simulated (``Path.mkdir`` refused in it): permissions do not
stop root, who runs the tests.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from cli_run import run_cli
from outputs import LONGEST_NAME, contents, one_error_line

import trajlens

PERMISSION_DENIED = os.strerror(errno.EACCES)


@pytest.fixture
def store(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    return tmp_path / "store"


def _no_work(monkeypatch) -> None:
    """Make the comparison and the report fail the test if they start."""
    import trajlens.compare
    import trajlens.report

    def no_work(*args, **kwargs):
        raise AssertionError("the work started before --out was checked")

    monkeypatch.setattr(trajlens.compare, "compare", no_work)
    monkeypatch.setattr(trajlens.report, "report_store", no_work)


# -- links into a store ------------------------------------------------------------------------


@pytest.mark.parametrize("link_to, arguments", [
    ("runs/tiny/trajectories", ("sql", "{store}", "SELECT 1 AS x", "--out", "{link}/part.parquet")),
    ("runs/tiny", ("sql", "{store}", "SELECT 1 AS x", "--out", "{link}/ingest.json")),
    ("runs/tiny", ("sample", "{store}", "--run", "tiny", "--stages", "first:1-1,second:2-2", "--out", "{link}/s.md")),
    ("runs/tiny", ("compare", "{store}", "tiny:Q1", "tiny:Q3", "--no-advantages", "--out", "{link}")),
    ("runs/tiny", ("compare", "{store}", "tiny:Q1", "tiny:Q3", "--no-advantages", "--out", "{link}/cmp")),
    ("runs", ("report", "{store}", "--run", "tiny", "--out", "{link}/tiny")),
], ids=["sql-table-folder", "sql-run-file", "sample", "compare-run-folder", "compare-under-run", "report"])
def test_a_link_to_a_store_folder_is_refused_like_the_folder(store, tmp_path, monkeypatch, link_to, arguments):
    link = tmp_path / "link"
    link.symlink_to(store / link_to, target_is_directory=True)
    _no_work(monkeypatch)
    before = contents(store)
    done = run_cli(*(a.format(store=store, link=link) for a in arguments))
    assert done.returncode == 1
    assert f"among the files of the store {store}, which only ingest" in one_error_line(done)
    assert contents(store) == before
    assert run_cli("verify", store).returncode == 0


def test_a_link_to_a_store_file_is_refused(store, tmp_path):
    target = next((store / "runs" / "tiny" / "trajectories").rglob("*.parquet"))
    link = tmp_path / "out.parquet"
    link.symlink_to(target)
    before = contents(store)
    done = run_cli("sql", store, "SELECT 1 AS x", "--out", link)
    assert done.returncode == 1
    assert f"among the files of the store {store}, which only ingest" in one_error_line(done)
    assert contents(store) == before


def test_a_relative_link_into_a_store_is_refused(store, tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "cc").symlink_to(Path("..") / "store" / "runs" / "tiny", target_is_directory=True)
    done = run_cli("sql", store, "SELECT 1 AS x", "--out", Path("cc") / "x.parquet", cwd=tmp_path / "work")
    assert done.returncode == 1
    assert "among the files of the store" in one_error_line(done)
    assert not (store / "runs" / "tiny" / "x.parquet").exists()


def test_a_link_to_a_folder_outside_any_store_is_written_through(store, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    done = run_cli("sql", store, "SELECT 1 AS x", "--out", tmp_path / "link" / "x.csv")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "elsewhere" / "x.csv").read_text() == "x\n1\n"
    done = run_cli("compare", store, "tiny:Q1", "tiny:Q3", "--no-advantages", "--out", tmp_path / "link")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "elsewhere" / "comparison.md").is_file()


# -- folder outputs that cannot be made ----------------------------------------------------------


def _refuse_entries_in(monkeypatch, folder: Path) -> None:
    """``folder`` refuses new folders, as a read-only one does."""
    real = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if Path(os.path.abspath(self)).parent == folder:
            raise PermissionError(errno.EACCES, PERMISSION_DENIED, str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)


COMMANDS = {
    "compare": ("compare", "{store}", "tiny:Q1", "tiny:Q3", "--no-advantages", "--out", "{out}"),
    "report": ("report", "{store}", "--run", "tiny", "--out", "{out}"),
}


def _refused_before_the_work(monkeypatch, store, command: str, out: Path, *, refusing: Path) -> None:
    """``command --out out`` where ``refusing`` takes no new entry: one line, exit 1, nothing printed."""
    _refuse_entries_in(monkeypatch, refusing)
    _no_work(monkeypatch)
    done = run_cli(*(a.format(store=store, out=out) for a in COMMANDS[command]))
    assert done.returncode == 1
    assert one_error_line(done) == f"error: --out {out}: cannot write it ({PERMISSION_DENIED})"
    assert done.stdout == ""


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("where", ["cmp", "missing/cmp"])
def test_a_folder_output_in_a_folder_that_refuses_files_fails_before_the_work(store, tmp_path, monkeypatch,
                                                                               command, where):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    out = read_only / where
    _refused_before_the_work(monkeypatch, store, command, out, refusing=read_only)
    assert list(read_only.iterdir()) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_existing_folder_output_that_refuses_files_fails_before_the_work(store, tmp_path, monkeypatch, command):
    out = tmp_path / "cmp"
    out.mkdir()
    _refused_before_the_work(monkeypatch, store, command, out, refusing=out)
    assert list(out.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_folder_output_whose_partial_name_is_too_long_fails_before_the_work(store, tmp_path, monkeypatch, command):
    out = tmp_path / ("c" * (LONGEST_NAME - 5))
    _no_work(monkeypatch)
    done = run_cli(*(a.format(store=store, out=out) for a in COMMANDS[command]))
    assert done.returncode == 1
    assert one_error_line(done).startswith(f"error: --out {out}: cannot write it (")
    assert done.stdout == "" and not list(tmp_path.glob("*c" * 8 + "*"))


def test_the_check_leaves_nothing_behind_when_the_output_can_be_made(store, tmp_path):
    from trajlens.cli._output import check_folder_output

    check_folder_output(tmp_path / "a" / "b" / "cmp")
    (tmp_path / "existing").mkdir()
    check_folder_output(tmp_path / "existing")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if "store" not in p.parts
                  and "tiny-run" not in p.parts) == ["existing"]
