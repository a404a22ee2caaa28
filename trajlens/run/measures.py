"""The trajectory measures a store saved for a run, read back: what ``trajlens classify`` (or
the report) wrote, which the checks, the stage reports and classification itself take rather
than classifying the calls again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from trajlens.classify.per_trajectory import current_measures, stored_measures
from trajlens.run.location import StoreLocation


def saved_measures(store: Any, run_id: str) -> pl.DataFrame | None:
    """The run's ``trajectory_measures`` as ``trajlens classify`` (or the report) saved them in
    ``store`` (an open store, as it sees them inside a transaction, or a local store's folder, read
    without opening it); None when they were not saved. Ingesting a changed run drops them, so
    saved measures are those of the run as stored. Measures saved with other columns than
    :data:`~trajlens.classify.per_trajectory.MEASURES` (by another version) count as not saved."""
    if not isinstance(store, (str, Path)):
        return stored_measures(store, [run_id])[run_id]
    table = StoreLocation.of(store).read_derived("trajectory_measures", run_id)
    return None if table is None else current_measures(pl.DataFrame(table))
