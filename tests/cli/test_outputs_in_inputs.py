"""An output never goes over or into what a store's runs were ingested from (input files are
never modified), whichever command writes it; and a report never replaces a README.md or an
index.html that no report wrote."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from cli_run import run_cli
from outputs import one_error_line

import trajlens

REPO = Path(__file__).resolve().parents[2]


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> tuple[Path, Path]:
    """(a copy of a sample run folder, a store ingested from it)."""
    base = tmp_path_factory.mktemp("inputs")
    source = base / "logs" / "r7"
    shutil.copytree(REPO / "sample_data" / "sao-r7", source)
    trajlens.ingest([source], base / "store")
    return source, base / "store"


@pytest.mark.parametrize("command", [
    ("report", "{store}", "--viewers", "0", "--out", "{out}"),
    ("compare", "{store}", "sao-r7:Q1", "sao-r7:Q4", "--no-advantages", "--out", "{out}"),
    ("sql", "{store}", "SELECT 1 AS x", "--out", "{out}/x.csv"),
    ("sample", "{store}", "--run", "sao-r7", "--out", "{out}/sample.md"),
    ("view", "{store}", "--run", "sao-r7", "--trajectory", "t", "--out", "{out}/t.html"),
    ("attribute", "{store}", "--run", "sao-r7", "--json", "{out}/a.json"),
    ("advantages", "{store}", "--run", "sao-r7", "--identify", "--json", "{out}/v.json"),
], ids=lambda c: c[0])
@pytest.mark.parametrize("inside", [False, True], ids=["the run folder", "a folder inside it"])
def test_an_output_in_an_input_is_refused_before_any_work(ingested, command, inside):
    source, store = ingested
    out = source / "trajectories" if inside else source
    before = _digest(source.parent)
    done = run_cli(*(a.format(store=store, out=out) for a in command))
    assert done.returncode == 1
    assert one_error_line(done).endswith(f": would write over the input {source}; write it elsewhere")
    assert _digest(source.parent) == before


def test_a_report_into_the_folder_above_a_run_s_logs_named_as_the_run_is_refused(tmp_path):
    """A report writes each run's files into OUT/<run id>/: with OUT the folder of the logs, that
    is the run's own log folder when it is named as the run (the default run id of a folder)."""
    source = tmp_path / "logs" / "sao-r7"
    shutil.copytree(REPO / "sample_data" / "sao-r7", source)
    trajlens.ingest([source], tmp_path / "store")
    before = _digest(source.parent)
    done = run_cli("report", tmp_path / "store", "--viewers", "0", "--out", source.parent)
    assert done.returncode == 1
    assert one_error_line(done) == (f"error: --out {source.parent}: {source} would be written into the input "
                                    f"{source}; write it elsewhere")
    assert _digest(source.parent) == before


@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_checks_of_a_stored_run_are_not_written_into_its_input(ingested, flag):
    """check exits 2 on a usage error, as on every other problem with what it was asked."""
    source, store = ingested
    before = _digest(source.parent)
    done = run_cli("check", store, "--run", "sao-r7", flag, source / "checks.out")
    assert done.returncode == 2
    assert one_error_line(done) == f"error: {flag} {source / 'checks.out'}: would write over the input {source}; write it elsewhere"
    assert _digest(source.parent) == before


def test_an_output_beside_an_input_is_written(ingested):
    source, store = ingested
    done = run_cli("sql", store, "SELECT 1 AS x", "--out", source.parent / "x.csv")
    assert done.returncode == 0, done.stderr
    assert (source.parent / "x.csv").read_text() == "x\n1\n"


def test_a_report_replaces_its_own_readme_and_no_other(tmp_path, ingested):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("# my project\n")
    arguments = ("report", ingested[1], "--viewers", "0", "--out")
    done = run_cli(*arguments, folder)
    assert done.returncode == 1
    assert one_error_line(done) == (f"error: --out {folder}: holds README.md, which no trajlens report wrote; report "
                                    "into a new or empty folder, or into one a report was written into")
    assert [p.name for p in folder.iterdir()] == ["README.md"]
    (folder / "README.md").unlink()
    (folder / "index.html").write_text("<html>my page</html>")
    done = run_cli(*arguments, folder)
    assert done.returncode == 1 and "holds index.html, which no trajlens report wrote" in one_error_line(done)
    # a report written again into its own folder replaces its own files
    report = tmp_path / "report"
    assert run_cli(*arguments, report).returncode == 0
    done = run_cli(*arguments, report)
    assert done.returncode == 0, done.stderr
    assert (report / "README.md").read_text().startswith("# trajlens report")
