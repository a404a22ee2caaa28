"""An estimator label names a column value, ``RUN:LABEL`` of ``trajlens compare`` and a line of a
table: an empty one, or one holding a blank or a control character, is refused in one line before
any work, by ``advantages --label`` and ``attribute -e LABEL=NAME`` alike."""

from __future__ import annotations

import pytest
from cli_run import run_cli


@pytest.mark.parametrize("label, problem", [
    ("", "expected a name, found an empty one"),
    ("a\nb", "expected a name without blanks or control characters, found 'a\\nb'"),
    ("my label", "expected a name without blanks or control characters, found 'my label'"),
    ("gae:raw", "expected a name without ':', which separates it in advantage:LABEL:STAT and RUN:LABEL, found 'gae:raw'"),
])
def test_a_label_that_cannot_name_a_recomputation_is_refused(samples_store_path, label, problem):
    advantages = run_cli("advantages", samples_store_path, "--run", "sao-r6", "-e", "grpo", "--label", label)
    attribute = run_cli("attribute", samples_store_path, "--run", "causal-r6", "-e", f"{label}=grpo")
    assert advantages.returncode == attribute.returncode == 1
    assert advantages.stderr == f"error: --label: {problem}\n"
    assert attribute.stderr == f"error: --estimator '{label}=grpo': the label: {problem}\n".replace("'a\nb=grpo'", "'a\\nb=grpo'")
