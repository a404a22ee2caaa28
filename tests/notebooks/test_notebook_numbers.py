"""The numbers a notebook shows are the ones the command line and the store give for the same fact.

02_advantages' batch-shape cell (GRPO with the batch std against GDPO on multireward, early and
saturated) runs here on its own, on a copy of the sample store; its window means must be those
of the per-step statistics ``trajlens advantages`` prints and saves in ``advantage_batches``,
over the same steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from _tolerance import assert_close_ulp, assert_frame_close_ulp
from cli_run import run_cli
from stores import copy_store

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "02_advantages.ipynb"
LABELS = ("grpo_batch_std", "gdpo_verl")


def _cell(notebook: Path, marker: str) -> str:
    """The source of the one code cell of ``notebook`` that contains ``marker``."""
    cells = ["".join(cell["source"]) for cell in json.loads(notebook.read_text())["cells"] if cell["cell_type"] == "code"]
    found = [source for source in cells if marker in source]
    assert len(found) == 1, f"{notebook.name}: {len(found)} code cells contain {marker!r}"
    return found[0]


def _stored_batches(store_path: Path) -> pl.DataFrame:
    import trajlens

    return (trajlens.open(store_path).table("advantage_batches")
            .filter((pl.col("run_id") == "multireward") & pl.col("estimator").is_in(LABELS))
            .collect().sort("estimator", "step"))


def test_batch_shape_cell_shows_the_cli_advantage_batches(tmp_path, samples_store_path):
    import trajlens

    shown_store = copy_store(samples_store_path, tmp_path / "notebook-store")
    namespace = {"store": trajlens.open(shown_store), "pl": pl}
    exec(_cell(NOTEBOOK, "multireward:saturated"), namespace)  # noqa: S102 - the notebook's own cell
    shape, windows = namespace["shape"], namespace["WINDOWS"]

    cli_store = copy_store(samples_store_path, tmp_path / "cli-store")
    for label in LABELS:
        result = run_cli("advantages", cli_store, "--run", "multireward", "--estimator", label)
        assert result.returncode == 0, result.stderr
    printed = _stored_batches(cli_store)

    # The per-step rows the cell averaged (compare keeps them in advantage_batches) are the CLI's.
    assert_frame_close_ulp(_stored_batches(shown_store).select(printed.columns), printed)

    # Each window mean the cell shows is the mean of the CLI's rows over the window's steps.
    assert set(shape["measure"]) == {f"advantage:{label}:{stat}" for label in LABELS for stat in ("std", "kurtosis")}
    values = {}
    for name, first, last in windows:
        steps = printed.filter(pl.col("step").is_between(first, last))
        for label in LABELS:
            for stat in ("std", "kurtosis"):
                expected = steps.filter(pl.col("estimator") == label)[stat].mean()
                found = shape.filter(pl.col("measure") == f"advantage:{label}:{stat}")[name].item()
                assert_close_ulp(found, expected, msg=f"{label} {stat} over {name}")
                values[label, stat, name] = found

    # What the notebook's text says of them.
    assert values["gdpo_verl", "std", "early"] == pytest.approx(1.0) == values["gdpo_verl", "std", "saturated"]
    assert values["grpo_batch_std", "std", "saturated"] < values["grpo_batch_std", "std", "early"]
    assert values["grpo_batch_std", "kurtosis", "saturated"] > 1.0
    assert values["gdpo_verl", "kurtosis", "saturated"] < values["grpo_batch_std", "kurtosis", "saturated"]
    assert np.isfinite(shape["p_value"].to_numpy()).all()
