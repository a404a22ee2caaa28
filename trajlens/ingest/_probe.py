"""What format detection may look at: a path and, read once on first use, the two ends of a file.

Every format's ``detect`` takes a :class:`Probe` (or a path, wrapped into one) and answers
yes or no. A probe reads at most :data:`SNIFF_BYTES` from each end of a file, once, and keeps
them only as long as the probe lives: detection holds no cache beyond one file's survey.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Any, Callable, Sequence

from trajlens.errors import InputError
from trajlens.ingest._unreadable import parquet_errors, reason
from trajlens.limits import UTF8_BOM, parse_json

SNIFF_BYTES = 65536


class Probe:
    """One path under detection."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._ends: tuple[str, str] | None = None
        self._keys: frozenset[str] | None = None

    @classmethod
    def of(cls, target: "Probe | Path | str") -> "Probe":
        return target if isinstance(target, Probe) else cls(target)

    @property
    def is_dir(self) -> bool:
        return self.path.is_dir()

    @property
    def is_file(self) -> bool:
        return self.path.is_file()

    @property
    def suffix(self) -> str:
        """The file's extension in lower case: ``LOG.JSONL`` is read as ``log.jsonl`` is."""
        return self.path.suffix.lower()

    @property
    def head(self) -> str:
        return self._read()[0]

    @property
    def tail(self) -> str:
        return self._read()[1]

    def first_line(self) -> str:
        """The first non-blank line of the head ('' when none)."""
        return next((line for line in self.head.splitlines() if line.strip()), "")

    def first_line_record(self) -> Any:
        """The first non-blank line of the head as JSON, read for its shape alone
        (:func:`~trajlens.limits.parse_json` with ``sniff``): an integer too long to convert
        reads as an integer, and a line past the size or depth limit is read, so the loader
        refuses them naming the record and field. An InputError when the line is empty or no JSON."""
        return parse_json(self.first_line(), str(self.path), sniff=True)

    @property
    def record_keys(self) -> frozenset[str]:
        """The top-level keys of the file's first record, whatever holds it: the columns of a
        Parquet file, the first line of JSONL, the first object of a JSON array, or a JSON
        object itself. Read from the head alone (a record longer than the head gives the keys
        before its cut); empty for anything else."""
        if self._keys is None:
            self._keys = self._record_keys()
        return self._keys

    def _record_keys(self) -> frozenset[str]:
        if not self.is_file:
            return frozenset()
        if self.suffix == ".parquet":
            import pyarrow.parquet as pq

            try:
                return frozenset(pq.read_schema(self.path).names)
            except parquet_errors():
                return frozenset()
        if self.suffix not in RECORD_SUFFIXES:
            return frozenset()
        return frozenset(first_record_keys(self.head))

    def _read(self) -> tuple[str, str]:
        if self._ends is None:
            self._ends = _ends(self.path)
        return self._ends


def _ends(path: Path) -> tuple[str, str]:
    if not path.is_file():  # a folder, a FIFO or a device is never read (a FIFO would block)
        return "", ""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size <= 2 * SNIFF_BYTES:
                data = handle.read()
                head, tail = data[:SNIFF_BYTES], data[-SNIFF_BYTES:]
            else:
                head = handle.read(SNIFF_BYTES)
                handle.seek(size - SNIFF_BYTES)
                tail = handle.read(SNIFF_BYTES)
    except OSError:
        return "", ""
    if head.startswith(UTF8_BOM):  # written by editors and tools on Windows; JSON readers skip it
        head = head[len(UTF8_BOM):]
    return head.decode("utf-8", "replace"), tail.decode("utf-8", "replace")


RECORD_SUFFIXES: frozenset[str] = frozenset({".json", ".jsonl", ".traj"})
"""Suffixes of files whose records :attr:`Probe.record_keys` reads (JSON or JSONL)."""
WHOLE_JSON_SUFFIXES: frozenset[str] = frozenset({".json", ".traj"})
"""Suffixes of files that hold one JSON document (a SWE-agent ``.traj`` is JSON): one cut short
no longer closes it (:func:`damage_error`)."""

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def first_record_keys(text: str) -> list[str]:
    """Keys of the first record in JSON text, in order: of the object it opens with, or of
    the first object in the array it opens with (a JSONL file opens with its first line's
    object). Text cut short gives the keys before the cut; anything else gives none."""
    start = text.lstrip("\ufeff \t\r\n")[:1]
    if start not in ("{", "["):
        return []
    keys: list[str] = []
    depth = 0
    record_depth = 1 if start == "{" else 2
    pending: str | None = None
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "{[":
            depth += 1
            if depth == 2 and record_depth == 2 and token == "[":
                return []  # an array of arrays: no records
        elif token in "}]":
            depth -= 1
            if depth < record_depth:
                return keys
        elif token == ":":
            if pending is not None:
                keys.append(pending)
        if token.startswith('"') and depth == record_depth:
            pending = token[1:-1]
        elif token != ":":
            pending = None
        if token == ":":
            pending = None
    return keys


def damage_error(probe: Probe) -> InputError | None:
    """The error to raise for a Parquet or JSON file cut short (or overwritten), or None.
    Detection asks it of a file in a folder of logs that no format recognised: such a file is
    left out only when it reads as something else, so a damaged log is never dropped without a
    word. A Parquet file must have a readable footer; a JSON file that opens as JSON (``{`` or
    ``[``) must close as JSON or JSON Lines do (``}`` or ``]``). Only the file's ends are read."""
    if probe.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            pq.read_schema(probe.path)
        except parquet_errors() as error:
            return InputError(str(probe.path), "not a readable Parquet file", expected="Parquet", found=reason(error))
    elif probe.suffix in WHOLE_JSON_SUFFIXES:
        opens, closes = probe.head.lstrip()[:1], probe.tail.rstrip()[-1:]
        if opens in ("{", "[") and closes not in ("}", "]"):
            return InputError(str(probe.path), "JSON cut short", expected="JSON that closes its last record",
                              found=f"a file ending in {probe.tail.rstrip()[-20:]!r}")
    return None


def depth_error(probe: Probe) -> InputError | None:
    """The depth-limit error for a JSONL file whose first record, or a JSON file (``.json``,
    ``.traj``) whose document, is nested past the limit, or None. Detection reads a record's shape
    by parsing it, and a record deeper than the parser can nest reads as no JSON at all (or as a
    format's keys with values of no format): such a file is said to be too deep (naming the limit
    and how to raise it), not of no known format. Only the head is read: a record longer than it
    is at least as deep as its head shows."""
    from trajlens import limits as _limits

    if probe.suffix == ".jsonl":
        text, record = probe.first_line(), "line 1"
        cut = "\n" not in probe.head[probe.head.find(text):]
    elif probe.suffix in WHOLE_JSON_SUFFIXES:
        text, record, cut = probe.head, None, True
    else:
        return None
    limit = _limits.current().depth
    depth = _limits.json_depth(text.encode("utf-8", "surrogatepass"), limit)
    if depth <= limit:
        return None
    cut = cut and probe.path.stat().st_size > SNIFF_BYTES
    return InputError(str(probe.path), record=record, expected=f"JSON nested at most {limit} levels "
                      "(raise it with --limit depth=...)", found=f"{'at least ' if cut else ''}{depth} levels")


STREAM_SUFFIXES: frozenset[str] = frozenset({".jsonl", ".parquet"})
"""Suffixes of files that hold a stream of records (JSON Lines, Parquet)."""


def strays(recognised: Sequence[Probe | Path], unrecognised: Sequence[Probe | Path]) -> list[Path]:
    """The files of ``unrecognised`` that look like a log of ``recognised`` gone bad: beside one
    of them (same folder, same record-stream suffix), with a first record that is not a record
    at all (a garbled line, stray bytes) or has the same keys as that log's (a mistyped value); a
    whole-file log (``.json``, ``.traj``) beside one of its suffix, when its record has that
    log's keys (``"history": null`` where a list belongs).
    Their loader reads them and names the bad record, rather than the survey dropping them
    without a word. A file of other records (a summary beside the logs) or an empty one is not a
    stray. Pass the probes detection made, so no file's head is read twice."""
    beside: dict[tuple[Path, str], set[frozenset[str]]] = {}
    for probe in map(Probe.of, recognised):
        if probe.suffix in STREAM_SUFFIXES or probe.suffix in RECORD_SUFFIXES:
            beside.setdefault((probe.path.parent, probe.suffix), set()).add(probe.record_keys)
    found = []
    for probe in map(Probe.of, unrecognised):
        keys_beside = beside.get((probe.path.parent, probe.suffix))
        if keys_beside is None:
            continue
        if probe.suffix in STREAM_SUFFIXES:
            garbled = not probe.record_keys and bool(probe.head.strip())
            if garbled or probe.record_keys in keys_beside:
                found.append(probe.path)
        elif probe.record_keys and probe.record_keys in keys_beside:  # a whole-file log with a mistyped value
            found.append(probe.path)
    return found


def named_like(path: Path, names: Sequence[str]) -> bool:
    """Whether the name of ``path`` matches one of ``names`` (lower-case ``fnmatch`` patterns), its
    extensions in any case (``X.TRAJ.JSON`` as ``x.traj.json``)."""
    return any(fnmatch.fnmatchcase(path.name, pattern) or fnmatch.fnmatchcase(path.name.lower(), pattern)
               for pattern in names)


def named_unread(unknown: Sequence[Probe], names: Sequence[str]) -> list[Path]:
    """The files of ``unknown`` named as a format names its logs (``names``) that no format
    detects (an empty file, one of another shape): their loader says what is wrong with them."""
    if not names:
        return []
    from trajlens.ingest.formats import claimed_by

    return [probe.path for probe in unknown if named_like(probe.path, names) and claimed_by(probe.path) is not None]


def files_of(paths: Sequence[Path | str] | Path | str, detect: Callable[["Probe"], bool],
             names: Sequence[str] = (), *, strict: bool = True) -> list[Path]:
    """The files a loader of row files reads: files named directly, and the files below named
    folders that ``detect`` recognises, with their :func:`strays` and the files named as the
    format names its logs (``names``) that no format detects (sorted); an InputError when a
    folder holds none.

    A damaged file in a folder (:func:`damage_error`) stops a strict load with its error.
    Lenient, it is read with the others, and its loader skips it and names it
    (:func:`~trajlens.ingest._records.readable_records`), so the rest of the run loads."""
    given = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    files: list[Path] = []
    for path in given:
        if path.is_dir():
            probes = [Probe(p) for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith(".")]
            known = [_recognised(probe, detect, strict) for probe in probes]
            found = [probe for probe, ok in zip(probes, known) if ok]
            if not found:
                raise InputError(str(path), "no files of this format in the directory", found="none")
            others = [probe for probe, ok in zip(probes, known) if not ok]
            gone_bad = {*strays(found, others), *named_unread(others, names)}
            files.extend(sorted([*(probe.path for probe in found), *gone_bad]))
        else:
            files.append(path)
    return files


def _recognised(probe: Probe, detect: Callable[["Probe"], bool], strict: bool) -> bool:
    if detect(probe):
        return True
    if (error := damage_error(probe)) is None:
        return False
    if strict:
        raise error
    return True


def run_name(paths: Sequence[Path | str] | Path | str, files: list[Path]) -> str:
    """The name of a run read from ``paths``: the one file or folder named, else the folder of
    the first file read."""
    return Path(paths).name if isinstance(paths, (str, Path)) else files[0].parent.name
