"""The typed field reader every loader reads raw log records with.

A log record is JSON someone else wrote. Each field a loader uses is read once through
:class:`Fields`, which checks its type and range and raises the standard
:class:`~trajlens.errors.InputError` (file, record, field, what was expected, what was found)
when it does not fit. An absent key or ``null`` reads as ``None`` unless the field is
required. JSON text itself is parsed through :func:`parse_json`, which applies the nesting
and size limits of :mod:`trajlens.limits` before the parser sees it, so no log can
raise ``RecursionError`` or grow a record past its limit.
"""

from __future__ import annotations

import json
import math
import stat
from pathlib import Path
from typing import Any, Hashable, Iterator

from trajlens.errors import InputError
from trajlens import limits as _limits
from trajlens.ingest._unreadable import special_kind
from trajlens.limits import INT32, INT64, is_not_json, parse_json, reward_problem, text_problem, type_name  # noqa: F401 - loaders read them from here


_MISSING = object()


def as_float(value: int | float) -> float:
    """A JSON number as a float; an integer too large for one reads as infinity (a reward so read
    is refused as not finite; a metric, as past float64)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


class Fields:
    """Reads typed fields of the records of one file; errors name ``file`` and ``record``."""

    def __init__(self, file: str | Path, record: str | int | None = None) -> None:
        self.file = str(file)
        self.record = record

    def at(self, record: str | int | None) -> "Fields":
        """A reader for another record of the same file."""
        return Fields(self.file, record)

    def error(self, field: str | None, expected: str, found: str, message: str | None = None) -> InputError:
        return InputError(self.file, message, record=self.record, field=field, expected=expected, found=found)

    def _get(self, obj: Any, key: str, required: bool, expected: str, name: str | None) -> Any:
        if not isinstance(obj, dict):
            raise self.error(name or key, f"an object holding {expected}", type_name(obj))
        value = obj.get(key, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise self.error(name or key, expected, "no such key" if value is _MISSING else "null")
            return None
        return value

    def text(self, obj: Any, key: str, *, required: bool = False, name: str | None = None) -> str | None:
        """A string field."""
        value = self._get(obj, key, required, "a string", name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(name or key, "a string", type_name(value))
        problem = text_problem(value, _limits.current().field_bytes)
        if problem:
            raise self.error(name or key, "UTF-8 text within the field limit", problem)
        return value

    def integer(self, obj: Any, key: str, *, required: bool = False, name: str | None = None,
                bounds: tuple[int, int] = INT64) -> int | None:
        """An integer field within ``bounds`` (64-bit by default); ``3.0`` reads as 3."""
        expected = f"an integer from {bounds[0]} to {bounds[1]}"
        value = self._get(obj, key, required, expected, name)
        if value is None:
            return None
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(name or key, expected, _found(value))
        if not bounds[0] <= value <= bounds[1]:
            raise self.error(name or key, expected, _found(value))
        return value

    def number(self, obj: Any, key: str, *, required: bool = False, name: str | None = None) -> float | None:
        """A finite number (a float64)."""
        value = self._get(obj, key, required, "a finite number", name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name or key, "a finite number", _found(value))
        try:
            number = float(value)
        except OverflowError:
            raise self.error(name or key, "a finite number", _found(value)) from None
        if not math.isfinite(number):
            raise self.error(name or key, "a finite number", _found(value))
        return number

    def reward(self, obj: Any, key: str, *, required: bool = False, name: str | None = None) -> float | None:
        """A reward, or a reward channel's value: a :meth:`number` float32 holds
        (:func:`~trajlens.limits.reward_problem`), named by the log's own field."""
        number = self.number(obj, key, required=required, name=name)
        if number is not None and (problem := reward_problem(number)) is not None:
            raise self.error(name or key, problem, _found(obj[key]))
        return number

    def boolean(self, obj: Any, key: str, *, required: bool = False, name: str | None = None) -> bool | None:
        value = self._get(obj, key, required, "true or false", name)
        if value is not None and not isinstance(value, bool):
            raise self.error(name or key, "true or false", _found(value))
        return value

    def mapping(self, obj: Any, key: str, *, required: bool = False, name: str | None = None) -> dict[str, Any] | None:
        """An object field."""
        value = self._get(obj, key, required, "an object", name)
        if value is not None and not isinstance(value, dict):
            raise self.error(name or key, "an object", type_name(value))
        return value

    def items(self, obj: Any, key: str, *, required: bool = False, name: str | None = None) -> list[Any] | None:
        """A list field."""
        value = self._get(obj, key, required, "a list", name)
        if value is not None and not isinstance(value, list):
            raise self.error(name or key, "a list", type_name(value))
        return value

    def mask(self, obj: Any, key: str, *, required: bool = False, name: str | None = None) -> list[bool] | None:
        """A list of flags (a response or loss mask): each item true or false, or a number equal
        to 0 or 1. Anything else (``"no"``, ``5``) is an error naming the item, since reading it
        as a truth value would count a token as trained on a guess."""
        values = self.items(obj, key, required=required, name=name)
        if values is None:
            return None
        flags = []
        for position, value in enumerate(values):
            if isinstance(value, bool):
                flags.append(value)
            elif isinstance(value, (int, float)) and value in (0, 1):
                flags.append(value == 1)
            else:
                raise self.error(f"{name or key}[{position}]", "true, false, 0 or 1", _found(value))
        return flags

    def identifier(self, obj: Any, key: str, *, required: bool = False, name: str | None = None) -> Hashable | None:
        """An id that links records (a tool-call id, an event id, an observation's cause):
        a string or an integer, never a list or object."""
        value = self._get(obj, key, required, "a string or integer id", name)
        if value is None:
            return None
        if isinstance(value, str):
            return self.text(obj, key, name=name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise self.error(name or key, "a string or integer id", type_name(value))


def _found(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        text = str(value)
        return text if len(text) <= 40 else f"an integer of {len(text)} digits"
    if isinstance(value, (float, str)):
        return repr(value) if isinstance(value, str) and len(value) < 60 else str(value)[:60]
    return type_name(value)


# -- JSON text ------------------------------------------------------------------------------


def read_json_file(path: Path) -> Any:
    """A whole JSON file, as one record within the limits."""
    limits = _limits.current()
    file = str(path)
    try:
        found = path.stat()
        _refuse_special(path, found.st_mode)
        size = found.st_size
        if size > limits.record_bytes:
            raise InputError(file, expected=f"a file of at most {limits.record_bytes:,} bytes "
                             "(raise it with --limit record_mb=...)", found=f"{size:,} bytes")
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(file, expected="an existing file", found="no such file") from None
    except IsADirectoryError:
        raise InputError(file, expected="a file", found="a directory") from None
    except OSError as error:
        raise InputError(file, expected="a readable file", found=error.strerror or str(error)) from None
    try:
        return parse_json(data, file)
    except InputError:
        from trajlens.ingest._probe import Probe, damage_error

        if (cut := damage_error(Probe(path))) is not None:  # said so, not where the parser gave up
            raise cut from None
        raise


def _refuse_special(path: Path, mode: int) -> None:
    """An InputError for a FIFO, a device or a socket (read, it would wait or never end)."""
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise InputError(str(path), expected="a regular file", found=special_kind(path))


def read_lines(path: Path) -> Iterator[tuple[int, bytes | InputError]]:
    """Non-blank lines of a JSONL file with their 1-based numbers; a line over the record limit
    is yielded as an InputError and skipped without being held in memory."""
    limit = _limits.current().record_bytes
    file = str(path)
    try:
        _refuse_special(path, path.stat().st_mode)
        handle = open(path, "rb")
    except FileNotFoundError:
        raise InputError(file, expected="an existing file", found="no such file") from None
    except OSError as error:
        raise InputError(file, expected="a readable file", found=error.strerror or str(error)) from None
    with handle:
        number = 0
        while True:
            line = handle.readline(limit + 1)
            if not line:
                return
            number += 1
            if len(line) > limit and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):
                    line = handle.readline(1 << 20)
                yield number, InputError(file, record=f"line {number}", expected=f"a line of at most {limit:,} "
                                         "bytes (raise it with --limit record_mb=...)", found="a longer line")
                continue
            if line.strip():
                yield number, line


def decode_arguments(raw: Any, file: str, record: str | int | None) -> tuple[dict[str, Any] | None, str]:
    """A tool call's ``arguments`` (a JSON string or an object) as a dict (``None`` when they are
    not a JSON object) and the JSON text to store: the sorted object, or ``{"raw": ...}``."""
    if raw is None or raw == "":
        return {}, "{}"
    value = raw
    if isinstance(raw, str):
        try:
            value = parse_json(raw, file, record=record)
        except InputError as error:
            if not is_not_json(error):
                raise  # past a limit: an error, not a malformed call
            return None, dumps({"raw": raw})
    if isinstance(value, dict):
        return value, dumps(value)
    return None, dumps({"raw": raw})


def dumps(value: Any) -> str:
    """JSON text of a value read from a log (sorted keys; lone surrogates escaped, not kept)."""
    return json.dumps(value, sort_keys=True)


__all__ = ["Fields", "as_float", "INT32", "INT64", "decode_arguments", "dumps", "parse_json", "read_json_file", "read_lines",
           "text_problem", "type_name"]
