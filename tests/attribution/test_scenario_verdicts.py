"""Verdicts on causal runs that sample_data does not ship: generated small here, judged against their truth."""

from __future__ import annotations

from dataclasses import replace

import pytest

import trajlens
from trajlens.attribution import ARTEFACT_VERDICT, ARTEFACT_VERDICTS, LEARNING_VERDICT, attribute
from trajlens.synth.causal import generate_causal
from trajlens.synth.causal_spec import CAUSAL_SCENARIOS

pytestmark = pytest.mark.slow


def _attributed(tmp_path, name: str, seed: int = 1, **sizes):
    spec = replace(CAUSAL_SCENARIOS[name], **sizes)
    generate_causal(spec, tmp_path / "run", seed=seed)
    trajlens.ingest([tmp_path / "run"], tmp_path / "store")
    return attribute(trajlens.open(tmp_path / "store"), name, write=False)


def _verdict(result, name: str) -> dict:
    rows = [row for row in result.verdicts.iter_rows(named=True) if row["primary_class"] == name]
    assert rows, f"no drift of {name}: {result.findings}"
    return rows[0]


def test_reset_returns_with_a_forced_submit_are_an_artefact_of_the_reset(tmp_path):
    result = _attributed(tmp_path, "causal-rpp-reset", steps=40, batch=16)
    think = _verdict(result, "think")
    assert think["verdict"] == ARTEFACT_VERDICT and think["direction"] == "grew"
    # the run's config names verl 0.8.0, whose REINFORCE++ resets the return: recomputed so
    assert think["estimator"] == result.own.label == "reinforce_plus_plus"
    assert "verl_reinforce_pp" in think["dissenting"]  # verl >= 0.9: the same estimator, the return carried over
    assert think["structural"] == "submit"  # every trajectory's final submit does not compete
    assert result.findings[0].startswith(f"{ARTEFACT_VERDICT}: think grew")


def test_a_class_that_earns_reward_grows_by_learning(tmp_path):
    result = _attributed(tmp_path, "causal-reward-driven", steps=36)
    tests = _verdict(result, "test_targeted")
    assert tests["verdict"] == LEARNING_VERDICT and tests["direction"] == "grew" and tests["relevance_low"] > 0
    assert not any(row["verdict"] in ARTEFACT_VERDICTS for row in result.verdicts.iter_rows(named=True))


def test_an_optimistic_critic_decays_the_long_useful_calls(tmp_path):
    result = _attributed(tmp_path, "causal-critic-decay", seed=0, steps=40)
    edit = _verdict(result, "edit")
    assert edit["verdict"] == ARTEFACT_VERDICT and edit["direction"] == "decayed" and edit["estimator"] == "gae_raw"
    assert "gae_whitened" in edit["dissenting"]
