"""Helpers shared by the generator tests: sizes, table reading, the shipped samples, small runs.

Not a conftest: a second ``conftest`` module would shadow the top-level one for tests that
import it by name.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_data"

SMALL = {"tokens_per_trajectory": 200, "tool_calls_per_trajectory": 12}
"""Sizes that keep a generated test run to a second or two."""


def tables(run_dir: Path) -> dict[str, pl.DataFrame]:
    """The five tables of a run directory, read the way trajlens reads a Parquet run."""
    from trajlens.ingest.parquet import scan_run

    return {name: frame.collect() for name, frame in scan_run(run_dir).items()}


def sample(name: str) -> Path:
    """A shipped sample run (regenerate with ``python -m trajlens.synth.regenerate sample_data``)."""
    path = SAMPLES / name
    if not (path / "truth.json").is_file():
        pytest.fail(f"{path} is missing: run `python -m trajlens.synth.regenerate sample_data`")
    return path


@pytest.fixture(scope="session")
def small_runs(tmp_path_factory) -> dict[str, Path]:
    """Every scenario, generated small (few steps where the scenario allows)."""
    from trajlens.synth import generate

    root = tmp_path_factory.mktemp("synth")
    runs = {}
    for name, kwargs in {
        "sao-r6": {"steps": 4, "batch": 4, **SMALL},
        "sao-r7": {"steps": 4, "batch": 4, **SMALL},
        "grpo-leg": {"steps": 3, "batch": 16, **SMALL},
        "multireward": {"steps": 3, "batch": 16, **SMALL},
        "resume-lr": {},
    }.items():
        runs[name] = generate(name, root / name, **kwargs).directory
    return runs


def assert_same_as_shipped(fresh: Path, shipped: Path) -> None:
    """A freshly generated Parquet part holds the shipped part's rows and columns; columns the
    schema gained after the samples were written are null in it."""
    made, kept = pl.read_parquet(fresh), pl.read_parquet(shipped)
    added = [c for c in made.columns if c not in kept.columns]
    assert all(made[c].null_count() == made.height for c in added), f"{fresh}: {added} not null"
    assert made.select(kept.columns).equals(kept), f"{fresh} differs from {shipped}"
