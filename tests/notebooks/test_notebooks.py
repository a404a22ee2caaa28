"""Every notebook in notebooks/ runs top to bottom on the shipped sample data."""

from __future__ import annotations

from pathlib import Path

import pytest
from stores import copy_store

pytestmark = pytest.mark.slow

# Something each notebook must print or write, checked beside "it ran".
EXPECTED_OUTPUT = {
    "01_tour": "early ┆ verification:quick_check",
    "02_advantages": "unwhitened GAE, all-negative streaks: ((119, 121),)",
    "03_attribution": "think drift pivot: all-negative batches",
    "04_checks": "resume-lr, logged LR != configured LR at steps 41-159",
}
NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch, samples_store_path):
    # imported here, not at collection: importing nbformat takes seconds on every pytest worker
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("TRAJLENS_OUT", str(tmp_path))
    if path.stem != "01_tour":
        # The tour ingests into an empty store. The others find the sample runs already there, as a
        # reader who ran the tour first does; their own ingest keeps those runs as they are.
        copy_store(samples_store_path, tmp_path / "store")
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", []) if o.output_type == "error"]
    assert not errors
    assert (tmp_path / "store" / "trajlens.duckdb").exists()
    printed = "\n".join(
        str(output.get("text") or output.get("data", {}).get("text/plain", ""))
        for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
    )
    assert EXPECTED_OUTPUT[path.stem] in printed
