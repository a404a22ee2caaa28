"""A Parquet file given as input that cannot be read: what opening or reading it raises, and
the one line that says why."""

from __future__ import annotations


def parquet_errors() -> tuple[type[Exception], ...]:
    """What opening or reading a damaged Parquet file raises: Arrow's errors, the operating
    system's, and ValueError (a footer whose column names are not UTF-8 raises
    UnicodeDecodeError while its schema is decoded)."""
    import pyarrow as pa

    return (pa.ArrowException, OSError, ValueError)


def reason(error: BaseException) -> str:
    """The first line of ``error``'s message, or the name of its type when it has none."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
