"""Plumbing shared by the agent-log loaders: reading JSON, walking folders, ids, strictness.

Every loader has the same shape: find the files of its format under the given paths, parse
each into :class:`Record` objects (one per trajectory), and feed them to a
:class:`~trajlens.model.RunBuilder`. :func:`load_run` does everything but the parsing.

Strict mode raises the first :class:`InputError`; lenient mode records it with
``RunBuilder.skip`` and goes on with the next file (or, in JSONL, the next line).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from trajlens.errors import InputError
from trajlens.model import RunBuilder, RunData
from trajlens.store.writer import slug

# Only files with these suffixes can be agent logs; everything else in a folder (YAML configs,
# patches, READMEs, licences, CSV summaries) is never opened.
CANDIDATE_SUFFIXES: frozenset[str] = frozenset({".json", ".jsonl", ".traj"})

# Tool names whose ``command`` argument is a shell command line.
SHELL_TOOLS: frozenset[str] = frozenset(
    {"bash", "execute_bash", "shell", "run_shell_command", "terminal", "execute_command", "run_command"}
)

# How much of a file ``sniff`` reads from each end to recognise a format.
SNIFF_BYTES = 65536

Detect = Callable[[Path], "str | None"]


@dataclass
class Record:
    """One parsed trajectory: its row, its tool calls in order, and where it came from."""

    row: dict[str, Any]
    tool_calls: list[dict[str, Any]]
    where: str
    model: str | None = None


@dataclass(frozen=True)
class FileContext:
    """What a parser knows about the file it reads besides its content."""

    path: Path
    source: str
    """Path of the file relative to the common root of the load (the ``source`` column)."""
    trajectory_id: str
    """Default trajectory id: the relative path without its suffix."""


Parse = Callable[[FileContext], Iterator["Record | InputError"]]
Select = Callable[[Path, list[Path]], "tuple[list[Path], list[InputError]]"]


@dataclass
class Found:
    """Files to load, the folder they are named relative to, and how each was given."""

    files: list[Path]
    root: Path
    walked: dict[Path, list[Path]] = field(default_factory=dict)


# -- reading -------------------------------------------------------------------------------


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), expected="an existing file", found="no such file") from None
    except IsADirectoryError:
        raise InputError(str(path), expected="a file", found="a directory") from None
    except UnicodeDecodeError as error:
        raise InputError(str(path), expected="UTF-8 text", found=f"an undecodable byte at offset {error.start}") from None
    except OSError as error:
        raise InputError(str(path), expected="a readable file", found=error.strerror or str(error)) from None


def parse_json(text: str, file: str, *, record: str | None = None) -> Any:
    """``json.loads`` with errors turned into an :class:`InputError` naming file and position."""
    if not text.strip():
        raise InputError(file, record=record, expected="JSON", found="an empty line" if record else "an empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}" if record is None else record
        raise InputError(file, "not valid JSON", record=where, expected="JSON", found=error.msg) from None


def read_json(path: Path) -> Any:
    return parse_json(read_text(path), str(path))


def sniff(path: Path) -> tuple[str, str]:
    """The first and last :data:`SNIFF_BYTES` of a file as text ('' when unreadable)."""
    try:
        stat = path.stat()
    except OSError:
        return "", ""
    return _sniff(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4096)
def _sniff(path: str, mtime_ns: int, size: int) -> tuple[str, str]:
    try:
        with open(path, "rb") as handle:
            if size <= 2 * SNIFF_BYTES:
                data = handle.read()
                head, tail = data[:SNIFF_BYTES], data[-SNIFF_BYTES:]
            else:
                head = handle.read(SNIFF_BYTES)
                handle.seek(size - SNIFF_BYTES)
                tail = handle.read(SNIFF_BYTES)
    except OSError:
        return "", ""
    return head.decode("utf-8", "replace"), tail.decode("utf-8", "replace")


def require(data: dict[str, Any], key: str, kind: type, file: str, expected: str, *, record: str | None = None) -> Any:
    """``data[key]``, checked to be of ``kind``; an :class:`InputError` otherwise."""
    if key not in data:
        raise InputError(file, record=record, field=key, expected=expected, found="no such key")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InputError(file, record=record, field=key, expected=expected, found=type_name(value))
    return value


def type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def message_text(content: Any) -> str | None:
    """Text of a chat message's ``content``: a string, or a list of parts with ``text``."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text") if isinstance(part, dict) else part for part in content]
        return "\n".join(p for p in parts if isinstance(p, str))
    return json.dumps(content, sort_keys=True)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def call_arguments(raw: Any) -> tuple[dict[str, Any] | None, str]:
    """Decode a tool call's ``arguments`` (a JSON string or an object).

    Returns the arguments as a dict (``None`` when they are not a JSON object) and the JSON
    text to store: the sorted object, or ``{"raw": ...}`` holding what the model wrote.
    """
    if raw is None or raw == "":
        return {}, "{}"
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return None, dumps({"raw": raw})
    if isinstance(value, dict):
        return value, dumps(value)
    return None, dumps({"raw": raw})


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class TokenTally:
    """Sums OpenAI-style ``usage`` blocks: generated tokens and, where logged, reasoning tokens.

    Prompt tokens are not summed: each call's prompt repeats the whole conversation so far.
    """

    def __init__(self) -> None:
        self.model_tokens: int | None = None
        self.reasoning_tokens: int | None = None

    def add(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        completion = int_or_none(usage.get("completion_tokens"))
        if completion is not None:
            self.model_tokens = (self.model_tokens or 0) + completion
        details = usage.get("completion_tokens_details")
        reasoning = int_or_none(details.get("reasoning_tokens")) if isinstance(details, dict) else None
        if reasoning is not None:
            self.reasoning_tokens = (self.reasoning_tokens or 0) + reasoning

    def columns(self) -> dict[str, int | None]:
        return {"model_tokens": self.model_tokens, "observation_tokens": None, "reasoning_tokens": self.reasoning_tokens}


# -- finding files -------------------------------------------------------------------------


def as_paths(paths: Any) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    result = [Path(p) for p in paths]
    if not result:
        raise InputError("(no paths)", expected="at least one file or directory", found="an empty list")
    return result


def walk(directory: Path) -> list[Path]:
    """Candidate log files under ``directory``, in sorted order, hidden entries skipped."""
    found = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith(".") and Path(name).suffix in CANDIDATE_SUFFIXES:
                found.append(Path(dirpath) / name)
    return found


def collect(paths: Any, detect: Detect, fmt: str) -> Found:
    """The files of format ``fmt`` under ``paths``.

    A directory is walked and keeps the files ``detect`` recognises; a file named directly is
    always taken (parsing it then says what is wrong with it).
    """
    files: list[Path] = []
    walked: dict[Path, list[Path]] = {}
    anchors: list[Path] = []
    for path in as_paths(paths):
        if path.is_dir():
            inside = [f for f in walk(path) if detect(f) == fmt]
            if not inside:
                raise InputError(str(path), f"no {fmt} trajectory files in this directory",
                                 expected=f"{fmt} logs", found="none")
            walked[path] = inside
            files.extend(inside)
            anchors.append(path.resolve())
        elif path.is_file():
            files.append(path)
            anchors.append(path.resolve().parent)
        else:
            raise InputError(str(path), expected="an existing file or directory", found="no such path")
    unique = list(dict.fromkeys(files))
    return Found(unique, Path(os.path.commonpath(anchors)), walked)


def relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


_SUFFIXES = (".traj.json", ".jsonl", ".json", ".traj")


def strip_suffix(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def default_trajectory_id(source: str) -> str:
    """The relative path without its suffix; ``task/task`` (one folder per task) becomes ``task``."""
    parts = strip_suffix(source).split("/")
    if len(parts) >= 2 and parts[-1] == parts[-2]:
        parts.pop()
    return "/".join(parts)




def default_run_id(paths: list[Path], root: Path) -> str:
    name = paths[0].resolve().name if len(paths) == 1 else root.name
    return slug(strip_suffix(name))


# -- the driver ----------------------------------------------------------------------------


def load_run(
    paths: Any,
    *,
    fmt: str,
    detect: Detect,
    parse: Parse,
    run_id: str | None,
    strict: bool,
    select: Select | None = None,
    trajectory_ids: Callable[[list[Path], Path], dict[Path, str]] | None = None,
) -> RunData:
    """Load every file of format ``fmt`` under ``paths`` as one run.

    ``select`` may drop some of the files found by walking a directory, returning the files
    it keeps and a note (an :class:`InputError`, recorded as a problem in either mode) for
    what it dropped. ``trajectory_ids`` may replace the default ids (relative paths) when the
    ones it returns are unique.
    """
    given = as_paths(paths)
    found = collect(given, detect, fmt)
    notes: list[InputError] = []
    files = found.files
    if select is not None:
        kept = set(files)
        for directory, inside in found.walked.items():
            chosen, dropped = select(directory, inside)
            kept -= set(inside) - set(chosen)
            notes.extend(dropped)
        files = [f for f in files if f in kept]
    sources = {f: relative(f, found.root) for f in files}
    ids = {f: default_trajectory_id(sources[f]) for f in files}
    if len(set(ids.values())) < len(ids):  # e.g. a.json beside a.jsonl: keep the suffixes
        ids = dict(sources)
    if trajectory_ids is not None:
        custom = trajectory_ids(files, found.root)
        if len(set(custom.values())) == len(custom):
            ids = custom

    items: list[Record | InputError] = []
    for path in files:
        context = FileContext(path=path, source=sources[path], trajectory_id=ids[path])
        try:
            for item in parse(context):
                if isinstance(item, Record):
                    item.row = {"trajectory_id": context.trajectory_id, "source": context.source, **item.row}
                elif strict:
                    raise item
                items.append(item)
        except InputError as error:
            if strict:
                raise
            items.append(error)

    models = sorted({item.model for item in items if isinstance(item, Record) and item.model})
    builder = RunBuilder(
        run_id or default_run_id(given, found.root),
        config={"models": models} if models else None,
        source_format=fmt,
        source=", ".join(str(p) for p in given),
    )
    for note in notes:
        builder.skip(note)
    for item in items:
        try:
            if isinstance(item, InputError):
                raise item
            builder.add_trajectory(item.row, item.tool_calls, where=item.where)
        except InputError as error:
            if strict:
                raise
            builder.skip(error)
    return builder.build()


def first_word(text: str) -> str:
    stripped = text.strip()
    return stripped.split(None, 1)[0] if stripped else ""

