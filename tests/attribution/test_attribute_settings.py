"""``attribute`` checks its settings before reading the run: every bad drift setting and an
empty list of aggregations is one ConfigError naming each; a mode named twice counts once."""

from __future__ import annotations

import math

import pytest

import trajlens
from trajlens.attribution import DriftConfig, attribute
from trajlens.errors import ConfigError


@pytest.mark.parametrize("drift, words", [
    (DriftConfig(k=0), ["drift: k: expected a lag of at least 1 step, found 0"]),
    (DriftConfig(k=-3), ["drift: k: expected a lag of at least 1 step, found -3"]),
    (DriftConfig(bootstrap=0, alpha=math.nan, min_change=-1),
     ["drift: alpha: expected a significance level between 0 and 1, found nan",
      "drift: min_change: expected a share change between 0 and 1, found -1",
      "drift: bootstrap: expected at least 1 replicate, found 0"]),
])
def test_bad_drift_settings_are_refused_together(samples_store_path, drift, words):
    with pytest.raises(ConfigError) as caught:
        attribute(trajlens.open(samples_store_path), "causal-r6", drift=drift, write=False)
    assert caught.value.problems == words


def test_no_aggregation_is_refused(samples_store_path):
    with pytest.raises(ConfigError, match="aggregations: expected at least one of token-mean"):
        attribute(trajlens.open(samples_store_path), "causal-r6", aggregations=(), write=False)


def test_an_aggregation_named_twice_counts_once(samples_store_path):
    store = trajlens.open(samples_store_path)
    once = attribute(store, "causal-r6", aggregations=("token-mean",), write=False, steps=range(1, 41))
    twice = attribute(store, "causal-r6", aggregations=("token-mean", "token-mean"), write=False, steps=range(1, 41))
    assert twice.drift.equals(once.drift) and twice.verdicts.equals(once.verdicts)


def test_notes_say_when_the_runs_own_estimator_or_aggregation_was_not_asked_for(samples_store_path):
    from trajlens.attribution import parse_recomputations

    store = trajlens.open(samples_store_path)
    steps = range(1, 41)
    other = attribute(store, "causal-r6", aggregations=("luspo",), write=False, steps=steps)
    assert "the run's loss aggregation, token-mean, is not among those asked for: the verdicts are under luspo" \
        in other.notes
    assert "run's estimator: gae_raw, aggregation token-mean (verdicts under luspo)" in other.findings
    assert not any("; ;" in line for line in [*other.findings, *other.cause_verdicts])
    without = attribute(store, "causal-r6", recomputations=parse_recomputations(["reinforce"], {}), write=False,
                        steps=steps)
    assert "the run's own estimator, gae_raw, is not among the recomputations asked for: no estimator is marked " \
           "as the run's" in without.notes
