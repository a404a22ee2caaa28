"""Small generated stores shared by the engine tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cli_run import run_cli


@pytest.fixture(scope="session")
def engine_store(tmp_path_factory) -> Path:
    """A store holding one generated run of 6 steps x 4 trajectories, with token arrays and critic values."""
    root = tmp_path_factory.mktemp("engine")
    made = run_cli("synth", "sao-r6", "--steps", "6", "--batch", "4", "--out", root / "run")
    assert made.returncode == 0, made.stderr
    ingested = run_cli("ingest", root / "run", "--store", root / "store")
    assert ingested.returncode == 0, ingested.stderr
    return root / "store"


@pytest.fixture(scope="session")
def multireward_store(tmp_path_factory) -> Path:
    """A store holding a small generated multireward run (two reward channels): 12 steps x 16 trajectories.

    Read it; copy it to write. Enough steps for gdpo_dynamic's moving averages to carry and matter.
    """
    import trajlens
    from trajlens.synth import generate

    root = tmp_path_factory.mktemp("multireward")
    generate("multireward", root / "run", steps=12, batch=16, tokens_per_trajectory=200, tool_calls_per_trajectory=12)
    trajlens.ingest([root / "run"], root / "store")
    return root / "store"


@pytest.fixture
def store_copy(engine_store, tmp_path) -> Path:
    """A fresh copy of the generated store, to write analysis tables into."""
    target = tmp_path / "store"
    shutil.copytree(engine_store, target)
    return target
