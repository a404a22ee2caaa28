"""Plumbing shared by the agent-log loaders: reading JSON, walking folders, ids, strictness.

Every loader has the same shape: find the files of its format under the given paths, parse
each into :class:`Record` objects (one per trajectory), and feed them to a
:class:`~trajlens.rows.RunBuilder`. :func:`load_run` does everything but the parsing.

Strict mode raises the first :class:`InputError`; lenient mode records it with
``RunBuilder.skip`` and goes on with the next file (or, in JSONL, the next line).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from trajlens.errors import InputError, Problem
from trajlens.ingest._fields import INT64, Fields, decode_arguments, dumps, parse_json, read_json_file, type_name
from trajlens.ingest._probe import Probe, named_unread, strays
from trajlens.limits import undecodable
from trajlens.ingest.tools import SHELL_TOOLS, shell_command
from trajlens.rows import TOOL_CALL, TRAJECTORY, RunBuilder, RunData
from trajlens.store.writer import joined_source, slug

T = TypeVar("T")

__all__ = [
    "SHELL_TOOLS", "TOOL_CALL", "TRAJECTORY", "Fields", "FileContext", "Probe", "Record", "TokenTally",
    "decode_arguments", "dumps", "load_run", "message_text", "parse_json", "read_json", "read_text",
    "shell_command", "type_name", "with_texts",
]

# Only files with these suffixes can be agent logs; everything else in a folder (YAML configs,
# patches, READMEs, licences, CSV summaries) is never opened.
CANDIDATE_SUFFIXES: frozenset[str] = frozenset({".json", ".jsonl", ".traj"})

Detect = Callable[[Probe], bool]


@dataclass
class Record:
    """One parsed trajectory: its row, its tool calls in order, and where it came from."""

    row: dict[str, Any]
    tool_calls: list[dict[str, Any]]
    where: str
    model: str | None = None
    notes: list[InputError] = field(default_factory=list)
    """What the loader worked around in this record (kept as problems of kind ``note`` in
    either mode: the record itself is kept)."""
    unread: list[InputError] = field(default_factory=list)
    """Files beside the log that it reads its outcome from (a verdict, a grade) and that could not
    be read (:func:`read_beside`): a strict load stops at the first; a lenient one skips each such
    file, naming it once, and keeps the record without what it would have said."""

    def trajectories(self) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """The record as :meth:`trajlens.rows.RunBuilder.add_record` takes it."""
        return [(self.row, self.tool_calls)]


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
    """A whole file as UTF-8 text, within the record size limit."""
    from trajlens import limits

    file = str(path)
    try:
        size = path.stat().st_size
        if size > limits.current().record_bytes:
            raise InputError(file, expected=f"a file of at most {limits.current().record_bytes:,} bytes "
                             "(raise it with --limit record_mb=...)", found=f"{size:,} bytes")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(file, expected="an existing file", found="no such file") from None
    except IsADirectoryError:
        raise InputError(file, expected="a file", found="a directory") from None
    except UnicodeDecodeError as error:
        raise InputError(file, expected="UTF-8 text", found=undecodable(error)) from None
    except OSError as error:
        raise InputError(file, expected="a readable file", found=error.strerror or str(error)) from None


def read_json(path: Path) -> Any:
    return read_json_file(path)


def read_beside(read: Callable[[], T], default: T, unread: list[InputError]) -> T:
    """What a file beside a log says (``read()``: its verdict, its grade), or ``default`` when it
    cannot be read, its error added to ``unread`` (:attr:`Record.unread`)."""
    try:
        return read()
    except InputError as error:
        unread.append(error)
        return default


def message_text(content: Any) -> str | None:
    """Text of a chat message's ``content``: a string, or a list of parts with ``text``."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text") if isinstance(part, dict) else part for part in content]
        return "\n".join(p for p in parts if isinstance(p, str))
    return dumps(content)


class TokenTally:
    """Sums OpenAI-style ``usage`` blocks: generated tokens and, where logged, reasoning tokens.

    Prompt tokens are not summed: each call's prompt repeats the whole conversation so far.
    """

    def __init__(self) -> None:
        self.model_tokens: int | None = None
        self.reasoning_tokens: int | None = None

    def add(self, usage: Any, read: Fields) -> None:
        """Add one ``usage`` block; ``read`` names the record it came from in errors."""
        if usage is None:
            return
        if not isinstance(usage, dict):
            raise read.error("usage", "an object", type_name(usage))
        completion = read.integer(usage, "completion_tokens", name="usage.completion_tokens", bounds=(0, INT64[1]))
        if completion is not None:
            self.model_tokens = (self.model_tokens or 0) + completion
        details = read.mapping(usage, "completion_tokens_details", name="usage.completion_tokens_details")
        reasoning = None if details is None else read.integer(
            details, "reasoning_tokens", name="usage.completion_tokens_details.reasoning_tokens", bounds=(0, INT64[1]))
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
            if not name.startswith(".") and Path(name).suffix.lower() in CANDIDATE_SUFFIXES:
                found.append(Path(dirpath) / name)
    return found


def collect(paths: Any, detect: Detect, fmt: str, names: tuple[str, ...] = ()) -> Found:
    """The files of format ``fmt`` under ``paths``.

    A directory is walked and keeps the files ``detect`` recognises, and the logs of the format
    gone bad, whose parsing says what is wrong with them: their :func:`strays`, and the files
    anywhere below it named as the format names its logs (``names``, ``*.traj.json``) that no
    format detects (an empty file, another ``trajectory_format``: in the one-folder-per-task
    layout no bad file sits beside a good one). A file named directly is always taken.
    """
    files: list[Path] = []
    walked: dict[Path, list[Path]] = {}
    anchors: list[Path] = []
    for path in as_paths(paths):
        if path.is_dir():
            probes = [Probe(f) for f in walk(path)]
            known = [detect(probe) for probe in probes]
            recognised = [probe for probe, ok in zip(probes, known) if ok]
            unknown = [probe for probe, ok in zip(probes, known) if not ok]
            gone_bad = set(strays(recognised, unknown)) | set(named_unread(unknown, names))
            inside = [probe.path for probe, ok in zip(probes, known) if ok or probe.path in gone_bad]
            if not recognised:
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
    """``name`` without its log extension (``.traj.json``, ``.jsonl``, ...), in any case."""
    for suffix in _SUFFIXES:
        if name.lower().endswith(suffix):
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
    names: tuple[str, ...] = (),
) -> RunData:
    """Load every file of format ``fmt`` under ``paths`` as one run.

    ``names`` are the patterns of the format's file names (``*.traj.json``): a file so named
    below a directory that no format detects is read too, so its parsing names what is wrong
    with it (see :func:`collect`).

    ``select`` may drop some of the files found by walking a directory, returning the files
    it keeps and an :class:`InputError` for what it dropped (recorded as a skipped problem in
    either mode). ``trajectory_ids`` may replace the default ids (relative paths) when the
    ones it returns are unique.
    """
    given = as_paths(paths)
    found = collect(given, detect, fmt, names)
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
                    if strict and item.unread:
                        raise item.unread[0]
                    item.row = {**item.row, "trajectory_id": item.row.get("trajectory_id") or context.trajectory_id,
                                "source": item.row.get("source") or context.source}
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
        source=joined_source(given),
    )
    unread: set[Problem] = set()
    for item in items:
        try:
            if isinstance(item, InputError):
                raise item
            builder.add_trajectory(item.row, item.tool_calls, where=item.where)
        except InputError as error:
            if strict:
                raise
            builder.skip(error)
            continue
        for note in item.notes:  # on a record kept: a record skipped is named by its own problem
            builder.note(note)
        for error in item.unread:  # a run's summary read for each of its trajectories is named once
            if (problem := error.as_problem()) not in unread:
                unread.add(problem)
                builder.skip(error)
    # what ``select`` left out, after the records: the first record skipped is the one strict
    # ingest stops at, and says so first
    for note in notes:
        builder.skip(note)
    return builder.build()


def first_word(text: str) -> str:
    stripped = text.strip()
    return stripped.split(None, 1)[0] if stripped else ""


def turn_texts(messages: list[Any]) -> list[str | None]:
    """The text of each assistant message, in order (``None`` where it has none): its
    reasoning (``reasoning_content``, where logged) before its content."""
    texts = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            parts = [message.get("reasoning_content"), message_text(message.get("content"))]
            texts.append("\n".join(p for p in parts if isinstance(p, str) and p) or None)
    return texts


def final_text(messages: list[Any]) -> str | None:
    """The last assistant message's text when it issued no call (the answer), else ``None``."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            if message.get("tool_calls") or message.get("function_call"):
                return None
            return message_text(message.get("content")) or None
    return None


def with_texts(calls: list[dict[str, Any]], row: dict[str, Any], messages: list[Any]) -> None:
    """Fill a chat conversation's ``assistant_text`` (the turn's text, on its first call) and
    ``response_text`` (the answer after the last call) where the loader left them empty."""
    texts = turn_texts(messages)
    first_of_turn: set[int] = set()
    for call in calls:
        if call["turn"] not in first_of_turn:
            first_of_turn.add(call["turn"])
            if call.get("assistant_text") is None:
                call["assistant_text"] = texts[call["turn"]] if call["turn"] < len(texts) else None
    if row.get("response_text") is None:
        row["response_text"] = final_text(messages)
