"""A small generated store shared by the engine tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine_helpers import run_cli


@pytest.fixture(scope="session")
def engine_store(tmp_path_factory) -> Path:
    """A store holding one generated run of 6 steps x 4 trajectories, with token arrays and critic values."""
    root = tmp_path_factory.mktemp("engine")
    made = run_cli("synth", "sao-r6", "--steps", "6", "--batch", "4", "--out", str(root / "run"))
    assert made.returncode == 0, made.stderr
    ingested = run_cli("ingest", str(root / "run"), "--store", str(root / "store"))
    assert ingested.returncode == 0, ingested.stderr
    return root / "store"


@pytest.fixture
def store_copy(engine_store, tmp_path) -> Path:
    """A fresh copy of the generated store, to write analysis tables into."""
    target = tmp_path / "store"
    shutil.copytree(engine_store, target)
    return target
