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

Integers in JSON text are read up to :data:`MAX_INT_DIGITS` digits (Python's own limit on
converting text to an integer); a longer one is refused with an error naming its field.
A UTF-8 byte-order mark at the start of JSON text is skipped, as JSON readers that accept
one do.

:func:`using` makes a :class:`Limits` current for the loaders called inside it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Iterator

from trajlens.errors import ConfigError, InputError

MB = 1 << 20
# Python refuses to convert longer digit strings to int (CVE-2020-10735); JSON holding one is refused.
MAX_INT_DIGITS = 4300
UTF8_BOM = b"\xef\xbb\xbf"
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32: the estimators compute advantages in float32, as the trainers do, so a
reward or a channel weight past it would reach them as infinite."""

FLOAT32_TINY = 1.1754943508222875e-38
"""The smallest normal float32 in size: a setting below it becomes 0 (or a subnormal that
divides to infinity) in the estimators' float32 arithmetic."""


def reward_problem(value: float) -> str | None:
    """What a reward (or a reward channel's value) is expected to be, when ``value`` is not that:
    finite, and within float32, in which the estimators compute; None when it is."""
    if not math.isfinite(value):
        return "a finite number"
    if abs(value) > FLOAT32_MAX:
        return f"a number of at most {FLOAT32_MAX:.4g} in size (float32, in which the estimators compute)"
    return None


FLOAT32_NUMBER = f"a finite number that float32 holds (0, or {FLOAT32_TINY:.4g} to {FLOAT32_MAX:.4g} in size)"
"""What :func:`float32_number` accepts, in words, for the messages that refuse a setting."""


def _size(value: object) -> float | None:
    """``abs(value)`` as a float; None when ``value`` is no number (a bool is none) or a Python
    integer too large for a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return abs(float(value))
    except OverflowError:
        return None


def float32_finite(value: object) -> bool:
    """Whether ``value`` is a number float32 holds as a finite one: not above
    :data:`FLOAT32_MAX` in size."""
    size = _size(value)
    return size is not None and math.isfinite(size) and size <= FLOAT32_MAX


def float32_number(value: object) -> bool:
    """Whether a setting keeps its meaning as a float32: :func:`float32_finite`, and 0 or not
    below :data:`FLOAT32_TINY` in size (a smaller one becomes 0 or a subnormal)."""
    size = _size(value)
    return float32_finite(value) and size is not None and (size == 0 or size >= FLOAT32_TINY)


LIMIT_CEILING: dict[str, float] = {"depth": 100_000, "field_mb": 1 << 20, "record_mb": 1 << 20, "regex_seconds": 86_400}
"""The largest value ``--limit`` (or :class:`Limits`) takes for each limit (a TiB, a day, far past any log): a bound
must stay a number every reader can hold."""


def _expected(name: str, value: object) -> str | None:
    """What the limit ``name`` expects, when ``value`` is not that; None when it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "a number"
    if not 0 < value <= LIMIT_CEILING[name]:
        return f"a positive number up to {LIMIT_CEILING[name]:,.0f}"
    if name.endswith("_mb") and value * MB < 1:
        return f"at least one byte ({1 / MB:.2g} MB)"
    if name == "depth" and not float(value).is_integer():
        return "a whole number of levels"
    return None


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

    def __post_init__(self) -> None:
        problems = [f"Limits {field.name}: expected {expected}, found {getattr(self, field.name)!r}"
                    for field in dataclasses.fields(self) if (expected := _expected(field.name, getattr(self, field.name)))]
        if problems:
            raise ConfigError(problems)

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
            if (expected := _expected(name, value)) is not None:
                problems.append(f"--limit {name}: expected {expected}, found {text!r}")
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
    if limits is not None and not isinstance(limits, Limits):
        raise ConfigError([f"limits: expected Limits(...) (from trajlens.limits), got {type(limits).__name__}"])
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


class _LongInteger(int):
    """Stands in for an integer too long to convert, so the field holding it can be named.

    It is an ``int`` (of value 0) so that format detection, which reads a record's shape
    alone, sees an integer where the log holds one; no loader ever keeps it as a value.
    """

    digits: int

    def __new__(cls, digits: int) -> "_LongInteger":
        stand_in = super().__new__(cls, 0)
        stand_in.digits = digits
        return stand_in


def _ends_early(data: bytes, error: json.JSONDecodeError) -> bool:
    """Whether the parser stopped because the text ended inside a value (a string with no closing
    quote, an object or list that does not close, ``nu`` of ``null``), not at a character that is
    no JSON."""
    rest = error.doc[error.pos:].rstrip()
    return (error.msg.startswith("Unterminated string") or not rest
            or any(word.startswith(rest) for word in _LITERALS))


def is_not_json(error: InputError) -> bool:
    """Whether ``error`` is :func:`parse_json`'s for text that is no JSON (malformed, or cut
    short), not a limit's: a caller that keeps such text as it is (a tool call's arguments) tells
    them apart by it."""
    detail = error.detail or ""
    return detail.startswith("not JSON") or detail == "JSON cut short"


_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
"""The words a JSON value may be (Python's reader takes the last three too)."""


def _integer_reader(seen: list[int]) -> Any:
    """A ``parse_int`` for :func:`json.loads` that keeps long integers as :class:`_LongInteger`
    and notes that it met one (so the parsed value is searched only then)."""

    def read(text: str) -> Any:
        digits = len(text.lstrip("-"))
        if digits > MAX_INT_DIGITS:
            seen.append(digits)
            return _LongInteger(digits)
        return int(text)

    return read


def _long_integer_at(value: Any) -> tuple[str, int] | None:
    """The dotted path and digit count of the first :class:`_LongInteger` in a parsed value."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, _LongInteger):
            return path, item.digits
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        pending.extend((f"{path}.{key}" if path else str(key), child) for key, child in reversed(list(children)))
    return None


def undecodable(error: UnicodeDecodeError) -> str:
    """What an error says it found where UTF-8 text was expected: where the bad byte is."""
    return f"an undecodable byte at offset {error.start}"


def parse_json(
    text: str | bytes, file: str, *, record: str | int | None = None, sniff: bool = False, first_key_wins: bool = False
) -> Any:
    """Parse one JSON record within the size and nesting limits; an InputError otherwise.

    A leading UTF-8 byte-order mark is skipped; an integer of more than
    :data:`MAX_INT_DIGITS` digits is refused, naming the field that holds it. Format
    detection (``sniff``, on a file's head) only looks at a record's shape: it keeps such an
    integer as a stand-in integer and reads a record past the size or depth limit (a record
    the parser cannot nest is still no JSON), so the loader, not the detector, reports them.
    A key repeated in one object keeps its last value, as Python reads JSON, or with
    ``first_key_wins`` its first, as Polars' JSON reader does (a reader with a Polars fast path).
    """
    limits = current()
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    if not data.strip():
        raise InputError(file, record=record, expected="JSON", found="an empty line" if record else "an empty file")
    if len(data) > limits.record_bytes and not sniff:
        raise InputError(file, record=record, expected=f"a record of at most {limits.record_bytes:,} bytes "
                         "(raise it with --limit record_mb=...)", found=f"{len(data):,} bytes")
    depth = 0 if sniff else json_depth(data, limits.depth)
    if depth > limits.depth:
        raise InputError(file, record=record, expected=f"JSON nested at most {limits.depth} levels "
                         "(raise it with --limit depth=...)", found=f"{depth} levels")
    try:
        long_integers: list[int] = []
        value = json.loads(data, parse_int=_integer_reader(long_integers),
                           object_pairs_hook=_first_value_of_each_key if first_key_wins else None)
    except json.JSONDecodeError as error:
        if _ends_early(data, error):  # the text stops inside a value: a file or record cut short
            whole = "its last record" if record is None else "the record"
            ending = data.rstrip()[-20:].decode("utf-8", "replace")
            raise InputError(file, "JSON cut short", record=record, expected=f"JSON that closes {whole}",
                             found=f"{'a file' if record is None else 'a record'} ending in {ending!r}") from None
        where = f"line {error.lineno}, column {error.colno}" if record is None else record
        raise InputError(file, f"not JSON ({error.msg})", record=where, expected="JSON") from None
    except UnicodeDecodeError as error:
        raise InputError(file, record=record, expected="UTF-8 text", found=undecodable(error)) from None
    except RecursionError:  # only reachable with a depth limit above the interpreter's
        raise InputError(file, record=record, expected="JSON the parser can nest", found="deeper nesting") from None
    long_integer = _long_integer_at(value) if long_integers and not sniff else None
    if long_integer is not None:
        path, digits = long_integer
        raise InputError(file, record=record, field=path or None,
                         expected=f"an integer of at most {MAX_INT_DIGITS} digits", found=f"{digits:,} digits")
    return value


def _first_value_of_each_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        obj.setdefault(key, value)
    return obj


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

__all__ = ["DEFAULT", "INT32", "INT64", "Limits", "MAX_INT_DIGITS", "MB", "UTF8_BOM", "current", "json_depth", "parse_json",
           "text_problem", "type_name", "using"]
