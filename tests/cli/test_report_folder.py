"""A report written again into its folder leaves no file of the earlier report behind that it no
longer writes (a run left out, fewer viewer pages, no PNGs), and removes nothing else: not a
user's file, not a file the user changed, not a file reached through a symbolic link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_run import run_cli

import trajlens
from trajlens.cli._written import LIST_NAME, read_list, remove_unwritten


@pytest.fixture
def store(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    trajlens.ingest([tiny_run_dir], tmp_path / "store", run_id="twin")
    return tmp_path / "store"


def _report(store: Path, out: Path, *args: object) -> None:
    done = run_cli("report", store, "--out", out, *args)
    assert done.returncode == 0, done.stderr


def _files(folder: Path) -> set[str]:
    """Every file under ``folder``, through linked folders too."""
    return {(Path(root) / name).relative_to(folder).as_posix()
            for root, _, names in os.walk(folder, followlinks=True) for name in names}


def test_a_report_of_fewer_runs_views_and_formats_leaves_what_it_wrote_and_the_users_files(store, tmp_path):
    out = tmp_path / "report"
    _report(store, out, "--viewers", "2", "--png")
    before = _files(out)
    assert {"twin/stage_report.md", "tiny/class_shares_by_step.png"} <= before
    assert len([name for name in before if name.startswith("tiny/view/")]) == 2
    (out / "notes.txt").write_text("mine")
    (out / "twin" / "stage_report.md").write_text("my notes on twin")
    # twin's viewer pages now lie in a folder of the user's, linked in where the report put them
    mine = tmp_path / "mine"
    (out / "twin" / "view").rename(mine)
    (out / "twin" / "view").symlink_to(mine)
    pages = sorted(p.name for p in mine.iterdir())
    assert pages

    _report(store, out, "--run", "tiny", "--viewers", "1")
    listed = set(json.loads((out / LIST_NAME).read_text())["files"])
    assert listed and not [name for name in listed if name.startswith("twin/") or name.endswith(".png")]
    assert len([name for name in listed if name.startswith("tiny/view/")]) == 1
    # what this report wrote, and the user's: the changed file, the linked folder's pages, their own
    assert _files(out) == listed | {LIST_NAME, "notes.txt", "twin/stage_report.md"} | {f"twin/view/{p}" for p in pages}
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "twin" / "stage_report.md").read_text() == "my notes on twin"
    assert sorted(p.name for p in mine.iterdir()) == pages and (out / "twin" / "view").is_symlink()
    # twin's unchanged files were removed; tiny's folder now holds what a report into a new folder writes
    assert not (out / "twin" / "class_shares_by_step.svg").exists()
    assert not (out / "tiny" / "class_shares_by_step.png").exists()


def test_a_report_replaces_no_file_of_the_users_at_a_path_it_writes(store, tmp_path):
    """Not the user's own stage_report.md or figure in a run's folder, nor a report's file the user
    changed after a report of fewer runs dropped it from the list: refused, the folder as it was."""
    out = tmp_path / "mine"
    (out / "tiny").mkdir(parents=True)
    (out / "tiny" / "stage_report.md").write_text("my notes")
    (out / "tiny" / "distributions.svg").write_text("<svg/>")
    done = run_cli("report", store, "--out", out, "--run", "tiny", "--viewers", "0")
    assert done.returncode == 1
    assert done.stderr.strip() == (f"error: --out {out}: holds tiny/distributions.svg and 1 more, which this would "
                                   "replace and the last report written there did not write; report into a new or "
                                   "empty folder, or move them away")
    assert _files(out) == {"tiny/stage_report.md", "tiny/distributions.svg"}
    assert (out / "tiny" / "stage_report.md").read_text() == "my notes"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".mine")]  # no partial folder left

    report = tmp_path / "report"
    _report(store, report, "--viewers", "0")
    (report / "twin" / "stage_report.md").write_text("my notes on twin")
    _report(store, report, "--run", "tiny", "--viewers", "0")  # twin's changed file is kept, and no longer listed
    done = run_cli("report", store, "--out", report, "--viewers", "0")
    assert done.returncode == 1 and "holds twin/stage_report.md, which this would replace" in done.stderr
    assert (report / "twin" / "stage_report.md").read_text() == "my notes on twin"


def test_a_report_clears_no_file_or_folder_of_the_users_where_it_makes_a_folder_or_a_file(store, tmp_path):
    """A file where the report makes a run's folder was unlinked, a folder where it puts a listed
    file was removed with what it held: both are refused, listed or not."""
    out = tmp_path / "a"
    out.mkdir()
    (out / "tiny").write_text("my notes")
    done = run_cli("report", store, "--out", out, "--run", "tiny", "--viewers", "0")
    assert done.returncode == 1 and f"--out {out}: holds tiny, which this would replace" in done.stderr
    assert (out / "tiny").read_text() == "my notes"

    report = tmp_path / "report"
    _report(store, report, "--run", "tiny", "--viewers", "0")
    (report / "tiny" / "stage_report.md").unlink()
    (report / "tiny" / "stage_report.md").mkdir()
    (report / "tiny" / "stage_report.md" / "notes.txt").write_text("precious")
    done = run_cli("report", store, "--out", report, "--run", "tiny", "--viewers", "0")
    assert done.returncode == 1 and "holds tiny/stage_report.md, which this would replace" in done.stderr
    assert (report / "tiny" / "stage_report.md" / "notes.txt").read_text() == "precious"


def test_a_report_folder_without_its_list_keeps_every_file_a_report_cannot_tell_is_its_own(store, tmp_path):
    """Written before lists were kept, or copied without its hidden list: its README.md and
    index.html say they are a report's and are replaced, and unchanged files are written again;
    a changed file (a stage_report.md of the user's) fails the report, as in a listed folder."""
    report = tmp_path / "report"
    _report(store, report, "--run", "tiny", "--viewers", "0")
    (report / LIST_NAME).unlink()
    (report / "README.md").write_text("# trajlens report\n\nan older report's front page\n")
    _report(store, report, "--run", "tiny", "--viewers", "0")
    assert "an older" not in (report / "README.md").read_text() and (report / LIST_NAME).is_file()

    (report / LIST_NAME).unlink()
    (report / "tiny" / "stage_report.md").write_text("my own notes")
    done = run_cli("report", store, "--out", report, "--run", "tiny", "--viewers", "0")
    assert done.returncode == 1, done.stdout
    assert "holds tiny/stage_report.md, which this would replace" in done.stderr
    assert "keeps no list of what a report wrote there" in done.stderr
    assert (report / "tiny" / "stage_report.md").read_text() == "my own notes"


def test_a_list_naming_paths_outside_the_folder_removes_nothing(tmp_path):
    folder, outside = tmp_path / "report", tmp_path / "outside.txt"
    folder.mkdir()
    outside.write_text("x")
    (folder / "kept.txt").write_text("x")
    digest = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"  # sha256 of "x"
    names = ["../outside.txt", str(outside), "./kept.txt", "kept.txt/", ""]
    (folder / LIST_NAME).write_text(json.dumps({"files": {name: digest for name in names}}))
    assert remove_unwritten(folder, read_list(folder), {}) == []
    assert outside.read_text() == "x" and (folder / "kept.txt").read_text() == "x"
    (folder / LIST_NAME).write_text(json.dumps({"files": {"kept.txt": digest}}))
    assert remove_unwritten(folder, read_list(folder), {}) == [folder / "kept.txt"]


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"files": [1]}', '{"files": {"a": 1}}'])
def test_a_list_that_cannot_be_read_lists_nothing(tmp_path, text):
    (tmp_path / LIST_NAME).write_text(text)
    assert read_list(tmp_path) == {}
