"""How much of a log file trajlens will read, and how long it will spend on log-supplied patterns.

A log is data someone else wrote, often while it crashed. These limits keep one bad file
from exhausting the stack, the memory or the clock; past one, ingest stops with a one-line
error naming the file, the record and the limit, and how to raise it (``--limit NAME=VALUE``
on the command line, ``Limits(...)`` in Python). The defaults are far above anything a
trainer or harness writes.

==================  =============  ==========================================================
name                default        what it bounds
==================  =============  ==========================================================
``depth``           200            JSON nesting levels, anywhere (tool arguments included)
``field_mb``        64             one text field: a command, an observation, arguments
``record_mb``       512            one record: a JSONL line, or a whole JSON log file
``regex_seconds``   1.0            one log-supplied pattern (mini-swe-agent ``action_regex``)
==================  =============  ==========================================================

:func:`using` makes a :class:`Limits` current for the loaders called inside it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Iterator

from trajlens.errors import ConfigError

MB = 1 << 20
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class Limits:
    """Bounds on what one log may make a loader do."""

    depth: int = 200
    """Deepest JSON nesting accepted (objects and lists), counted from the top of a record."""
    field_mb: float = 64
    """Largest text field, in MiB of UTF-8."""
    record_mb: float = 512
    """Largest record (a JSONL line, or a whole JSON file), in MiB."""
    regex_seconds: float = 1.0
    """Time allowed for one log-supplied regular expression on one message."""

    @property
    def field_bytes(self) -> int:
        return int(self.field_mb * MB)

    @property
    def record_bytes(self) -> int:
        return int(self.record_mb * MB)

    @classmethod
    def parse(cls, items: list[str]) -> "Limits":
        """Limits from ``NAME=VALUE`` strings; every bad item is reported together."""
        names = {f.name: f.type for f in dataclasses.fields(cls)}
        values: dict[str, float] = {}
        problems = []
        for item in items:
            name, sep, text = item.partition("=")
            name = name.strip()
            if not sep or name not in names:
                problems.append(f"--limit {item!r}: expected NAME=VALUE with NAME one of {', '.join(names)}")
                continue
            try:
                value = float(text)
            except ValueError:
                problems.append(f"--limit {name}: expected a number, found {text!r}")
                continue
            if not value > 0:
                problems.append(f"--limit {name}: expected a positive number, found {text!r}")
                continue
            values[name] = int(value) if name == "depth" else value
        if problems:
            raise ConfigError(problems)
        return cls(**values)  # type: ignore[arg-type]


DEFAULT = Limits()

_current: contextvars.ContextVar[Limits] = contextvars.ContextVar("trajlens_limits", default=DEFAULT)


def current() -> Limits:
    """The limits in force (:data:`DEFAULT` outside :func:`using`)."""
    return _current.get()


@contextlib.contextmanager
def using(limits: Limits | None) -> Iterator[Limits]:
    """Make ``limits`` current for the block (``None`` keeps the current ones)."""
    if limits is None:
        yield current()
        return
    token = _current.set(limits)
    try:
        yield limits
    finally:
        _current.reset(token)


# Strings (with their escapes) hold brackets that are not structure.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def json_depth(data: bytes, limit: int | None = None) -> int:
    """Deepest nesting of ``[``/``{`` in JSON text, without parsing it (linear, no recursion).

    With ``limit``, text holding no more than ``limit`` opening brackets in all is answered
    from that count (it cannot nest deeper), without the scan.
    """
    import numpy as np

    openings = data.count(b"[") + data.count(b"{")
    if openings < 2 or (limit is not None and openings <= limit):
        return openings
    structure = _JSON_STRING.sub(b"", data)
    codes = np.frombuffer(structure, dtype=np.uint8)
    steps = np.zeros(codes.shape, dtype=np.int32)
    steps[(codes == ord("[")) | (codes == ord("{"))] = 1
    steps[(codes == ord("]")) | (codes == ord("}"))] = -1
    return int(np.cumsum(steps).max(initial=0))



def type_name(value: Any) -> str:
    """How a JSON value is named in error messages ("a list", "an object", ...)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer" if INT64[0] <= value <= INT64[1] else f"an integer of {value.bit_length()} bits"
    return {dict: "an object", list: "a list", str: "a string", float: "a number", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def text_problem(value: str, max_bytes: int) -> str | None:
    """Why ``value`` cannot be stored as text (a lone surrogate, too long), or ``None``."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as error:
        return f"a lone UTF-16 surrogate at character {error.start}"
    if size > max_bytes:
        return f"{size:,} bytes (the field limit is {max_bytes:,}; raise it with --limit field_mb=...)"
    return None

__all__ = ["DEFAULT", "INT32", "INT64", "Limits", "MB", "current", "json_depth", "text_problem", "type_name", "using"]
