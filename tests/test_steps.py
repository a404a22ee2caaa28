"""Steps as text: one writer for every surface."""

from __future__ import annotations

from trajlens.steps import spans_text, step_spans, steps_text


def test_runs_of_consecutive_steps_are_joined():
    assert steps_text([1, 2, 3, 7, 9, 10]) == "1-3, 7, 9-10"
    assert step_spans([1, 2, 3, 7, 9, 10]) == [(1, 3), (7, 7), (9, 10)]


def test_order_and_repeats_do_not_matter():
    assert steps_text([10, 3, 1, 2, 9, 7, 2]) == "1-3, 7, 9-10"


def test_no_steps_is_empty_text():
    assert steps_text([]) == ""
    assert spans_text([]) == ""


def test_spans_keep_their_order_and_a_one_step_span_is_one_number():
    assert spans_text([(8, 9), (2, 2), (4, 6)]) == "8-9, 2, 4-6"
