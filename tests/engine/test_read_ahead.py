"""The one read-ahead of a run's batches (store.ahead.ReadAhead): the next item is read on a
background thread with what the caller asked of this one; asked otherwise, it is read again."""

from __future__ import annotations

import threading

from trajlens.store.ahead import ReadAhead, read_ahead


def _recording(log: list[tuple[int, str | None, str]]):
    def read(item: int, ask: str | None) -> tuple[int, str | None]:
        log.append((item, ask, threading.current_thread().name))
        return item, ask

    return read


def test_each_item_after_the_first_is_read_ahead_on_the_reading_thread():
    log: list[tuple[int, str | None, str]] = []
    with ReadAhead(_recording(log), [10, 11, 12]) as ahead:
        assert [ahead.get(i, "a") for i in range(3)] == [(10, "a"), (11, "a"), (12, "a")]
    log.sort()  # the next item may be read before the one asked
    assert [(item, ask) for item, ask, _ in log] == [(10, "a"), (11, "a"), (12, "a")]
    assert log[0][2] == threading.current_thread().name
    assert all(name.startswith("trajlens-read") for _, _, name in log[1:])


def test_an_item_asked_differently_from_the_one_before_is_read_again_with_what_was_asked():
    log: list[tuple[int, str | None, str]] = []
    with ReadAhead(_recording(log), [0, 1, 2]) as ahead:
        assert ahead.get(0, "a") == (0, "a")
        assert ahead.get(1, "b") == (1, "b")  # 1 was read ahead with "a": that read is not handed out
        assert ahead.get(2, "b") == (2, "b")
    asked_of_one = [ask for item, ask, _ in log if item == 1]
    assert "b" in asked_of_one and asked_of_one[-1] in ("a", "b")
    assert [ask for item, ask, _ in log if item == 2] == ["b"]


def test_each_ask_made_of_an_item_reads_the_next_item_the_same_way_once():
    log: list[tuple[int, str | None, str]] = []
    with ReadAhead(_recording(log), [0, 1, 2, 3]) as ahead:
        for index in range(4):  # the checks ask a batch for its logged column, then for its arrays
            assert ahead.get(index, "logged") == (index, "logged")
            assert ahead.get(index, "arrays") == (index, "arrays")
    assert sorted((item, ask) for item, ask, _ in log) == sorted(
        (item, ask) for item in range(4) for ask in ("logged", "arrays"))
    assert all(name.startswith("trajlens-read") for item, _, name in log if item > 0)


def test_after_closing_an_item_is_read_on_the_spot():
    log: list[tuple[int, str | None, str]] = []
    ahead = ReadAhead(_recording(log), [0, 1])
    ahead.close()
    assert ahead.get(0, None) == (0, None) and ahead.get(1, None) == (1, None)
    assert [name for _, _, name in log] == [threading.current_thread().name] * 2


def test_read_ahead_yields_every_item_in_order_and_none_of_an_empty_list():
    assert list(read_ahead(lambda item: item * 2, [1, 2, 3])) == [2, 4, 6]
    assert list(read_ahead(lambda item: item, [])) == []
