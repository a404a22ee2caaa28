from __future__ import annotations

import hashlib
import re
import shutil

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import trajlens
from trajlens.errors import InputError, SchemaError, StoreError
from trajlens.store.handle import QueryError


def _tree_digest(root):
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix == ".parquet"):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def test_round_trip_keeps_every_row(tmp_path, tiny, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    for name in ("runs", "trajectories", "tool_calls", "tokens", "step_metrics"):
        expected = pl.from_arrow(tiny.table(name)).sort(pl.all())
        got = store.table(name).collect().sort(pl.all())
        assert got.equals(expected), name


def test_sql_binds_parameters_and_lazy_frames_agree(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    by_sql = store.sql("SELECT count(*) AS n FROM trajectories WHERE step = $step AND reward > $r", {"step": 2, "r": 0.5})
    assert by_sql["n"].to_list() == [2]
    lazy = store.trajectories.filter((pl.col("step") == 2) & (pl.col("reward") > 0.5)).collect()
    assert lazy.height == 2
    hostile = store.sql("SELECT count(*) AS n FROM runs WHERE run_id = $id", {"id": "x' OR '1'='1"})
    assert hostile["n"].to_list() == [0]


def test_database_file_has_views(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    connection = duckdb.connect(str(tmp_path / "store" / "trajlens.duckdb"), read_only=True)
    assert connection.execute("SELECT count(*) FROM tool_calls").fetchone() == (16,)
    assert connection.execute("SELECT count(*) FROM step_metrics").fetchone() == (2,)


def test_ingesting_twice_changes_nothing(tmp_path, tiny_run_dir):
    store = tmp_path / "store"
    trajlens.ingest([tiny_run_dir], store)
    first = _tree_digest(store)
    trajlens.ingest([tiny_run_dir], store)
    assert _tree_digest(store) == first
    assert trajlens.open(store).sql("SELECT count(*) AS n FROM trajectories")["n"].to_list() == [8]


@pytest.mark.parametrize("inside", ["runs", "runs/other", "derived/x"])
def test_a_store_among_another_stores_files_is_refused_before_anything_is_written(tmp_path, tiny_run_dir, inside):
    """A store in ``runs/`` would read, to the store around it, as a run without its records."""
    outer = tmp_path / "store"
    trajlens.ingest([tiny_run_dir], outer)
    before = sorted(str(p.relative_to(outer)) for p in outer.rglob("*"))
    with pytest.raises(StoreError, match=f"^store {outer / inside}: among the files of the store {outer}, which only "
                                         "ingest and the analyses write; write it elsewhere$"):
        trajlens.ingest([tiny_run_dir], outer / inside)
    assert sorted(str(p.relative_to(outer)) for p in outer.rglob("*")) == before


def test_input_files_are_not_modified(tmp_path, tiny_run_dir):
    before = _tree_digest(tiny_run_dir)
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert _tree_digest(tiny_run_dir) == before


def _first_file(run_dir, table):
    return sorted((run_dir / table).rglob("*.parquet"))[0]


@pytest.mark.parametrize(
    "damage, message",
    [
        ("truncate", "not a readable Parquet file"),
        ("drop_column", "field 'reward'"),
        ("extra_column", "field 'surprise'"),
        ("mistype", "field 'num_turns'"),
        ("nan_reward", "field 'reward': expected a finite number, found nan"),
        # finite, but infinite once the estimators cast it to float32, as the trainers compute
        ("huge_reward", re.escape("field 'reward': expected a number of at most 3.403e+38 in size (float32, in which "
                                  "the estimators compute), found -1e+300")),
        ("duplicate_id", "field 'trajectory_id'"),
    ],
)
def test_bad_parquet_leaves_store_untouched(tmp_path, tiny_run_dir, damage, message):
    path = _first_file(tiny_run_dir, "trajectories")
    table = pq.read_table(path)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:50])
    elif damage == "drop_column":
        pq.write_table(table.drop_columns(["reward"]), path)
    elif damage == "extra_column":
        pq.write_table(table.append_column("surprise", pa.array([1] * table.num_rows)), path)
    elif damage == "mistype":
        pq.write_table(table.set_column(table.schema.get_field_index("num_turns"), "num_turns",
                                        pa.array(["many"] * table.num_rows)), path)
    elif damage in ("nan_reward", "huge_reward"):
        rewards = [float("nan") if damage == "nan_reward" else -1e300] + table.column("reward").to_pylist()[1:]
        pq.write_table(table.set_column(table.schema.get_field_index("reward"), "reward", pa.array(rewards)), path)
    elif damage == "duplicate_id":
        shutil.copy(path, path.with_name("part-1.parquet"))
    store = tmp_path / "store"
    with pytest.raises(InputError, match=message) as caught:
        trajlens.ingest([tiny_run_dir], store)
    assert str(path.parent) in str(caught.value) or str(tiny_run_dir) in str(caught.value)
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())
    assert not (store / ".staging").exists()


def test_token_arrays_of_different_lengths_are_refused(tmp_path, tiny_run_dir):
    path = _first_file(tiny_run_dir, "tokens")
    table = pq.read_table(path)
    values = table.column("values").to_pylist()
    values[0] = values[0][:-1]
    pq.write_table(table.set_column(table.schema.get_field_index("values"), "values",
                                    pa.array(values, pa.list_(pa.float32()))), path)
    with pytest.raises(InputError, match="field 'values': expected 7 values"):
        trajlens.ingest([tiny_run_dir], tmp_path / "store")


def test_a_call_filed_under_another_step_than_its_trajectory_is_refused(tmp_path, tiny_run_dir):
    """A call in step 1's folder naming a trajectory of step 2: per-step measures would count it
    at step 1."""
    later = pq.read_table(sorted((tiny_run_dir / "trajectories").rglob("*.parquet"))[-1])
    trajectory, step = later.column("trajectory_id")[0].as_py(), later.column("step")[0].as_py()
    path = _first_file(tiny_run_dir, "tool_calls")
    calls = pq.read_table(path)
    assert calls.column("step")[0].as_py() != step
    for name, value in (("trajectory_id", trajectory), ("call_index", 999)):
        column = calls.column(name).to_pylist()
        calls = calls.set_column(calls.schema.get_field_index(name), name,
                                 pa.array([value, *column[1:]], calls.schema.field(name).type))
    pq.write_table(calls, path)
    with pytest.raises(InputError, match=re.escape(
            f"record tool_calls {trajectory}: field 'step': expected {step} (the step of its trajectory), found "
            f"{calls.column('step')[0].as_py()}")) as caught:
        trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert caught.value.file == str(path)  # the file that holds the call, not the run's folder
    assert not (tmp_path / "store" / "runs").exists() or not any((tmp_path / "store" / "runs").iterdir())


@pytest.mark.parametrize("table, damage, message", [
    ("tool_calls", "copy", r"record tool_calls \S+: field 'call_index': expected unique keys, found a duplicate"),
    ("tokens", "copy", r"record tokens \S+: field 'trajectory_id': expected unique keys, found a duplicate"),
    ("step_metrics", "copy", r"record step_metrics step \d+: field '\S+': expected one value per step and metric"),
    ("tool_calls", "stray", r"record tool_calls nowhere: field 'trajectory_id': expected an id present in trajectories"),
    ("tokens", "stray", r"record tokens nowhere: field 'trajectory_id': expected an id present in trajectories"),
])
def test_whole_run_key_checks_refuse_what_no_single_file_shows(tmp_path, tiny_run_dir, table, damage, message):
    """Each file is valid on its own; the run is not (writer.check_run_dir)."""
    path = _first_file(tiny_run_dir, table)
    if damage == "copy":
        shutil.copy(path, path.with_name("part-9.parquet"))
    else:
        rows = pq.read_table(path)
        ids = rows.column("trajectory_id").to_pylist()
        pq.write_table(rows.set_column(rows.schema.get_field_index("trajectory_id"), "trajectory_id",
                                       pa.array(["nowhere", *ids[1:]], rows.schema.field("trajectory_id").type)), path)
    with pytest.raises(InputError, match=message) as caught:
        trajlens.ingest([tiny_run_dir], tmp_path / "store")
    # the file that holds the row: the copy of a duplicate, the stray's own file
    assert caught.value.file == str(path.with_name("part-9.parquet") if damage == "copy" else path)
    assert not (tmp_path / "store" / "runs").exists() or not any((tmp_path / "store" / "runs").iterdir())


def test_failed_reingest_keeps_the_previous_run(tmp_path, tiny_run_dir):
    store = tmp_path / "store"
    trajlens.ingest([tiny_run_dir], store)
    path = _first_file(tiny_run_dir, "tool_calls")
    path.write_bytes(b"garbage")
    with pytest.raises(InputError):
        trajlens.ingest([tiny_run_dir], store)
    assert trajlens.open(store).sql("SELECT count(*) AS n FROM tool_calls")["n"].to_list() == [16]


def test_missing_source_and_missing_store(tmp_path):
    with pytest.raises(InputError, match="no such file or directory"):
        trajlens.ingest([tmp_path / "nope"], tmp_path / "store")
    with pytest.raises(StoreError, match="no such store"):
        trajlens.open(tmp_path / "nope")


def test_bad_sql_is_a_one_line_error(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    with pytest.raises(QueryError) as caught:
        trajlens.open(tmp_path / "store").sql("SELECT nope FROM trajectories")
    assert "\n" not in str(caught.value)


def test_schema_error_is_an_input_error():
    assert issubclass(SchemaError, InputError) and issubclass(SchemaError, ValueError)


def test_lenient_ingest_skips_a_bad_file_and_reports_it(tmp_path, tiny_run_dir):
    victim = sorted((tiny_run_dir / "tool_calls").rglob("*.parquet"))[0]
    victim.write_bytes(b"not parquet")
    result = trajlens.ingest([tiny_run_dir], tmp_path / "store", strict=False)
    assert len(result.problems) == 1
    problem = result.problems[0]
    assert problem.file == str(victim) and "not a readable Parquet file" in problem.message
    store = trajlens.open(tmp_path / "store")
    assert store.sql("SELECT count(*) AS n FROM tool_calls")["n"].to_list() == [8]
    assert store.sql("SELECT count(*) AS n FROM trajectories")["n"].to_list() == [8]


def test_parquet_run_can_be_stored_under_another_id(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store", run_id="renamed")
    store = trajlens.open(tmp_path / "store")
    assert store.run_ids() == ["renamed"]
    ids = store.sql("SELECT DISTINCT run_id FROM tool_calls UNION SELECT DISTINCT run_id FROM tokens")
    assert ids["run_id"].to_list() == ["renamed"]


def test_metrics_file_joins_the_single_parquet_run(tmp_path, tiny_run_dir):
    metrics = tmp_path / "export.jsonl"
    metrics.write_text('{"_step": 3, "actor/lr": 1e-6}\n{"_step": 4, "actor/lr": 2e-6}\n')
    result = trajlens.ingest([tiny_run_dir, metrics], tmp_path / "store")
    assert result.run_ids == ["tiny"]
    rows = trajlens.open(tmp_path / "store").sql("SELECT step, name FROM step_metrics ORDER BY step, name")
    assert rows.rows() == [(1, "critic/vf_explained_var"), (2, "critic/vf_explained_var"), (3, "actor/lr"), (4, "actor/lr")]


def test_metrics_that_repeat_the_runs_own_scalars_are_refused(tmp_path, tiny_run_dir):
    metrics = tmp_path / "export.jsonl"
    metrics.write_text('{"_step": 1, "critic/vf_explained_var": 0.5}\n')
    with pytest.raises(InputError, match=f"^{metrics}: record step 1: field 'critic/vf_explained_var': expected a "
                                         "metric the run tiny does not already log at that step"):
        trajlens.ingest([tiny_run_dir, metrics], tmp_path / "store")


def test_scan_run_reads_lazily(tiny_run_dir):
    from trajlens.ingest.parquet import scan_run

    tables = scan_run(tiny_run_dir)
    assert all(isinstance(frame, pl.LazyFrame) for frame in tables.values())
    assert tables["tool_calls"].filter(pl.col("tool_name") == "think").select(pl.len()).collect().item() == 8


def test_failed_ingest_into_a_new_store_leaves_no_folder(tmp_path, tiny_run_dir):
    sorted((tiny_run_dir / "tokens").rglob("*.parquet"))[0].write_bytes(b"broken")
    with pytest.raises(InputError):
        trajlens.ingest([tiny_run_dir], tmp_path / "new-store")
    assert not (tmp_path / "new-store").exists()


def test_reingest_keeps_analyses_when_unchanged_and_drops_them_when_changed(tmp_path, tiny_run_dir):
    from trajlens.report import classify_store

    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    classify_store(trajlens.open(tmp_path / "store"))
    again = trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert again.notes == ["run tiny is unchanged: kept as it was, with its analyses"]
    store = trajlens.open(tmp_path / "store")
    assert store.sql("SELECT count(*) AS n FROM call_classes")["n"].to_list() == [16]

    path = _first_file(tiny_run_dir, "trajectories")
    table = pq.read_table(path)
    pq.write_table(table.slice(0, table.num_rows - 1), path)
    extra_calls = [p for p in (tiny_run_dir / "tool_calls").rglob("*.parquet")]
    for call_file in extra_calls:  # keep tool calls consistent with the trajectories left
        calls = pq.read_table(call_file)
        kept = set(pq.read_table(path).column("trajectory_id").to_pylist()) | {
            t for f in (tiny_run_dir / "trajectories").rglob("*.parquet") if f != path
            for t in pq.read_table(f).column("trajectory_id").to_pylist()}
        pq.write_table(calls.filter(pa.array([t in kept for t in calls.column("trajectory_id").to_pylist()])), call_file)
    for token_file in (tiny_run_dir / "tokens").rglob("*.parquet"):
        tokens = pq.read_table(token_file)
        pq.write_table(tokens.filter(pa.array([t in kept for t in tokens.column("trajectory_id").to_pylist()])), token_file)
    changed = trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert changed.notes == ["run tiny changed: dropped its analyses call_classes, trajectory_measures, unknown_tools; "
                             f"run `trajlens classify {tmp_path / 'store'}` again"]
    store = trajlens.open(tmp_path / "store")
    assert "call_classes" not in store.tables()
    assert store.sql("SELECT count(*) AS n FROM trajectories")["n"].to_list() == [7]
    with pytest.raises(QueryError, match="table call_classes does not exist yet .*`trajlens classify STORE` creates it"):
        store.sql("SELECT * FROM call_classes")
    for table in ("call_credit", "attribution_drift"):
        with pytest.raises(QueryError, match=f"table {table} does not exist yet .*`trajlens attribute STORE --run RUN`"):
            store.sql(f"SELECT * FROM {table}")
    with pytest.raises(QueryError, match="table unknown_tools does not exist yet .*`trajlens classify STORE` creates it"):
        store.sql("SELECT * FROM unknown_tools")


def test_every_table_an_analysis_saves_names_the_command_that_writes_it():
    from trajlens.attribution.saved import FRAME_TABLES, RUNS_TABLE
    from trajlens.store.database import ANALYSIS_TABLES, CLASS_ANALYSES

    attribution = {*FRAME_TABLES.values(), RUNS_TABLE, "call_credit", "class_credit"}
    assert {name for name, command in ANALYSIS_TABLES.items() if " attribute " in command} == attribution
    assert set(CLASS_ANALYSES) == attribution | {"stage_rates", "stage_changes"}


def _store_files(store):
    """Every file of a store with its size and modification time."""
    return {str(p.relative_to(store)): (p.stat().st_size, p.stat().st_mtime_ns) for p in store.rglob("*") if p.is_file()}


def _count_staged_writes(monkeypatch) -> list[str]:
    """The tables written into the staging area from now on (one entry per part written)."""
    from trajlens.store.layout import RunDirWriter

    written: list[str] = []
    write_step = RunDirWriter.write_step

    def counted(self, name, table):
        written.append(name)
        return write_step(self, name, table)

    monkeypatch.setattr(RunDirWriter, "write_step", counted)
    return written


def test_reingest_of_an_untouched_run_directory_reads_and_writes_nothing(tmp_path, tiny_run_dir, monkeypatch):
    from trajlens.report import classify_store

    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    classify_store(trajlens.open(tmp_path / "store"))
    before = _store_files(tmp_path / "store")
    written = _count_staged_writes(monkeypatch)
    again = trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert again.run_ids == ["tiny"]
    assert again.notes == ["run tiny is unchanged: kept as it was, with its analyses"]
    assert written == []  # the run's tables were not read into the staging area
    assert _store_files(tmp_path / "store") == before  # nor was anything published
    assert trajlens.open(tmp_path / "store").sql("SELECT count(*) AS n FROM call_classes")["n"].to_list() == [16]


@pytest.mark.parametrize("change", ["touched", "lenient", "run_id_named", "replace"])
def test_reingest_reads_the_run_again_when_its_files_or_the_call_differ(tmp_path, tiny_run_dir, monkeypatch, change):
    """Same bytes but a new modification time, or the same source ingested with other options
    (lenient; the run id named rather than read from the run): the source is read again, and
    its content decides (here: the same run, kept with its analyses)."""
    import os

    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    if change == "touched":
        path = _first_file(tiny_run_dir, "tool_calls")
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
    written = _count_staged_writes(monkeypatch)
    options = {"touched": {}, "lenient": {"strict": False}, "run_id_named": {"run_id": "tiny"},
               "replace": {"replace": True}}[change]
    again = trajlens.ingest([tiny_run_dir], tmp_path / "store", **options)
    assert "tool_calls" in written, "the source was not read again"
    assert again.notes == ["run tiny is unchanged: kept as it was, with its analyses"]
    written.clear()  # the run is recorded as this call read it: the same call again reads nothing,
    # unless lenient, which reads every file to list the bad records again, or told to replace
    assert trajlens.ingest([tiny_run_dir], tmp_path / "store", **options).notes == again.notes
    assert bool(written) == (change in ("lenient", "replace"))


def _run_dir(directory, run_id="tiny"):
    from tinyrun import tiny_run
    from trajlens.store.layout import RunDirWriter

    run = tiny_run(run_id)
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)
    return directory


def _metric_names(store, run_id):
    return set(trajlens.open(store).sql("SELECT DISTINCT name FROM step_metrics WHERE run_id = $r", {"r": run_id})["name"])


def test_a_run_that_metrics_joined_is_read_again_when_they_no_longer_join(tmp_path):
    """A metrics file named in the call joins the folder's only run; once a second run sits in
    the folder the metrics are a run of their own, and the first run is read again without them."""
    parent = _run_dir(tmp_path / "parent" / "a").parent
    metrics = tmp_path / "m.jsonl"
    metrics.write_text('{"_step": 1, "extra/metric": 5.0}\n{"_step": 2, "extra/metric": 6.0}\n')
    trajlens.ingest([parent, metrics], tmp_path / "store")
    assert "extra/metric" in _metric_names(tmp_path / "store", "tiny")
    _run_dir(parent / "b", "other")
    trajlens.ingest([parent, metrics], tmp_path / "store")
    assert "extra/metric" not in _metric_names(tmp_path / "store", "tiny")
    assert _metric_names(tmp_path / "store", "m") == {"extra/metric"}


def test_a_file_written_while_the_run_is_read_is_read_by_the_next_ingest(tmp_path):
    run = _run_dir(tmp_path / "run")
    later = pq.read_table(_first_file(run, "step_metrics"))
    later = later.set_column(later.schema.get_field_index("step"), "step", pa.array([3, 4], later.schema.field("step").type))

    def training_writes_a_step(path: str) -> None:  # as the ingest reads the run's scalars
        if "step_metrics" in path and not (run / "step_metrics" / "late.parquet").exists():
            pq.write_table(later, run / "step_metrics" / "late.parquet")

    trajlens.ingest([run], tmp_path / "store", progress=training_writes_a_step)
    steps = "SELECT DISTINCT step FROM step_metrics ORDER BY step"
    assert trajlens.open(tmp_path / "store").sql(steps)["step"].to_list() == [1, 2]
    trajlens.ingest([run], tmp_path / "store")
    assert trajlens.open(tmp_path / "store").sql(steps)["step"].to_list() == [1, 2, 3, 4]


def test_a_run_with_a_linked_table_folder_is_always_read_again(tmp_path):
    """The fingerprint does not look behind links; ingest reads a table folder through one."""
    import os

    run = _run_dir(tmp_path / "run")
    shutil.move(run / "step_metrics", tmp_path / "shared")
    os.symlink(tmp_path / "shared", run / "step_metrics")
    trajlens.ingest([run], tmp_path / "store")
    path = _first_file(tmp_path / "shared", ".")
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.schema.get_field_index("value"), "value",
                                    pa.array([0.9, 0.95], table.schema.field("value").type)), path)
    trajlens.ingest([run], tmp_path / "store")
    values = trajlens.open(tmp_path / "store").sql("SELECT value FROM step_metrics ORDER BY step")["value"].to_list()
    assert values == [0.9, 0.95]


def test_notes_follow_the_order_of_the_runs_kept_or_read_again(tmp_path):
    import os

    parent = tmp_path / "runs"
    for name in ("a", "b", "c"):
        _run_dir(parent / name, name)
    trajlens.ingest([parent], tmp_path / "store")
    path = _first_file(parent / "b", "tool_calls")  # b read again (same bytes, a new time), a and c kept
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
    again = trajlens.ingest([parent], tmp_path / "store")
    assert again.notes == [f"run {name} is unchanged: kept as it was, with its analyses" for name in "abc"]


def test_run_config_must_be_a_json_object(tmp_path, tiny_run_dir):
    path = _first_file(tiny_run_dir, "runs")
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.schema.get_field_index("config"), "config", pa.array(["not json"])), path)
    with pytest.raises(InputError, match="record tiny: field 'config': expected a JSON object, found not json"):
        trajlens.ingest([tiny_run_dir], tmp_path / "store")


def test_a_moved_or_copied_store_reads_only_its_own_files(tmp_path, tiny_run_dir):
    original = tmp_path / "original"
    trajlens.ingest([tiny_run_dir], original)
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    moved = tmp_path / "moved"
    shutil.copytree(original, moved)
    # Empty the original's trajectories: a copy that still read them would now see no rows.
    for path in (original / "runs" / "tiny" / "trajectories").rglob("*.parquet"):
        pq.write_table(pq.read_table(path).slice(0, 0), path)
    for store in (copy, moved):
        opened = trajlens.open(store)
        assert opened.sql("SELECT count(*) AS n FROM trajectories")["n"].to_list() == [8]
        assert opened.trajectories.collect().height == 8
        connection = duckdb.connect(str(store / "trajlens.duckdb"), read_only=True)
        assert connection.execute("SELECT count(*) FROM trajectories").fetchone() == (8,)
        views = " ".join(row[0] for row in connection.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall())
        assert str(store) + "/" in views and str(original) + "/" not in views
        connection.close()


def test_queries_cannot_touch_files_or_change_the_store(tmp_path, tiny_run_dir):
    store = trajlens.open(trajlens.ingest([tiny_run_dir], tmp_path / "store").store)
    for query in ("COPY runs TO 'x.csv'", "ATTACH 'x.duckdb'", "SET enable_external_access = true",
                  "DROP VIEW trajectories", "SELECT * FROM read_text('/etc/passwd')", "SELECT * FROM glob('*')"):
        with pytest.raises(QueryError, match="query refused"):
            store.sql(query)
    assert store.sql("SELECT count(*) AS n FROM trajectories")["n"].to_list() == [8]
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize(("query", "named"), [
    ("INSTALL httpfs", "INSTALL"), ("-- fetch it\nFORCE INSTALL httpfs", "FORCE INSTALL"), ("/* x */ load httpfs", "LOAD"),
    ("COPY runs TO 'x.csv'", "COPY"), ("ATTACH 'x.duckdb'", "ATTACH"),
])
def test_a_refused_statement_is_named_as_written(tmp_path, tiny_run_dir, query, named):
    store = trajlens.open(trajlens.ingest([tiny_run_dir], tmp_path / "store").store)
    with pytest.raises(QueryError, match=f"^query refused: {named} is not a read;"):
        store.sql(query)


def test_long_names_slug_to_a_bounded_unique_id():
    from trajlens.store.writer import MAX_RUN_ID_LENGTH, slug

    first, second = slug("a" * 300), slug("a" * 299 + "b")
    assert len(first) <= MAX_RUN_ID_LENGTH and len(second) <= MAX_RUN_ID_LENGTH and first != second
    assert slug("a b") == slug("a-b") == "a-b"
    assert slug("\n") == "run"


def test_a_view_dropped_with_another_duckdb_comes_back_on_open(tmp_path, tiny_run_dir):
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    connection = duckdb.connect(str(tmp_path / "store" / "trajlens.duckdb"))
    connection.execute("DROP VIEW trajectories")
    connection.close()
    trajlens.open(tmp_path / "store")
    connection = duckdb.connect(str(tmp_path / "store" / "trajlens.duckdb"), read_only=True)
    assert connection.execute("SELECT count(*) FROM trajectories").fetchone() == (8,)


def test_a_query_given_a_run_the_store_lacks_or_has_not_analysed_says_so(tmp_path, tiny_run_dir):
    """$run_id (and $run_a, $run_b) name runs as every command's --run does: an unknown run is an
    error, not an empty table; a query that answers no rows because the run has no part yet in
    an analysis table it reads names the command that computes it. A run analysed and a query
    that finds nothing in it still give an empty table."""
    trajlens.ingest([tiny_run_dir], tmp_path / "store", run_id="first")
    store = trajlens.open(tmp_path / "store")
    trajlens.classify_store(store, ["first"])
    trajlens.ingest([tiny_run_dir], tmp_path / "store", run_id="later")
    store = trajlens.open(tmp_path / "store")
    think = "SELECT step, count(*) AS n FROM call_classes WHERE run_id = $run_id GROUP BY step"
    with pytest.raises(QueryError, match=re.escape("$run_id: run 'nope' is not in the store (runs: first, later)")):
        store.sql(think, {"run_id": "nope"})
    with pytest.raises(QueryError, match=re.escape("$run_b: run \"it's\" is not in the store")):
        store.sql("SELECT $run_a AS a, $run_b AS b", {"run_a": "first", "run_b": "it's"})
    with pytest.raises(QueryError, match=re.escape(f"query answered no rows: run 'later' has no call_classes yet; "
                                                   f"`trajlens classify {store.path}` computes it")):
        store.sql(think, {"run_id": "later"})
    assert store.sql(think, {"run_id": "first"}).height > 0
    assert store.sql(think + " HAVING false", {"run_id": "first"}).is_empty()
    assert store.sql("SELECT * FROM trajectories WHERE run_id = $run_id AND false", {"run_id": "later"}).is_empty()


def test_a_query_that_finds_nothing_because_a_value_is_mistyped_names_the_nearest(samples_store_path):
    """A parameter compared with the column of its own name (``name = $name``) whose value no
    table the query reads holds there (for the run given) is an error naming the nearest values;
    a value that is there gives the empty table, as does a parameter compared with another column."""
    store = trajlens.open(samples_store_path)
    metric = "SELECT step, value FROM step_metrics WHERE run_id = $run_id AND name = $name"
    with pytest.raises(QueryError, match=re.escape(
            "query answered no rows: $name 'critic/vf_explained_varr': no such name of run 'sao-r6' in "
            "step_metrics (nearest: critic/vf_explained_var)")):
        store.sql(metric, {"run_id": "sao-r6", "name": "critic/vf_explained_varr"})
    with pytest.raises(QueryError, match=re.escape(
            "$name 'loss': no such name of run 'sao-r6' in step_metrics (there: actor/entropy, ")):
        store.sql(metric, {"run_id": "sao-r6", "name": "loss"})
    with pytest.raises(QueryError, match=re.escape("$split 'trian': no such split in trajectories (nearest: train)")):
        store.sql("SELECT count(*) AS n FROM trajectories t WHERE t.split = $split GROUP BY step", {"split": "trian"})
    assert store.sql(metric + " AND step < 0", {"run_id": "sao-r6", "name": "critic/vf_explained_var"}).is_empty()
    assert store.sql("SELECT step FROM step_metrics WHERE name = $label", {"label": "loss"}).is_empty()


def test_a_value_of_either_run_compared_is_there(samples_store_path):
    store = trajlens.open(samples_store_path)
    both = ("SELECT a.step FROM step_metrics a JOIN step_metrics b USING (step, name) "
            "WHERE a.run_id = $run_a AND b.run_id = $run_b AND a.name = $name AND a.value > 1e300")
    known = store.sql("SELECT name FROM step_metrics WHERE run_id = 'sao-r6'")["name"].to_list()
    assert store.sql(both, {"run_a": "grpo-leg", "run_b": "sao-r6", "name": known[0]}).is_empty()
    with pytest.raises(QueryError, match=re.escape("no such name of runs 'grpo-leg', 'sao-r6' in step_metrics")):
        store.sql(both, {"run_a": "grpo-leg", "run_b": "sao-r6", "name": "no/such/metric"})


def test_a_text_value_the_query_cannot_convert_is_named_with_its_parameter(samples_store_path):
    store = trajlens.open(samples_store_path)
    query = "SELECT count(*) AS n FROM trajectories WHERE step = $s AND run_id = $run_id"
    with pytest.raises(QueryError, match=re.escape("query failed: $s 'abc' (text): Conversion Error: ")):
        store.sql(query, {"s": "abc", "run_id": "sao-r6"})
    assert store.sql(query, {"s": "12", "run_id": "sao-r6"})["n"].item() > 0
