"""The report's optional sections: checks on every run, attribution where the store holds one."""

from __future__ import annotations

from pathlib import Path

import pytest

import trajlens
from trajlens.report.sections import run_sections

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="module")
def store(samples_store_path, tmp_path_factory):
    """The sample runs, copied: rendering a section may save what it computes."""
    from stores import copy_store

    return trajlens.open(copy_store(samples_store_path, tmp_path_factory.mktemp("sections") / "store"))


def test_checks_section_shows_the_r6_alarms(store):
    sections = dict((section.key, html) for section, html in run_sections(store, "sao-r6"))
    assert "attribution" not in sections  # nobody attributed this run
    checks = sections["checks"]
    assert 'class="check-fail"><td>think_share</td>' in checks
    assert "<td>all_negative_streak</td><td>error</td><td>FAIL</td><td>119-121</td>" in checks


def test_attribution_section_appears_once_the_run_is_attributed(store):
    from trajlens.attribution import RECOMPUTATIONS, attribute

    assert "attribution" not in {section.key for section, _ in run_sections(store, "causal-r6-whitened")}
    chosen = tuple(r for r in RECOMPUTATIONS if r.label in ("gae_raw", "gae_whitened"))
    attribute(store, "causal-r6-whitened", chosen)
    sections = dict((section.key, html) for section, html in run_sections(store, "causal-r6-whitened"))
    assert "Attribution: causal-r6-whitened" in sections["attribution"]


def test_fired_checks_are_drawn_on_the_class_share_plot(store):
    import polars as pl

    from trajlens.report import plots
    from trajlens.report.build import _alarms, _checks, classify_store

    measures = classify_store(store, ["sao-r6"])["sao-r6"]
    alarms = {alarm.name: alarm for alarm in _alarms(_checks(store, "sao-r6", measures))}
    assert alarms["all_negative_streak"].first_step == 119
    assert alarms["all_negative_streak"].severity == "error"
    assert "reward_channel_rel_gain" not in alarms  # skipped: r6 has no reward channels
    chart = plots.class_shares_by_step(measures, "sao-r6", list(alarms.values()))
    assert "check all_negative_streak (error) fired from step 119" in chart.tips.values()
    assert isinstance(measures, pl.DataFrame)
