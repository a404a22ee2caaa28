"""Tests of the training-scalar loader (trajlens.ingest.metrics)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from cli_run import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from trajlens.errors import InputError
from trajlens.ingest import metrics
from trajlens.ingest.metrics import MetricsLoad, detect, load_metrics
from trajlens.schema import SCHEMAS

DATA = Path(__file__).parent.parent / "data" / "metrics"
WANDB = DATA / "wandb_history.jsonl"
CSV = DATA / "trainer_metrics.csv"


def rows(load: MetricsLoad) -> list[tuple[int, str, float]]:
    return [(r["step"], r["name"], r["value"]) for r in load.table.to_pylist()]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def jsonl(*records: str) -> str:
    return "".join(record + "\n" for record in records)


# --- happy paths ---------------------------------------------------------------------------------


def test_wandb_export_rows():
    load = load_metrics(WANDB, run_id="grpo-sandbox")
    assert load.problems == []
    assert load.table.schema.equals(SCHEMAS["step_metrics"])
    assert set(load.table.column("run_id").to_pylist()) == {"grpo-sandbox"}
    assert rows(load) == [
        (1, "actor/entropy", 0.712),
        (1, "actor/lr", 1e-06),
        (1, "actor/pg_loss", -0.0131),
        (1, "critic/score/mean", 0.5),
        (1, "critic/vf_explained_var", -0.42),
        (1, "response_length/mean", 611.25),
        (1, "training/epoch", 0.0),
        (2, "actor/entropy", 0.698),
        (2, "actor/lr", 1e-06),
        (2, "actor/pg_loss", 0.0042),
        (2, "critic/score/mean", 0.6667),
        (2, "critic/vf_explained_var", 0.05),
        (2, "response_length/mean", 580.0),
        (2, "training/epoch", 0.0),
        (2, "val-core/sandbox/acc/mean@1", 0.5),
        (3, "actor/entropy", 0.655),
        (3, "actor/lr", 1e-06),
        (3, "actor/pg_loss", -0.0007),
        (3, "critic/score/mean", 0.75),
        (3, "critic/vf_explained_var", 0.31),
        (3, "response_length/mean", 544.5),
        (3, "training/epoch", 0.0),
    ]


def test_csv_rows_skip_empty_cells():
    load = load_metrics(CSV, run_id="r")
    assert load.problems == []
    assert rows(load) == [
        (1, "actor/entropy", 0.712),
        (1, "actor/kl_loss", 0.0011),
        (1, "critic/vf_explained_var", -0.42),
        (2, "actor/entropy", 0.698),
        (2, "actor/kl_loss", 0.0019),
        (2, "critic/vf_explained_var", 0.05),
        (2, "val-core/sandbox/acc/mean@1", 0.5),
        (3, "actor/entropy", 0.655),
        (3, "actor/kl_loss", 0.0024),
        (3, "critic/vf_explained_var", 0.31),
    ]


@pytest.mark.parametrize("key", ["_step", "step", "global_step", "trainer/global_step", "training/global_step"])
def test_every_step_key(tmp_path, key):
    path = write(tmp_path, "m.jsonl", jsonl(json.dumps({key: 7, "actor/lr": 0.5}), json.dumps({key: 8.0, "actor/lr": 0.25})))
    assert rows(load_metrics(path, run_id="r")) == [(7, "actor/lr", 0.5), (8, "actor/lr", 0.25)]


def test_step_key_preference_and_fallback(tmp_path):
    # _step wins over training/global_step; a record without _step falls back to the next key.
    path = write(tmp_path, "m.jsonl", jsonl(
        '{"_step": 5, "training/global_step": 4, "a/b": 1}',
        '{"_step": null, "training/global_step": 6, "a/b": 2}',
    ))
    assert rows(load_metrics(path, run_id="r")) == [(5, "a/b", 1.0), (6, "a/b", 2.0)]


def test_csv_whitespace_and_number_forms(tmp_path):
    path = write(tmp_path, "m.csv", "_step, a/b ,c/d\n 1 , 2 ,1e-3\n2.0,   ,+4\n")
    assert rows(load_metrics(path, run_id="r")) == [(1, "a/b", 2.0), (1, "c/d", 0.001), (2, "c/d", 4.0)]


def test_csv_empty_last_cells_are_missing_values_and_a_short_row_is_refused(tmp_path):
    """``1,0.5,`` leaves c/d empty at step 1; ``1,0.5`` is a line cut off (its 0.5 may be 0.5xx)."""
    path = write(tmp_path, "m.csv", "_step,a/b,c/d\n1,0.5,\n2,0.25,3\n")
    assert metrics._fast_csv(path) is not None
    assert rows(load_metrics(path, run_id="r")) == [(1, "a/b", 0.5), (2, "a/b", 0.25), (2, "c/d", 3.0)]
    cut = write(tmp_path, "cut.csv", "_step,a/b,c/d\n1,0.5,1\n2,0.2")
    assert metrics._fast_csv(cut) is None
    with pytest.raises(InputError, match="record 3: expected 3 cells"):
        load_metrics(cut, run_id="r")
    # Quoted cells, as spreadsheet and wandb exports write them, are counted as the csv module reads them.
    quoted = write(tmp_path, "quoted.csv", '"_step","a/b","c, d"\n"1","0.5",""\n"2","0.25","3"\n')
    assert metrics._fast_csv(quoted) is not None
    assert rows(load_metrics(quoted, run_id="r")) == [(1, "a/b", 0.5), (2, "a/b", 0.25), (2, "c, d", 3.0)]
    assert metrics._fast_csv(write(tmp_path, "quoted-cut.csv", '"_step","a/b","c"\n"1","0.5"\n')) is None


def test_only_step_column_gives_empty_table(tmp_path):
    path = write(tmp_path, "m.jsonl", jsonl('{"_step": 1, "_runtime": 2.0}'))
    load = load_metrics(path, run_id="r")
    assert load.table.num_rows == 0 and load.problems == []
    assert load.table.schema.equals(SCHEMAS["step_metrics"])


# --- bad input -----------------------------------------------------------------------------------

BAD_CASES = [
    # (file name, content, record, field, text in the message)
    ("m.jsonl", jsonl('{"_step": 1, "a/b": 1}', '{"_step": 2, "a/b": "high"}'), 2, "a/b", 'expected a number, found "high"'),
    ("m.jsonl", jsonl('{"_step": 1, "a/b": true}'), 1, "a/b", "expected a number, found true"),
    ("m.jsonl", jsonl('{"_step": 1, "a/b": [1, 2]}'), 1, "a/b", "expected a number, found [1, 2]"),
    ("m.jsonl", jsonl('{"_step": 1, "a/b": {"x": 1}}'), 1, "a/b", "expected a number"),
    ("m.jsonl", jsonl('{"_step": 1, "a/b": "0.5"}'), 1, "a/b", 'found "0.5"'),
    ("m.jsonl", jsonl('{"_step": 1, "a/b": ' + "9" * 400 + "}"), 1, "a/b",
     "expected a number of at most 1.798e+308 in size (float64), found an integer of 400 digits"),
    ("m.jsonl", jsonl('{"_step": 12, "actor/lr": 1}', '{"_step": 12, "actor/lr": 2}'), 2, "actor/lr",
     "duplicate step 12 for metric actor/lr"),
    ("m.jsonl", jsonl('{"_step": 1, "a/b": 1}', '{"a/b": 2}'), 2, "_step", "no step"),
    ("m.jsonl", jsonl('{"_step": 1.5, "a/b": 1}'), 1, "_step", "expected an integer step, found 1.5"),
    ("m.jsonl", jsonl('{"step": "3", "a/b": 1}'), 1, "step", 'expected an integer step, found "3"'),
    ("m.jsonl", jsonl('{"_step": 1, "a/b": 1}', '{"_step": 2, "a/b": 1'), 2, None, "JSON cut short"),
    ("m.jsonl", jsonl('{"_step": 1, "a/b": 1}', '{"_step": 2, "a/b": 1]'), 2, None, "not JSON"),
    ("m.jsonl", jsonl('[1, 2]'), 1, None, "expected a JSON object, found list"),
    ("m.csv", "_step,a/b\n1,0.5\n2,fast\n", 3, "a/b", 'expected a number, found "fast"'),
    ("m.csv", "_step,a/b\n1," + "9" * 400 + "\n", 2, "a/b", "found an integer of 400 digits"),
    ("m.csv", "_step,a/b\n1,1_000\n", 2, "a/b", 'found "1_000"'),
    ("m.csv", "_step,a/b\n1,0.5\n1,0.7\n", 3, "a/b", "duplicate step 1 for metric a/b"),
    ("m.csv", "_step,a/b,a/b\n1,0.5,0.7\n", 2, "a/b", "duplicate step 1 for metric a/b"),
    ("m.csv", "_step,a/b\n1,0.5\n,0.7\n", 3, "_step", "no step"),
    ("m.csv", "_step,a/b\nfirst,0.5\n", 2, "_step", "expected an integer step"),
    ("m.csv", "_step,a/b\n1,0.5,9\n", 2, None, "expected 2 cells (the header's), found 3 cells"),
    ("m.csv", "_step,a/b,c\n1,0.5,0.001\n2,0.4\n", 3, None, "expected 3 cells (the header's), found 2 cells"),
    # a metric name with a lone surrogate (a JSON escape) cannot be stored: named as JSON writes it
    ("m.jsonl", jsonl('{"_step": 1, "a/\\ud800": 1}'), 1, '"a/\\ud800"', "expected a metric name in UTF-8"),
    ("trainer_state.json", '{"log_history": [{"step": 1, "loss\\ud800": 0.5}]}', 0, '"loss\\ud800"',
     "found a lone UTF-16 surrogate at character 4"),
]


@pytest.mark.parametrize("name,content,record,field,text", BAD_CASES)
def test_bad_input_strict(tmp_path, name, content, record, field, text):
    path = write(tmp_path, name, content)
    with pytest.raises(InputError) as caught:
        load_metrics(path, run_id="r")
    error = caught.value
    assert error.file == str(path)
    assert error.record == record
    assert error.field == field
    assert text in str(error)
    assert str(path) in str(error) and f"record {record}" in str(error)


@pytest.mark.parametrize("name,content,record,field,text", BAD_CASES)
def test_bad_input_lenient_reports_the_problem(tmp_path, name, content, record, field, text):
    path = write(tmp_path, name, content)
    load = load_metrics(path, run_id="r", strict=False)
    assert len(load.problems) == 1
    problem = load.problems[0]
    assert (problem.file, problem.record, problem.field) == (str(path), str(record), field)
    assert text in problem.message


@pytest.mark.parametrize("name, content", [
    ("m.jsonl", jsonl('{"_step": 1, "a/b": NaN, "c/d": 1}', '{"_step": 2, "a/b": Infinity, "c/d": -Infinity}')),
    ("m.csv", "_step,a/b,c/d\n1,nan,1\n2,inf,-Infinity\n"),
])
def test_nan_and_infinities_are_values_a_diverging_run_logged(tmp_path, name, content):
    """Python's json writes a NaN loss as NaN (TRL's trainer_state.json, wandb histories): kept, not refused."""
    table = load_metrics(write(tmp_path, name, content), run_id="r").table.to_pylist()
    values = {(row["step"], row["name"]): row["value"] for row in table}
    assert math.isnan(values[1, "a/b"]) and values[1, "c/d"] == 1.0
    assert (values[2, "a/b"], values[2, "c/d"]) == (math.inf, -math.inf)


def test_lenient_keeps_the_good_values(tmp_path):
    path = write(tmp_path, "m.jsonl", jsonl(
        '{"_step": 1, "a/b": 1, "c/d": [1]}',
        'garbage',
        '{"_step": 2, "a/b": 2, "c/d": "x"}',
        '{"_step": 2, "a/b": 3}',
        '{"c/d": 4}',
        '{"_step": 3, "a/b": 5}',
    ))
    load = load_metrics(path, run_id="r", strict=False)
    assert rows(load) == [(1, "a/b", 1.0), (2, "a/b", 2.0), (3, "a/b", 5.0)]
    assert [(p.record, p.field) for p in load.problems] == [
        ("1", "c/d"), ("2", None), ("3", "c/d"), ("4", "a/b"), ("5", "_step"),
    ]


@pytest.mark.parametrize("name,content", [("m.jsonl", ""), ("m.jsonl", "\n\n"), ("m.csv", ""), ("m.csv", "_step,a/b\n")])
def test_empty_file(tmp_path, name, content):
    path = write(tmp_path, name, content)
    with pytest.raises(InputError, match="no records"):
        load_metrics(path, run_id="r")
    load = load_metrics(path, run_id="r", strict=False)
    assert load.table.num_rows == 0
    assert [p.message for p in load.problems] == [f"{path}: no records, expected at least one logged step, found an empty file"]


def test_missing_file_and_wrong_suffix(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_metrics(tmp_path / "absent.jsonl", run_id="r")
    with pytest.raises(InputError, match="expected a .jsonl or .csv file"):
        load_metrics(write(tmp_path, "m.txt", "_step,a/b\n1,2\n"), run_id="r")


def test_input_files_unchanged(tmp_path):
    paths = [WANDB, CSV, write(tmp_path, "bad.jsonl", jsonl('{"_step": 1, "a/b": NaN}', "x"))]
    before = [path.read_bytes() for path in paths]
    for path in paths:
        load_metrics(path, run_id="r", strict=False)
    assert [path.read_bytes() for path in paths] == before


# --- the fast path agrees with the reference reader ------------------------------------------------

NAMES = st.sampled_from(["actor/lr", "actor/entropy", "critic/vf_explained_var", "loss", "val/score"])
FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
LOGS = st.dictionaries(st.integers(0, 10_000), st.dictionaries(NAMES, FINITE | st.integers(-10**6, 10**6)), min_size=1)


def reference(path: Path) -> list[tuple[int, str, float]]:
    read = metrics._read_csv_records if path.suffix == ".csv" else metrics._read_jsonl_records
    reading = metrics._collect(path, read(path), strict=True)
    assert reading.problems == []
    return [(r["step"], r["name"], r["value"]) for r in metrics._to_table(reading.values).to_dicts()]


@settings(max_examples=40, deadline=None)
@given(LOGS)
def test_fast_path_matches_reference(tmp_path_factory, logs):
    directory = tmp_path_factory.mktemp("logs")
    expected = sorted((step, name, float(value)) for step, values in logs.items() for name, value in values.items())
    as_jsonl = directory / "m.jsonl"
    as_jsonl.write_text(jsonl(*(json.dumps({"_step": step, **values}) for step, values in logs.items())))
    names = sorted({name for values in logs.values() for name in values})
    as_csv = directory / "m.csv"
    as_csv.write_text(jsonl(",".join(["_step", *names]), *(
        ",".join([str(step), *(repr(float(values[n])) if n in values else "" for n in names)]) for step, values in logs.items()
    )))
    for path in (as_jsonl, as_csv):
        fast = metrics._fast_csv(path) if path.suffix == ".csv" else metrics._fast_jsonl(path)
        assert fast is not None
        got = [(r["step"], r["name"], r["value"]) for r in fast.to_dicts()]
        assert got == expected
        assert reference(path) == expected
        assert rows(load_metrics(path, run_id="r")) == expected


@pytest.mark.parametrize("line", [
    '{"_step": 1, "loss": 1.5, "lr": 0.1, "loss": 2.5}',
    # verl's file logger: some Polars releases refuse a struct with a repeated field and leave
    # the file to the reference reader, others read it; either way the first value is kept
    '{"step": 1, "data": {"loss": 1.5, "lr": 0.1, "loss": 2.5}}',
])
def test_a_key_repeated_in_one_line_reads_the_same_on_both_paths(tmp_path, line):
    path = write(tmp_path, "m.jsonl", jsonl(line))
    fast = metrics._fast_jsonl(path)
    expected = [(1, "loss", 1.5), (1, "lr", 0.1)]
    if fast is not None:
        assert [(r["step"], r["name"], r["value"]) for r in fast.to_dicts()] == expected
    assert reference(path) == expected
    assert rows(load_metrics(path, run_id="r")) == expected
    # a bad line sends the whole file to the reference reader: the repeated key reads the same
    damaged = write(tmp_path, "n.jsonl", jsonl(line, '{"_step": 2, "loss": "high"}'))
    assert metrics._fast_jsonl(damaged) is None
    assert rows(load_metrics(damaged, run_id="r", strict=False)) == expected


def test_fast_path_defers_on_bad_values(tmp_path):
    assert metrics._fast_jsonl(write(tmp_path, "a.jsonl", jsonl('{"_step": 1, "a/b": NaN}'))) is None
    assert metrics._fast_jsonl(write(tmp_path, "b.jsonl", jsonl('{"_step": 1, "a/b": 1}', '{"_step": 1, "a/b": 2}'))) is None
    assert metrics._fast_csv(write(tmp_path, "c.csv", "_step,a/b\n1,x\n")) is None
    assert metrics._fast_csv(write(tmp_path, "d.csv", "_step,a/b\n1.5,1\n")) is None


# --- detect --------------------------------------------------------------------------------------


def test_detect(tmp_path):
    assert detect(WANDB) and detect(CSV)
    assert detect(write(tmp_path, "a.jsonl", jsonl('{"global_step": 1, "loss": 0.3}')))
    assert not detect(write(tmp_path, "b.jsonl", jsonl('{"_step": 1, "score": 0.3}')))  # no metric-like name
    assert not detect(write(tmp_path, "c.jsonl", jsonl('{"actor/lr": 0.3}')))  # no step
    assert not detect(write(tmp_path, "d.jsonl", "not json\n"))
    assert not detect(write(tmp_path, "e.txt", '{"_step": 1, "actor/lr": 0.3}\n'))
    assert not detect(write(tmp_path, "f.csv", "name,value\nactor/lr,0.3\n"))
    verl_dump = Path(__file__).parent.parent / "data" / "verl" / "grpo-sandbox" / "1.jsonl"
    assert not detect(verl_dump)
    assert not detect(tmp_path)


def test_csv_with_byte_order_mark(tmp_path):
    path = tmp_path / "m.csv"
    path.write_bytes(b"\xef\xbb\xbf_step,a/b\n1,0.5\n")
    assert rows(load_metrics(path, run_id="r")) == [(1, "a/b", 0.5)]


def test_not_utf8(tmp_path):
    csv_path = tmp_path / "m.csv"
    csv_path.write_bytes(b"_step,a/b\n1,\xff\n")
    with pytest.raises(InputError, match="expected UTF-8 text"):
        load_metrics(csv_path, run_id="r")
    jsonl_path = tmp_path / "m.jsonl"
    jsonl_path.write_bytes(b'{"_step": 1, "a/b": "\xff"}\n')
    with pytest.raises(InputError, match="record 1: expected UTF-8 text"):
        load_metrics(jsonl_path, run_id="r")


def test_csv_the_csv_module_cannot_parse_is_an_input_error(tmp_path):
    path = tmp_path / "huge.csv"
    path.write_text('step,loss\n1,0.5\n2,"' + "x" * 200_000 + "\n")
    with pytest.raises(InputError, match="huge.csv: record .*expected a CSV row, found field larger than field limit"):
        load_metrics(path, run_id="r", strict=True)


def test_a_metrics_file_that_repeats_a_metric_of_the_run_is_named(tmp_path, tiny_run_dir):
    """The error names the metrics file, the step and the metric, not the run it joins."""
    import trajlens

    repeated = tmp_path / "scalars.jsonl"
    repeated.write_text(json.dumps({"step": 2, "data": {"critic/vf_explained_var": 0.3}}) + "\n")
    with pytest.raises(InputError) as caught:
        trajlens.ingest([tiny_run_dir, repeated], tmp_path / "store")
    assert str(caught.value) == (
        f"{repeated}: record step 2: field 'critic/vf_explained_var': expected a metric the run tiny does not "
        "already log at that step, found one its own logs or an earlier metrics file give")
    twice = tmp_path / "again.jsonl"
    fresh = json.dumps({"step": 1, "data": {"actor/lr": 1e-6}}) + "\n"
    twice.write_text(fresh)
    (tmp_path / "first.jsonl").write_text(fresh)
    with pytest.raises(InputError, match=f"^{twice}: record step 1: field 'actor/lr'"):
        trajlens.ingest([tiny_run_dir, tmp_path / "first.jsonl", twice], tmp_path / "store")
    trajlens.ingest([tiny_run_dir, twice], tmp_path / "store")  # a metric of its own joins the run
    assert trajlens.open(tmp_path / "store").sql("SELECT count(*) AS n FROM step_metrics")["n"].item() == 3


@pytest.mark.parametrize("name, content", [
    ("m.csv", "step,actor/lr\n1,abc\n2,0.1\n"),
    ("m.jsonl", jsonl('{"step": 1, "actor/lr": "abc"}')),
])
def test_a_bad_first_value_is_named_not_taken_for_an_unknown_format(tmp_path, name, content):
    """The file is still scalars (a step and a metric name): ingest names the bad value."""
    import trajlens

    path = write(tmp_path, name, content)
    assert detect(path)
    with pytest.raises(InputError, match=r"record \d: field 'actor/lr': expected a number, found \"abc\""):
        trajlens.ingest([path], tmp_path / "store")


def test_a_csv_with_a_byte_that_is_not_utf8_is_read_as_metrics_and_named_by_offset(tmp_path):
    """Detection reads the first record's shape, so the file is still metrics, and the error says
    where the byte is rather than that the file has no known format."""
    path = tmp_path / "m.csv"
    path.write_bytes(b"step,train/loss\n1,0.5\n2,0.4 \xff\n")
    done = run_cli("ingest", path, "--store", tmp_path / "store")
    assert done.returncode == 1
    assert done.stderr == f"error: {path}: expected UTF-8 text, found an undecodable byte at offset 28\n"
    assert not (tmp_path / "store").exists()


def test_a_metrics_file_beside_two_runs_is_a_run_of_its_own_and_ingest_says_so(tmp_path, tiny_run_dir):
    import trajlens

    resumed = Path(__file__).resolve().parents[2] / "sample_data" / "resume-lr"
    scalars = tmp_path / "scalars.jsonl"
    scalars.write_text(json.dumps({"step": 1, "data": {"actor/lr": 1e-6}}) + "\n")
    result = trajlens.ingest([tiny_run_dir, resumed, scalars], tmp_path / "store")
    assert sorted(result.run_ids) == ["resume-lr", "scalars", "tiny"]
    assert result.notes == [f"{scalars}: training scalars beside 2 runs, ingested as their own run scalars (they "
                            "join a run only when the call has one)"]
    store = trajlens.open(tmp_path / "store")
    assert store.sql("SELECT source_format FROM runs WHERE run_id = 'scalars'").item() == "metrics"
