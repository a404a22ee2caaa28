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
