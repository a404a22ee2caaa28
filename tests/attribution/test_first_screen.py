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


def _attributed_report(tmp_path, scenario, *, steps: int, seed: int):
    """The report of a causal run generated, ingested, classified and attributed as a user would."""
    generate_causal(scenario, tmp_path / "run", steps=steps, seed=seed)
    trajlens.ingest([tmp_path / "run"], tmp_path / "store", run_id="run")
    store = trajlens.open(tmp_path / "store")
    trajlens.classify_store(store, ["run"])
    attribute(store, "run")
    (report,) = report_store(store, tmp_path / "out", viewers_per_run=0)
    return report


def test_a_learned_habit_leads_a_run_whose_think_share_sits_above_its_check(tmp_path):
    """causal-reward-driven at another size and seed: test_targeted grows because it earns reward
    (learning). The think share sits above the think_share check's 0.15 from the first step and
    drifts down a little; it led the overview, the run's story second."""
    scenario = dataclasses.replace(CAUSAL_SCENARIOS["causal-reward-driven"], batch=16)
    report = _attributed_report(tmp_path, scenario, steps=60, seed=44)
    assert report.findings[0].startswith("learning: test_targeted grew 0.1")  # 0.10 -> 0.58 from step 21 here
    assert ("think_share", "fail") in [(name, status) for name, status, _ in report.failing]


def test_a_collapsed_channel_the_checks_fail_on_leads_a_learned_length_drift(tmp_path):
    """causal-multireward at seed 11: the format channel collapses (an estimator artefact; the
    channel checks fail) while the length grows (its check warns), longer responses earning more
    reward under token-mean, whose weights do not depend on length: learning. Format's last
    quarter rel_gain is 0.100, just not a saturation finding, so the channel checks weigh the
    verdict up themselves; attribute lists the artefact first too."""
    generate_causal(CAUSAL_SCENARIOS["causal-multireward"], tmp_path / "run", seed=11)
    trajlens.ingest([tmp_path / "run"], tmp_path / "store", run_id="cmr")
    store = trajlens.open(tmp_path / "store")
    trajlens.classify_store(store, ["cmr"])
    result = attribute(store, "cmr")
    assert result.cause_verdicts[0].startswith("estimator artefact: reward channel format collapsed")
    assert result.cause_verdicts[1].startswith("learning: response length grew")
    assert "under sum_then_normalize / token-mean the elasticity of push per token on length is " in result.cause_verdicts[1]
    assert "(its weights 0.00 [0.00, 0.00])" in result.cause_verdicts[1]
    (report,) = report_store(store, tmp_path / "out", viewers_per_run=0)
    assert report.findings[0].startswith("estimator artefact: reward channel format collapsed")
    assert ("reward_channel_rel_gain", "fail") in [(name, status) for name, status, _ in report.failing]
    # the first screen gives the drift and the reason; every estimator's credit stays in the run's section
    from trajlens.report.overview import main_finding

    shown, full = main_finding(report), str(report.findings[0])
    assert shown.startswith("estimator artefact: reward channel format collapsed")
    assert shown.endswith(str(result.cause_verdicts[0]).split("; ")[-1])  # the reason, whole
    assert "would have credited the channel and kept it" in shown or "would have pushed it down less" in shown
    assert "in-group value" in full and "in-group value" not in shown and len(shown) < 0.6 * len(full)


def test_a_collapsed_channel_leads_the_learned_length_drift_it_caused_when_no_check_fires(tmp_path):
    """causal-multireward at 40 steps of 24: the format channel collapses (0.52 -> 0.05) and its
    checks do not fire (rel_gain ends at 0.30); the policy stops submitting early, so responses grow
    (learning, and its check warns). The length verdict weighed more and led the first screen,
    while attribute listed the artefact first: the report now lists verdicts in attribute's order."""
    from trajlens.attribution.render import verdict_lines
    from trajlens.attribution.saved import load_attribution

    scenario = dataclasses.replace(CAUSAL_SCENARIOS["causal-multireward"], batch=24)
    report = _attributed_report(tmp_path, scenario, steps=40, seed=11)
    assert not [name for name, _, _ in report.failing if name.startswith("reward_channel")]
    verdicts = [f for f in report.findings if getattr(f, "kind", "").startswith("attribution_")]
    assert [str(f).split(":", 1)[0] for f in verdicts] == ["estimator artefact", "learning"]
    assert report.findings[0].startswith("estimator artefact: reward channel format collapsed")
    lines = verdict_lines(load_attribution(trajlens.open(tmp_path / "store"), "run"))
    assert [line.split(":", 1)[0] for line in lines] == ["estimator artefact", "learning"]


def test_a_verdict_headline_keeps_the_drift_and_the_reason():
    from trajlens.attribution.render import headline

    line = ("aggregation artefact: response length grew: 778 -> 1061 model tokens per trajectory (p < 0.001); under "
            "grpo / seq-mean-token-mean the elasticity is -1.3 [-1.4, -1.2]; under token-mean it would be -0.3; "
            "length relevance signed by the drift -0.1 [-0.2, 0.0]; the loss aggregation seq-mean-token-mean weighs "
            "tokens by length, which token-mean would not")
    assert headline(line) == ("aggregation artefact: response length grew: 778 -> 1061 model tokens per trajectory "
                              "(p < 0.001); the loss aggregation seq-mean-token-mean weighs tokens by length, which "
                              "token-mean would not")
    assert headline("learning: x grew") == "learning: x grew"


def test_a_drift_the_run_s_advantages_caused_leads_their_sign_streaks(tmp_path):
    """causal-critic-decay at 80 steps of 8, seed 293: edit decays under gae_raw as the critic
    stays above the reward (an estimator artefact). The run's all-negative batches, which the
    failing all_negative_streak check weighed up, led the first screen as a list of 24 spans; the
    verdict they are the mechanism of now carries that check and leads, its headline without the
    stage figures that repeat its drift."""
    scenario = dataclasses.replace(CAUSAL_SCENARIOS["causal-critic-decay"], batch=8)
    report = _attributed_report(tmp_path, scenario, steps=80, seed=293)
    from trajlens.report.overview import main_finding

    assert ("all_negative_streak", "fail") in [(name, status) for name, status, _ in report.failing]
    assert main_finding(report).startswith("estimator artefact: edit decayed")
    assert "by stage" not in main_finding(report)


def test_report_attribute_gives_each_drift_its_verdict_and_says_why_a_run_has_none(samples_store_copy, tmp_path):
    """``trajlens report --attribute`` attributes each run before reporting it: the first screen
    says causal-grpo-length's longer responses are an aggregation artefact (its truth), where the
    report alone shows only the length; agent logs no estimator can be recomputed on (terminal-bench
    trials without groups or token arrays) say why they have no verdict."""
    from pathlib import Path

    from cli_run import run_cli

    trials = Path(__file__).resolve().parents[1] / "data" / "terminal_bench"
    assert run_cli("ingest", trials, "--store", samples_store_copy, "--run", "trials").returncode == 0
    runs = ("--run", "causal-grpo-length", "--run", "trials")
    # the store copy holds no attribution: a verdict on the first screen is --attribute's
    attributed = run_cli("report", samples_store_copy, "--out", tmp_path / "report", "--viewers", "0", "--attribute", *runs)
    assert attributed.returncode == 0, attributed.stderr
    overview = attributed.stdout.split("causal-grpo-length", 1)[1]
    assert "main:   aggregation artefact: response length grew" in overview
    readme = (tmp_path / "report" / "README.md").read_text()
    assert "not attributed: run 'trials': no estimator can be recomputed (the run lacks what they need: " in readme
    assert trajlens.open(samples_store_copy).sql(
        "SELECT count(*) AS n FROM attribution_runs WHERE run_id = 'causal-grpo-length'")["n"][0] == 1
