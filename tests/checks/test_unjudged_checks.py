"""A check whose condition cannot be judged on the run is skipped with the reason, never passed:
no step after its ``after_step``, a trend window or jump baseline longer than the run, fewer than
two stages with data. A check judged on some of its measures and not others says which were not."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from trajlens.checks import check_run, parse_checks

SAMPLES = Path(__file__).resolve().parents[2] / "sample_data"
THINK = 'measure = "share:think"\n'


def _result(body: str):
    (check,) = parse_checks(tomllib.loads(f"[checks.c]\n{THINK}{body}"), "test.toml")
    (result,) = check_run(SAMPLES / "sao-r6", [check]).results
    return result


@pytest.mark.parametrize("body, reason", [
    ('condition = "threshold"\nabove = 0.1\nafter_step = 1000000', "no step after 1000000"),
    ('condition = "trend"\ndirection = "increase"\nwindow = 1000', "no window of 1000 steps with 500 values"),
    ('condition = "jump"\nfactor = 2\nbaseline = 1000', "fewer than 1001 steps"),
    ('condition = "stage_change"\ndirection = "increase"\nstages = [["a", 1000, 2000], ["b", 3000, 4000]]',
     "fewer than two stages with data (0)"),
])
def test_a_check_that_cannot_be_judged_is_skipped_with_its_reason(body, reason):
    result = _result(body)
    assert (result.status, result.reason) == ("skip", reason)
    assert result.evidence_text() == reason


def test_the_same_checks_on_steps_the_run_has_are_judged():
    assert _result('condition = "threshold"\nabove = 0.1\nafter_step = 100').status == "fail"
    assert _result('condition = "trend"\ndirection = "increase"\nwindow = 20').status == "fail"
    assert _result('condition = "stage_change"\ndirection = "increase"\nstages = [["a", 1, 30], ["b", 100, 135]]'
                   ).status == "fail"


def test_the_skip_reason_counts_the_steps_identification_read(tmp_path):
    """A two-step run whose config names no estimator and that logs no advantages: the advantage
    checks are skipped because its first 2 training steps tell no estimator, not its first 16."""
    from cli_run import run_cli

    import trajlens

    trajlens.ingest([Path(__file__).resolve().parents[1] / "data" / "verl" / "grpo-sandbox"], tmp_path / "store",
                    run_id="verl")
    done = run_cli("check", tmp_path / "store", "--run", "verl", "--json", tmp_path / "checks.json")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "checks.json").read_text()
    assert "its first 2 training steps have no logged advantages that tell the estimators apart" in text
    assert "first 16" not in text
