"""Which estimators a stored run allows is read once per version of the run directory."""

from __future__ import annotations

import os

import trajlens
from engine_helpers import RUN_ID
from trajlens.run import choices


def _counted_reads(monkeypatch) -> list[str]:
    """The runs each pass over a run's data asks about, in order, from now on (none kept before)."""
    calls: list[str] = []
    original = choices.report_advantages

    def counted(*args, **kwargs):
        calls.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(choices, "report_advantages", counted)
    monkeypatch.setattr(choices, "_ALLOWED", {})
    return calls


def test_a_second_side_of_the_same_run_reuses_the_answer_until_the_run_changes(store_copy, monkeypatch):
    store = trajlens.open(store_copy)
    calls = _counted_reads(monkeypatch)
    first = choices.available_estimators(store, RUN_ID)
    assert first and choices.available_estimators(store, RUN_ID) == first
    assert calls == [RUN_ID]
    run_dir = store_copy / "runs" / RUN_ID
    stamp = os.stat(run_dir)
    os.utime(run_dir, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))
    assert choices.available_estimators(store, RUN_ID) == first
    assert calls == [RUN_ID, RUN_ID]


def test_two_runs_asked_by_turns_are_each_read_once(samples_store_path, monkeypatch):
    """A comparison of two runs asks for each side's estimators several times, by turns: each
    answer is kept beside the other's, not in its place."""
    store = trajlens.open(samples_store_path)
    calls = _counted_reads(monkeypatch)
    answers = [choices.available_estimators(store, run) for run in ("grpo-leg", "sao-r6") * 3]
    assert calls == ["grpo-leg", "sao-r6"]
    assert answers[0] == answers[2] == answers[4] and answers[1] == answers[3] == answers[5]
