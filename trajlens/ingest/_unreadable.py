"""A file given as input that cannot be read: what opening or reading a Parquet file raises,
the one line that says why, and what a path that is no regular file is."""

from __future__ import annotations

import re
from pathlib import Path


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


def special_kind(path: Path) -> str:
    """What a path that is neither a regular file nor a directory is (``a FIFO``): such a path is
    refused before it is opened, since reading a FIFO waits for a writer and a device never ends."""
    for test, kind in ((path.is_fifo, "a FIFO"), (path.is_char_device, "a character device"),
                       (path.is_block_device, "a block device"), (path.is_socket, "a socket")):
        if test():
            return kind
    return "another kind of file"
