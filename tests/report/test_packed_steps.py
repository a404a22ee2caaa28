"""Tiny steps packed into one file per range of steps (``step=A-B/``), and every reader of step
partitions finding a step's rows in them: the batch reader, ``read_step``, and the engines'
store location."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from built_runs import built_run, degenerate_store

import trajlens
from trajlens.run.location import StoreLocation
from trajlens.run.partitions import partition_files, read_arrow_partitions, read_partitions, scan_run_table
from trajlens.run.stepwise import read_step
from trajlens.store.layout import RunDirWriter, step_dir, step_range

STEP_TABLES = ("trajectories", "tool_calls", "tokens")


def test_step_directory_names_parse_both_ways():
    assert step_dir(12) == "step=000012" and step_dir(12, 12) == "step=000012"
    assert step_dir(12, 40) == "step=000012-000040"
    assert step_range("step=000012") == (12, 12)
    assert step_range("step=000012-000040") == (12, 40)
    for name in ("step=000040-000012", "step=", "step=12-", "step=x", "step=000012\n", "steps=1-2", "step=-1"):
        assert step_range(name) is None, name


def test_a_run_of_many_tiny_steps_is_a_few_files(tmp_path):
    store = degenerate_store(tmp_path / "store", 1_000, chunk=250)
    run = store / "runs" / "degenerate"
    for table in STEP_TABLES:
        directories = sorted(p.name for p in (run / table).iterdir())
        assert len(directories) <= 3, (table, directories)
        ranges = [step_range(name) for name in directories]
        assert ranges[0][0] == 1 and ranges[-1][1] == 1_000
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))  # written in step order, no overlap
    opened = trajlens.open(store)
    assert opened.sql("SELECT count(DISTINCT step) AS n FROM trajectories")["n"][0] == 1_000
    assert opened.sql("SELECT count(*) AS n FROM tool_calls")["n"][0] == 2_000


def _mixed_run(tmp_path, monkeypatch):
    """Steps 1-6 stored with a small ``pack_bytes``: a large step 4 gets its own directory
    between packed small ones, and step 2, written twice (a small part, then a large one),
    has rows in a packed directory and in its own."""
    small, large = built_run("mixed", steps=6, per_step=2, calls=2), built_run("mixed", steps=6, per_step=40, calls=40)
    directory = tmp_path / "mixed"
    with RunDirWriter(directory, small.runs) as writer:
        for name in STEP_TABLES:
            table, big = small.table(name), large.table(name)
            writer.write_step(name, table.filter([s != 4 for s in table.column("step").to_pylist()]))
            writer.write_step(name, big.filter([s == 4 for s in big.column("step").to_pylist()]))
            extra = big.filter([s == 2 for s in big.column("step").to_pylist()])
            again = [f"{t}-again" for t in extra.column("trajectory_id").to_pylist()]
            writer.write_step(name, extra.set_column(extra.schema.get_field_index("trajectory_id"), "trajectory_id",
                                                     [again]))
    monkeypatch.setattr("trajlens.store.writer.PACK_BYTES", 4_000)
    store = tmp_path / "store"
    trajlens.ingest([directory], store)
    return directory, trajlens.open(store)


@pytest.mark.parametrize("table", STEP_TABLES)
def test_every_reader_finds_a_step_in_single_and_packed_partitions(tmp_path, monkeypatch, table):
    directory, store = _mixed_run(tmp_path, monkeypatch)
    names = sorted(p.name for p in (store.path / "runs" / "mixed" / table).iterdir())
    assert step_dir(4) in names and step_dir(2) in names and "step=000001-000002" in names, names
    whole = pl.from_arrow(_all_rows(directory, table)).sort("step", maintain_order=True)
    location = StoreLocation.of(store.path)
    assert location.steps("mixed", table) == sorted(whole["step"].unique().to_list())
    partitions = partition_files(store, "mixed", table)
    assert partitions is not None and partitions.packed
    key = ["step", "trajectory_id"] + (["call_index"] if table == "tool_calls" else [])
    assert_frame_equal(scan_run_table(store, "mixed", table).collect().sort(key), whole.sort(key))
    for steps in ([2], [4], [1, 4, 6], [2, 3], [7]):
        expected = whole.filter(pl.col("step").is_in(steps))
        for listing in (True, partitions):
            got = read_partitions(store, "mixed", table, steps, None, listing)
            assert_frame_equal(got.sort(key), expected.sort(key))
            assert got["step"].is_sorted()
            arrow = pl.from_arrow(read_arrow_partitions(store, "mixed", table, steps, ["trajectory_id"], listing))
            assert sorted(arrow["trajectory_id"]) == sorted(expected["trajectory_id"])
        for step in steps:
            one = sorted(whole.filter(pl.col("step") == step)["trajectory_id"])
            rows = pl.from_arrow(read_step(store, "mixed", table, step, ["trajectory_id", "absent"]))
            assert rows.columns == ["trajectory_id"] and sorted(rows["trajectory_id"]) == one
            located = location.read_step("mixed", table, step, ["trajectory_id"])
            if not one:
                assert located is None
            else:
                assert located.column_names == ["trajectory_id"]
                assert sorted(located.column("trajectory_id").to_pylist()) == one


def _all_rows(directory, table):
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa.concat_tables([pq.read_table(p) for p in sorted((directory / table).rglob("*.parquet"))])


def test_a_report_over_packed_steps_matches_one_over_single_steps(tmp_path):
    """The same run, stored packed and one directory per step, reports the same figures."""
    from trajlens.run.choices import report_advantages
    from trajlens.store.layout import PACK_BYTES

    run = built_run("same", steps=12, per_step=3, calls=4)
    stores = {}
    for name, pack in (("packed", PACK_BYTES), ("single", 0)):
        directory = tmp_path / name / "run"
        with RunDirWriter(directory, run.runs, pack_bytes=pack) as writer:
            writer.write_run(run)
        root = tmp_path / name / "store"
        trajlens.ingest([directory], root)
        stores[name] = trajlens.open(root)
    packed_dirs = [p.name for p in (stores["packed"].path / "runs" / "same" / "tokens").iterdir()]
    assert packed_dirs == ["step=000001-000012"]
    # re-ingesting through the store packs both: write the single-step layout in place to compare
    single = stores["single"].path / "runs" / "same"
    import shutil

    for table in STEP_TABLES:
        shutil.rmtree(single / table)
        with RunDirWriter(tmp_path / "unpacked", run.runs) as writer:
            writer.write_step(table, run.table(table))
        shutil.move(tmp_path / "unpacked" / table, single / table)
        shutil.rmtree(tmp_path / "unpacked")
    assert len(list((single / "tokens").iterdir())) == 12
    results = {name: report_advantages(store, "same") for name, store in stores.items()}
    assert [c.label for c in results["packed"].choices] == [c.label for c in results["single"].choices]
    assert_frame_equal(results["packed"].diagnostics, results["single"].diagnostics)


def test_an_engine_reads_a_run_ingested_again_afresh(tmp_path):
    """The engines keep a few packed files' rows between steps; a run ingested again under the
    same paths is read again, not served from what was kept."""
    store = degenerate_store(tmp_path / "store", 40, chunk=40)
    location = StoreLocation.of(store)
    assert [d.name for d in (store / "runs" / "degenerate" / "tokens").iterdir()] == ["step=000001-000040"]
    before = location.read_step("degenerate", "tokens", 7, ["response_mask"]).column("response_mask").to_pylist()
    assert before == [[True] * 3 + [False] * 2 + [True] * 3 + [False] * 2]
    degenerate_store(store, 40, chunk=40, mask="empty")  # the same source again: replaces the run
    after = location.read_step("degenerate", "tokens", 7, ["response_mask"]).column("response_mask").to_pylist()
    assert after == [[]]
