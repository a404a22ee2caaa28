"""A run with neither trajectories nor training scalars is called what it is on every surface."""

from __future__ import annotations

from cli_run import run_cli

from trajlens.rows import RunBuilder
from trajlens.store.writer import RunDirWriter


def test_an_empty_run_is_named_empty(tmp_path):
    run = RunBuilder("hollow", source_format="test", source="hollow").build()
    with RunDirWriter(tmp_path / "run", run.runs) as writer:
        writer.write_run(run)
    store = tmp_path / "store"
    assert run_cli("ingest", tmp_path / "run", "--store", store).returncode == 0
    done = run_cli("report", store, "--out", tmp_path / "report", "--viewers", "0")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report" / "hollow" / "stage_report.md").read_text()
    assert page.startswith("# hollow\n\nNo trajectories and no training scalars.\n")
    assert "| [hollow](#hollow) | empty (no trajectories, no training scalars) |" in (tmp_path / "report" / "README.md").read_text()
    channels = run_cli("channels", store, "--run", "hollow", "--split", "train")
    assert channels.returncode == 1
    expected = "error: run 'hollow' has no trajectories: nothing to measure (`trajlens check` reads a run's training scalars)\n"
    assert channels.stderr == expected
    for command in (("channels", store, "--run", "hollow"), ("sample", store, "--run", "hollow")):
        done = run_cli(*command)
        assert (done.returncode, done.stderr) == (1, expected)
