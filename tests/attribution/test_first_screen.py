"""The report's first screen on runs the rules were not tuned on: a run's main finding is its story."""

from __future__ import annotations

import dataclasses

import pytest

import trajlens
from trajlens.attribution import attribute
from trajlens.report import report_store
from trajlens.synth.causal import generate_causal
from trajlens.synth.causal_spec import CAUSAL_SCENARIOS

pytestmark = pytest.mark.slow


def test_a_learned_habit_leads_a_run_whose_think_share_sits_above_its_check(tmp_path):
    """causal-reward-driven at another size and seed: test_targeted grows because it earns reward
    (learning). The think share sits above the think_share check's 0.15 from the first step and
    drifts down a little; it led the overview, the run's story second."""
    scenario = dataclasses.replace(CAUSAL_SCENARIOS["causal-reward-driven"], batch=16)
    generate_causal(scenario, tmp_path / "run", steps=60, seed=44)
    trajlens.ingest([tmp_path / "run"], tmp_path / "store", run_id="crd")
    store = trajlens.open(tmp_path / "store")
    trajlens.classify_store(store, ["crd"])
    attribute(store, "crd")
    (report,) = report_store(store, tmp_path / "out", viewers_per_run=0)
    assert report.findings[0].startswith("learning: test_targeted grew 0.1")  # 0.10 -> 0.58 from step 21 here
    assert ("think_share", "fail") in [(name, status) for name, status, _ in report.failing]
