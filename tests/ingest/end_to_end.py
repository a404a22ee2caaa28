"""A log of one format through every surface: ingest, classify, report and the checks."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from cli_run import run_cli

import trajlens


def through_every_surface(source: Path, tmp_path: Path, *, nothing_to_check: bool = False
                          ) -> tuple[trajlens.Store, pl.DataFrame]:
    """Ingest ``source``, classify, report and check it with the CLI (each must exit as it
    should: the checks pass or fail, or, with ``nothing_to_check``, for a log the shipped checks
    have nothing to read in, say that every one was skipped); the store and the classified
    calls (``tool_name``, ``primary_class``)."""
    store = tmp_path / "store"
    done = run_cli("ingest", source, "--store", store)
    assert done.returncode == 0, done.stderr
    opened = trajlens.open(store)
    (run_id,) = opened.sql("SELECT run_id FROM runs")["run_id"].to_list()
    for args, allowed in ((["classify", store], {0}),
                          (["report", store, "--run", run_id, "--out", tmp_path / "report", "--viewers", "0"], {0}),
                          (["check", store, "--run", run_id], {2} if nothing_to_check else {0, 1})):
        done = run_cli(*args)
        assert done.returncode in allowed, (args[0], done.stdout, done.stderr)
        if nothing_to_check and args[0] == "check":
            assert done.stderr.endswith("every check was skipped (the table says why); nothing was checked\n")
    assert (tmp_path / "report" / run_id / "stage_report.md").is_file()
    opened = trajlens.open(store)
    classes = opened.sql("SELECT c.tool_name, k.primary_class FROM tool_calls c JOIN call_classes k "
                         "USING (run_id, trajectory_id, call_index) ORDER BY c.trajectory_id, c.call_index")
    return opened, classes
