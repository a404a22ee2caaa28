"""A drift is the stage change `trajlens check` finds: the same shares, the same test, the same
p-value (trajectories as units), so attribution and the checks never disagree about a class."""

from __future__ import annotations

import re

import pytest

import trajlens
from trajlens.attribution.api import attribute
from trajlens.checks.evaluate import check_run
from trajlens.checks.spec import parse_checks

RUN = "sao-r6"


def test_each_drift_has_the_shares_and_p_value_of_the_checks_stage_change(samples_store_path):
    store = trajlens.open(samples_store_path)
    drift = attribute(store, RUN, write=False).drift.select("primary_class", "direction", "share_first", "share_last",
                                                              "change_p").unique(maintain_order=True)
    assert set(drift["primary_class"]) >= {"think", "view"}
    checks = parse_checks({"checks": {name: {
        "measure": f"share:{name}", "condition": "stage_change", "stages": "quartiles", "compare": "first_to_last",
        "direction": "increase" if direction == "grew" else "decrease", "alpha": 0.001}
        for name, direction in drift.select("primary_class", "direction").iter_rows()}}, "test")
    results = {r.check.name: r for r in check_run(samples_store_path, checks, RUN).results}
    for name, _, first, last, p_value in drift.iter_rows():
        detail = results[name].evidence.detail
        q1, q4, p_text = re.search(r"Q1 ([\d.e-]+) .* -> Q4 ([\d.e-]+); p = (\S+)", detail).groups()
        assert (first, last) == (pytest.approx(float(q1), rel=5e-4), pytest.approx(float(q4), rel=5e-4)), detail
        assert results[name].status == "fail"  # the drift is significant at the check's alpha too
        assert p_value == pytest.approx(float(p_text), rel=0.05, abs=1e-300), detail
