"""Writing a command's ``--out`` file, in the format its extension names.

Every command that writes a file takes ``--out PATH`` and reads the format from the suffix:
``.csv``, ``.json``, ``.parquet``, ``.md`` or ``.html`` for a table, ``.md`` or ``.html`` for a
document. The folder, suffix and that a file can be made there are checked before any work; the
file is written to a partial name and renamed into place, so a failure leaves nothing behind,
and an error names the path the user gave, never the partial one. A command that writes a folder
(``trajlens report``) fills a partial sibling folder the same way (:func:`folder_output`).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import html
import json
import os
import re
import shutil
import uuid
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from trajlens.cli._written import LIST_NAME, read_list, remove_unwritten, unlisted_replacements, write_list
from trajlens.errors import ConfigError, TrajlensError
from trajlens.jsontext import json_values
from trajlens.markdown import markdown_html

if TYPE_CHECKING:
    import polars as pl


@dataclass(frozen=True)
class OutputFormat:
    """A file format ``--out`` can write."""

    suffix: str
    description: str
    tables: bool
    """Whether a table (a DataFrame) can be written in it."""
    documents: bool
    """Whether a Markdown document (a report) can be written in it."""


OUTPUT_FORMATS: dict[str, OutputFormat] = {
    format.suffix: format
    for format in (
        OutputFormat(".csv", "CSV; nested cells (lists, structs) as JSON text", tables=True, documents=False),
        OutputFormat(".json", "a JSON array of row objects", tables=True, documents=False),
        OutputFormat(".parquet", "Parquet, nested columns kept", tables=True, documents=False),
        OutputFormat(".md", "Markdown", tables=True, documents=True),
        OutputFormat(".html", "a standalone HTML page", tables=True, documents=True),
    )
}
TABLE_SUFFIXES: tuple[str, ...] = tuple(s for s, f in OUTPUT_FORMATS.items() if f.tables)
DOCUMENT_SUFFIXES: tuple[str, ...] = tuple(s for s, f in OUTPUT_FORMATS.items() if f.documents)


def check_output(path: Path, suffixes: tuple[str, ...] | None = None, *, flag: str = "--out",
                 store: Path | str | None = None) -> None:
    """Fail before any work when ``path`` cannot be written, or its suffix is not one of
    ``suffixes``, or it lies in an input of ``store``'s runs (:func:`source_problems`)."""
    problems = output_problems(path, suffixes, flag=flag, store=store)
    if problems:
        raise ConfigError(problems)


def _recorded_inputs(store: Path | str | None) -> list[Path]:
    """What the runs of the local ``store`` were ingested from
    (:func:`~trajlens.store.writer.recorded_sources`); none for a store given as a URI (another
    engine's) or no store."""
    if store is None or "://" in str(store):
        return []
    from trajlens.store.writer import recorded_sources

    return recorded_sources(Path(store))


def source_problems(path: Path, store: Path | str | None, *, flag: str = "--out") -> list[str]:
    """Problems when writing ``path`` would write over, or into, a file or folder the runs of the
    local ``store`` were ingested from (:func:`_recorded_inputs`): input files are never modified."""
    for source in _recorded_inputs(store):
        if problems := overwrites_input(path, source, flag=flag):
            return problems
    return []


def entry_source_problems(folder: Path, names: Iterable[str], store: Path | str | None, *,
                          flag: str = "--out") -> list[str]:
    """:func:`source_problems` of the entries ``names`` a command writes inside ``folder`` (a
    report's run folders, ``OUT/<run id>/``): an input of the store's runs at such a place (the
    folder of logs a run was ingested from, named as its run) would be written into."""
    sources = _recorded_inputs(store)
    for name in names:
        for source in sources:
            if overwrites_input(folder / name, source, flag=flag):
                return [f"{flag} {folder}: {folder / name} would be written into the input {source}; write it elsewhere"]
    return []


def output_problems(path: Path, suffixes: tuple[str, ...] | None = None, *, flag: str = "--out",
                    store: Path | str | None = None) -> list[str]:
    """Why ``path`` cannot be written (``flag`` names the option), for :class:`ConfigError`.

    Beyond the folder existing, a file is made and removed under the partial name the write will
    use, so that a folder that refuses files (read-only, a name too long) fails here, not after
    the work. With ``store``: also when ``path`` lies in an input of its runs. ``-`` is refused
    (:func:`standard_output_problem`)."""
    if (refused := standard_output_problem(path, flag, "a file")) is not None:
        return [refused]
    problems = source_problems(path, store, flag=flag)
    ending = f" ending in {', '.join(suffixes)}" if suffixes else ""
    try:
        if path.is_dir():
            problems.append(f"{flag} {path}: is a folder; expected a file name{ending}")
            return problems
        elif not path.parent.is_dir():
            what = "is a file, not a folder" if path.parent.exists() else "does not exist"
            problems.append(f"{flag} {path}: folder {path.parent} {what}")
    except OSError as error:
        problems.append(f"{flag} {path}: cannot write it ({_os_reason(error)})")
    if suffixes and path.suffix.lower() not in suffixes:
        problems.append(f"{flag} {path}: expected a file{ending}")
    from trajlens.store.handle import store_holding_problem

    if (holding := store_holding_problem(path, f"{flag} {path}")) is not None:
        problems.append(holding)
    if not problems:
        partial = _partial(path)
        try:
            with open(partial, "xb"):
                pass
        except FileExistsError:  # a partial file left by a write that was killed is replaced
            if partial.is_dir():
                problems.append(f"{flag} {path}: the folder {partial} is in the way of writing it")
        except OSError as error:
            problems.append(f"{flag} {path}: cannot write it ({_os_reason(error)})")
        else:
            partial.unlink(missing_ok=True)
    return problems


STANDARD_OUTPUT = "-"


def standard_output_problem(path: Path, flag: str, kind: str) -> str | None:
    """Why ``-`` is no output: the commands write their files whole, beside their own lines on
    standard output, so ``-`` would make a file (or a folder) of that name rather than mean
    standard output. None for any other path."""
    if str(path) != STANDARD_OUTPUT:
        return None
    return f"{flag} -: {flag} writes {kind}, not to standard output; name {kind} other than -"


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def _os_reason(error: OSError) -> str:
    """Why an operating-system call failed, without the file name it was given (a partial name)."""
    if error.strerror:
        return error.strerror
    text = str(error).strip()
    # Polars and pyarrow raise OSError("Reason (os error N): PATH") without errno or filename
    code = re.search(r"\(os error (\d+)\)", text)
    if code:
        return os.strerror(int(code.group(1)))
    return text.splitlines()[0] if text else type(error).__name__


def write_atomically(path: Path, write: Callable[[Path], None], *, flag: str = "--out") -> None:
    """Write through ``write(partial)`` and rename into place; remove the partial on failure.

    An operating-system failure (a full disk, a folder that refuses files) is a one-line
    :class:`ConfigError` naming ``flag`` and ``path`` as given, never the partial file."""
    partial = _partial(path)
    try:
        write(partial)
        partial.replace(path)
    except OSError as error:
        if isinstance(error, TrajlensError):
            raise
        reason = _os_reason(error).replace(str(partial), str(path))
        raise ConfigError([f"{flag} {path}: cannot write it ({reason})"]) from None
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def write_text_atomically(path: Path, text: str, *, flag: str = "--out") -> None:
    """``text`` written to ``path`` as UTF-8 through :func:`write_atomically`."""
    write_atomically(path, lambda partial: partial.write_text(text, encoding="utf-8"), flag=flag)


@contextlib.contextmanager
def folder_output(folder: Path, *, flag: str = "--out", listed: bool = False, unlisted_ours: Sequence[str] = ()
                  ) -> Iterator[Path]:
    """A partial sibling of ``folder`` to write into; on success what it holds is moved into
    ``folder`` (made if missing; a file of the same name is replaced, other files are kept).

    ``listed``: the files written are listed in the folder (:mod:`trajlens.cli._written`), and
    those the last listed write made that this one does not, unchanged since, are removed; what
    it would replace in ``folder`` that the last listed write did not make (the user's own,
    :func:`~trajlens.cli._written.unlisted_replacements`) fails the write, leaving ``folder`` as
    it was. ``unlisted_ours``: in a folder with no list (a write from before lists were kept, or
    one copied without its hidden list), the files known by their content to be an earlier
    write's of the same command, which it replaces; any other file it would replace fails it.

    On any failure, an interrupt included, the partial folder and any parent folders made for it
    are removed: nothing is left behind, and an existing ``folder`` is as it was. An
    operating-system error within the partial folder names the path under ``folder`` instead.
    Check the folder first with :func:`check_folder_output`, before any work.
    """
    check_folder_output(folder, flag=flag)
    made = [parent for parent in [folder.parent, *folder.parent.parents] if not parent.exists()]
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        _remove_dead_partials(folder.parent, folder.name)
        partial = _partial_folder(folder.parent, folder.name)
        partial.mkdir()  # not mkdtemp: the report folder keeps the usual permissions
    except OSError as error:
        _remove_empty(made)
        raise ConfigError([f"{flag} {folder}: cannot write it ({_os_reason(error)})"]) from None
    try:
        yield partial
        earlier = read_list(folder) if listed else {}
        written = write_list(partial) if listed else {}
        known = earlier or dict.fromkeys(unlisted_ours, "")
        if listed and (theirs := unlisted_replacements(folder, known, written)):
            more = f" and {len(theirs) - 1} more" if len(theirs) > 1 else ""
            unlisted = f" (it keeps no list of what a report wrote there, {LIST_NAME})" if unlisted_ours and not earlier else ""
            raise ConfigError([f"{flag} {folder}: holds {theirs[0]}{more}, which this would replace and the last "
                               f"report written there did not write{unlisted}; report into a new or empty folder, or "
                               f"move {'them' if more else 'it'} away"])
        _move_into(partial, folder)
    except BaseException as error:
        shutil.rmtree(partial, ignore_errors=True)
        _remove_empty(made)
        if isinstance(error, OSError) and not isinstance(error, TrajlensError):
            inside = None if error.filename is None else _under(Path(os.fsdecode(error.filename)), partial)
            if inside is not None:
                raise ConfigError([f"{flag} {folder / inside}: cannot write it ({_os_reason(error)})"]) from None
            code = _errno(error)
            if code in OUT_OF_SPACE:  # a writer that names no file (Polars, pyarrow): only a write fills a disk
                raise ConfigError([f"{flag} {folder}: cannot write it ({os.strerror(code)})"]) from None
        raise
    remove_unwritten(folder, earlier, written)


OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""Errors only a write raises: a full disk, a spent quota."""


def _errno(error: OSError) -> int | None:
    """The error's number, also where a library gives it in its text alone (``(os error 28)``, ``[errno 28]``)."""
    if error.errno is not None:
        return error.errno
    found = re.search(r"(?:os error|errno) (\d+)", str(error), flags=re.IGNORECASE)
    return int(found.group(1)) if found else None


def check_folder_output(folder: Path, *, flag: str = "--out", store: Path | str | None = None) -> None:
    """Fail before any work when ``folder`` is an existing file (a folder is written into), is a
    store itself, lies among a store's own files (:func:`store_holding`) or in an input of
    ``store``'s runs (:func:`source_problems`), or cannot be written: a partial folder is made
    and removed where the write will make one (and inside ``folder`` when it exists), so that a
    read-only folder or a name too long fails here, not after the work. ``-`` is refused
    (:func:`standard_output_problem`)."""
    if (refused := standard_output_problem(folder, flag, "a folder")) is not None:
        raise ConfigError([refused])
    if folder.exists() and not folder.is_dir():
        raise ConfigError([f"{flag} {folder}: is a file; expected a folder"])
    if problems := source_problems(folder, store, flag=flag):
        raise ConfigError(problems)
    from trajlens.store.handle import is_published_store, store_holding_problem

    if folder.is_dir() and is_published_store(folder):  # its runs' folders would land among the store's own
        raise ConfigError([f"{flag} {folder}: is a store; write into a folder of its own "
                           f"(such as {folder / 'report'})"])
    if (holding := store_holding_problem(folder, f"{flag} {folder}")) is not None:
        raise ConfigError([holding])
    try:
        _try_folder_in(_nearest_existing(folder.parent), folder.name)
        if folder.is_dir():  # what the partial folder holds is moved into it
            _try_folder_in(folder, folder.name)
    except OSError as error:
        raise ConfigError([f"{flag} {folder}: cannot write it ({_os_reason(error)})"]) from None


def _partial_folder(parent: Path, name: str) -> Path:
    """A fresh name in ``parent`` for the partial folder of an output folder called ``name``,
    naming the process that writes it (:func:`_remove_dead_partials`)."""
    return parent / f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial"


def _remove_dead_partials(parent: Path, name: str) -> None:
    """Remove the partial folders of ``name`` in ``parent`` whose writer is no longer running (a
    write killed outright, which could not clean up after itself)."""
    for partial in parent.glob(f".{glob.escape(name)}.*-*.partial"):
        pid = partial.name[len(name) + 2:].split("-", 1)[0]
        if pid.isdigit() and partial.is_dir() and not _running(int(pid)):
            shutil.rmtree(partial, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _nearest_existing(folder: Path) -> Path:
    """``folder``, or the nearest folder above it that exists (where the first missing one is made)."""
    absolute = Path(os.path.abspath(folder))
    return next((candidate for candidate in [absolute, *absolute.parents] if candidate.exists()), absolute)


def _try_folder_in(parent: Path, name: str) -> None:
    """Make and remove a partial folder for ``name`` in ``parent``: an ``OSError`` when ``parent``
    refuses it (read-only, a name too long, not a folder)."""
    probe = _partial_folder(parent, name)
    probe.mkdir()
    probe.rmdir()


def overwrites_input(path: Path, source: Path, *, flag: str = "--out") -> list[str]:
    """Problems when writing ``path`` would replace the input ``source`` (a run folder, a
    metrics file) or a file inside it; links are followed on both sides. A store is guarded by
    :func:`store_holding` alone: a file kept beside its runs is fine."""
    from trajlens.store.handle import is_store

    target, read = Path(os.path.realpath(path)), Path(os.path.realpath(source))
    if read.is_dir() and is_store(read):
        return []
    if target == read or read in target.parents:
        return [f"{flag} {path}: would write over the input {source}; write it elsewhere"]
    return []


def distinct_outputs(outputs: dict[str, Path | None]) -> list[str]:
    """Problems when two output options (flag -> path) name the same file: the second write
    would silently replace the first."""
    seen: dict[str, str] = {}
    problems = []
    for flag, path in outputs.items():
        if path is None:
            continue
        key = os.path.abspath(path)
        if key in seen:
            problems.append(f"{flag} {path}: the same file as {seen[key]}; give each output its own file")
        seen.setdefault(key, flag)
    return problems


def _under(path: Path, folder: Path) -> Path | None:
    """``path`` relative to ``folder`` when it lies inside it, else None."""
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(folder))
    except ValueError:
        return None


def _move_into(source: Path, target: Path) -> None:
    """Move the contents of ``source`` into ``target`` (renamed whole when ``target`` is missing)."""
    if not target.exists():
        source.rename(target)
        return
    for entry in source.iterdir():
        destination = target / entry.name
        if destination.is_dir() and not destination.is_symlink():
            if entry.is_dir():
                _move_into(entry, destination)
                continue
            shutil.rmtree(destination)
        elif entry.is_dir() and (destination.exists() or destination.is_symlink()):
            destination.unlink()
        _replace(entry, destination)
    source.rmdir()


def _replace(entry: Path, destination: Path) -> None:
    """Rename ``entry`` to ``destination``; copied, then removed, when ``destination`` is on
    another filesystem (a ``--out`` folder that is a mount point)."""
    try:
        entry.replace(destination)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        shutil.move(entry, destination)


def _remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) where empty: the parents made for an output."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def write_output(path: Path, *, frame: "pl.DataFrame | None" = None, document: str | None = None) -> None:
    """Write a table (``frame``) or a Markdown ``document`` to ``path`` by its extension."""
    if frame is not None:
        write_table_batches(path, [frame])
        return
    suffix = path.suffix.lower()
    check_output(path, DOCUMENT_SUFFIXES)
    if document is not None:
        text = document if suffix == ".md" else _html_page(markdown_html(document))
        write_text_atomically(path, text)


def write_table_batches(path: Path, batches: Iterable["pl.DataFrame"]) -> int:
    """Write a table given a batch of rows at a time (all in one schema) to ``path`` by its
    extension, and return the rows written. Parquet, CSV and JSON hold one batch at a time; a
    Markdown or HTML table, a page to read, is built whole. An error names ``path`` as given."""
    import polars as pl
    import pyarrow as pa

    suffix = path.suffix.lower()
    check_output(path, TABLE_SUFFIXES)
    written = 0

    def counted() -> Iterator["pl.DataFrame"]:
        nonlocal written
        for batch in batches:
            written += batch.height
            yield batch

    def write(partial: Path) -> None:
        try:
            if suffix == ".parquet":
                _parquet_batches(counted(), partial)
            elif suffix == ".csv":
                with open(partial, "wb") as handle:
                    for index, batch in enumerate(counted()):
                        flat_frame(batch).write_csv(handle, include_header=index == 0)
            elif suffix == ".json":
                with open(partial, "w", encoding="utf-8") as handle:
                    _json_rows(counted(), handle)
            else:  # .md, .html
                table = flat_frame(pl.concat(list(counted())))
                page = _markdown_table(table) if suffix == ".md" else _html_page(_html_table(table))
                partial.write_text(page, encoding="utf-8")
        except (pl.exceptions.PolarsError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ConfigError([f"--out {path}: cannot write the result ({reason})"]) from None

    write_atomically(path, write)
    return written


ROW_GROUP_BYTES = 64 * 2**20
"""Bytes of batches gathered into one Parquet row group (a row group a batch of 256 rows of token
arrays wrote twice as slowly)."""


def _parquet_batches(batches: Iterable["pl.DataFrame"], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    held: list[pa.Table] = []
    held_bytes = 0
    try:
        for batch in batches:
            table = batch.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            held.append(table.cast(writer.schema))
            held_bytes += held[-1].nbytes
            if held_bytes >= ROW_GROUP_BYTES:
                writer.write_table(pa.concat_tables(held))
                held, held_bytes = [], 0
        if held and writer is not None:
            writer.write_table(pa.concat_tables(held))
    finally:
        if writer is not None:
            writer.close()


def _json_rows(batches: Iterable["pl.DataFrame"], handle: Any) -> None:
    """The rows of ``batches`` as one JSON list, written as ``json.dumps`` writes the whole list."""
    handle.write("[")
    first = True
    for batch in batches:
        for row in json_values(batch.to_dicts()):
            handle.write(("" if first else ", ") + json.dumps(row, default=str, ensure_ascii=False, allow_nan=False))
            first = False
    handle.write("]\n")


def flat_frame(frame: "pl.DataFrame") -> "pl.DataFrame":
    """``frame`` with every nested column (list, array, struct) as compact JSON text, for flat
    formats: encoded by Polars, no Python object made per value (a row of token arrays holds tens
    of thousands); a column of Python objects, or one Polars cannot encode, through ``json.dumps``."""
    import polars as pl

    nested = [name for name, dtype in frame.schema.items() if dtype.is_nested() or dtype == pl.Object]
    if not nested:
        return frame
    return frame.with_columns(_json_column(frame, name) for name in nested)


def _json_column(frame: "pl.DataFrame", name: str) -> "pl.Series":
    import polars as pl

    if frame.schema[name] != pl.Object:
        # {"name": value} encoded whole, then the value cut out of it
        prefix = "{" + json.dumps(name, ensure_ascii=False) + ":"
        whole = pl.struct(name).struct.json_encode()
        encoded = pl.when(pl.col(name).is_null()).then(None).otherwise(whole.str.strip_prefix(prefix).str.strip_suffix("}"))
        with contextlib.suppress(pl.exceptions.PolarsError):
            cut = frame.select(encoded.alias(name), whole.str.starts_with(prefix).all().alias("__cut"))
            if cut["__cut"][0]:  # the name written as json.dumps writes it: the value is what is left
                return cut.get_column(name)
    return pl.Series(name, [None if value is None else _json_cell(value) for value in frame[name].to_list()], dtype=pl.String)


def _json_cell(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _cell_text(value: Any) -> str:
    return "" if value is None else str(value)


def _markdown_table(frame: "pl.DataFrame") -> str:
    from trajlens.markdown import markdown_table

    rows = ([_cell_text(value) for value in values] for values in frame.iter_rows())
    return "\n".join(markdown_table(frame.columns, rows)) + "\n"


def _html_table(frame: "pl.DataFrame") -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for name in frame.columns)
    body = "\n".join("<tr>" + "".join(f"<td>{html.escape(_cell_text(v))}</td>" for v in values) + "</tr>"
                     for values in frame.iter_rows())
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


CONSOLE_WIDTH = 120
"""Widest line a console table aims for; a header wider than its column wraps at its spaces."""


def console_table(frame: "pl.DataFrame", *, rows: int | None = None, width: int = CONSOLE_WIDTH,
                  right: Collection[str] = ()) -> str:
    """``frame`` as a plain-text table for the terminal.

    Headers wrap only at spaces (and at ``_`` when a name has no space), never inside a word, so
    a column is at least as wide as the longest word of its header. A float column whose nonzero
    values lie within three orders of magnitude (and between 0.001 and a million) is fixed, with
    enough decimals for three significant digits of its smallest value; any other column gives
    each value three significant digits, in scientific notation below 0.001 (``8.9e-08``,
    ``4.9e-04``), so that small values never all read "0.00".
    ``rows`` keeps the first rows and says how many more there are. Numbers are aligned right, as
    are the ``right`` columns (numbers already written as text, such as ``< 1e-15``).
    """
    import polars as pl

    shown = frame if rows is None else frame.head(rows)
    columns = []
    for name in frame.columns:
        series = shown[name]
        if series.dtype in (pl.Float32, pl.Float64):
            cells = _float_cells(series.to_list())
        else:
            cells = ["" if value is None else _one_line(value) for value in series.to_list()]
        columns.append((name, cells))
    spare = max(width - 2 * (len(columns) - 1), len(columns))
    widths = []
    for name, cells in columns:
        cell_width = max((len(cell) for cell in cells), default=0)
        word_width = max(len(word) for word in _header_words(name))
        widths.append(max(cell_width, word_width, min(len(name), max(cell_width, spare // max(len(columns), 1)))))
    headers = [_wrap_header(name, w) for (name, _), w in zip(columns, widths)]
    height = max((len(h) for h in headers), default=0)
    numeric = [frame.schema[name].is_numeric() or name in right for name, _ in columns]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.rjust(w) if right else cell.ljust(w)
                         for cell, w, right in zip(cells, widths, numeric)).rstrip()

    lines = [line([h[i] if i < len(h) else "" for h in headers]) for i in range(height)]
    lines.append("  ".join("-" * w for w in widths))
    lines += [line([cells[i] for _, cells in columns]) for i in range(shown.height)]
    if shown.height < frame.height:
        lines.append(f"({frame.height - shown.height} more rows)")
    return "\n".join(lines)


def _one_line(value: Any) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:59] + "…"


def _float_cells(values: list[float | None]) -> list[str]:
    import math

    finite = [abs(v) for v in values if v is not None and math.isfinite(v) and v != 0]
    if not finite:
        return ["" if v is None else f"{v:g}" for v in values]
    smallest, largest = min(finite), max(finite)
    if largest / smallest >= 1e3 or smallest < 1e-3 or largest >= 1e6:
        return ["" if v is None else _general(v) for v in values]
    decimals = max(0, min(6, 2 - math.floor(math.log10(smallest))))
    return ["" if v is None else f"{v:,.{decimals}f}" for v in values]


def _general(value: float) -> str:
    """Three significant digits, in scientific notation below 0.001 and from a million up."""
    import math

    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.1e}" if abs(value) < 1e-3 or abs(value) >= 1e6 else f"{value:.3g}"


def _header_words(name: str) -> list[str]:
    words = name.split()
    if len(words) == 1 and "_" in name:
        parts = name.split("_")
        words = [part + "_" for part in parts[:-1]] + [parts[-1]]
    return words


def _wrap_header(name: str, width: int) -> list[str]:
    if len(name) <= width:
        return [name]
    joiner = " " if " " in name else ""
    lines: list[str] = []
    for word in _header_words(name):
        if lines and len(lines[-1]) + len(joiner) + len(word) <= width:
            lines[-1] += joiner + word
        else:
            lines.append(word)
    return lines


HTML_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;line-height:1.4}"
              "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.25em .6em;"
              "text-align:left}th{background:#f3f3f3}")


def _html_page(body: str) -> str:
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>trajlens</title><style>{HTML_STYLE}</style>'
            f'</head>\n<body>\n{body}\n</body></html>\n')


__all__ = ["CONSOLE_WIDTH", "DOCUMENT_SUFFIXES", "OUTPUT_FORMATS", "TABLE_SUFFIXES", "OutputFormat", "check_folder_output",
           "check_output", "console_table", "distinct_outputs", "flat_frame", "folder_output", "output_problems",
           "overwrites_input", "write_atomically",
           "write_output", "write_text_atomically"]
