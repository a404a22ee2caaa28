"""The shipped checks on the shipped sample runs: every seed alarm fires where truth.json says, and nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from trajlens.checks import check_run, default_checks

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[2] / "sample_data"


def _truth(run: str) -> dict:
    return json.loads((SAMPLES / run / "truth.json").read_text())


@pytest.fixture(scope="module")
def results():
    checks = default_checks()
    cache: dict[str, dict] = {}

    def get(run: str):
        if run not in cache:
            cache[run] = {r.name: r for r in check_run(SAMPLES / run, checks).results}
        return cache[run]
    return get


def _fired(results: dict, status: str) -> set[str]:
    return {name for name, result in results.items() if result.status == status}


def test_r6_collapse_alarms(results):
    r6 = results("sao-r6")
    truth = _truth("sao-r6")
    per_step = truth["per_step"]
    steps = per_step["step"]
    assert _fired(r6, "fail") == {
        "think_share",                            # 0.07 -> 0.73
        "think_runs_growing",                     # runs of consecutive think calls lengthen
        "all_negative_streak",                    # steps 119-121
        "critic_starved",                         # grad_norm 7-68 under clip 1.0
        "critic_explained_variance_unwhitened",   # 0-0.3 with whitening off
    }
    expected_think = tuple(s for s, share in zip(steps, per_step["think_share"]) if share > 0.15)
    assert r6["think_share"].fired_steps == expected_think
    assert r6["all_negative_streak"].fired_steps == tuple(truth["summary"]["all_negative_steps"]) == (119, 120, 121)
    assert r6["critic_starved"].fired_steps == tuple(steps)
    assert r6["critic_explained_variance_unwhitened"].fired_steps == tuple(steps)
    think_runs = r6["think_runs_growing"].fired_steps
    assert min(think_runs) >= 60 and set(range(115, 136)) <= set(think_runs)
    # Warnings, each a change the truth holds: the suite rate falls (0.7 -> 0.35), turns rise,
    # and the advantage std collapses in the all-negative batches.
    assert _fired(r6, "warn") == {"suite_rate_decline", "turns_inflation", "advantage_std_jump"}
    assert set(r6["advantage_std_jump"].fired_steps) <= {119, 120, 121}
    assert min(r6["suite_rate_decline"].fired_steps) > 100
    for name in ("all_positive_streak", "advantage_outliers", "critic_grad_norm_run", "learning_rate_mismatch"):
        assert r6[name].status == "pass", name


def test_r7_suite_decline_is_a_warning_and_nothing_errs(results):
    r7 = results("sao-r7")
    assert _fired(r7, "fail") == set()
    assert _fired(r7, "warn") == {"suite_rate_decline"}
    assert r7["suite_rate_decline"].fired_steps == tuple(range(151, 201))
    assert r7["suite_rate_decline"].evidence.detail.startswith("Q1 0.776 ") and " -> Q4 0.48;" in r7["suite_rate_decline"].evidence.detail
    # a decline's change is negative, as sample and the report give it, and so is the bound the rule sets
    assert r7["suite_rate_decline"].evidence.detail.endswith("; change -0.296")
    assert r7["suite_rate_decline"].evidence.threshold == "a significant decrease (alpha 0.05, change <= -0.1)"
    # the single grad-norm spike of 233 at step 143 is not an alarm
    assert r7["critic_grad_norm_run"].status == "pass"
    assert r7["critic_grad_norm_run"].evidence.value == pytest.approx(233.0)
    assert r7["think_share"].status == "pass"
    # the run is whitened: the check on unwhitened steps has none to check
    unwhitened = r7["critic_explained_variance_unwhitened"]
    assert (unwhitened.status, unwhitened.reason) == ("skip", "algorithm.whiten_advantages == false holds at no step")
    # docs/checks.md quotes the decline's p-value
    p_value = r7["suite_rate_decline"].evidence.detail.split("p = ", 1)[1].split(";")[0]
    assert f"0.776 in Q1 -> 0.48 in Q4, p = {p_value})" in (SAMPLES.parent / "docs" / "checks.md").read_text()


def test_grpo_leg_only_length_growth(results):
    leg = results("grpo-leg")
    assert _fired(leg, "fail") == set()
    assert _fired(leg, "warn") == {"turns_inflation", "response_length_inflation"}
    assert leg["critic_starved"].status == "skip" and "critic/grad_norm" in leg["critic_starved"].reason


def test_multireward_rel_gain_and_std_of_the_format_channel(results):
    multi = results("multireward")
    per_step = pl.DataFrame({k: v for k, v in _truth("multireward")["per_step"].items()
                             if k in ("step", "format/rel_gain", "format/std")})
    assert _fired(multi, "fail") == {"reward_channel_rel_gain", "reward_channel_std"}
    assert _fired(multi, "warn") == set()
    checks = {c.name: c for c in default_checks()}
    for name, measure, column in (("reward_channel_rel_gain", "rel_gain:format", "format/rel_gain"),
                                  ("reward_channel_std", "channel_std:format", "format/std")):
        check = checks[name]
        pooled = per_step.select("step", pl.col(column).rolling_mean(check.window, min_samples=1).alias("v"))
        expected = tuple(pooled.filter(pl.col("v") < check.below)["step"].to_list())
        assert multi[name].alarms == {measure: expected}  # the correctness channel never fires
        assert min(expected) > 150  # format is learned after about step 200
    assert multi["reward_channels_collinear"].status == "pass"


def test_resume_lr_fires_on_exactly_the_wrong_steps(results):
    resume = results("resume-lr")
    truth = _truth("resume-lr")
    (event,) = truth["events"]
    assert _fired(resume, "fail") == {"learning_rate_mismatch"}
    assert resume["learning_rate_mismatch"].alarms == {"lr_ratio:critic/lr": tuple(event["steps"])}
    assert len(event["steps"]) == 119
    # no trajectories in this run: behaviour checks are skipped with the reason, never passed
    assert resume["think_share"].status == "skip" and resume["think_share"].reason == "the run has no trajectories"


def test_resume_lr_from_a_store_keeps_the_config_history(samples_store_path, tmp_path):
    assert (samples_store_path / "runs" / "resume-lr" / "config_history" / "part-0.parquet").is_file()
    checks = [c for c in default_checks() if c.name == "learning_rate_mismatch"]
    (result,) = check_run(samples_store_path, checks, run_id="resume-lr").results
    assert result.fired_steps == tuple(range(41, 160))
    # Without the history only the current config is known, and steps 1-40 (configured 5e-6
    # then) would be flagged too: the history is what makes the alarm exact.
    bare = tmp_path / "bare"
    shutil.copytree(SAMPLES / "resume-lr", bare)
    (bare / "config.json").unlink()
    (result,) = check_run(bare, checks).results
    assert result.fired_steps == tuple(range(1, 160))


def test_a_floor_on_a_habit_the_run_never_had_is_skipped_not_fired(results):
    """causal-grpo-length has no test-suite class at all: the suite-rate floor has nothing to
    fall from, so it is skipped with the reason; on sao-r7, which runs the suite, it is judged."""
    length = results("causal-grpo-length")["suite_rate_floor"]
    assert (length.status, length.reason) == ("skip", "ran_suite is 0 at every step: the run never shows it")
    assert results("sao-r7")["suite_rate_floor"].status in ("pass", "warn")


def test_skip_when_absent_is_a_yes_or_no(tmp_path):
    from trajlens.checks.spec import CheckConfigError, parse_checks

    with pytest.raises(CheckConfigError, match="check 'c': field 'skip_when_absent'"):
        parse_checks({"checks": {"c": {"measure": "ran_suite", "condition": "threshold", "below": 0.2,
                                       "skip_when_absent": "yes"}}}, "checks.toml")


def test_a_star_check_leads_with_the_channel_it_fired_on(results):
    """reward_channel_rel_gain checks every channel of multireward; it fires on format, not on the
    healthy correctness channel, and its evidence and JSON record say format first."""
    from trajlens.checks.output import result_record

    rel_gain = results("multireward")["reward_channel_rel_gain"]
    assert rel_gain.status == "fail" and set(rel_gain.alarms) == {"rel_gain:format"}
    assert rel_gain.evidence_text().startswith("rel_gain:format: ")
    record = result_record(rel_gain)
    assert record["evidence"]["measure"] == "rel_gain:format" and record["summary"].startswith("rel_gain:format: ")
    # every channel's evidence as numbers, not only the leading one's (the other was in the summary's text alone)
    measures = {m["measure"]: m for m in record["measures"]}
    assert set(measures) == {"rel_gain:format", "rel_gain:correctness"}
    assert measures["rel_gain:correctness"]["fired_steps"] == [] and measures["rel_gain:format"]["fired_steps"]
    correctness = measures["rel_gain:correctness"]
    assert f"rel_gain:correctness: step {correctness['step']}: {correctness['value']:.4g}" in record["summary"]


def test_a_config_without_adv_estimator_is_read_by_its_runs_estimator_column(tmp_path):
    """The runs table's estimator stands in for the config's algorithm.adv_estimator, for the
    checks as for the report and attribution (run_trained_with): the run's advantage checks run."""
    import pyarrow.parquet as pq

    import trajlens
    from trajlens.run.trained import run_trained_with

    run = shutil.copytree(SAMPLES / "causal-r6", tmp_path / "run")
    runs_file = run / "runs" / "part-0.parquet"
    runs = pq.read_table(runs_file)
    config = json.loads(runs.column("config")[0].as_py())
    del config["algorithm"]["adv_estimator"]
    runs = runs.set_column(runs.schema.get_field_index("config"), "config", [[json.dumps(config)]])
    pq.write_table(runs, runs_file)
    assert runs.column("estimator")[0].as_py() == "gae"
    trajlens.ingest([run], tmp_path / "store")
    assert run_trained_with(trajlens.open(tmp_path / "store"), "causal-r6").label == "gae_raw"
    for source in (run, tmp_path / "store"):
        streak = next(r for r in check_run(source, default_checks(), run_id="causal-r6").results
                      if r.name == "all_negative_streak")
        assert streak.status == "fail" and list(streak.fired_steps) == [61, 62, 63, 64], source
        assert "the run's estimator is gae_raw (from its runs.estimator=gae)" in streak.evidence_text(), source


def test_the_table_shows_every_step_fired_and_the_bounds_a_change_missed(results):
    """The terminal table wraps a long cell over the next lines rather than cutting it, and a
    stage change that is significant but smaller than its check asks says by how much."""
    from trajlens.checks.evaluate import RunChecks
    from trajlens.checks.output import render_table
    from trajlens.steps import steps_text

    multi = results("multireward")
    table = render_table(RunChecks("multireward", "sample_data/multireward", list(multi.values()), 320))
    assert all(len(line) <= 200 for line in table.splitlines())
    fired = steps_text(multi["reward_channel_rel_gain"].fired_steps)
    steps_column = [line[line.index("FAIL") + 8:].split("  ")[0] for line in table.splitlines() if "FAIL" in line]
    continued = table.split("reward_channel_rel_gain", 1)[1].splitlines()[1]
    assert fired.startswith(steps_column[0]) and fired.endswith(continued.strip().split("  ")[0])
    assert fired.count(",") > 5  # long enough to wrap
    length = results("sao-r7")["response_length_inflation"]
    assert length.status == "pass" and length.evidence.threshold == "a significant increase (alpha 0.05, ratio >= 1.25)"
    assert length.evidence.detail.endswith("; ratio 1.15")


def test_a_metric_a_diverging_run_logged_as_nan_is_stored_and_fires_its_check(tmp_path):
    """TRL writes trainer_state.json with Python's json: a NaN grad norm is ``NaN``. Ingest keeps it,
    and a threshold check on the metric fires at that step, above or below (no value is past a
    NaN, so only its being NaN can say it)."""
    import math

    import trajlens
    from trajlens.checks.spec import load_checks

    run = tmp_path / "grpo-run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "trl" / "grpo-run", run)
    state = run / "trainer_state.json"
    state.write_text(state.read_text().replace('"grad_norm": 0.4', '"grad_norm": NaN', 1))
    trajlens.ingest([run], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    (step, value), = store.sql("SELECT step, value FROM step_metrics WHERE name = 'grad_norm' AND isnan(value)").rows()
    assert math.isnan(value)
    config = tmp_path / "checks.toml"
    config.write_text('[checks.grad_norm_high]\nmeasure = "metric:grad_norm"\ncondition = "threshold"\nabove = 10.0\n'
                      'severity = "error"\n\n[checks.grad_norm_low]\nmeasure = "metric:grad_norm"\n'
                      'condition = "threshold"\nbelow = 0.0\nseverity = "error"\n')
    (run_id,) = store.sql("SELECT run_id FROM runs")["run_id"].to_list()
    results = {r.name: r for r in check_run(tmp_path / "store", load_checks(config), run_id=run_id).results}
    assert results["grad_norm_high"].alarms == results["grad_norm_low"].alarms == {"metric:grad_norm": (step,)}
