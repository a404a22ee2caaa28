"""A Parquet file given as input that cannot be read: what opening or reading it raises, and
the one line that says why."""

from __future__ import annotations

import re


def parquet_errors() -> tuple[type[Exception], ...]:
    """What opening or reading a damaged Parquet file raises: Arrow's errors, the operating
    system's, and ValueError (a footer whose column names are not UTF-8 raises
    UnicodeDecodeError while its schema is decoded)."""
    import pyarrow as pa

    return (pa.ArrowException, OSError, ValueError)


def reason(error: BaseException) -> str:
    """The first line of ``error``'s message, or the name of its type when it has none. A path
    the message quotes (``Could not open Parquet input source '/long/path/x.parquet': Parquet
    magic bytes not found``) is left out: the error names the file already, and the line is
    shortened to a width where the path would push out the cause."""
    text = str(error).strip()
    if not text:
        return type(error).__name__
    return re.sub(r" ?'[^\n]*/[^\n]*?'(?=:|$)", "", text.splitlines()[0])
