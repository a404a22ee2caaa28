"""``trajlens check`` keeps exit 1 for "a check fired": an output it cannot write and a watch
that checked nothing are errors (exit 2, as documented for usage and input errors), never a
check result and never a pass."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from cli_run import run_cli

import trajlens

EXIT_FAILED, EXIT_ERROR = 1, 2


@pytest.fixture
def store(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    return tmp_path / "store"


def test_the_tiny_run_fails_a_check(store):
    assert run_cli("check", store, "--run", "tiny").returncode == EXIT_FAILED


@pytest.mark.parametrize("flag, name", [("--json", "checks.json"), ("--junit", "checks.xml")])
def test_an_output_that_fails_while_written_is_exit_2_naming_it(store, tmp_path, monkeypatch, flag, name):
    target = tmp_path / name
    real = Path.write_text

    def write_text(self, data, *args, **kwargs):
        if self.name.startswith(name):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    done = run_cli("check", store, "--run", "tiny", flag, target)
    assert done.returncode == EXIT_ERROR
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: {flag} {target}: cannot write it ({os.strerror(errno.ENOSPC)})"]
    assert not list(tmp_path.glob(name + "*"))


def test_an_output_that_cannot_be_made_is_exit_2_before_the_checks(store, tmp_path):
    target = tmp_path / ("c" * (255 - len(".json")) + ".json")
    done = run_cli("check", store, "--run", "tiny", "--json", target)
    assert done.returncode == EXIT_ERROR and done.stdout == ""
    assert done.stderr.strip().startswith(f"error: --json {target}: cannot write it (")
    assert ".partial" not in done.stderr


def test_a_watch_that_sees_no_complete_step_is_not_a_pass(tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    json_out = tmp_path / "checks.json"
    done = run_cli("check", live, "--watch", "--timeout", "0.2", "--poll", "0.05", "--json", json_out)
    assert done.returncode == EXIT_ERROR
    assert done.stdout.strip() == "stopped (timeout): no complete step seen"
    assert done.stderr.strip().splitlines() == [
        f"error: {live}: the watch ended (timeout) before it checked a step; nothing was checked"]
    assert not json_out.exists()
