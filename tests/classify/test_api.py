"""The public surface of trajlens.classify: documented, versioned, ordered."""

from __future__ import annotations

import inspect
from pathlib import Path

import trajlens.classify as classify
from trajlens.classify.rules import CLASS_DESCRIPTIONS, rule_table
from trajlens.classify.tool_map import SHELL


def test_every_public_name_is_documented():
    for name in classify.__all__:
        value = getattr(classify, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert inspect.getdoc(value), f"trajlens.classify.{name} has no docstring"


def test_taxonomy_is_ordered_and_described():
    assert classify.BEHAVIOUR_CLASSES == (
        "submit", "test_suite", "test_targeted", "quick_check", "run_script", "edit", "view", "search", "think", "other",
    )
    assert set(CLASS_DESCRIPTIONS) == set(classify.BEHAVIOUR_CLASSES)
    assert {e.klass for e in classify.default_tool_map().entries} <= {*classify.BEHAVIOUR_CLASSES, SHELL}
    assert set(classify.VERIFICATION_CLASSES) == {"test_suite", "test_targeted", "quick_check", "run_script"}
    assert isinstance(classify.RULES_VERSION, str) and classify.RULES_VERSION
    guide = (Path(__file__).resolve().parents[2] / "docs" / "classify.md").read_text()
    assert f"`trajlens.classify.RULES_VERSION` (now **{classify.RULES_VERSION}**)" in guide
    assert len(rule_table()) == len(classify.SHELL_RULES)
