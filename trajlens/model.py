"""In-memory form of one run: five Arrow tables, plus a row builder for loaders.

Loaders of record-oriented formats (agent logs, verl dumps) append plain dicts to a
:class:`RunBuilder`; loaders of columnar data build the Arrow tables directly. Either way the
result is a :class:`RunData` whose tables have passed :func:`trajlens.schema.conform` and the
checks in :meth:`RunData.validate`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from trajlens.errors import InputError, Problem
from trajlens.schema import PRIMARY_KEYS, SCHEMAS, TABLES, TOKEN_ARRAYS, conform, empty


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
        """Add one trajectory; ``where`` names file and record for error messages."""
        row = {"run_id": self.run_id, "step": 0, "split": "train", "reward_channels": [], **trajectory}
        trajectory_id = row.get("trajectory_id")
        if trajectory_id in self._ids:
            raise InputError(where, field="trajectory_id", expected="a unique id", found=f"duplicate {trajectory_id!r}")
        row.setdefault("group_id", row.get("task_id"))
        _check_finite(row, ("reward", *(f"reward_channels.{c['name']}" for c in row["reward_channels"])), where)
        calls = []
        for index, call in enumerate(tool_calls):
            calls.append({
                "run_id": self.run_id,
                "step": row["step"],
                "trajectory_id": trajectory_id,
                "call_index": index,
                "format_error": False,
                "arguments": "{}",
                **call,
            })
        row.setdefault("num_turns", max((c["turn"] for c in calls), default=-1) + 1)
        token_row = None
        if tokens is not None:
            token_row = {"run_id": self.run_id, "step": row["step"], "trajectory_id": trajectory_id, **tokens}
            lengths = {k: len(v) for k, v in token_row.items() if k in TOKEN_ARRAYS and v is not None}
            if len(set(lengths.values())) > 1:
                raise InputError(where, field="tokens", expected="token arrays of one length", found=str(lengths))
        self._ids.add(trajectory_id)
        self._rows["trajectories"].append(row)
        self._rows["tool_calls"].extend(calls)
        if token_row is not None:
            self._rows["tokens"].append(token_row)

    def add_metric(self, step: int, name: str, value: float | None) -> None:
        self._rows["step_metrics"].append({"run_id": self.run_id, "step": step, "name": name, "value": value})

    def skip(self, error: InputError) -> None:
        """Record a skipped record (lenient mode)."""
        self.problems.append(error.as_problem())

    def build(self) -> RunData:
        tables = {"runs": pa.Table.from_pylist([self._run], schema=SCHEMAS["runs"])}
        for name, rows in self._rows.items():
            if not rows:
                tables[name] = empty(name)
                continue
            try:
                table = pa.Table.from_pylist(rows, schema=SCHEMAS[name])
            except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
                raise InputError(self.source, f"{name} rows do not fit the schema: {error}") from None
            tables[name] = conform(table, name, self.source)
        return RunData(**tables, problems=list(self.problems)).validate(self.source)


def concat_runs(parts: list[RunData]) -> RunData:
    """Join several partial loads of the same run (same ``runs`` row) into one."""
    first = parts[0]
    tables = {"runs": first.runs}
    for name in TABLES[1:]:
        tables[name] = pa.concat_tables([p.table(name) for p in parts])
    return RunData(**tables, problems=[p for part in parts for p in part.problems])


def check_values(name: str, table: pa.Table, source: str) -> None:
    """Per-row value checks beyond the schema: finite rewards, consistent token arrays."""
    if name == "runs":
        for row, config in enumerate(table.column("config").to_pylist()):
            _check_config(config, table.column("run_id")[row].as_py(), source)
    elif name == "tokens":
        _check_token_lengths(table, source)
    elif name == "trajectories" and table.num_rows:
        _check_finite_column(table, table.column("reward"), "reward", source)
        channels = pc.list_flatten(table.column("reward_channels"))
        if len(channels):
            values = pc.struct_field(channels, "value")
            parents = pc.list_parent_indices(table.column("reward_channels"))
            _check_finite_column(table, values, "reward_channels.value", source, parents)


def _check_config(config: str, run_id: str, source: str) -> None:
    try:
        parsed = json.loads(config)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise InputError(source, record=run_id, field="config", expected="a JSON object", found=config)


def _check_finite_column(table: pa.Table, values, field: str, source: str, parents=None) -> None:
    bad = pc.invert(pc.is_finite(values.fill_null(0.0)))
    if not pc.any(bad).as_py():
        return
    index = int(pc.index(bad, True).as_py())
    row = index if parents is None else parents[index].as_py()
    trajectory = table.column("trajectory_id")[row].as_py()
    raise InputError(source, record=trajectory, field=field,
                     expected="a finite number", found=str(values[index].as_py()))


def _check_unique(table: pa.Table, keys: tuple[str, ...], name: str, source: str) -> None:
    if table.num_rows == 0:
        return
    counts = table.group_by(list(keys)).aggregate([([], "count_all")])
    if counts.num_rows == table.num_rows:
        return
    duplicated = counts.filter(pc.greater(counts.column("count_all"), 1)).slice(0, 1).to_pylist()[0]
    key = ", ".join(f"{k}={duplicated[k]!r}" for k in keys)
    raise InputError(source, record=key, field=keys[-1], expected="unique keys", found="a duplicate")


def _check_token_lengths(tokens: pa.Table, source: str) -> None:
    if tokens.num_rows == 0:
        return
    mask_lengths = pc.list_value_length(tokens.column("response_mask"))
    for name in TOKEN_ARRAYS[1:]:
        lengths = pc.list_value_length(tokens.column(name))
        bad = pc.and_(pc.is_valid(lengths), pc.not_equal(lengths, mask_lengths))
        if pc.any(bad).as_py():
            row = int(pc.index(bad, True).as_py())
            trajectory = tokens.column("trajectory_id")[row].as_py()
            raise InputError(
                source, record=trajectory, field=name,
                expected=f"{mask_lengths[row].as_py()} values (the response_mask length)",
                found=f"{lengths[row].as_py()}",
            )
        values = pc.list_flatten(tokens.column(name))
        if len(values) and not pc.all(pc.is_finite(values.fill_null(0.0))).as_py():
            rows = pc.list_parent_indices(tokens.column(name))
            first = int(pc.index(pc.invert(pc.is_finite(values.fill_null(0.0))), True).as_py())
            trajectory = tokens.column("trajectory_id")[rows[first].as_py()].as_py()
            raise InputError(source, record=trajectory, field=name,
                             expected="finite numbers", found=str(values[first].as_py()))


def _check_finite(row: dict[str, Any], names: Iterable[str], where: str) -> None:
    for name in names:
        if name.startswith("reward_channels."):
            channel = name.split(".", 1)[1]
            value = next(c["value"] for c in row["reward_channels"] if c["name"] == channel)
        else:
            value = row.get(name)
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(where, field=name, expected="a finite number", found=str(value))
