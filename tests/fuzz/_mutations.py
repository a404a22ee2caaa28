"""Mutations of real log files and store files: truncation, byte edits, hostile values at any
path of a JSON record, other encodings, repeated records, and changed Parquet columns."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa
from hypothesis import strategies as st

BOM = b"\xef\xbb\xbf"

# Values a hostile writer puts where a string, a number, an id or an object belongs.
HOSTILE_VALUES = st.one_of(
    st.sampled_from([None, True, False, "", 0, -1, 2**63, -(2**63) - 1, 10**400, 1.5, "\ud800", "a\x00b",
                     [], {}, [[]], {"a": None}, "x" * 70_000]),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.builds(lambda depth: json.loads("[" * depth + "]" * depth), st.integers(1, 400)),
    st.lists(st.integers(-5, 5), max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)

# Raw text a hostile writer puts into a file.
HOSTILE_BYTES = st.one_of(
    st.sampled_from([BOM, b"\x00", b"\xff\xfe", b"\xc3", b'"', b"{", b"}", b"[" * 300, b"9" * 5000, b"1e999",
                     b"NaN", b"-Infinity", b"\n", b"\r\n", b"\\ud800", b",", b"null"]),
    st.binary(max_size=16),
)


@dataclass(frozen=True)
class Mutation:
    """One change to a file's bytes, described for the failure message."""

    label: str
    apply: Callable[[bytes], bytes]

    def __repr__(self) -> str:
        return self.label


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value[:20]):
            found.extend(_paths(child, (*prefix, index)))
    return found


def _set(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    target = value
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return value


def _records(data: bytes) -> tuple[list[bytes], bool]:
    """The file's JSON records: its lines when it is JSONL, else the whole file."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    if len(lines) > 1:
        return lines, True
    return [data], False


@st.composite
def json_value_mutation(draw) -> Mutation:
    record_index = draw(st.integers(0, 50))
    path_index = draw(st.integers(0, 10_000))
    value = draw(HOSTILE_VALUES)
    ascii_only = draw(st.booleans())

    def apply(data: bytes) -> bytes:
        records, jsonl = _records(data)
        index = record_index % len(records)
        try:
            document = json.loads(records[index])
        except ValueError:
            return data
        paths = _paths(document)
        path = paths[path_index % len(paths)]
        text = json.dumps(_set(document, path, value), ensure_ascii=ascii_only)
        records[index] = text.encode("utf-8", "surrogatepass")
        return b"\n".join(records) + (b"\n" if jsonl else b"")

    return Mutation(f"set a JSON value (record {record_index}, path {path_index}) to {value!r:.60}", apply)


@st.composite
def byte_mutation(draw) -> Mutation:
    kind = draw(st.sampled_from(["truncate", "overwrite", "insert", "encode", "repeat", "bom"]))
    where = draw(st.floats(0, 1))
    if kind == "truncate":
        return Mutation(f"cut at {where:.3f}", lambda data: data[: int(len(data) * where)])
    if kind == "overwrite":
        patch = draw(st.binary(min_size=1, max_size=8))
        return Mutation(f"overwrite {patch!r} at {where:.3f}",
                        lambda data: _splice(data, where, patch, replace=True))
    if kind == "insert":
        patch = draw(HOSTILE_BYTES)
        return Mutation(f"insert {patch[:20]!r} at {where:.3f}", lambda data: _splice(data, where, patch))
    if kind == "encode":
        encoding = draw(st.sampled_from(["utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252"]))
        return Mutation(f"re-encode as {encoding}",
                        lambda data: data.decode("utf-8", "replace").encode(encoding, "replace"))
    if kind == "repeat":
        times = draw(st.integers(2, 40))
        return Mutation(f"repeat {times} times", lambda data: data * times if data.endswith(b"\n") else data)
    return Mutation("prefix a byte-order mark", lambda data: BOM + data)


def _splice(data: bytes, where: float, patch: bytes, *, replace: bool = False) -> bytes:
    at = int(len(data) * where)
    return data[:at] + patch + data[at + len(patch) if replace else at:]


def mutations(json_like: bool) -> st.SearchStrategy[Mutation]:
    return st.one_of(byte_mutation(), json_value_mutation()) if json_like else byte_mutation()


@st.composite
def column_mutation(draw) -> Callable[[pa.Table], pa.Table]:
    """A change to one column of a Parquet table: dropped, emptied, retyped, renamed, nested."""
    index = draw(st.integers(0, 1000))
    kind = draw(st.sampled_from(["drop", "nulls", "text", "huge", "rename", "nested", "rows"]))

    def apply(table: pa.Table) -> pa.Table:
        if table.num_columns == 0:
            return table
        at = index % table.num_columns
        name = table.schema.field(at).name
        rows = table.num_rows
        if kind == "drop":
            return table.remove_column(at)
        if kind == "nulls":
            return table.set_column(at, name, pa.nulls(rows, table.schema.field(at).type))
        if kind == "text":
            return table.set_column(at, name, pa.array(["\ud800".encode("utf-8", "surrogatepass").decode(
                "utf-8", "replace")] * rows))
        if kind == "huge":
            return table.set_column(at, name, pa.array([2**63 - 1] * rows, pa.int64()))
        if kind == "rename":
            return table.rename_columns([f"{n}_x" if i == at else n for i, n in enumerate(table.column_names)])
        if kind == "nested":
            return table.set_column(at, name, pa.array([[[1]]] * rows))
        return table.slice(0, rows // 2) if rows else table

    return apply
