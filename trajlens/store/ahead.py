"""Read the next item while the caller works on this one: :class:`ReadAhead`, :func:`read_ahead`.

Every reader of many files or batches in turn (ingest's files of a run directory, the run
layer's batches of steps, the checks' token columns) reads through here: one background
thread, one item ahead (for each way the caller asks an item), so memory holds the item in hand
and the next one, and the order of the reads, and of their errors, is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K")


class ReadAhead(Generic[T, K, R]):
    """``read(items[index], ask)`` handed to the caller, the next item read with each ``ask``
    made of this one on a background thread while the caller works on this one. What a caller
    asks of an item (``ask``: the columns of a batch) may be known only when it asks, and it may
    ask an item more than once (the checks ask a batch for its logged column, then for the
    arrays they recompute from): each ask of an item reads the next item the same way, so a
    caller that asks every item alike gets every item after the first read ahead. Reads ahead
    that the caller does not ask for are dropped when it moves on. The first item is read when
    asked."""

    def __init__(self, read: Callable[[T, K], R], items: Sequence[T]) -> None:
        self.read, self.items = read, items
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trajlens-read")
        self._pending: dict[tuple[int, K], Future[R]] = {}
        self._closed = False

    def __enter__(self) -> ReadAhead[T, K, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading ahead; an item asked afterwards is read on the spot."""
        self._closed = True
        self._reader.shutdown(wait=True, cancel_futures=True)
        self._pending.clear()

    def get(self, index: int, ask: K) -> R:
        for passed in [key for key in self._pending if key[0] < index]:
            self._pending.pop(passed).cancel()
        ahead = self._pending.pop((index, ask), None)
        following = (index + 1, ask)
        if index + 1 < len(self.items) and not self._closed and following not in self._pending:
            self._pending[following] = self._reader.submit(self.read, self.items[index + 1], ask)
        if ahead is not None and not ahead.cancelled():
            return ahead.result()
        return self.read(self.items[index], ask)


def read_ahead(read: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
    """``read(item)`` of each of ``items`` in order, through :class:`ReadAhead`: the next one
    read on a background thread while the caller works on this one."""
    ahead: ReadAhead[T, None, R] = ReadAhead(lambda item, _: read(item), items)
    with ahead:
        for index in range(len(items)):
            yield ahead.get(index, None)
