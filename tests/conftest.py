"""Shared fixtures: a tiny hand-made run and paths to the real fixture logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyrun import tiny_run

REPO = Path(__file__).resolve().parents[1]
REAL_FIXTURES = REPO.parent / "shared" / "fixtures" / "real"


@pytest.fixture
def tiny():
    return tiny_run()


@pytest.fixture
def tiny_run_dir(tmp_path, tiny):
    """The tiny run written as a canonical Parquet run directory."""
    from trajlens.store.layout import RunDirWriter

    directory = tmp_path / "tiny-run"
    with RunDirWriter(directory, tiny.runs) as writer:
        writer.write_run(tiny)
    return directory
