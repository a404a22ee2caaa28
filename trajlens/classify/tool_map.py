"""Tool maps: which behaviour class a tool call that is not a shell command belongs to.

A tool map is a TOML file of entries, tried in order; the first entry whose matchers all hold
decides the call::

    [map]
    name = "my-harness"
    description = "Tools of the harness we train with."

    [[tools]]
    name = "web_search"          # exact tool name (case-insensitive); or a list of names
    class = "search"

    [[tools]]
    glob = "mcp__github__*"      # or a shell-style glob on the tool name; or `regex = "..."`
    class = "other"

    [[tools]]
    name = "editor"
    arguments = { action = "^(write|patch)$" }   # regex searched in argument values
    class = "edit"

    [[tools]]
    name = "run"
    class = "shell"              # classify its command with the shell rules

Matchers of one entry (all must hold; exactly one of ``name``, ``glob``, ``regex``):

``name``
    A tool name or a list of names, compared case-insensitively.
``glob``
    A shell-style pattern on the lower-cased tool name: ``*`` any run of characters, ``?`` one
    character, ``[...]`` a set.
``regex``
    A regular expression searched in the lower-cased tool name (use ``^...$`` to anchor).
``arguments``
    A table ``key = regex``: the value of that top-level key of the call's JSON arguments (a
    string as is; any other JSON value as compact JSON text) must contain a match. A missing
    key fails the entry.
``command``
    A regex searched in the call's ``command`` column (the action text some harnesses log,
    such as SWE-agent's ``str_replace_editor view /path``); a null command fails the entry.

``class`` is one of :data:`~trajlens.classify.rules.BEHAVIOUR_CLASSES`, or ``shell``: the call
carries a shell command (its ``command`` column, or else its ``command``/``cmd`` argument) and
the shell rules of :mod:`trajlens.classify.rules` decide. Optional ``id`` names the entry in
``trajlens classify --explain`` (default: its matchers), ``doc`` says what it recognises.

Regular expressions must be in the subset that Rust's ``regex`` (Polars) and Python's ``re``
read the same way: no look-around, no back-references. Every problem in a file is reported
at once, each naming the file and the entry.

A user's map is tried before the maps shipped in ``trajlens/classify/tool_maps/`` (OpenHands,
SWE-agent, then generic tools: search, browsers, calculators, MCP ``server__tool`` names), so
it can override any of them. A call that no entry matches and that has no shell command is
``other`` and counts as an unknown tool (:func:`trajlens.classify.unknown_tools`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Union, cast

from trajlens.classify._syntax import python_regex, rust_regex
from trajlens.classify.rules import BEHAVIOUR_CLASSES
from trajlens.errors import ConfigError

SHELL = "shell"
"""The class of an entry whose calls are classified by their shell command."""

SHIPPED_MAPS: tuple[str, ...] = ("openhands.toml", "swe_agent.toml", "generic.toml")
"""The tool maps shipped with trajlens, in the order they are tried."""

SHIPPED_DIR = Path(__file__).resolve().parent / "tool_maps"
SHIPPED_PREFIX = "trajlens/classify/tool_maps/"
"""How shipped maps are named as the source of a decision (independent of the install path)."""

ENTRY_CLASSES: tuple[str, ...] = (*BEHAVIOUR_CLASSES, SHELL)
"""The classes a tool-map entry may give: a behaviour class, or :data:`SHELL` (classify the command)."""

_ENTRY_KEYS = frozenset({"id", "name", "glob", "regex", "arguments", "command", "class", "doc"})
_MAP_KEYS = ("name", "description")
"""The keys of a tool map's ``[map]`` table, both text."""
_ARGUMENT_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ToolEntry:
    """One entry of a tool map: matchers on a call, and the class a matching call gets."""

    id: str
    """Name of the entry shown by ``--explain`` (the TOML ``id``, or the entry's matchers)."""
    klass: str
    """Behaviour class of a matching call, or :data:`SHELL`."""
    names: tuple[str, ...] = ()
    """Lower-case tool names the entry matches exactly (empty when ``pattern`` is used)."""
    pattern: str | None = None
    """Regex searched in the lower-cased tool name (a ``glob`` is converted to one)."""
    arguments: tuple[tuple[str, str], ...] = ()
    """(JSON argument key, regex) pairs that must all match."""
    command: str | None = None
    """Regex searched in the ``command`` column."""
    source: str = ""
    """File the entry was read from (``trajlens/classify/tool_maps/...`` for shipped maps)."""
    doc: str = ""
    """What the entry recognises."""

    def __post_init__(self) -> None:
        if self.klass not in ENTRY_CLASSES:
            raise ConfigError([f"tool-map entry {self.id!r}: class: expected one of {', '.join(ENTRY_CLASSES)}, "
                               f"found {self.klass!r}"])


@dataclass(frozen=True)
class ToolMap:
    """Tool-map entries in the order they are tried, and the files they came from."""

    entries: tuple[ToolEntry, ...]
    sources: tuple[str, ...]

    def __add__(self, other: "ToolMap") -> "ToolMap":
        return ToolMap(self.entries + other.entries, self.sources + other.sources)

    def table(self) -> list[dict[str, str]]:
        """The entries as rows (id, class, tool, arguments, command, source, doc), for display."""
        return [
            {
                "id": e.id,
                "class": e.klass,
                "tool": ", ".join(e.names) if e.names else f"~{e.pattern}",
                "arguments": ", ".join(f"{k}~{v}" for k, v in e.arguments),
                "command": e.command or "",
                "source": e.source,
                "doc": e.doc,
            }
            for e in self.entries
        ]


ToolMapLike = Union[ToolMap, str, Path, None]


def glob_to_regex(glob: str) -> str:
    """A shell-style glob as an anchored regex in the Rust/Python common subset."""
    out, i = [], 0
    while i < len(glob):
        char = glob[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            start = i + 1
            negate = glob[start:start + 1] == "!"
            start += negate
            # A `]` right after `[` (or `[!`) belongs to the set, as in fnmatch.
            end = glob.find("]", start + 1)
            if end < 0:
                out.append(re.escape(char))
            else:
                body = "".join("\\" + c if c in "\\[]^&~-" and not (c == "-" and 0 < k < end - start - 1) else c
                               for k, c in enumerate(glob[start:end]))
                out.append(f"[{'^' if negate else ''}{body}]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "^" + "".join(out) + "$"


def _check_regex(pattern: Any, where: str, problems: list[str]) -> str | None:
    if not isinstance(pattern, str):
        problems.append(f"{where}: expected a regular expression string, found {type(pattern).__name__}")
        return None
    import warnings

    try:
        with warnings.catch_warnings():
            # Python warns where its reading may differ from another engine's ([[:alpha:]] is a
            # class in Rust's regex, a nested set to Python): both must read a pattern alike.
            warnings.simplefilter("error", FutureWarning)
            python_regex(pattern)
    except re.error as error:
        problems.append(f"{where}: invalid regular expression {pattern!r}: {error}")
        return None
    except FutureWarning as warning:
        problems.append(f"{where}: {pattern!r} reads differently in Python and in Polars ({warning}); "
                        "escape the '[' or write the class out")
        return None
    if re.search(r"\(\?[=!<]|\\[1-9]", pattern):
        problems.append(f"{where}: {pattern!r} uses look-around or a back-reference, which the classifier cannot run")
        return None
    import polars as pl

    try:
        pl.Series([""], dtype=pl.String).str.contains(rust_regex(pattern))
    except (ValueError, pl.exceptions.PolarsError) as error:
        reason = " ".join(str(error).split("This error occurred")[0].split())
        problems.append(f"{where}: {pattern!r} is not a regular expression Polars can run: {reason}")
        return None
    return pattern


def _parse_entry(raw: Any, index: int, source: str, problems: list[str]) -> ToolEntry | None:
    where = f"{source}: tools[{index}]"
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a table, found {type(raw).__name__}")
        return None
    before = len(problems)
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        problems.append(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(sorted(_ENTRY_KEYS))})")
    matchers = [k for k in ("name", "glob", "regex") if k in raw]
    if len(matchers) != 1:
        problems.append(f"{where}: expected exactly one of name, glob, regex, found {len(matchers)}")
    klass = raw.get("class")
    if klass not in ENTRY_CLASSES:
        problems.append(f"{where}: field 'class': expected one of {', '.join(ENTRY_CLASSES)}, found {klass!r}")
    names: tuple[str, ...] = ()
    pattern = None
    if "name" in raw:
        value = raw["name"]
        listed = [value] if isinstance(value, str) else value
        if not isinstance(listed, list) or not listed or not all(isinstance(n, str) and n for n in listed):
            problems.append(f"{where}: field 'name': expected a tool name or a list of names, found {value!r}")
        else:
            names = tuple(n.lower() for n in listed)
    elif "glob" in raw:
        if not isinstance(raw["glob"], str) or not raw["glob"]:
            problems.append(f"{where}: field 'glob': expected a pattern string, found {raw['glob']!r}")
        else:
            pattern = glob_to_regex(raw["glob"].lower())
    elif "regex" in raw:
        pattern = _check_regex(raw["regex"], f"{where}: field 'regex'", problems)
    arguments = []
    raw_arguments = raw.get("arguments", {})
    if not isinstance(raw_arguments, dict):
        problems.append(f"{where}: field 'arguments': expected a table of key = regex, found {raw_arguments!r}")
    else:
        for key, value in raw_arguments.items():
            if not _ARGUMENT_KEY.match(key):
                problems.append(f"{where}: field 'arguments': key {key!r} is not a plain identifier")
            checked = _check_regex(value, f"{where}: field 'arguments.{key}'", problems)
            if checked is not None:
                arguments.append((key, checked))
    command = None
    if "command" in raw:
        command = _check_regex(raw["command"], f"{where}: field 'command'", problems)
    for key in ("id", "doc"):
        if key in raw and not isinstance(raw[key], str):
            problems.append(f"{where}: field {key!r}: expected a string, found {raw[key]!r}")
    if len(problems) > before:
        return None
    described = ", ".join(names) if names else str(raw.get("glob") or raw.get("regex"))
    described += "".join(f" {k}~{v}" for k, v in arguments) + (f" command~{command}" if command else "")
    return ToolEntry(
        id=raw.get("id") or described, klass=cast(str, klass), names=names, pattern=pattern, arguments=tuple(arguments),
        command=command, source=source, doc=raw.get("doc", ""),
    )


def parse_tool_map(text: str, source: str) -> ToolMap:
    """A tool map from TOML text; ``source`` names it in errors and explanations.

    Raises :class:`~trajlens.errors.ConfigError` listing every problem of the file.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError([f"{source}: not valid TOML: {error}"]) from None
    problems: list[str] = []
    unknown = sorted(set(data) - {"map", "tools"})
    if unknown:
        problems.append(f"{source}: unknown top-level key {unknown[0]!r} (expected [map] and [[tools]])")
    header = data.get("map", {})
    if not isinstance(header, dict):
        problems.append(f"{source}: [map]: expected a table (name, description), found {type(header).__name__}")
        header = {}
    problems += [f"{source}: [map]: unknown key {key!r} (expected {', '.join(_MAP_KEYS)})"
                 for key in sorted(set(header) - set(_MAP_KEYS))]
    problems += [f"{source}: [map]: field {key!r}: expected a string, found {header[key]!r}"
                 for key in _MAP_KEYS if key in header and not isinstance(header[key], str)]
    raw_entries = data.get("tools", [])
    if not isinstance(raw_entries, list):
        problems.append(f"{source}: 'tools' must be an array of tables ([[tools]])")
        raw_entries = []
    elif not raw_entries:  # an empty file, or a [map] alone: a map that classes nothing is a mistake
        problems.append(f"{source}: field 'tools': expected at least one [[tools]] entry, found none")
    entries = [_parse_entry(raw, index, source, problems) for index, raw in enumerate(raw_entries)]
    first: dict[str, int] = {}
    for index, raw in enumerate(raw_entries):
        given = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(given, str) and given:
            if given in first:
                problems.append(f"{source}: tools[{index}]: id {given!r} already used by tools[{first[given]}]")
            first.setdefault(given, index)
    if problems:
        raise ConfigError(problems)
    return ToolMap(tuple(e for e in entries if e is not None), (source,))


def load_tool_map(path: str | Path) -> ToolMap:
    """Read a user's tool map (TOML); raises :class:`~trajlens.errors.ConfigError` naming the
    file and each bad entry."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError([f"{path}: cannot read the tool map: {error}"]) from None
    return parse_tool_map(text, str(path))


@lru_cache(maxsize=1)
def default_tool_map() -> ToolMap:
    """The shipped tool maps (:data:`SHIPPED_MAPS`), in order."""
    maps = [parse_tool_map((SHIPPED_DIR / name).read_text(encoding="utf-8"), SHIPPED_PREFIX + name)
            for name in SHIPPED_MAPS]
    combined = maps[0]
    for more in maps[1:]:
        combined = combined + more
    return combined


def resolve_tool_map(tool_map: ToolMapLike) -> ToolMap:
    """The map a classification uses: the shipped maps when ``tool_map`` is None; a path or a
    :class:`ToolMap` is tried first, then the shipped maps; :func:`only` uses a map alone."""
    if tool_map is None:
        return default_tool_map()
    if isinstance(tool_map, _Only):
        return tool_map.tool_map
    if not isinstance(tool_map, (ToolMap, str, Path)):
        raise TypeError(f"tool_map: expected a tool-map file, a ToolMap or None, got {type(tool_map).__name__}")
    user = tool_map if isinstance(tool_map, ToolMap) else load_tool_map(tool_map)
    return user + default_tool_map()


@dataclass(frozen=True)
class _Only:
    tool_map: ToolMap


def only(tool_map: ToolMap | str | Path) -> _Only:
    """Use ``tool_map`` alone, without the shipped maps after it::

        classify_calls(calls, tool_map=only("my_tools.toml"))
    """
    return _Only(tool_map if isinstance(tool_map, ToolMap) else load_tool_map(tool_map))
