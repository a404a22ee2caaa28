"""Records of a file, whatever holds them: a JSON array, a JSON object, JSONL or Parquet.

A format is recognised by its records (:attr:`trajlens.ingest._probe.Probe.record_keys`), so
its loader reads them from any of these containers through :func:`records`: the same rows
load alike from a JSON array, a JSONL file or a Parquet shard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from trajlens.errors import InputError
from trajlens.ingest._fields import parse_json, read_json_file, read_lines
from trajlens.ingest._unreadable import parquet_errors, reason

PARQUET_BATCH_ROWS = 256
"""Rows read from Parquet at a time (a dataset shard is ~90 MB: read it in pieces)."""


def records(file: Path) -> Iterator[tuple[int, Any]]:
    """``(number, record)`` for each record of ``file``; a record that cannot be read is an
    :class:`InputError` in place of the record (the caller decides: raise, or skip it).

    Numbers are 1-based lines in JSONL and 0-based positions in a JSON array or Parquet file;
    a JSON file holding one object is one record numbered 0.
    """
    if file.suffix.lower() == ".parquet":
        yield from _parquet_rows(file)
        return
    if file.suffix.lower() == ".jsonl":
        for number, line in read_lines(file):
            if isinstance(line, InputError):
                yield number, line
                continue
            try:
                yield number, parse_json(line, str(file), record=number)
            except InputError as error:
                yield number, error
        return
    data = read_json_file(file)
    if isinstance(data, list):
        yield from enumerate(data)
    else:
        yield 0, data


def readable_records(file: Path) -> Iterator[tuple[int, Any]]:
    """:func:`records`, with a file that cannot be read as records at all (empty, no JSON, past
    the size limit) given as one record numbered 0, its :class:`InputError`: a lenient loader
    skips the file, naming it, and goes on with the next."""
    try:
        yield from records(file)
    except InputError as error:
        yield 0, error


def _parquet_rows(file: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trajlens.ingest.parquet import check_text

    try:
        parquet = pq.ParquetFile(file)
    except parquet_errors() as error:
        raise InputError(str(file), "not a readable Parquet file", expected="Parquet", found=reason(error)) from None
    number = 0
    batches = parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS)
    while True:
        try:  # a damaged page is found only when its batch is read: the rest of the file is lost
            batch = next(batches)
        except StopIteration:
            return
        except parquet_errors() as error:
            yield number, InputError(str(file), "a damaged Parquet page", record=number, expected="Parquet",
                                     found=reason(error))
            return
        table = pa.Table.from_batches([batch])
        check_text(table, file)
        for row in table.to_pylist():
            yield number, row
            number += 1


__all__ = ["readable_records", "records"]
