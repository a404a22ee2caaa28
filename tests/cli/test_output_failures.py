"""Outputs that cannot be written: checked before the work, written atomically, and a failure
names the path the user gave (never the partial file) and leaves nothing behind.

Write failures are injected (a full disk at the partial file), since a test cannot count on a
read-only folder: permissions do not stop root.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import run_cli
from outputs import LONGEST_NAME, contents, one_error_line

import trajlens

FULL_DISK = os.strerror(errno.ENOSPC)


@pytest.fixture
def store(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    return tmp_path / "store"


def _full_disk_at(monkeypatch, target: Path) -> None:
    """``Path.write_text`` of ``target`` (or its partial file) writes half, then finds the disk full."""
    real = Path.write_text

    def write_text(self, data, *args, **kwargs):
        if self.name.startswith(target.name):
            real(self, data[: len(data) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, FULL_DISK, str(self))
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)


# -- trajlens report: a folder ------------------------------------------------------------


def test_report_checks_the_compare_sides_before_any_work(store, tmp_path, monkeypatch):
    import trajlens.report

    def no_work(*args, **kwargs):
        raise AssertionError("the report started before its --compare sides were checked")

    monkeypatch.setattr(trajlens.report, "report_store", no_work)
    out = tmp_path / "report"
    done = run_cli("report", store, "--out", out, "--compare", "tiny,nope", "--compare", "tiny:Q9,tiny")
    assert done.returncode == 1
    line = one_error_line(done)
    assert "--compare side 'nope': run 'nope' is not in the store" in line
    assert "--compare side 'tiny:Q9': 'Q9' is neither a stage" in line
    assert not out.exists()


@pytest.mark.parametrize("failure", ["full disk", "interrupt"])
def test_a_failed_report_leaves_no_folder_behind(store, tmp_path, monkeypatch, failure):
    import trajlens.report.html_report

    def fail(store, out, *args, **kwargs):
        if failure == "interrupt":
            raise KeyboardInterrupt
        raise OSError(errno.ENOSPC, FULL_DISK, str(Path(out) / "index.html"))

    monkeypatch.setattr(trajlens.report.html_report, "write_index", fail)
    before = contents(tmp_path)
    out = tmp_path / "new" / "folders" / "report"
    done = run_cli("report", store, "--out", out, "--viewers", "1")
    if failure == "interrupt":
        assert done.returncode == 130 and done.stderr.strip() == "interrupted"
    else:
        assert done.returncode == 1
        assert one_error_line(done) == f"error: --out {out / 'index.html'}: cannot write it ({FULL_DISK})"
    # no OUT/RUN/, no partial folder, not even the parent folders made for it
    assert not (tmp_path / "new").exists()
    assert contents(tmp_path).keys() == before.keys()


def test_a_failed_report_leaves_an_earlier_report_as_it_was(store, tmp_path, monkeypatch):
    import trajlens.report.html_report

    out = tmp_path / "report"
    assert run_cli("report", store, "--out", out, "--viewers", "0").returncode == 0
    (out / "notes.txt").write_text("mine")
    before = contents(out)

    def fail(*args, **kwargs):
        raise OSError(errno.ENOSPC, FULL_DISK, None)

    monkeypatch.setattr(trajlens.report.html_report, "write_index", fail)
    assert run_cli("report", store, "--out", out, "--viewers", "0").returncode == 1
    assert contents(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def test_a_report_into_an_earlier_one_replaces_its_files_and_keeps_others(store, tmp_path):
    out = tmp_path / "report"
    assert run_cli("report", store, "--out", out, "--viewers", "0").returncode == 0
    (out / "notes.txt").write_text("mine")
    earlier = (out / "index.html").stat().st_mtime_ns
    done = run_cli("report", store, "--out", out, "--viewers", "1")
    assert done.returncode == 0, done.stderr
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "index.html").read_text().startswith("<!DOCTYPE html>")
    assert (out / "index.html").stat().st_mtime_ns != earlier
    assert (out / "tiny" / "stage_report.md").is_file() and list((out / "tiny" / "view").glob("*.html"))
    assert oct(out.stat().st_mode & 0o777) == oct(0o777 & ~_umask())
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- files written through the atomic writer ----------------------------------------------------


def test_attribute_checks_its_json_path_before_the_work(store, tmp_path):
    done = run_cli("attribute", store, "--run", "tiny", "--json", tmp_path / "missing" / "v.json")
    assert done.returncode == 1
    assert one_error_line(done) == f"error: --json {tmp_path / 'missing' / 'v.json'}: folder {tmp_path / 'missing'} does not exist"
    assert done.stdout == ""
    assert "call_credit" not in trajlens.open(store).tables()  # nothing was attributed


def test_attribute_json_is_written_atomically(store, tmp_path, monkeypatch):
    target = tmp_path / "verdicts.json"
    _full_disk_at(monkeypatch, target)
    done = run_cli("attribute", store, "--run", "tiny", "--json", target)
    assert done.returncode == 1
    assert one_error_line(done) == f"error: --json {target}: cannot write it ({FULL_DISK})"
    assert not target.exists() and not list(tmp_path.glob("*.partial"))


def _identified():
    fit = SimpleNamespace(candidate=SimpleNamespace(label="verl_grpo"), max_abs_diff=0.0, median_abs_diff=0.0, n=8,
                          error=None)
    return SimpleNamespace(candidates=[fit], matched=True, verdict="verl GRPO", to_dict=lambda: {"matched": True})


def test_advantages_identify_json_is_checked_first_and_written_atomically(store, tmp_path, monkeypatch):
    import trajlens.run.identify

    monkeypatch.setattr(trajlens.run.identify, "identify_run", lambda *args, **kwargs: _identified())
    missing = tmp_path / "missing" / "id.json"
    done = run_cli("advantages", store, "--run", "tiny", "--identify", "--json", missing)
    assert done.returncode == 1 and done.stdout == ""
    assert one_error_line(done) == f"error: --json {missing}: folder {missing.parent} does not exist"

    target = tmp_path / "id.json"
    assert run_cli("advantages", store, "--run", "tiny", "--identify", "--json", target).returncode == 0
    assert json.loads(target.read_text()) == {"matched": True}
    target.unlink()
    _full_disk_at(monkeypatch, target)
    done = run_cli("advantages", store, "--run", "tiny", "--identify", "--json", target)
    assert done.returncode == 1
    assert one_error_line(done) == f"error: --json {target}: cannot write it ({FULL_DISK})"
    assert not target.exists() and not list(tmp_path.glob("*.partial"))


def test_sample_refuses_an_out_it_cannot_make_before_the_work(store, tmp_path):
    out = tmp_path / ("r" * (LONGEST_NAME - len(".md")) + ".md")
    done = run_cli("sample", store, "--run", "tiny", "--stages", "first:1-1,second:2-2", "--n", "2", "--out", out)
    assert done.returncode == 1
    line = one_error_line(done)
    assert line.startswith(f"error: --out {out}: cannot write it (") and done.stdout == ""
    assert "stage_rates" not in trajlens.open(store).tables()  # refused before the work
    assert not list(tmp_path.glob("r*"))


def test_an_out_that_fails_while_written_names_the_path_given(store, tmp_path, monkeypatch):
    out = tmp_path / "runs.parquet"

    def full_disk(self, *args, **kwargs):
        # said without errno or file name: "Reason (os error N): PATH"
        raise OSError(f"No space left on device (os error {errno.ENOSPC}): {out}.partial")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full_disk)
    done = run_cli("sql", store, "SELECT * FROM runs", "--out", out)
    assert done.returncode == 1
    assert one_error_line(done) == f"error: --out {out}: cannot write it ({FULL_DISK})"
    assert not list(tmp_path.glob("runs.parquet*"))


def test_a_result_that_cannot_be_written_names_the_path_given_once(store, tmp_path, monkeypatch):
    out = tmp_path / "runs.parquet"

    def refuse(self, *args, **kwargs):
        raise pa.ArrowInvalid("cannot write this column")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", refuse)
    done = run_cli("sql", store, "SELECT * FROM runs", "--out", out)
    assert done.returncode == 1
    assert one_error_line(done) == f"error: --out {out}: cannot write the result (cannot write this column)"
    assert "parquet.parquet" not in done.stderr and not list(tmp_path.glob("runs.parquet*"))


def test_an_out_whose_partial_name_is_too_long_is_refused_up_front(store, tmp_path):
    for suffix in (".csv", ".json", ".parquet", ".html"):
        out = tmp_path / ("x" * (LONGEST_NAME - len(suffix)) + suffix)
        done = run_cli("sql", store, "SELECT * FROM runs", "--out", out)
        assert done.returncode == 1
        assert one_error_line(done).startswith(f"error: --out {out}: cannot write it (")
        assert not list(tmp_path.glob("x*"))


@pytest.mark.parametrize("arguments", [
    ("sql", "{store}", "SELECT 1 AS a", "--out", "{store}/runs/{run}/runs/part-0.parquet"),
    ("sql", "{store}", "SELECT 1 AS a", "--out", "{store}/.publish.json"),
    ("sample", "{store}", "--run", "{run}", "--out", "{store}/runs/{run}/sample.csv"),
    ("report", "{store}", "--run", "{run}", "--out", "{store}/runs/{run}"),
    ("report", "{store}", "--run", "{run}", "--out", "{store}/runs"),
])
def test_no_output_goes_into_the_store(store, arguments):
    """An output inside the store could replace the store's own files (a table's Parquet, a
    run's ingest record): refused before any work, and the store is as it was."""
    run = trajlens.open(store).runs.collect()["run_id"][0]
    before = contents(store)
    done = run_cli(*(a.format(store=store, run=run) for a in arguments))
    assert done.returncode == 1
    assert f"among the files of the store {store}, which only ingest" in one_error_line(done)
    assert contents(store) == before


def test_generated_runs_may_sit_side_by_side_under_runs(tmp_path):
    """`trajlens synth --out runs/a` then `--out runs/b` (the README's layout): a folder of
    generated runs reads as a store, but ingest never published it, so nothing is refused."""
    for name in ("a", "b"):
        done = run_cli("synth", "sao-r6", "--steps", "2", "--batch", "2", "--calls", "3", "--tokens", "100",
                       "--out", "runs/" + name, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["a", "b"]


def test_a_report_may_be_kept_beside_its_store(store):
    """The store's folder may hold other things: a report next to runs/ writes none of its files."""
    run = trajlens.open(store).runs.collect()["run_id"][0]
    assert run_cli("sample", store, "--run", run, "--out", store / "sample.md").returncode == 0
    assert (store / "sample.md").is_file()
    # A report folder too: its partial folder sits beside runs/ while the report writes the
    # store's analysis tables, and the store's clean-up of its own cut files leaves it alone.
    done = run_cli("report", store, "--run", run, "--out", store / "report", "--viewers", "0")
    assert done.returncode == 0, done.stderr
    assert (store / "report" / "index.html").is_file()
    assert run_cli("verify", store).returncode == 0


def test_a_report_is_not_written_into_the_store_s_own_folder(store):
    """``--out STORE`` would put a folder per run among the store's own files (a run named
    ``trajlens.duckdb`` over its database): refused before any work, the store left as it was."""
    before = sorted(str(p.relative_to(store)) for p in store.rglob("*"))
    for command in (("report", store), ("compare", store, "--no-advantages")):
        run = trajlens.open(store).runs.collect()["run_id"][0]
        arguments = (*command, "--run", run) if command[0] == "report" else (command[0], store, f"{run}:Q1", f"{run}:Q4",
                                                                               *command[2:])
        done = run_cli(*arguments, "--out", store)
        assert done.returncode != 0
        assert one_error_line(done) == f"error: --out {store}: is a store; write into a folder of its own " \
                                        f"(such as {store / 'report'})"
    assert sorted(str(p.relative_to(store)) for p in store.rglob("*")) == before
    assert run_cli("verify", store).returncode == 0


def test_two_outputs_may_not_name_one_file(store, tmp_path):
    run = trajlens.open(store).runs.collect()["run_id"][0]
    done = run_cli("attribute", store, "--run", run, "--out", tmp_path / "a.md", "--json", tmp_path / "a.md")
    assert done.returncode == 1
    assert one_error_line(done).endswith("--json " + str(tmp_path / "a.md") + ": the same file as --out; "
                                          "give each output its own file")
    assert not (tmp_path / "a.md").exists()


def test_compare_checks_its_report_index_before_the_work(store, tmp_path):
    """A --report folder whose index.html is missing or not UTF-8 fails at once: no comparison
    files are left in --out."""
    run = trajlens.open(store).runs.collect()["run_id"][0]
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "index.html").write_bytes(b"\xff\xfe<html>")
    for report in ("report", "missing"):
        done = run_cli("compare", store, run, run, "--out", tmp_path / "cmp", "--report", tmp_path / report)
        assert done.returncode == 1
        assert one_error_line(done).startswith(f"error: --report: {tmp_path / report / 'index.html'}: ")
        assert not (tmp_path / "cmp").exists()


@pytest.mark.parametrize("command", ["sample", "report"])
def test_a_split_the_run_does_not_have_is_refused(store, tmp_path, command):
    run = trajlens.open(store).runs.collect()["run_id"][0]
    arguments = ("--out", tmp_path / "report") if command == "report" else ()
    done = run_cli(command, store, "--run", run, "--split", "nosuch", *arguments)
    assert done.returncode == 1
    assert one_error_line(done) == (f"error: split 'nosuch': run {run!r} has the splits train" if command == "sample"
                                     else "error: split 'nosuch': no run reported has it (their splits: train)")
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("arguments, message", [
    (("advantages", "{store}", "--run", "{run}", "-e", "grpo", "--json", "{tmp}/v.json"),
     "error: --json writes the verdict of --identify; pass --identify, or drop --json"),
    (("advantages", "{store}", "--run", "{run}", "--identify", "-e", "grpo", "--label", "x"),
     "error: --identify tries every estimator and convention itself; drop --estimator, --label"),
    (("view", "{store}", "--run", "{run}", "--trajectory", "t", "--no-credit", "-e", "grpo", "--out", "{tmp}/v.html"),
     "error: --estimator picks the credit colours; drop it, or drop --no-credit"),
])
def test_options_that_would_be_ignored_are_refused(store, tmp_path, arguments, message):
    run = trajlens.open(store).runs.collect()["run_id"][0]
    done = run_cli(*(a.format(store=store, run=run, tmp=tmp_path) for a in arguments))
    assert done.returncode == 1
    assert one_error_line(done) == message
    assert not any(tmp_path.glob("v.*"))


def test_a_folder_on_another_filesystem_is_filled_by_copying(tmp_path, monkeypatch):
    """--out a mount point: the partial sibling lies on the parent's filesystem, so its files
    cannot be renamed into the folder; they are copied there instead."""
    from trajlens.cli import _output

    target = tmp_path / "mounted"
    (target / "old").mkdir(parents=True)
    real = Path.replace

    def replace(self, destination):
        if Path(destination).is_relative_to(target):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        return real(self, destination)

    monkeypatch.setattr(Path, "replace", replace)
    with _output.folder_output(target) as partial:
        (partial / "index.html").write_text("page")
        (partial / "run").mkdir()
        (partial / "run" / "a.md").write_text("a")
    assert (target / "index.html").read_text() == "page" and (target / "run" / "a.md").read_text() == "a"
    assert (target / "old").is_dir() and not list(tmp_path.glob(".mounted.*"))


def test_attribute_takes_its_json_back_when_its_out_cannot_be_written(store, tmp_path, monkeypatch):
    """``--json`` is written first: when ``--out`` then finds the disk full, the command failed,
    and the ``--json`` file it made is taken back with it."""
    run = trajlens.open(store).runs.collect()["run_id"][0]
    verdicts, section = tmp_path / "verdicts.json", tmp_path / "section.md"
    _full_disk_at(monkeypatch, section)
    done = run_cli("attribute", store, "--run", run, "--k", "1", "--json", verdicts, "--out", section)
    assert done.returncode == 1
    assert one_error_line(done) == f"error: --out {section}: cannot write it ({FULL_DISK})"
    assert not verdicts.exists() and not section.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(("verdicts", "section"))] == []


@pytest.mark.parametrize("raised", [
    OSError("No space left on device (os error 28)"),  # Polars: the number in its text, no file
    OSError("Error writing bytes to file. Detail: [errno 28] No space left on device"),  # pyarrow
    OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)),
])
def test_a_folder_writer_that_fills_the_disk_without_naming_a_file_names_the_folder(tmp_path, raised):
    from trajlens.cli._output import folder_output
    from trajlens.errors import ConfigError

    out = tmp_path / "a" / "report"
    with pytest.raises(ConfigError) as caught, folder_output(out) as partial:
        (partial / "index.html").write_text("<html>")
        raise raised
    reason = os.strerror(errno.EDQUOT) if raised.errno else FULL_DISK
    assert str(caught.value) == f"--out {out}: cannot write it ({reason})"
    assert not (tmp_path / "a").exists()


def test_a_read_error_inside_a_folder_writer_is_not_blamed_on_the_folder(tmp_path):
    """Only a write fills a disk: another error naming no file (a store that cannot be read) is
    not said to be the output's."""
    from trajlens.cli._output import folder_output

    with pytest.raises(OSError, match="Input/output error"), folder_output(tmp_path / "report"):
        raise OSError("Input/output error (os error 5)")
    assert not (tmp_path / "report").exists()


def test_synth_on_a_full_disk_names_its_out_and_leaves_nothing(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    def full(self, *args, **kwargs):
        raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    out = tmp_path / "runs" / "r6"
    done = run_cli("synth", "sao-r6", "--steps", "4", "--batch", "4", "--out", out)
    assert done.returncode == 1
    assert one_error_line(done) == f"error: --out {out}: cannot write it ({FULL_DISK})"
    assert list(tmp_path.iterdir()) == []
