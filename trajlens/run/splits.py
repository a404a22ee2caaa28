"""Which trajectories of a run are measured: its training split, or the split it has.

Every surface that measures a run's behaviour (the report, the stage reports of ``sample``,
``compare``, the checks, attribution and the saved queries) measures the trajectories of the
training split, :data:`TRAIN_SPLIT`. A run that logged validation trajectories only is measured
on the split it has (:func:`measured_split`), and says so. In SQL, the store's
``measured_splits`` view (:data:`trajlens.schema.VIEWS`) names each run's measured split; in Polars, :func:`trajlens.schema.in_measured_split`
keeps its trajectories.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from trajlens.schema import TRAIN_SPLIT as TRAIN_SPLIT


def run_splits(store: Any, run_id: str) -> list[str]:
    """The splits of a stored run's trajectories, training first."""
    from trajlens.run.partitions import scan_run_table

    found = scan_run_table(store, run_id, "trajectories").select("split").unique().collect()["split"]
    return ordered_splits(found.to_list())


def ordered_splits(splits: Iterable[str | None]) -> list[str]:
    """The distinct splits named, training first."""
    return sorted({s for s in splits if s is not None}, key=lambda s: (s != TRAIN_SPLIT, s))


def chosen_split(splits: Sequence[str], split: str = TRAIN_SPLIT) -> str:
    """``split`` when it is among a run's ``splits`` (training first), else the first it has."""
    return split if split in splits or not splits else splits[0]


def requested_split(store: Any, run_id: str, split: str | None) -> str:
    """The split a command measures: ``split`` when the user named one, which the run must have
    (else a one-line :class:`~trajlens.errors.ConfigError` naming the splits it has); without
    one, :func:`measured_split`. A run without trajectories is a ConfigError either way."""
    from trajlens.errors import ConfigError

    splits = run_splits(store, run_id)
    if not splits:
        raise ConfigError([f"run {run_id!r} has no trajectories: nothing to measure (`trajlens check` reads a "
                           "run's training scalars)"])
    if split is None:
        return measured_split(store, run_id)
    if split not in splits:
        raise ConfigError([f"split {split!r}: run {run_id!r} has the splits {', '.join(splits)}"])
    return split


def reported_split(store: Any, run_ids: Sequence[str], split: str | None) -> str:
    """The split a report of several runs asks for: ``split`` when the user named one, which at
    least one of the runs must have (a run without it is reported on the split it has, and says
    so: :func:`measured_split`); without one, training."""
    if split is None:
        return TRAIN_SPLIT
    having = {s for run_id in run_ids for s in run_splits(store, run_id)}
    if split not in having:
        from trajlens.errors import ConfigError

        raise ConfigError([f"split {split!r}: no run reported has it (their splits: {', '.join(sorted(having)) or 'none'})"])
    return split


def measured_split(store: Any, run_id: str, split: str = TRAIN_SPLIT) -> str:
    """``split`` when the stored run has it, else the split it has (a run with validation data
    only is measured on that, as what it is)."""
    return chosen_split(run_splits(store, run_id), split)
