"""A read never makes a store: commands pointed at a folder that is not one refuse in one line
and leave the folder as it was; only ``ingest --store`` creates a store."""

from __future__ import annotations

import pytest
from cli_run import run_cli as trajlens

from trajlens.errors import StoreError
from trajlens.store import open_store
from trajlens.store.handle import is_store

READS = [
    ("sql", "{store}", "SELECT 1"),
    ("classify", "{store}"),
    ("report", "{store}", "--out", "{tmp}/report.html"),
    ("view", "{store}", "--run", "r", "--trajectory", "t", "--out", "{tmp}/view.html"),
    ("sample", "{store}", "--run", "r"),
    ("attribute", "{store}", "--run", "r"),
    ("advantages", "{store}", "--run", "r", "--estimator", "grpo"),
    ("compare", "{store}", "a", "b"),
    ("check", "{store}", "--run", "r"),
]


def _contents(folder):
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.parametrize("args", READS, ids=[args[0] for args in READS])
def test_a_read_of_a_folder_holding_an_empty_runs_folder_refuses_and_creates_nothing(tmp_path, args):
    folder = tmp_path / "folder"
    (folder / "runs").mkdir(parents=True)
    done = trajlens(*(arg.format(store=folder, tmp=tmp_path) for arg in args))
    assert done.returncode == (2 if args[0] == "check" else 1)  # check's status for a run it cannot read
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(folder) in lines[0], done.stderr
    if args[0] != "check":  # check reads run folders too, and names the run it did not find
        assert "not a trajlens store" in lines[0] and "trajlens ingest LOGS --store" in lines[0]
    assert _contents(folder) == ["runs"]
    assert not (tmp_path / "report.html").exists() and not (tmp_path / "view.html").exists()


def test_the_library_refuses_the_same_folder(tmp_path):
    (tmp_path / "runs").mkdir()
    assert not is_store(tmp_path)
    with pytest.raises(StoreError, match=r"not a trajlens store .*`trajlens ingest LOGS --store "):
        open_store(tmp_path)
    assert _contents(tmp_path) == ["runs"]


def test_ingest_makes_a_store_where_asked(tmp_path, tiny_run_dir):
    folder = tmp_path / "folder"
    (folder / "runs").mkdir(parents=True)
    assert trajlens("ingest", tiny_run_dir, "--store", folder).returncode == 0
    assert is_store(folder)
    assert trajlens("sql", folder, "SELECT count(*) FROM runs").returncode == 0


def test_a_store_without_its_database_file_is_still_a_store(tmp_path, tiny_run_dir):
    import trajlens as library

    store = tmp_path / "store"
    library.ingest([tiny_run_dir], store)
    for name in ("trajlens.duckdb", ".generation", ".trajlens-views"):
        (store / name).unlink()
    assert is_store(store)
    assert open_store(store).sql("SELECT count(*) AS n FROM runs")["n"].to_list() == [1]


READS_WITHOUT_CHECK = [args for args in READS if args[0] != "check"]


@pytest.mark.parametrize("args", READS_WITHOUT_CHECK, ids=[args[0] for args in READS_WITHOUT_CHECK])
def test_a_folder_of_synthetic_runs_is_no_store_and_stays_as_it_was(tmp_path, args):
    """``trajlens synth --out runs/a`` writes a run directory, not a store: a read of the folder
    above refuses in one line and writes nothing there, so a second synth run can follow."""
    folder = tmp_path / "folder"
    assert trajlens("synth", "sao-r6", "--steps", "2", "--batch", "2", "--out", folder / "runs" / "a").returncode == 0
    before = _contents(folder)
    done = trajlens(*(arg.format(store=folder, tmp=tmp_path) for arg in args))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "no run written by trajlens ingest in runs/" in lines[0], done.stderr
    assert _contents(folder) == before and not is_store(folder)
    assert trajlens("synth", "sao-r6", "--steps", "2", "--batch", "2", "--out", folder / "runs" / "b").returncode == 0
