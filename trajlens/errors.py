"""The trajlens exception hierarchy.

Every error a user can act on derives from :class:`TrajlensError`. The CLI prints
``str(error)`` as one line and exits non-zero; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


class TrajlensError(Exception):
    """Base class of every error trajlens raises on purpose."""


class InputError(TrajlensError, ValueError):
    """A source file or record that cannot be read as what it claims to be.

    The message names the file, the record, the field, what was expected and what was found.
    """

    def __init__(
        self,
        file: str,
        message: str | None = None,
        *,
        record: str | int | None = None,
        field: str | None = None,
        expected: str | None = None,
        found: str | None = None,
    ) -> None:
        self.file = str(file)
        self.record = record
        self.field = field
        self.expected = expected
        self.found = found
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.file]
        if self.record is not None:
            parts.append(f"record {self.record}")
        if self.field is not None:
            parts.append(f"field '{self.field}'")
        head = ": ".join(parts)
        body = []
        if self.detail:
            body.append(self.detail)
        if self.expected is not None:
            body.append(f"expected {self.expected}")
        if self.found is not None:
            body.append(f"found {_short(self.found)}")
        return head + ": " + ", ".join(body) if body else head

    def as_problem(self, kind: "ProblemKind" = "skipped") -> "Problem":
        return Problem(
            file=self.file,
            record=None if self.record is None else str(self.record),
            field=self.field,
            message=str(self),
            kind=kind,
        )


class SchemaError(InputError):
    """A table read from a file whose columns or types do not match the trajlens schema.

    A DataFrame passed to a function that lacks a column is a :class:`FrameError` instead.
    """


class StoreError(TrajlensError, OSError):
    """A store directory that is missing, unreadable, unwritable or inconsistent."""


class RunConflictError(StoreError):
    """A run id already held in the store by a different source; ``--replace`` overrides it."""


class QueryError(TrajlensError, ValueError):
    """A SQL query that DuckDB rejected, or one that would write or read outside the store."""


class FrameError(TrajlensError, ValueError):
    """A DataFrame handed to a library function lacks a column the function needs."""

    def __init__(self, frame: str, function: str, column: str) -> None:
        self.frame = frame
        self.column = column
        super().__init__(f"{function}: the {frame} frame has no column '{column}'")


class ConfigError(TrajlensError, ValueError):
    """Invalid options; collects every problem and reports them together."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class CommandImportError(TrajlensError, ImportError):
    """A command module of the command line that cannot be imported (a broken installation)."""

    def __init__(self, module: str, cause: BaseException) -> None:
        reason = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        super().__init__(f"command module {module} failed to import ({type(cause).__name__}: {reason}); "
                         f"`python -c 'import {module}'` shows where")


class MissingDependencyError(TrajlensError, ImportError):
    """An optional dependency is not installed; the message gives the install command."""

    def __init__(self, package: str, purpose: str) -> None:
        super().__init__(f"{purpose} needs {package}: install it with `pip install {package}`")


__all__ = [
    "CommandImportError",
    "ConfigError",
    "FrameError",
    "InputError",
    "MissingDependencyError",
    "Problem",
    "ProblemKind",
    "QueryError",
    "RunConflictError",
    "SchemaError",
    "StoreError",
    "TrajlensError",
]


ProblemKind = Literal["skipped", "note"]
"""What a load did about a :class:`Problem`: ``skipped`` left something out (a bad record in
lenient mode, a run folder a folder of runs leaves out); ``note`` kept the record and says how
it read it otherwise (a logged pattern replaced by the harness default)."""


@dataclass(frozen=True)
class Problem:
    """Something a load met in a source: a record it skipped, and why, or a note on one it kept."""

    file: str
    record: str | None
    field: str | None
    message: str
    kind: ProblemKind = "skipped"
    """``skipped`` (the record is not in the run) or ``note`` (it is, read as the message says)."""


def non_utf8(text: str) -> str | None:
    """What in ``text`` is not UTF-8 (``the byte 0xff at character 8``), None when all of it is.
    Bytes that are not UTF-8 reach Python from a command line as lone surrogates, which no query,
    table or file name can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        try:
            found = f"the byte 0x{text[error.start].encode('utf-8', 'surrogateescape')[0]:02x}"
        except UnicodeEncodeError:
            found = repr(text[error.start])
        return f"{found} at character {error.start}"
    return None


def _short(value: object, limit: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."
