"""Actions are tried only against the rules that can match their first character, with the
answer of trying every rule."""

from __future__ import annotations

import polars as pl
import pytest

from trajlens.classify import _vectorised
from trajlens.classify._synthetic import synthetic_tool_calls
from trajlens.classify._vectorised import (
    first_rule,
    leading_chars,
    normalise_actions,
    normalise_commands,
    split_actions,
    with_first_rule,
)
from trajlens.classify.rules import SHELL_RULES


@pytest.mark.parametrize(("pattern", "chars"), [
    (r"^submit(?:\s|$)", {"s"}),
    (r"^(?:pytest|python -m pytest)\s", {"p"}),
    (r"^(?:git|hg)\b", {"g", "h"}),
    (r"^[a-c]x", {"a", "b", "c"}),
    (r"^(?:ls)+", {"l"}),
    (r"^\S+\s--version", None),  # a class: any character
    (r"^(?:x?)y", None),  # may start with y: not told
    (r"^(?:a|)b", None),  # an empty branch
    (r"submit", None),  # not anchored
    (r"(?i)^submit", None),  # case-insensitive
    (r"(?m)^submit", None),  # any line
    (r"^", None),
])
def test_leading_chars(pattern, chars):
    found = leading_chars(pattern)
    assert (None if found is None else set(found)) == chars


def test_rules_by_first_character_give_the_first_rule_of_all(monkeypatch):
    monkeypatch.setattr(_vectorised, "BISECT_FROM", 0)  # bisect these 2,000-odd actions
    texts = synthetic_tool_calls(3_000, seed=3).filter(pl.col("command").is_not_null()).select(
        pl.col("command").alias("text")).unique(maintain_order=True).with_row_index("text_id")
    actions = normalise_actions(split_actions(normalise_commands(texts, "text"), "text")).with_row_index("__action")
    empty = actions.head(2).with_columns(pl.lit("").alias("action"), pl.col("__action") + actions.height)
    actions = pl.concat([actions, empty])
    expected = actions.with_columns(first_rule(SHELL_RULES).alias("__rule")).sort("__action")
    found = with_first_rule(actions, SHELL_RULES).sort("__action")
    assert found["__rule"].null_count() < found.height  # rules matched
    assert found["__rule"].to_list() == expected["__rule"].to_list()
    assert found.drop("__rule").equals(actions.sort("__action"))
