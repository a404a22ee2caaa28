"""Accuracy on real commands labelled by hand (tests/data/labelled_commands.jsonl).

Each line holds one tool call taken from ``shared/fixtures/real`` (``source`` gives the file
and the message, step or event it came from), the label a person gave it by reading the
command against the taxonomy, and sometimes a note on why. Run with ``-s`` to see the
per-class table.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from trajlens.classify import BEHAVIOUR_CLASSES, classify_calls, classify_command_slow

LABELLED = Path(__file__).resolve().parents[1] / "data" / "labelled_commands.jsonl"
FIELDS = ("source", "format", "tool_name", "arguments", "command", "label")


@pytest.fixture(scope="module")
def labelled() -> list[dict]:
    return [json.loads(line) for line in LABELLED.read_text().splitlines() if line.strip()]


def test_labelled_set_is_well_formed(labelled):
    assert len(labelled) >= 150
    assert all(set(FIELDS) <= set(row) for row in labelled)
    assert {row["label"] for row in labelled} <= set(BEHAVIOUR_CLASSES)
    assert len({row["source"] for row in labelled}) == len(labelled)
    formats = Counter(row["format"] for row in labelled)
    assert set(formats) == {"mini-v1", "mini-v2", "swe-agent", "openhands-v0", "openhands-v1"}


def test_accuracy_per_class(labelled):
    frame = pl.DataFrame([{k: row[k] for k in ("tool_name", "arguments", "command")} for row in labelled],
                         schema={"tool_name": pl.String, "arguments": pl.String, "command": pl.String})
    predicted = classify_calls(frame)["primary_class"].to_list()
    total, right = Counter(), Counter()
    misses = []
    for row, guess in zip(labelled, predicted):
        total[row["label"]] += 1
        right[row["label"]] += guess == row["label"]
        if guess != row["label"]:
            misses.append(f"  {row['label']} -> {guess}: {row['source']}")
    print(f"\nprimary-class accuracy on {len(labelled)} hand-labelled real commands")
    print(f"{'class':<15}{'n':>5}{'right':>7}{'accuracy':>10}")
    for klass in BEHAVIOUR_CLASSES:
        if total[klass]:
            print(f"{klass:<15}{total[klass]:>5}{right[klass]:>7}{right[klass] / total[klass]:>10.3f}")
    overall = sum(right.values()) / len(labelled)
    print(f"{'all':<15}{len(labelled):>5}{sum(right.values()):>7}{overall:>10.3f}")
    print("\n".join(misses))
    assert overall >= 0.99


def test_reference_gives_the_same_labels(labelled):
    frame = pl.DataFrame([{k: row[k] for k in ("tool_name", "arguments", "command")} for row in labelled],
                         schema={"tool_name": pl.String, "arguments": pl.String, "command": pl.String})
    fast = classify_calls(frame)["primary_class"].to_list()
    assert fast == [classify_command_slow(r["tool_name"], r["arguments"], r["command"]) for r in labelled]
