"""Loader of per-step training scalars: wandb history exports as JSONL, or CSV, verl's file
logger, and TRL's ``trainer_state.json``.

One record per logged step, one key or column per metric::

    {"_step": 12, "_runtime": 301.5, "critic/vf_explained_var": 0.1, "actor/lr": 1e-06}

    _step,critic/vf_explained_var,actor/lr
    12,0.1,1e-06

becomes rows of the ``step_metrics`` table (``run_id, step, name, value``), sorted by step and
name. Reading rules:

* The step is the first non-missing of :data:`STEP_KEYS` in the record (``_step`` first);
  it must be an integer (``12.0`` is read as 12). A record without one is an error.
* The step keys and wandb's own keys (names starting with ``_``: ``_runtime``, ``_timestamp``,
  ``_wandb``) are not metrics. Neither are wandb media summaries (objects with a ``_type``
  key, e.g. the ``val/generations`` table), which are skipped.
* Missing values (JSON ``null``, an absent key, an empty CSV cell) are skipped.
* A value that is not a number (a string, a boolean, a list) is an error; so is a second value
  for the same step and metric ("duplicate step 12 for metric actor/lr"). NaN and infinities are
  values (``NaN``, ``Infinity`` as Python's ``json`` writes them, ``nan``, ``inf`` in CSV): a
  diverging run logs a NaN loss or grad norm, and a check on that metric fires at its step.
  CSV cells are numbers as Python's ``float`` reads them, less ``_`` separators.
* CSV rows shorter than the header just miss their last cells; longer ones are errors.

Two trainer files are read by the same rules:

* verl's ``file`` tracking backend (``FileLogger`` in ``verl/utils/tracking.py``,
  verl-project/verl@047621b2583780b8ebda21126e75f5bf48dea7b9) writes one
  ``orjson.dumps({"step": step, "data": data})`` per ``Tracking.log(data, step)`` call: compact
  JSON, ``step`` the trainer's ``global_steps`` (an integer; 0 for the validation before
  training), ``data`` the flat metrics dict (``actor/pg_loss``, ``critic/vf_explained_var``,
  ``val-core/...``), NaN and infinities written as ``null`` (so skipped as missing). The file
  is ``$VERL_FILE_LOGGER_PATH``, else ``${VERL_FILE_LOGGER_ROOT:-.}/<project_name>/
  <experiment_name>.jsonl``, opened with ``"wb"``: a resumed run starts it afresh. A line
  whose keys are exactly ``step`` and ``data`` is read as ``data``'s metrics at ``step``.
* TRL's (``transformers.Trainer``'s) ``trainer_state.json`` keeps every logged dict in
  ``log_history``, each with its ``step``. Entries of the same step (a training log and an
  evaluation log) are merged, the later value of a repeated key (``epoch``) winning.

Errors name the file, the record (its 1-based line number), the field, what was expected and
what was found. In strict mode the first one raises :class:`InputError`; in lenient mode the
bad value (or, for a bad step or line, the whole record) is skipped and reported in
``problems``.

Clean files are read with polars. When polars refuses a file or a check fails, the file is
read again by a line-by-line reader (:func:`_read_jsonl_records` / :func:`_read_csv_records`),
which is the reference for the rules above and the one that locates the bad record.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

import polars as pl
import pyarrow as pa

from trajlens.errors import InputError, Problem
from trajlens.ingest._fields import as_float
from trajlens.ingest._probe import Probe
from trajlens.limits import current, text_problem, type_name, undecodable
from trajlens.schema import conform

STEP_KEYS: tuple[str, ...] = ("_step", "step", "global_step", "trainer/global_step", "training/global_step")
"""Keys that hold the training step, in order of preference."""

KNOWN_METRIC_NAMES: frozenset[str] = frozenset({"loss", "lr", "learning_rate", "grad_norm", "epoch"})
"""Metric names without a ``/`` that :func:`detect` still takes as training scalars."""

SUFFIXES: frozenset[str] = frozenset({".jsonl", ".ndjson", ".csv"})

FLOAT64_MAX = sys.float_info.max
"""The largest float64: a metric written with more digits than it holds is refused, not read as infinity."""

TRAINER_STATE = "trainer_state.json"
"""The file name transformers' Trainer (and so TRL) keeps its ``log_history`` in."""


class MetricsLoad(NamedTuple):
    """Result of :func:`load_metrics`."""

    table: pa.Table
    """Rows in the ``step_metrics`` schema."""
    problems: list[Problem]
    """What lenient mode skipped (empty in strict mode)."""


class _Value(NamedTuple):
    step: int
    name: str
    value: float


class _Reading(NamedTuple):
    values: list[_Value]
    problems: list[Problem]


def detect(target: Probe | Path | str) -> bool:
    """True when ``path`` is a JSONL or CSV file whose first record looks like training scalars.

    The first record must have a step key and a metric (a number, or a text the loader then reads
    as one or refuses) whose name contains ``/`` or is in :data:`KNOWN_METRIC_NAMES`.
    """
    probe = Probe.of(target)
    path = probe.path
    if path.name == TRAINER_STATE:
        return probe.is_file and '"log_history"' in probe.head
    if not path.is_file() or path.suffix.lower() not in SUFFIXES:
        return False
    try:
        record = _first_record(probe)
    except (OSError, ValueError, csv.Error):
        return False
    if not isinstance(record, dict) or not any(record.get(key) not in (None, "") for key in STEP_KEYS):
        return False
    for name, value in record.items():
        if name in STEP_KEYS or name.startswith("_") or ("/" not in name and name not in KNOWN_METRIC_NAMES):
            continue
        # A text value is a metric too: the loader names it when it is no number ("abc").
        if isinstance(value, str) and value.strip() or isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
    return False


def load_metrics(path: Path | str, *, run_id: str, strict: bool = True) -> MetricsLoad:
    """Read the training scalars in ``path`` (JSONL or CSV) as ``step_metrics`` rows of ``run_id``."""
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), "cannot read", expected="a JSONL or CSV file", found="no such file")
    suffix = path.suffix.lower()
    if path.name == TRAINER_STATE:
        reading = _collect(path, _read_trainer_state(path), strict=strict)
        table = _to_table(reading.values).with_columns(pl.lit(run_id).alias("run_id")).select("run_id", "step", "name", "value")
        return MetricsLoad(conform(table.to_arrow(), "step_metrics", str(path)), reading.problems)
    if suffix not in SUFFIXES:
        raise InputError(str(path), expected="a .jsonl or .csv file", found=f"a {suffix or 'suffix-less'} file")
    is_csv = suffix == ".csv"
    table = _fast_csv(path) if is_csv else _fast_jsonl(path)
    problems: list[Problem] = []
    if table is None:
        read = _read_csv_records if is_csv else _read_jsonl_records
        try:
            reading = _collect(path, read(path), strict=strict)
        except UnicodeDecodeError as error:
            raise InputError(str(path), expected="UTF-8 text", found=undecodable(error)) from None
        table, problems = _to_table(reading.values), reading.problems
    table = table.with_columns(pl.lit(run_id).alias("run_id")).select("run_id", "step", "name", "value")
    return MetricsLoad(conform(table.to_arrow(), "step_metrics", str(path)), problems)


def load_metric_files(paths: "Sequence[Path | str] | Path | str", *, run_id: str, strict: bool = True) -> MetricsLoad:
    """:func:`load_metrics` of each file, as one table (the format registry's ``load``)."""
    given = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    loads = [load_metrics(path, run_id=run_id, strict=strict) for path in given]
    return MetricsLoad(pa.concat_tables([load.table for load in loads]),
                       [problem for load in loads for problem in load.problems])


# --- the reference reader --------------------------------------------------------------------

Pairs = list[tuple[str, Any]]
"""One record as (key, value) pairs, keeping repeated CSV columns."""


def _collect(path: Path, records: Iterator[tuple[int, Pairs | InputError]], *, strict: bool) -> _Reading:
    """Apply the reading rules to ``(line number, record)`` pairs."""
    values: list[_Value] = []
    problems: list[Problem] = []

    def fail(error: InputError) -> None:
        if strict:
            raise error
        problems.append(error.as_problem())

    any_record = False
    seen: set[tuple[int, str]] = set()
    for line_no, record in records:
        any_record = True
        if isinstance(record, InputError):
            fail(record)
            continue
        for value in record_scalars(path, line_no, record, seen):
            if isinstance(value, InputError):
                fail(value)
            else:
                values.append(value)
    if not any_record:
        fail(InputError(str(path), "no records", expected="at least one logged step", found="an empty file"))
    return _Reading(values, problems)


def record_scalars(path: Path, line_no: int, record: Pairs, seen: set[tuple[int, str]]) -> Iterator[_Value | InputError]:
    """The scalars of one record of a metrics log (a JSONL line, a CSV row), each with its step,
    or the error that refuses it: a record without a step (the step's own error, and nothing
    else), a value that is no number (NaN and infinities are), an integer past float64, a name
    that cannot be stored, a second value of a step and metric (``seen``: the steps and metrics read so far, added to). Keys of the step
    (:data:`STEP_KEYS`), keys starting with ``_``, nulls and wandb media summaries are no
    scalars. ``trajlens ingest``, ``trajlens check`` and ``check --watch`` read records by it."""
    step = _record_step(path, line_no, record)
    if isinstance(step, InputError):
        yield step
        return
    for name, raw in record:
        if name in STEP_KEYS or name.startswith("_") or raw is None:
            continue
        if isinstance(raw, dict) and "_type" in raw:
            continue  # a wandb media summary (table, histogram), not a scalar
        unstorable = text_problem(name, current().field_bytes)
        if unstorable:  # named as JSON writes it: a lone surrogate cannot be printed
            yield InputError(str(path), record=line_no, field=json.dumps(name), expected="a metric name in UTF-8",
                             found=unstorable)
        elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
            yield InputError(str(path), record=line_no, field=name, expected="a number", found=_text(raw))
        elif isinstance(raw, int) and math.isinf(as_float(raw)):
            yield InputError(str(path), record=line_no, field=name, expected=f"a number of at most {FLOAT64_MAX:.4g} "
                             "in size (float64)", found=_text(raw))
        elif (step, name) in seen:
            yield InputError(str(path), f"duplicate step {step} for metric {name}", record=line_no, field=name,
                             expected="one value per step and metric", found=_text(raw))
        else:
            seen.add((step, name))
            yield _Value(step, name, as_float(raw))


def _record_step(path: Path, line_no: int, record: Pairs) -> int | InputError:
    first: dict[str, Any] = {}
    for name, raw in record:
        first.setdefault(name, raw)
    for key in STEP_KEYS:
        raw = first.get(key)
        if raw is None:
            continue
        step = int(raw) if isinstance(raw, float) and raw.is_integer() else raw
        if isinstance(step, bool) or not isinstance(step, int):
            return InputError(str(path), record=line_no, field=key, expected="an integer step", found=_text(raw))
        if not 0 <= step < 2**63:
            return InputError(str(path), record=line_no, field=key, expected="an integer step from 0 to 2**63-1",
                              found=_text(raw))
        return step
    return InputError(str(path), "no step", record=line_no, field=STEP_KEYS[0],
                      expected="a step under one of " + ", ".join(STEP_KEYS), found="none")



def _text(raw: object) -> str:
    if isinstance(raw, float):
        return str(raw)
    if isinstance(raw, int) and not isinstance(raw, bool) and abs(raw) >= 10**40:
        return f"an integer of {len(str(abs(raw)))} digits"
    text = json.dumps(raw)
    return text if len(text) <= 200 else text[:200] + "..."


def _read_jsonl_records(path: Path) -> Iterator[tuple[int, Pairs | InputError]]:
    from trajlens.ingest._fields import read_lines

    for line_no, line in read_lines(path):
        yield line_no, line if isinstance(line, InputError) else jsonl_record(path, line_no, line)


def jsonl_record(path: Path, line_no: int, line: bytes) -> Pairs | InputError:
    """One line of a JSONL metrics log as a record (its keys and values, a verl file-logger line
    flattened), or the error that refuses it. A key repeated in one object keeps its first value,
    as the fast path (Polars' reader) reads it, so a file reads the same whichever path reads it."""
    from trajlens.ingest._fields import parse_json

    try:
        record = parse_json(line, str(path), record=line_no, first_key_wins=True)
    except InputError as error:
        return error
    if not isinstance(record, dict):
        return InputError(str(path), record=line_no, expected="a JSON object", found=type(record).__name__)
    return list(_file_logger_record(record).items())


def _file_logger_record(record: dict[str, Any]) -> dict[str, Any]:
    """verl's file-logger line ``{"step": N, "data": {...}}`` as one flat record."""
    if set(record) == {"step", "data"} and isinstance(record["data"], dict):
        return {"step": record["step"], **record["data"]}
    return record


def _read_trainer_state(path: Path) -> Iterator[tuple[int, Pairs | InputError]]:
    """``log_history`` entries merged by step; the record number is the first entry's index."""
    from trajlens.ingest._fields import read_json_file

    data = read_json_file(path)
    history = data.get("log_history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        found = ("no such key" if "log_history" not in data else type_name(history)) if isinstance(data, dict) \
            else f"a file holding {type_name(data)}"
        raise InputError(str(path), field="log_history", expected="a list of logged dicts", found=found)
    merged: dict[Any, tuple[int, dict[str, Any]]] = {}
    for index, entry in enumerate(history):
        if not isinstance(entry, dict):
            yield index, InputError(str(path), record=index, expected="a JSON object", found=type(entry).__name__)
            continue
        step = entry.get("step")
        key = step if isinstance(step, (int, float, str)) and not isinstance(step, bool) else ("entry", index)
        first, values = merged.get(key, (index, {}))
        merged[key] = (first, {**values, **entry})
    for index, entry in sorted(merged.values(), key=lambda item: item[0]):
        yield index, list(entry.items())


def _read_csv_records(path: Path) -> Iterator[tuple[int, Pairs | InputError]]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = _next_row(reader, path)
        if header is None:
            return
        header = [name.strip() for name in header]
        while (row := _next_row(reader, path)) is not None:
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                # A short row is a line cut off (a file still being written, or damaged): its last
                # cell may be a number cut short too, so it is not read as empty cells.
                yield reader.line_num, InputError(
                    str(path), record=reader.line_num, expected=f"{len(header)} cells (the header's)",
                    found=f"{len(row)} cells",
                )
                continue
            yield reader.line_num, [(name, _cell(cell)) for name, cell in zip(header, row)]


def _next_row(reader, path: Path) -> list[str] | None:
    """The next CSV row, None at the end; a row the csv module cannot parse is an InputError."""
    try:
        return next(reader, None)
    except csv.Error as error:
        raise InputError(str(path), record=reader.line_num, expected="a CSV row", found=str(error)) from None


def _cell(cell: str) -> float | int | str | None:
    """A CSV cell as a number, None when empty, or its text when it is not a number."""
    text = cell.strip()
    if not text:
        return None
    if "_" in text:  # float() accepts "1_000"; polars, and most readers, do not
        return text
    try:
        number = float(text)
    except ValueError:
        return text
    if math.isinf(number) and text.lstrip("+-").lower() not in ("inf", "infinity"):
        try:  # digits past float64: the integer, refused as one (not read as infinity)
            return int(text)
        except ValueError:
            return text
    return number


def _to_table(values: list[_Value]) -> pl.DataFrame:
    frame = pl.DataFrame(
        {"step": [v.step for v in values], "name": [v.name for v in values], "value": [v.value for v in values]},
        schema={"step": pl.Int64, "name": pl.String, "value": pl.Float64},
    )
    return frame.sort("step", "name")


# --- the fast path ---------------------------------------------------------------------------


def _fast_jsonl(path: Path) -> pl.DataFrame | None:
    """The metrics of a clean JSONL file, or None when the reference reader must look."""
    try:
        frame = pl.read_ndjson(path, infer_schema_length=None)
    except Exception:  # polars raises several error types for malformed input
        return None
    if set(frame.columns) == {"step", "data"} and isinstance(frame.schema["data"], pl.Struct):
        if frame["data"].null_count():
            return None  # a line whose data is not an object: the reference reader names it
        frame = frame.select("step", pl.col("data").struct.unnest())  # verl's file logger
        if "step" in frame.columns[1:] or len(set(frame.columns)) != len(frame.columns):
            return None
    if any("\x00" in name for name in frame.columns):
        return None  # Polars reads some lone surrogates (a key "a/\ud800") as NUL: the reference reader names them
    metrics = []
    for name, dtype in frame.schema.items():
        if name.startswith("_") or dtype == pl.Null:
            continue
        if not dtype.is_numeric():
            if name not in STEP_KEYS and isinstance(dtype, pl.Struct) and "_type" in [f.name for f in dtype.fields]:
                continue
            return None
        if name not in STEP_KEYS:
            metrics.append(name)
    return _long(frame, metrics)


def _fast_csv(path: Path) -> pl.DataFrame | None:
    """The metrics of a clean CSV file, or None when the reference reader must look."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            header = [name.strip() for name in next(csv.reader(handle), [])]
        if not header or len(set(header)) != len(header):
            return None
        frame = pl.read_csv(path, infer_schema=False, new_columns=header)
    except Exception:  # polars raises several error types for malformed input
        return None
    # Polars reads a short row's missing cells as nulls, as it reads empty unquoted cells (a quoted
    # "" is an empty text): only a file with nulls may hold a short row, which the reference reader names.
    if sum(frame.null_count().row(0)) and not _rows_have_every_cell(path, len(header)):
        return None
    cells = frame.select(pl.all().str.strip_chars().replace("", None))
    numbers = cells.select(pl.all().cast(pl.Float64, strict=False))
    if cells.null_count().row(0) != numbers.null_count().row(0):
        return None  # a cell that is not a number
    if cells.select(pl.any_horizontal(pl.all().str.contains("_", literal=True)).any()).item():
        return None
    metrics = [name for name in frame.columns if name not in STEP_KEYS and not name.startswith("_")]
    return _long(numbers, metrics)


def _rows_have_every_cell(path: Path, cells: int) -> bool:
    """Whether every line of a CSV file that is not blank has ``cells`` cells: each line's commas
    counted outside its quoted cells; False (the reference reader decides) where a line's quotes
    do not pair up (a quoted cell over several lines) or the lines cannot be read."""
    try:
        lines = pl.read_csv(path, has_header=False, separator="\x1f", quote_char=None, new_columns=["line"],
                            infer_schema=False)
    except Exception:  # polars raises several error types for malformed input
        return False
    line = pl.col("line").str.strip_chars()
    outside_quotes = line.str.replace_all(r'"(?:[^"]|"")*"', "")
    found = lines.filter(line.str.len_bytes() > 0).select(
        (line.str.count_matches('"', literal=True) % 2 == 0).all().alias("paired"),
        (outside_quotes.str.count_matches(",", literal=True) == cells - 1).all().alias("every"),
    )
    return bool(found["paired"].item() and found["every"].item())


def _long(frame: pl.DataFrame, metrics: list[str]) -> pl.DataFrame | None:
    """Long rows of ``metrics`` from a frame of numeric columns, or None if any rule is broken."""
    steps = [key for key in STEP_KEYS if key in frame.columns]
    if frame.height == 0 or not steps:
        return None
    if not all(frame.schema[key].is_numeric() for key in steps):
        return None  # a step given as text: the reference reader names it
    step = frame.select(pl.coalesce([pl.col(key).cast(pl.Float64) for key in steps])).to_series()
    if step.null_count() or not (step == step.floor()).all() or not ((step >= 0) & (step < 2.0**63)).all():
        return None
    if not metrics:
        return _to_table([])
    long = (
        frame.select(step.cast(pl.Int64).alias("step"), *[pl.col(m).cast(pl.Float64) for m in metrics])
        .unpivot(index="step", variable_name="name", value_name="value")
        .drop_nulls("value")
    )
    if not long.get_column("value").is_finite().all():
        return None
    if long.select(pl.struct("step", "name").is_duplicated().any()).item():
        return None
    return long.sort("step", "name")


def _first_record(probe: Probe) -> dict[str, Any] | None:
    path = probe.path
    if path.suffix.lower() == ".csv":
        # a byte that is not UTF-8 is the loader's error to name, not a reason to take the file for another format
        with open(path, newline="", encoding="utf-8-sig", errors="replace") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            row = next(reader, None)
        if header is None or row is None:
            return None
        return dict(zip((name.strip() for name in header), row))
    record = probe.first_line_record() if probe.first_line() else None
    return _file_logger_record(record) if isinstance(record, dict) else record
