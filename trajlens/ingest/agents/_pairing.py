"""Pairs tool results with the calls they answer, read in log order.

Agent logs link a result to its call by an id: an OpenAI ``tool_call_id``, an OpenHands
observation's ``cause`` or ``action_id``. Ids are not always unique within a trajectory: some
providers and proxies number calls ``call_0`` in every turn, and a damaged event stream can
repeat an event id. A result always follows the call it answers, so it answers the nearest call
of its id before it, never a later one, and never every call of that id.

Two cases cannot be decided by order, and the call they touch raises the standard
:class:`~trajlens.errors.InputError` (naming the result's record and the id) when it is looked
up, rather than be given an output that may be another call's:

* a result whose nearest call of its id shares that id with another call of the same message
  (parallel calls under one id);
* a second result for a call that already has one.

A result with no call of its id before it answers nothing, as a result for an unknown id does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable

from trajlens.errors import InputError


@dataclass
class _Call:
    where: str
    """The record that issued the call (a message or event), named as errors name it."""
    keys: list[Hashable] = field(default_factory=list)
    """The calls of that record that carry this id (more than one cannot be told apart)."""
    result: Any = None
    answered_by: str | None = None
    problem: InputError | None = None


class ResultPairing:
    """Results of one trajectory paired with its calls: feed calls and results in log order
    (:meth:`call`, :meth:`result`), then look each call up by its key (:meth:`of`)."""

    def __init__(self, file: str, *, first_result_wins: bool = False) -> None:
        self.file = file
        self.first_result_wins = first_result_wins
        """Keep the first of several results for one call instead of refusing them (for
        results that repeat by design, such as error events of one failed call)."""
        self._latest: dict[Hashable, _Call] = {}
        self._by_key: dict[Hashable, _Call] = {}

    def call(self, call_id: Hashable | None, key: Hashable, where: str) -> None:
        """A call with id ``call_id`` (``None``: it has none) issued by record ``where``;
        ``key`` is what the loader looks it up by later."""
        if call_id is None:
            return
        latest = self._latest.get(call_id)
        if latest is not None and latest.where == where:
            latest.keys.append(key)
        else:
            latest = _Call(where, [key])
            self._latest[call_id] = latest
        self._by_key[key] = latest

    def result(self, call_id: Hashable | None, result: Any, where: str, field_name: str) -> None:
        """A result answering ``call_id``, from record ``where`` (its id in ``field_name``)."""
        if call_id is None:
            return
        call = self._latest.get(call_id)
        if call is None:
            return
        if call.answered_by is not None:
            if not self.first_result_wins and call.problem is None:
                call.problem = InputError(
                    self.file, record=where, field=field_name, expected="one result per call",
                    found=f"a second result for {call_id!r} (the call of {call.where}, answered by {call.answered_by})")
            return
        if len(call.keys) > 1 and call.problem is None:
            call.problem = InputError(
                self.file, record=where, field=field_name, expected="the id of one call",
                found=f"{call_id!r}, the id of {len(call.keys)} calls of {call.where}")
        call.result = result
        call.answered_by = where

    def of(self, key: Hashable) -> Any:
        """The result that answers the call ``key``, None when none does; raises when which
        result answers it cannot be told."""
        call = self._by_key.get(key)
        if call is None:
            return None
        if call.problem is not None:
            raise call.problem
        return call.result

    def where(self, key: Hashable) -> str | None:
        """The record of the result that answers the call ``key`` (a message or event, named as
        errors name it), None when none does: a bad field of the result is that record's."""
        call = self._by_key.get(key)
        return None if call is None else call.answered_by
