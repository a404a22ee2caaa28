"""Measures a run was saved with by a version that measured other columns are measured again,
whichever run's file a read of the table sees first; the table still reads as one."""

from __future__ import annotations

import polars as pl

import trajlens
from trajlens.store.integrity import write_checksum
from trajlens.classify.per_trajectory import MEASURES
from trajlens.engine.classify import run_measures
from trajlens.run.measures import saved_measures
from trajlens.report import classify_store


def test_a_run_saved_without_a_newer_measure_is_measured_again(samples_store_copy):
    store = trajlens.open(samples_store_copy)
    classify_store(store, ["multireward", "sao-r6", "sao-r7"])
    folder = samples_store_copy / "derived" / "trajectory_measures"
    for run in ("multireward", "sao-r6"):  # the first file read is old, and a later one is
        path = folder / f"{run}.parquet"
        pl.read_parquet(path).drop("think_empty").write_parquet(path)
        write_checksum(path)  # as the older version that wrote it recorded it
    store = trajlens.open(samples_store_copy)
    table = store.table("trajectory_measures").collect()  # one table over files of both kinds
    assert {"think_empty", "run_id"} <= set(table.columns) and table["run_id"].n_unique() == 3
    assert saved_measures(store, "sao-r6") is None and saved_measures(samples_store_copy, "sao-r6") is None
    assert saved_measures(store, "sao-r7").columns == [m.name for m in MEASURES]
    measured = run_measures(store, "sao-r6")  # classified again, with every measure
    assert measured["think_empty"].null_count() == 0 and measured["think_empty"].sum() > 0
