"""Stage findings say where verification went: a falling suite rate names what took its place."""

from __future__ import annotations

import polars as pl

from staged_runs import staged_run
from trajlens.attribution.drift import share_rule
from trajlens.report.findings import stage_findings


def _mix(suite: tuple[float, float], targeted: tuple[float, float], quick: tuple[float, float]) -> dict:
    script = (1 - suite[0] - targeted[0] - quick[0], 1 - suite[1] - targeted[1] - quick[1])
    return {"verification:test_suite": suite, "verification:test_targeted": targeted,
            "verification:quick_check": quick, "verification:run_script": script}


def test_a_falling_suite_rate_names_the_verification_that_took_its_place():
    rates = staged_run({"ran_suite": (0.78, 0.48), **_mix((0.09, 0.04), (0.33, 0.21), (0.41, 0.66))})
    findings = stage_findings(*rates)
    assert [str(f) for f in findings] == [
        "runs the full suite: 0.780 in Q1 -> 0.480 in Q4 (N=80 sample: 0.512 [0.404, 0.620]); "
        "verification moved to quick_check: 0.410 -> 0.660 of verification calls"]
    assert findings[0].checks == ("suite_rate_decline", "suite_rate_floor")


def test_a_suite_that_falls_while_its_share_of_verification_rises_names_no_other_class():
    # verification calls dwindle; the few left run the suite more often: nothing took its place
    rates = staged_run({"ran_suite": (0.73, 0.12), **_mix((0.41, 0.69), (0.30, 0.20), (0.20, 0.06))})
    assert [str(f) for f in stage_findings(*rates)] == [
        "runs the full suite: 0.730 in Q1 -> 0.120 in Q4 (N=80 sample: 0.138 [0.078, 0.230])"]


def test_a_shift_of_the_mix_without_a_suite_trend_is_a_finding_of_its_own():
    rates = staged_run({"ran_suite": (0.50, 0.52), **_mix((0.10, 0.10), (0.50, 0.20), (0.20, 0.50))})
    findings = stage_findings(*rates)
    assert [str(f) for f in findings] == ["verification moved to quick_check: 0.200 -> 0.500 of verification calls"]
    assert findings[0].kind == "behaviour" and findings[0].evidence == "stage"


def test_a_rise_below_the_threshold_is_no_finding():
    rise = share_rule().min_change - 0.01
    rates = staged_run({"ran_suite": (0.50, 0.52), **_mix((0.10, 0.10), (0.50, 0.50 - rise), (0.20, 0.20 + rise))})
    assert stage_findings(*rates) == []


def test_a_shift_of_the_mix_no_test_supports_is_no_finding():
    """The report said "verification moved to quick_check: 0.167 -> 0.269" as a run's main
    finding where the stage table and ``trajlens compare`` gave the same change p = 0.11. The
    mix is judged by the rule of a class share's drift: the same rise counts on a large run, not
    on a run of a few trajectories a step."""
    mix = _mix((0.10, 0.10), (0.50, 0.38), (0.20, 0.32))
    assert [str(f) for f in stage_findings(*staged_run({"ran_suite": (0.50, 0.50), **mix}))] == [
        "verification moved to quick_check: 0.200 -> 0.320 of verification calls"]
    assert stage_findings(*staged_run({"ran_suite": (0.50, 0.50), **mix}, per_step=1)) == []


def test_a_verdict_on_a_trending_metric_is_one_finding_that_says_why():
    from trajlens.report.findings import Finding, with_verdicts

    rates = staged_run({"share:think": (0.08, 0.93), "mean:num_turns": (6.0, 9.0)})
    trends = stage_findings(*rates)
    verdicts = [
        Finding("estimator artefact: think grew 0.08 -> 0.93 from step 60 (gae_raw / token-mean: ...)",
                "attribution_artefact", "attribution", subject="share:think"),
        Finding("unexplained: edit decayed 0.20 -> 0.00 from step 30 (...)", "attribution_unexplained", "attribution",
                subject="share:edit"),
        Finding("estimator artefact: reward channel format collapsed: ...", "attribution_artefact", "attribution"),
    ]
    folded = with_verdicts(trends, verdicts)
    assert [str(f) for f in folded] == [
        "turns per trajectory: 6.0 in Q1 -> 9.0 in Q4 (N=80 sample: 8.8 [8.6, 9.0])",
        "estimator artefact: think grew 0.08 -> 0.93 from step 60 (gae_raw / token-mean: ...); by stage, "
        "think share: 0.080 in Q1 -> 0.930 in Q4 (N=80 sample: 0.930 [0.924, 0.935])",
        *map(str, verdicts[1:]),
    ]
    think = folded[1]
    assert think.kind == "attribution_artefact" and think.checks == ("think_share", "think_runs_growing")
    trend = next(t for t in trends if t.subject == "share:think")
    assert think.importance == max(verdicts[0].importance, trend.importance)


def test_a_think_share_trend_is_a_drift_attribution_would_attribute():
    """The report judged a class share's trend by its size alone (0.05 or more), attribution by
    0.10 or more at p < 0.001: a rise of 0.08 was the report's main finding while attribution said
    no share drifted. Both now judge by one rule, on the same trajectories."""
    from trajlens.attribution.drift import class_drifts
    from trajlens.report.findings import class_counts

    for (first, last), drifts in (((0.10, 0.18), False), ((0.10, 0.22), True)):
        rates, measures = staged_run({"share:think": (first, last)})
        trend = [f for f in stage_findings(rates, measures) if f.subject == "share:think"]
        drift = class_drifts(class_counts(measures), measures.select("step", "stage_index").unique())
        assert bool(trend) is drifts
        assert ("think" in drift["primary_class"].to_list()) is drifts


def test_a_drift_left_unexplained_weighs_what_the_drift_does():
    """Folding a large think trend into an 'unexplained' verdict kept the verdict's small weight:
    the run's largest drift fell below findings of far less (sao-r6's critic clip)."""
    from trajlens.report.findings import IMPORTANCE, Finding, with_verdicts

    (trend,) = stage_findings(*staged_run({"share:think": (0.07, 0.48)}))
    unexplained = Finding("unexplained: think grew 0.07 -> 0.48 from step 83 (...)", "attribution_unexplained",
                          "attribution", subject="share:think")
    (folded,) = with_verdicts([trend], [unexplained])
    assert folded.kind == "attribution_unexplained"
    assert folded.importance == trend.importance > IMPORTANCE["critic"]


def test_a_suite_rate_fall_is_a_finding_from_the_change_the_shipped_check_fails_at():
    """The report and ``suite_rate_decline`` judge one change: a fall of 0.096 (below the check's
    min_change of 0.1) is no finding; a fall of 0.104 is."""
    from trajlens.checks.spec import default_checks

    (check,) = (c for c in default_checks() if c.name == "suite_rate_decline")
    assert check.min_change == 0.1
    assert stage_findings(*staged_run({"ran_suite": (0.598, 0.502)})) == []
    (finding,) = stage_findings(*staged_run({"ran_suite": (0.598, 0.494)}))
    assert str(finding).startswith("runs the full suite: 0.598 in Q1 -> 0.494 in Q4")


def test_a_channel_verdict_and_the_channel_finding_are_one_finding():
    """The collapse of a reward channel was said twice on the first screen: the rel_gain finding,
    and apart from it the verdict that says why."""
    from types import SimpleNamespace

    from trajlens.attribution.render import subject_lines
    from trajlens.report.findings import Finding, with_verdicts

    line = "estimator artefact: reward channel format collapsed: 0.40 -> 0.01 (first vs last quarter of steps, ...)"
    ((subject, text),) = subject_lines(SimpleNamespace(verdicts=None, cause_verdicts=[line]))
    assert subject == "channel:format"
    channel = Finding("reward channel format: rel_gain 0.94 in the first quarter -> 0.08 in the last (collapsed: ...)",
                      "saturated_channel", "summary-outcome", subject="channel:format")
    (folded,) = with_verdicts([channel], [Finding(text, "attribution_artefact", "attribution", subject=subject)])
    assert str(folded) == f"{line}; by stage, {channel}"
    assert folded.checks == ("reward_channel_rel_gain", "reward_channel_std")


def test_the_format_error_finding_says_its_calls_count_the_rejected_ones():
    """A log of 8 attempts, 272 executed tool calls and 10 rejected as malformed: the share is of
    the 282 calls made, which the stage report's 272 tool calls do not count, so the finding says so."""
    from trajlens.report.findings import outcome_finding
    from trajlens.report.summary import SummaryTable

    frame = pl.DataFrame({"measure": ["trajectories with a format error", "format errors / tool calls"],
                          "value": [5 / 8, 10 / 282], "n": [8, 282]})
    (finding,) = outcome_finding([SummaryTable("outcome", "Outcome", "", frame)])
    assert str(finding) == "format errors in 62% of 8 attempts (3.5% of 282 tool calls made, the rejected ones included)"


def test_a_sign_streak_finding_says_only_the_signs_it_saw():
    """"all-negative batches at steps none; all-positive at 31" led a run's first screen."""
    from trajlens.report.findings import advantage_findings

    def diagnostics(negative, positive):
        return pl.DataFrame({"estimator": "grpo", "step": [1, 2, 3, 4], "all_negative": negative,
                             "all_positive": positive, "std": [1.0] * 4})

    (only_positive,) = advantage_findings(diagnostics([False] * 4, [False, False, True, False]), "grpo")
    assert str(only_positive) == "as trained (grpo): all-positive batches at steps 3"
    (both,) = advantage_findings(diagnostics([True, True, False, False], [False, False, False, True]), None)
    assert str(both) == ("recomputed under grpo (not what this run trained with): all-negative batches at steps 1-2; "
                         "all-positive batches at steps 4")


def test_a_light_finding_is_context_not_the_run_s_story():
    """A grad norm sitting at its clip led the first screen of runs where nothing happened, worded
    as sao-r6's critic starvation; a finding lighter than the floor follows "nothing notable"."""
    from types import SimpleNamespace

    from trajlens.report.findings import Finding
    from trajlens.report.overview import MAIN_FINDING_LEAST, main_finding

    clip = Finding("critic grad_norm / its clip: median 1.00x (0.95x), clipped on 48% (42%) of steps", "explained_variance",
                   "summary-critic", checks=("critic_explained_variance_unwhitened",))
    assert clip.importance < MAIN_FINDING_LEAST
    assert main_finding(SimpleNamespace(findings=[clip], failing=[])) == f"nothing notable; {clip}"
    fired = [("critic_explained_variance_unwhitened", "fail", "")]
    assert main_finding(SimpleNamespace(findings=[clip], failing=fired)) == str(clip)
    # a check that fires where no finding speaks (a think share held above its bound from the first step)
    think = [("think_share", "fail", "1-8, 10-30")]
    assert main_finding(SimpleNamespace(findings=[], failing=think)) == "no finding beyond the checks that fire"
    assert main_finding(SimpleNamespace(findings=[], failing=[])) == "nothing notable"
    # the run's own section says what the overview says
    from trajlens.report.html_report import _findings
    from trajlens.report.overview import quiet_finding

    section = _findings([], None, quiet_finding(SimpleNamespace(findings=[], failing=think)))  # type: ignore[arg-type]
    assert section == "<p>No finding beyond the checks that fire.</p>"
    assert _findings([], None, quiet_finding(SimpleNamespace(findings=[], failing=[]))) == "<p>Nothing notable.</p>"  # type: ignore[arg-type]


def _with_outcome(reward: tuple[float, float], resolved: tuple[float, float]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A staged run whose trajectories' reward and resolved rate hold the first value in Q1-Q3
    and the second in Q4 (reward a tenth either side; resolved on that share of each step),
    with its stage table and its outcome by stage as the report joins them."""
    from trajlens.classify.stages import outcome_rates

    rates, measures = staged_run({})
    unit = pl.col("trajectory_id").str.split("-").list.last().cast(pl.Int64)
    late = pl.col("step") > 6
    measures = measures.with_columns(
        (pl.when(late).then(reward[1]).otherwise(reward[0]) * pl.when(unit % 2 == 1).then(1.1).otherwise(0.9))
        .alias("reward"),
        (unit < pl.when(late).then(round(resolved[1] * 500)).otherwise(round(resolved[0] * 500))).alias("resolved"))
    return pl.concat([rates, outcome_rates(measures)]), measures


def test_a_falling_reward_and_resolved_rate_are_stage_trends():
    """sao-r6's reward fell 0.443 -> 0.303 and its resolved rate 38.5% -> 24.8% without a finding:
    the outcome is a stage trend, worded as the others, the mean reward judged by its effect size
    (a fifth of its spread or more) and the resolved rate as a rate of trajectories (ten points or more)."""
    rates, measures = _with_outcome((0.44, 0.30), (0.385, 0.248))
    findings = {f.subject: f for f in stage_findings(rates, measures)}
    q4 = {row["metric"]: row for row in rates.filter(pl.col("stage") == "Q4").iter_rows(named=True)}
    assert str(findings["reward"]) == (
        f"mean reward: 0.440 in Q1 -> 0.300 in Q4 (N=80 sample: {q4['reward']['value']:.3f} "
        f"[{q4['reward']['ci_low']:.3f}, {q4['reward']['ci_high']:.3f}])")
    assert str(findings["resolved"]).startswith("resolved rate: 0.384 in Q1 -> 0.248 in Q4 (N=80 sample: ")
    assert findings["reward"].kind == findings["resolved"].kind == "reward"
    assert findings["reward"].evidence == "stage"


def test_an_outcome_change_under_the_rule_is_no_finding():
    # a reward 0.005 less, about a ninth of its spread (0.044: a tenth either side of the value); 8.5 points
    rates, measures = _with_outcome((0.44, 0.435), (0.385, 0.30))
    assert stage_findings(rates, measures) == []
    # a tenth less is more than twice its spread here, whatever the ratio (the ratio rule said no)
    rates, measures = _with_outcome((0.44, 0.40), (0.385, 0.30))
    assert [f.subject for f in stage_findings(rates, measures)] == ["reward"]
