"""Accuracy on constructed commands (tests/data/constructed_commands.jsonl).

Commands written to look like what coding agents issue (chained, piped, heredoc, wrapped,
argv-array and non-shell tool calls) and labelled by reading them against the taxonomy, before
the classifier was run on them; a ``note`` says why where the spec leaves room. They test the
rules on commands the rules were not written from. Run with ``-s`` to see misses.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from trajlens.classify import BEHAVIOUR_CLASSES, classify_calls, classify_command_slow

CONSTRUCTED = Path(__file__).resolve().parents[1] / "data" / "constructed_commands.jsonl"
FIELDS = ("source", "tool_name", "arguments", "command", "label")
SCHEMA = {"tool_name": pl.String, "arguments": pl.String, "command": pl.String}


@pytest.fixture(scope="module")
def constructed() -> list[dict]:
    return [json.loads(line) for line in CONSTRUCTED.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def predicted(constructed) -> list[str]:
    frame = pl.DataFrame([{k: row[k] for k in SCHEMA} for row in constructed], schema=SCHEMA)
    return classify_calls(frame)["primary_class"].to_list()


def test_constructed_set_is_well_formed(constructed):
    assert len(constructed) >= 200
    assert all(set(FIELDS) <= set(row) and row["source"] == "constructed" for row in constructed)
    assert {row["label"] for row in constructed} <= set(BEHAVIOUR_CLASSES)
    assert len({row["id"] for row in constructed}) == len(constructed)
    assert set(Counter(row["label"] for row in constructed)) == set(BEHAVIOUR_CLASSES)


def test_accuracy_on_constructed_commands(constructed, predicted):
    misses = [f"  #{row['id']} {row['label']} -> {guess}: {row['command'] or row['arguments']!r}"
              for row, guess in zip(constructed, predicted) if guess != row["label"]]
    accuracy = 1 - len(misses) / len(constructed)
    print(f"\nprimary-class accuracy on {len(constructed)} constructed commands: {accuracy:.3f}")
    print("\n".join(misses))
    assert accuracy >= 0.99


def test_reference_gives_the_same_labels_on_constructed(constructed, predicted):
    assert predicted == [classify_command_slow(r["tool_name"], r["arguments"], r["command"]) for r in constructed]
