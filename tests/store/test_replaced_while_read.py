"""An analysis computed while an ingest replaced its run is not saved (it may mix the two runs), and
one whose part was deleted is named when the store opens, not read as no rows."""

from __future__ import annotations

import polars as pl
import pytest

import trajlens
from trajlens.errors import StoreError
from trajlens.synth.generate import generate


def _analysis() -> pl.DataFrame:
    return pl.DataFrame({"run_id": ["r"], "step": [0], "value": [1.0]})


def test_a_run_replaced_since_the_store_was_opened_gets_no_analysis(tmp_path):
    store = tmp_path / "store"
    generate("sao-r6", tmp_path / "first", steps=4, batch=4)
    generate("sao-r6", tmp_path / "second", steps=6, batch=4, seed=1)
    trajlens.ingest([tmp_path / "first"], store, run_id="r")
    handle = trajlens.open(store)
    trajlens.ingest([tmp_path / "second"], store, run_id="r", replace=True)  # as a second process would
    with pytest.raises(StoreError, match="run 'r' was ingested again while this command read it; nothing was saved"):
        handle.write_derived("advantage_batches", "r", _analysis())
    assert "advantage_batches" not in trajlens.open(store).tables()


def test_an_ingest_that_keeps_the_run_as_it_was_changes_nothing(tmp_path):
    store = tmp_path / "store"
    generate("sao-r6", tmp_path / "first", steps=4, batch=4)
    trajlens.ingest([tmp_path / "first"], store, run_id="r")
    handle = trajlens.open(store)
    trajlens.ingest([tmp_path / "first"], store, run_id="r")  # unchanged: kept as it is
    handle.write_derived("advantage_batches", "r", _analysis())
    assert trajlens.open(store).table("advantage_batches").collect().height == 1


def test_a_deleted_analysis_part_is_named_when_the_store_opens(tmp_path):
    """Not an empty answer: its checksum file says the part was written."""
    store = tmp_path / "store"
    generate("sao-r6", tmp_path / "first", steps=4, batch=4)
    trajlens.ingest([tmp_path / "first"], store, run_id="r")
    trajlens.open(store).write_derived("advantage_batches", "r", _analysis())
    part = store / "derived" / "advantage_batches" / "r.parquet"
    part.unlink()
    with pytest.raises(StoreError, match=f"{part}: cannot be read \\(missing, though its checksum file remains\\); "
                                         "the store is damaged: run `trajlens verify"):
        trajlens.open(store)


def _rewritten(path, column: str) -> None:
    """``path`` written again with every ``column`` value 1, its schema kept (as a script might)."""
    frame = pl.read_parquet(path)
    frame.with_columns(pl.lit(1).cast(frame.schema[column]).alias(column)).write_parquet(path)


def test_a_run_file_rewritten_with_other_values_is_named_when_the_store_opens(tmp_path):
    """Not read silently: before, every reward set to 1 gave a mean reward of 1.0 on every surface."""
    store = tmp_path / "store"
    generate("sao-r6", tmp_path / "first", steps=4, batch=4)
    trajlens.ingest([tmp_path / "first"], store, run_id="r")
    part = sorted((store / "runs" / "r" / "trajectories").rglob("*.parquet"))[0]
    written = part.stat().st_size
    _rewritten(part, "reward")
    with pytest.raises(StoreError, match=f"{part}: changed since it was written: {part.stat().st_size:,} bytes where "
                                         f"{written:,} were written; the store is damaged: run `trajlens verify"):
        trajlens.open(store)


def test_an_analysis_part_rewritten_is_named_when_the_store_opens(tmp_path):
    store = tmp_path / "store"
    generate("sao-r6", tmp_path / "first", steps=4, batch=4)
    trajlens.ingest([tmp_path / "first"], store, run_id="r")
    trajlens.open(store).write_derived("advantage_batches", "r", pl.DataFrame({"run_id": ["r"] * 50, "value": range(50)}))
    part = store / "derived" / "advantage_batches" / "r.parquet"
    _rewritten(part, "value")
    with pytest.raises(StoreError, match=f"{part}: changed since it was written"):
        trajlens.open(store)
