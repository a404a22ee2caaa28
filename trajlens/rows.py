"""In-memory form of one run: five Arrow tables, plus typed row builders for loaders.

Loaders of record-oriented formats (agent logs, verl dumps) make rows with the row types
:data:`TRAJECTORY`, :data:`TOOL_CALL` and :data:`TOKENS` (keyword names checked against the
schema's columns) and add them to a :class:`RunBuilder`, which checks every value against
its column's type and range once (integers that fit, finite floats, storable text) and
raises the standard :class:`InputError` naming the record and field. Loaders of columnar
data build the Arrow tables directly. Either way the result is a :class:`RunData` whose
tables have passed :func:`trajlens.schema.conform` and the checks in
:meth:`RunData.validate`.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from trajlens.errors import ConfigError, InputError, Problem
from trajlens.limits import FLOAT32_MAX, reward_problem
from trajlens.schema import PRIMARY_KEYS, SCHEMAS, TABLE_COLUMNS, TABLES, TOKEN_ARRAYS, Column, conform, empty

# Rows are turned into Arrow tables in chunks of this many, so a run of millions of small
# records is held columnar rather than as millions of dicts.
CHUNK_ROWS = 20_000

_INTEGER_BOUNDS = {
    pa.int32(): (-(2**31), 2**31 - 1),
    pa.int64(): (-(2**63), 2**63 - 1),
}


class RowType:
    """Rows of one table, made by keyword: names are the schema's columns, nothing else.

    ``RowType("tool_calls", filled=...)`` makes dicts holding every column but the ``filled``
    ones (which :class:`RunBuilder` sets: run id, step, ids, order); a nullable column left
    out is ``None``, a non-nullable one takes its entry in ``defaults`` or must be given.
    An unknown name is a programming error (``TypeError``); values are checked by
    :meth:`check`.
    """

    def __init__(self, table: str, *, filled: tuple[str, ...], defaults: dict[str, Any] | None = None) -> None:
        self.table = table
        self.columns: dict[str, Column] = {c.name: c for c in TABLE_COLUMNS[table] if c.name not in filled}
        self.defaults = dict(defaults or {})
        self.required = [n for n, c in self.columns.items() if not c.nullable and n not in self.defaults]

    def __call__(self, **values: Any) -> dict[str, Any]:
        unknown = [name for name in values if name not in self.columns]
        if unknown:
            raise TypeError(f"{self.table} has no column {unknown[0]!r}")
        missing = [name for name in self.required if name not in values]
        if missing:
            raise TypeError(f"{self.table} row needs {missing[0]!r}")
        row = {name: None for name in self.columns}
        row.update(self.defaults)
        row.update(values)
        return row

    def check(self, row: dict[str, Any], where: str, record: str | None = None, field_prefix: str = "") -> None:
        """Raise an InputError when a value does not fit its column (type, range, text)."""
        from trajlens import limits
        from trajlens.limits import text_problem, type_name

        max_bytes = limits.current().field_bytes
        for name, column in self.columns.items():
            value = row.get(name)
            if value is None:
                continue
            problem = _value_problem(value, column.type, max_bytes, text_problem, type_name)
            if problem is not None:
                expected, found = problem
                raise InputError(where, record=record, field=field_prefix + name, expected=expected, found=found)


def _value_problem(value: Any, kind: pa.DataType, max_bytes: int, text_problem, type_name) -> tuple[str, str] | None:
    if pa.types.is_string(kind):
        if not isinstance(value, str):
            return "a string", type_name(value)
        problem = text_problem(value, max_bytes)
        return None if problem is None else ("UTF-8 text within the field limit", problem)
    if pa.types.is_boolean(kind):
        return None if isinstance(value, bool) else ("true or false", type_name(value))
    if pa.types.is_integer(kind):
        low, high = _INTEGER_BOUNDS[kind]
        if isinstance(value, bool) or not isinstance(value, int):
            return f"an integer ({kind})", type_name(value)
        if not low <= value <= high:
            digits = str(value)
            return f"an integer from {low} to {high}", digits if len(digits) <= 40 else f"{len(digits)} digits"
        return None
    if pa.types.is_floating(kind):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "a number", type_name(value)
        try:
            number = float(value)
        except OverflowError:
            return "a finite number", f"an integer of {len(str(value))} digits"
        if not math.isfinite(number) or (kind == pa.float32() and abs(number) > 3.4e38):
            return f"a finite number ({kind})", str(value)
        return None
    if pa.types.is_list(kind):
        if not isinstance(value, list):
            return "a list", type_name(value)
        for index, item in enumerate(value):
            if item is None:
                continue
            problem = _value_problem(item, kind.value_type, max_bytes, text_problem, type_name)
            if problem is not None:
                return f"{problem[0]} at [{index}]", problem[1]
        return None
    if pa.types.is_struct(kind):
        if not isinstance(value, dict):
            return "an object", type_name(value)
        for field in kind:
            item = value.get(field.name)
            if item is not None:
                problem = _value_problem(item, field.type, max_bytes, text_problem, type_name)
                if problem is not None:
                    return f"{problem[0]} in '{field.name}'", problem[1]
        return None
    return None


TRAJECTORY = RowType("trajectories", filled=("run_id",),
                     defaults={"step": 0, "split": "train", "reward_channels": [], "group_id": None, "num_turns": None,
                               "trajectory_id": None})
"""Trajectory rows; ``group_id`` defaults to ``task_id``, ``num_turns`` to the turns of the calls, and
``trajectory_id`` is set by the loader's driver when the format has none of its own."""

TOOL_CALL = RowType("tool_calls", filled=("run_id", "step", "trajectory_id", "call_index"),
                    defaults={"arguments": "{}", "format_error": False})
"""Tool-call rows, in call order; the builder numbers them and sets run, step and trajectory."""

TOKENS = RowType("tokens", filled=("run_id", "step", "trajectory_id"))
"""Token-array rows of one trajectory."""


@dataclass
class RunData:
    """One run's five tables, each in its exact trajlens schema."""

    runs: pa.Table
    trajectories: pa.Table
    tool_calls: pa.Table
    tokens: pa.Table
    step_metrics: pa.Table
    problems: list[Problem] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return str(self.runs.column("run_id")[0].as_py())

    def table(self, name: str) -> pa.Table:
        """The table ``name`` (one of :data:`~trajlens.schema.TABLES`); a :class:`ConfigError` for any other name."""
        if name not in TABLES:
            raise ConfigError([f"no table {name!r} (tables: {', '.join(TABLES)})"])
        return getattr(self, name)

    def validate(self, source: str) -> "RunData":
        """Check keys and cross-table consistency; raise :class:`InputError` naming ``source``."""
        if self.runs.num_rows != 1:
            raise InputError(source, expected="exactly one run", found=f"{self.runs.num_rows} rows")
        for name in TABLES:
            _check_unique(self.table(name), PRIMARY_KEYS[name], name, source)
        known = set(self.trajectories.column("trajectory_id").to_pylist())
        for name in ("tool_calls", "tokens"):
            ids = pc.unique(self.table(name).column("trajectory_id")).to_pylist()
            stray = [i for i in ids if i not in known]
            if stray:
                raise InputError(source, record=stray[0], field="trajectory_id",
                                 expected="an id present in trajectories", found=stray[0])
        for name in TABLES:
            check_values(name, self.table(name), source)
        return self


class RunBuilder:
    """Collects rows for one run and turns them into a validated :class:`RunData`.

    ``add_trajectory`` takes the trajectory row, its tool calls and optionally its token
    arrays together, so a record is either wholly in or wholly out.
    """

    def __init__(
        self,
        run_id: str,
        *,
        name: str | None = None,
        estimator: str | None = None,
        config: dict[str, Any] | None = None,
        source_format: str,
        source: str,
    ) -> None:
        self.run_id = run_id
        self.source = source
        self._run = {
            "run_id": run_id,
            "name": name or run_id,
            "estimator": estimator,
            "config": json.dumps(config or {}, sort_keys=True, default=str),
            "source_format": source_format,
            "source": source,
        }
        self._rows: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES if name != "runs"}
        self._chunks: dict[str, list[pa.Table]] = {name: [] for name in TABLES if name != "runs"}
        self._ids: set[str] = set()
        self.problems: list[Problem] = []

    def add_trajectory(
        self,
        trajectory: dict[str, Any],
        tool_calls: Iterable[dict[str, Any]] = (),
        tokens: dict[str, Any] | None = None,
        *,
        where: str,
    ) -> None:
        """Add one trajectory, all or nothing; ``where`` names file and record for error messages.

        Rows may be plain dicts (only schema columns) or made with :data:`TRAJECTORY`,
        :data:`TOOL_CALL` and :data:`TOKENS`; every value is checked against its column.
        """
        row = {**TRAJECTORY.defaults, **trajectory}
        row.setdefault("group_id", None)
        if row["group_id"] is None:
            row["group_id"] = row.get("task_id")
        TRAJECTORY.check(row, where)
        trajectory_id = row.get("trajectory_id")
        if trajectory_id in self._ids:
            raise InputError(where, field="trajectory_id", expected="a unique id", found=f"duplicate {trajectory_id!r}")
        _check_finite(row, ("reward", *(f"reward_channels.{c['name']}" for c in row["reward_channels"])), where)
        calls = []
        for index, call in enumerate(tool_calls):
            call_row = {**TOOL_CALL.defaults, **call}
            TOOL_CALL.check(call_row, where, field_prefix=f"tool_calls[{index}].")
            calls.append({"run_id": self.run_id, "step": row["step"], "trajectory_id": trajectory_id,
                          "call_index": index, **call_row})
        if row.get("num_turns") is None:
            row["num_turns"] = max((c["turn"] for c in calls), default=-1) + 1
        token_row = None
        if tokens is not None:
            TOKENS.check(tokens, where, field_prefix="tokens.")
            token_row = {"run_id": self.run_id, "step": row["step"], "trajectory_id": trajectory_id, **tokens}
            lengths = {k: len(v) for k, v in token_row.items() if k in TOKEN_ARRAYS and v is not None}
            if len(set(lengths.values())) > 1:
                raise InputError(where, field="tokens", expected="token arrays of one length", found=str(lengths))
        self._ids.add(trajectory_id)
        self._append("trajectories", [{"run_id": self.run_id, **row}])
        self._append("tool_calls", calls)
        if token_row is not None:
            self._append("tokens", [token_row])

    def _append(self, name: str, rows: list[dict[str, Any]]) -> None:
        pending = self._rows[name]
        pending.extend(rows)
        if len(pending) >= CHUNK_ROWS:
            self._chunks[name].append(self._to_table(name, pending))
            pending.clear()

    def _to_table(self, name: str, rows: list[dict[str, Any]]) -> pa.Table:
        try:
            return pa.Table.from_pylist(rows, schema=SCHEMAS[name])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
            raise InputError(self.source, f"{name} rows do not fit the schema: {error}") from None

    def add_metric(self, step: int, name: str, value: float | None) -> None:
        self._append("step_metrics", [{"run_id": self.run_id, "step": step, "name": name, "value": value}])

    def skip(self, error: InputError) -> None:
        """Record a skipped record (lenient mode)."""
        self.problems.append(error.as_problem())

    def note(self, error: InputError) -> None:
        """Record how a record that was kept was read otherwise (in either mode)."""
        self.problems.append(error.as_problem("note"))

    def add_record(self, item: Any, trajectories: Callable[[Any], Iterable[tuple[Any, ...]]], *,
                   where: str, strict: bool) -> None:
        """Add every trajectory of one source record: ``trajectories(item)`` yields
        ``(row, tool_calls)`` or ``(row, tool_calls, tokens)``. A record its container could not
        read (``item`` is the :class:`InputError`) or that fails a check is raised, or skipped
        and noted when ``strict`` is false."""
        try:
            if isinstance(item, InputError):
                raise item
            for made in trajectories(item):
                self.add_trajectory(*made, where=where)
        except InputError as error:
            if strict:
                raise
            self.skip(error)

    def build(self) -> RunData:
        tables = {"runs": pa.Table.from_pylist([self._run], schema=SCHEMAS["runs"])}
        for name, rows in self._rows.items():
            parts = self._chunks[name] + ([self._to_table(name, rows)] if rows else [])
            if not parts:
                tables[name] = empty(name)
                continue
            tables[name] = conform(pa.concat_tables(parts), name, self.source)
        return RunData(**tables, problems=list(self.problems)).validate(self.source)


class RowProblem(NamedTuple):
    """A row of a table that fails a per-row value check, and the error that names it."""

    row: int
    error: InputError


class CheckedRows(NamedTuple):
    """A table without its rows that failed the per-row value checks, and what each failed."""

    table: pa.Table
    problems: list[Problem]


def check_values(name: str, table: pa.Table, source: str) -> None:
    """Per-row value checks beyond the schema: finite rewards, consistent token arrays. Raise the
    :class:`InputError` of the first failure (field by field, then row by row)."""
    first = next(value_problems(name, table, source), None)
    if first is not None:
        raise first.error


def without_bad_rows(name: str, table: pa.Table, source: str, other: Iterable[RowProblem] = ()) -> CheckedRows:
    """``table`` (rows of table ``name``) less every row that fails :func:`check_values` or has
    one of the ``other`` problems (a reader's own row checks, found first), with one problem per
    row left out, in row order (lenient loading)."""
    first_error: dict[int, InputError] = {}
    for row, error in itertools.chain(other, value_problems(name, table, source)):
        first_error.setdefault(row, error)
    if not first_error:
        return CheckedRows(table, [])
    keep = np.ones(table.num_rows, dtype=bool)
    keep[list(first_error)] = False
    problems = [first_error[row].as_problem() for row in sorted(first_error)]
    return CheckedRows(table.filter(pa.array(keep)), problems)


def value_problems(name: str, table: pa.Table, source: str) -> Iterator[RowProblem]:
    """Every failure of the per-row value checks of ``table`` (rows of table ``name``), field by
    field and within a field row by row; a row can fail more than one. Lazy: the first costs
    one field's check."""
    if name == "runs":
        for row, config in enumerate(table.column("config").to_pylist()):
            try:
                _check_config(config, table.column("run_id")[row].as_py(), source)
            except InputError as error:
                yield RowProblem(row, error)
    elif name == "tokens":
        yield from _token_problems(table, source)
    elif name == "tool_calls" and table.num_rows:
        for position in ("call_index", "turn"):  # both count from 0
            yield from _below_problems(table, position, pa.scalar(0, table.schema.field(position).type), "0 or more",
                                       source)
        yield from _below_problems(table, "token_start", pa.scalar(0, pa.int64()), "0 or more", source)
        yield from _below_problems(table, "token_end", table.column("token_start"), "token_start or more", source)
    elif name == "trajectories" and table.num_rows:
        for count in ("num_turns", "model_tokens"):
            yield from _below_problems(table, count, pa.scalar(0, table.schema.field(count).type), "0 or more", source)
        yield from _finite_problems(table, table.column("reward"), "reward", source)
        channels = pc.list_flatten(table.column("reward_channels"))
        if len(channels):
            values = pc.struct_field(channels, "value")
            parents = pc.list_parent_indices(table.column("reward_channels"))
            yield from _finite_problems(table, values, "reward_channels.value", source, parents)
            yield from _repeated_channels(table, pc.struct_field(channels, "name"), parents, source)


def _check_config(config: str, run_id: str, source: str) -> None:
    from trajlens.limits import is_not_json, parse_json

    try:
        parsed = parse_json(config, source, record=run_id)
    except InputError as error:
        if error.expected != "JSON" and not is_not_json(error):  # past a limit; text that is not JSON is refused below
            field = "config" if error.field is None else f"config.{error.field}"
            raise InputError(source, error.detail, record=run_id, field=field, expected=error.expected,
                             found=error.found) from None
        parsed = None
    if not isinstance(parsed, dict):
        raise InputError(source, record=run_id, field="config", expected="a JSON object", found=config)




def _below_problems(table: pa.Table, field: str, least: pa.Scalar | pa.ChunkedArray, expected: str,
                    source: str) -> Iterator[RowProblem]:
    """The rows whose ``field`` is below ``least`` (a value, or another column: a call's span
    ending before it starts), each naming its trajectory (and call); nulls are not compared."""
    values = table.column(field)
    bad = pc.fill_null(pc.less(values, least), False)
    for row in np.flatnonzero(bad.to_numpy(zero_copy_only=False)) if pc.any(bad).as_py() else ():
        row = int(row)
        record = table.column("trajectory_id")[row].as_py()
        if "call_index" in table.column_names:
            record = f"{record} call {table.column('call_index')[row].as_py()}"
        bound = least[row].as_py() if isinstance(least, pa.ChunkedArray) else None
        yield RowProblem(row, InputError(source, record=record, field=field,
                                         expected=expected if bound is None else f"{expected} ({bound})",
                                         found=str(values[row].as_py())))


def _finite_problems(table: pa.Table, values: pa.Array | pa.ChunkedArray, field: str, source: str,
                     parents: pa.Array | pa.ChunkedArray | None = None) -> Iterator[RowProblem]:
    """The rows of ``table`` with a value of ``values`` (one per row, or one per entry of the row
    ``parents`` gives) that is not finite or past float32, each with its first such value."""
    values = values.fill_null(0.0)
    bad = pc.or_(pc.invert(pc.is_finite(values)), pc.greater(pc.abs(values), FLOAT32_MAX))
    for index, row in _first_per_row(bad, parents):
        trajectory = table.column("trajectory_id")[row].as_py()
        value = values[index].as_py()
        yield RowProblem(row, InputError(source, record=trajectory, field=field, expected=reward_problem(value),
                                         found=str(value)))


def _repeated_channels(table: pa.Table, names: pa.Array | pa.ChunkedArray, parents: pa.Array | pa.ChunkedArray,
                       source: str) -> Iterator[RowProblem]:
    """The rows whose reward channels name one channel twice (which value would be its?), each
    with the first name repeated."""
    pairs = pa.table({"row": parents, "name": names})
    counted = pairs.group_by(["row", "name"], use_threads=False).aggregate([([], "count_all")])
    repeated = counted.filter(pc.greater(counted.column("count_all"), 1)).sort_by([("row", "ascending"), ("name", "ascending")])
    seen: set[int] = set()
    for row, name in zip(repeated.column("row").to_pylist(), repeated.column("name").to_pylist()):
        if row in seen:
            continue
        seen.add(row)
        trajectory = table.column("trajectory_id")[row].as_py()
        yield RowProblem(row, InputError(source, record=trajectory, field="reward_channels.name",
                                         expected="each channel once", found=f"{name!r} more than once"))


def _first_per_row(bad: pa.Array | pa.ChunkedArray,
                   parents: pa.Array | pa.ChunkedArray | None = None) -> Iterator[tuple[int, int]]:
    """``(index, row)`` of the first true entry of ``bad`` in each row, rows ascending: an entry is
    its own row, or belongs to row ``parents[index]`` (ascending, as list parent indices are)."""
    if not pc.any(bad).as_py():
        return
    indices = np.flatnonzero(bad.fill_null(False).to_numpy(zero_copy_only=False))
    rows = indices if parents is None else np.asarray(parents)[indices]
    firsts = np.flatnonzero(np.diff(rows, prepend=-1))  # entries of one row lie together, rows ascending
    for first in firsts:
        yield int(indices[first]), int(rows[first])


def _check_unique(table: pa.Table, keys: tuple[str, ...], name: str, source: str) -> None:
    if table.num_rows == 0:
        return
    counts = table.group_by(list(keys)).aggregate([([], "count_all")])
    if counts.num_rows == table.num_rows:
        return
    duplicated = counts.filter(pc.greater(counts.column("count_all"), 1)).slice(0, 1).to_pylist()[0]
    key = ", ".join(f"{k}={duplicated[k]!r}" for k in keys)
    raise InputError(source, record=key, field=keys[-1], expected="unique keys", found="a duplicate")


def _token_problems(tokens: pa.Table, source: str) -> Iterator[RowProblem]:
    """Token rows whose arrays are not as long as their ``response_mask``, or hold a value that
    is not finite: per array, the length failures then the value failures."""
    if tokens.num_rows == 0:
        return
    mask_lengths = pc.list_value_length(tokens.column("response_mask"))
    for name in TOKEN_ARRAYS[1:]:
        lengths = pc.list_value_length(tokens.column(name))
        bad = pc.and_(pc.is_valid(lengths), pc.not_equal(lengths, mask_lengths))
        for _, row in _first_per_row(bad):
            trajectory = tokens.column("trajectory_id")[row].as_py()
            yield RowProblem(row, InputError(
                source, record=trajectory, field=name,
                expected=f"{mask_lengths[row].as_py()} values (the response_mask length)",
                found=f"{lengths[row].as_py()}",
            ))
        values = pc.list_flatten(tokens.column(name))
        if not len(values) or _surely_finite(values):
            continue
        not_finite = pc.invert(pc.is_finite(values.fill_null(0.0)))
        parents = pc.list_parent_indices(tokens.column(name))
        for first, row in _first_per_row(not_finite, parents):
            trajectory = tokens.column("trajectory_id")[row].as_py()
            yield RowProblem(row, InputError(source, record=trajectory, field=name,
                                             expected="finite numbers", found=str(values[first].as_py())))


def _surely_finite(values: pa.ChunkedArray) -> bool:
    """True when every value is finite, known from one float64 sum per chunk (no float32 array can
    overflow it, and a NaN or an infinity makes it non-finite); False when it cannot tell (a null
    value, or float64 values large enough to overflow), which leaves it to the exact test."""
    for chunk in values.chunks:
        if chunk.null_count or not pa.types.is_floating(chunk.type):
            return False
        with np.errstate(over="ignore", invalid="ignore"):
            total = np.sum(chunk.to_numpy(zero_copy_only=False), dtype=np.float64)
        if not np.isfinite(total):
            return False
    return True


def _check_finite(row: dict[str, Any], names: Iterable[str], where: str) -> None:
    for name in names:
        if name.startswith("reward_channels."):
            channel = name.split(".", 1)[1]
            value = next(c["value"] for c in row["reward_channels"] if c["name"] == channel)
        else:
            value = row.get(name)
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(where, field=name, expected="a finite number", found=str(value))
