"""The old import path of :mod:`trajlens.run.recompute` (notebooks and tests import it here)."""

from trajlens.run.recompute import (  # noqa: F401
    DIAGNOSTIC_COLUMNS, RunFrames, batch_diagnostics, diagnostics_of, labelled_diagnostics, read_run, recompute_run,
    save_advantage_batches,
)
