"""The files a command wrote into an output folder, listed in the folder, so that the next write
into it removes what it no longer makes.

``trajlens report`` merges into an existing folder (a user's own files there are kept). Without a
list, a run left out of the next report, a viewer page fewer, or a PNG no longer asked for would
stay behind with the earlier numbers, beside an index that no longer names them. The list
(:data:`LIST_NAME`) records each file's path under the folder and its SHA-256. A later write
removes a listed file it did not write again only when it is still a plain file with those exact
bytes, reached through no symbolic link: a file the user changed, replaced or moved in behind a
link is kept, and so is every file the list does not name. Nor does a write replace such a file
of the user's where it would write one of its own (:func:`unlisted_replacements`): it is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

LIST_NAME = ".trajlens-written.json"
"""The list of the files the last write put in the folder (a hidden file in the folder itself)."""


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _files(folder: Path) -> Iterator[Path]:
    for root, _, names in os.walk(folder):
        for name in names:
            yield Path(root) / name


def write_list(partial: Path) -> dict[str, str]:
    """List every file under ``partial`` (the folder a write fills before it is moved into place)
    in ``partial / LIST_NAME``; returns the list."""
    listed = {PurePosixPath(path.relative_to(partial)).as_posix(): _digest(path) for path in sorted(_files(partial))}
    (partial / LIST_NAME).write_text(json.dumps({"files": listed}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return listed


def read_list(folder: Path) -> dict[str, str]:
    """The files the last write listed in ``folder``; none when there is no list, or one that
    cannot be read as a list (then nothing is removed)."""
    try:
        files = json.loads((folder / LIST_NAME).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(files, dict):
        return {}
    return {name: digest for name, digest in files.items() if isinstance(name, str) and isinstance(digest, str)}


def unlisted_replacements(folder: Path, earlier: dict[str, str], written: dict[str, str]) -> list[str]:
    """The paths in ``folder`` that moving this write (``written``) into it would replace or clear
    and that are not the last listed write's own (``earlier``): a file of the user's where the
    write puts one, unless it holds the very bytes written; and, listed or not, a file or a link
    where the write makes a folder, or a folder or a link where it puts a file."""
    found: dict[str, None] = {}
    for name, digest in written.items():
        if name == LIST_NAME:
            continue
        parts = PurePosixPath(name).parts
        standing, index = _standing(folder, parts)
        if standing == "other":
            found["/".join(parts[:index + 1])] = None
        elif standing == "file" and name not in earlier and _digest(folder / name) != digest:
            found[name] = None
    return list(found)


def remove_unwritten(folder: Path, earlier: dict[str, str], written: dict[str, str]) -> list[Path]:
    """Remove the files ``earlier`` listed that this write did not make (``written``), where each
    is as that write left it; then the folders that held them, where left empty. Returns the
    files removed. A file that cannot be removed stays; the write has succeeded either way."""
    removed = []
    for name, digest in earlier.items():
        if name in written:
            continue
        path = _inside(folder, name)
        if path is None:
            continue
        with contextlib.suppress(OSError):
            if _digest(path) == digest:
                path.unlink()
                removed.append(path)
    for path in removed:
        for parent in path.parents:
            if parent == folder or folder not in parent.parents:
                break
            try:
                parent.rmdir()
            except OSError:  # not empty (or not ours to remove): its parents are not empty either
                break
    return removed


def _inside(folder: Path, name: str) -> Path | None:
    """``folder / name`` when ``name`` is a relative path as :func:`write_list` writes one (plain
    parts, no ``.`` or ``..``) whose folders under ``folder`` are real folders (no symbolic link)
    and which is a plain file itself; else None."""
    pure = PurePosixPath(name)
    parts = pure.parts
    if not parts or pure.is_absolute() or pure.as_posix() != name or ".." in parts:
        return None
    return folder / name if _standing(folder, parts)[0] == "file" else None


def _standing(folder: Path, parts: tuple[str, ...]) -> tuple[str, int]:
    """What stands at ``folder`` joined with ``parts``, and at which part it was decided:
    ``file``, a plain file reached through real folders; ``missing``, nothing at that part;
    ``other``, a part that is not what the path needs (a file or a link where a folder goes, a
    folder or a link at its end) or that cannot be read."""
    path = folder
    for index, part in enumerate(parts):
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return "missing", index
        except OSError:
            return "other", index
        last = index == len(parts) - 1
        if not (stat.S_ISREG(mode) if last else stat.S_ISDIR(mode)):
            return "other", index
    return "file", len(parts) - 1
