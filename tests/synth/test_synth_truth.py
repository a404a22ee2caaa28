"""trajlens recovers each injected phenomenon from the data alone (the shipped samples).

Every check reads only the run's tables, classifies and recomputes with trajlens' own
functions, and compares with ``truth.json``.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import torch
from synth_helpers import sample, tables

from trajlens.classify import classify_calls, trajectory_measures
from trajlens.estimators import explained_variance, recompute, sign_streaks
from trajlens.synth import load_truth
from trajlens.synth.commands import CALL_CLASSES


def _per_step(truth: dict) -> pl.DataFrame:
    return pl.DataFrame({k: v for k, v in truth["per_step"].items()}, strict=False)


def _metric(t: dict, name: str) -> pl.DataFrame:
    return t["step_metrics"].filter(pl.col("name") == name).sort("step")


def test_r6_think_share_follows_the_injected_curve():
    run = sample("sao-r6")
    truth = _per_step(load_truth(run))
    calls = classify_calls(tables(run)["tool_calls"])
    counts = calls.group_by("step").agg(pl.len().alias("n"), (pl.col("primary_class") == "think").sum().alias("think"))
    joined = counts.join(truth.select("step", "think_share_target"), on="step").sort("step")
    p = joined["think_share_target"].to_numpy()
    share = joined["think"].to_numpy() / joined["n"].to_numpy()
    sigma = np.sqrt(p * (1 - p) / joined["n"].to_numpy())
    assert (np.abs(share - p) <= 4 * sigma).all(), "every step within 4 binomial sigma of the curve"

    def pooled(lo: int, hi: int) -> float:
        window = joined.filter(pl.col("step").is_between(lo, hi))
        return window["think"].sum() / window["n"].sum()

    # the seed: 0.06-0.08 at steps 5-50, 0.17-0.18 at 80-100, 0.29 at 115, 0.73 at 130
    assert 0.06 <= pooled(5, 50) <= 0.08
    assert 0.15 <= pooled(80, 100) <= 0.20
    assert 0.25 <= pooled(113, 117) <= 0.33
    assert 0.66 <= pooled(128, 132) <= 0.80


def test_classes_per_step_are_the_generated_ones():
    for name in ("sao-r6", "sao-r7", "grpo-leg", "multireward"):
        run = sample(name)
        truth = _per_step(load_truth(run))
        calls = classify_calls(tables(run)["tool_calls"])
        counts = calls.group_by("step", "primary_class").len().pivot(on="primary_class", index="step", values="len")
        counts = counts.join(truth.select("step", *[f"calls.{c}" for c in CALL_CLASSES]), on="step").fill_null(0)
        for klass in CALL_CLASSES:
            found = counts[klass] if klass in counts.columns else pl.Series([0] * counts.height)
            assert (found == counts[f"calls.{klass}"]).all(), f"{name}: {klass}"


def test_r6_all_negative_streak_from_unwhitened_gae():
    run = sample("sao-r6")
    t = tables(run)
    out = recompute(t["trajectories"], t["tokens"], "gae", gamma=1.0, lam=1.0, whiten=False)
    tokens = out.select("step", "trajectory_id", "token_advantages").join(
        t["tokens"].select("trajectory_id", "response_mask"), on="trajectory_id")
    flat = tokens.explode("token_advantages", "response_mask").filter(pl.col("response_mask"))
    flags = flat.group_by("step").agg(
        (pl.col("token_advantages") < 0).all().alias("negative"),
        (pl.col("token_advantages") > 0).all().alias("positive"),
        pl.col("token_advantages").mean().alias("mean"),
    ).sort("step")
    streaks = sign_streaks(flags["step"].to_list(), flags["negative"].to_list(), flags["positive"].to_list())
    assert streaks.negative_streaks == ((119, 121),)
    assert streaks.negative_steps == (119, 120, 121) and streaks.positive_steps == ()
    assert load_truth(run)["summary"]["all_negative_steps"] == [119, 120, 121]
    # the seed: the unwhitened batch mean drifts by about +/-0.25
    assert flags["mean"].abs().max() < 0.35 and flags["mean"].min() < -0.15 and flags["mean"].max() > 0.15
    per_trajectory = out.filter(pl.col("step").is_between(119, 121))["advantage"]
    assert (per_trajectory < 0).all()


def test_r6_critic_is_starved_and_its_explained_variance_is_what_the_values_give():
    run = sample("sao-r6")
    t = tables(run)
    logged = _metric(t, "critic/vf_explained_var")
    assert logged["value"].min() >= 0.0 and logged["value"].max() <= 0.3
    grad, clip = _metric(t, "critic/grad_norm")["value"], _metric(t, "critic/grad_clip")["value"]
    assert 7.0 <= (grad / clip).min() and (grad / clip).max() <= 68.0
    rewards = t["trajectories"].select("trajectory_id", "step", "reward")
    joined = t["tokens"].join(rewards, on="trajectory_id").filter(pl.col("step").is_in([1, 60, 120]))
    for step, batch in joined.group_by("step"):
        mask = np.concatenate(batch["response_mask"].to_list())
        values = np.concatenate(batch["values"].to_list()).astype(np.float32)
        returns = np.repeat(batch["reward"].to_numpy(), batch["response_mask"].list.len().to_numpy()).astype(np.float32)
        ev = explained_variance(torch.tensor(returns)[None], torch.tensor(values)[None], torch.tensor(mask)[None])
        assert ev == pytest.approx(logged.filter(pl.col("step") == step[0])["value"][0], abs=1e-3)


def test_r6_turns_rise_and_think_runs_lengthen():
    run = sample("sao-r6")
    t = tables(run)
    measures = trajectory_measures(classify_calls(t["tool_calls"]), t["trajectories"])
    early = measures.filter(pl.col("step") <= 20)
    late = measures.filter(pl.col("step") >= 126)
    assert late["num_turns"].mean() > 1.5 * early["num_turns"].mean()
    assert late["think_longest_run"].mean() > 3 * early["think_longest_run"].mean()
    useful = 1 - pl.col("share_think")
    assert late.select(useful.mean()).item() < 0.5 * early.select(useful.mean()).item()
    val = _metric(t, "val/score").filter(pl.col("step").is_between(20, 120))["value"]
    assert val.min() >= 0.62 and val.max() <= 0.66


def test_r7_verification_changes_form_at_flat_turns():
    run = sample("sao-r7")
    t = tables(run)
    measures = trajectory_measures(classify_calls(t["tool_calls"]), t["trajectories"])
    measures = measures.filter(pl.col("n_calls") > 1)  # the step-143 empty shells
    last_quarter = measures.filter(pl.col("step") > 150)
    rate = last_quarter["ran_suite"].mean()
    sigma = np.sqrt(0.47 * 0.53 / last_quarter.height)
    assert abs(rate - 0.47) <= 3.5 * sigma
    early = measures.filter(pl.col("step") <= 50)
    assert early["ran_suite"].mean() > rate + 0.15
    for klass in ("quick_check", "edit"):
        assert last_quarter[f"count_{klass}"].mean() > 1.3 * early[f"count_{klass}"].mean()
    windows = measures.with_columns(((pl.col("step") - 1) // 10).alias("w")).group_by("w").agg(
        (pl.col("count_think").sum() / pl.col("n_calls").sum()).alias("think"), pl.col("n_calls").sum().alias("n"))
    sigma = np.sqrt(0.07 * 0.93 / windows["n"].to_numpy())
    assert (np.abs(windows["think"].to_numpy() - 0.07) <= 4 * sigma).all()
    assert windows["think"].max() < 0.15  # the monitor line never fires
    turns = windows.with_columns(pl.col("n") / 50)  # 10 steps x 5 trajectories
    assert 50 <= turns["n"].min() and turns["n"].max() <= 60
    length = _metric(t, "response_length/mean")["value"]
    assert abs(length.tail(20).mean() / length.head(20).mean() - 1) < 0.15


def test_r7_critic_is_healthy_and_validation_matches_the_seed():
    t = tables(sample("sao-r7"))
    ev = _metric(t, "critic/vf_explained_var")["value"]
    assert ev.min() >= 0.18 and 0.6 <= ev.max() <= 0.66 and 0.2 <= ev.median() <= 0.5
    grad = _metric(t, "critic/grad_norm")
    assert 9.0 <= grad["value"].median() <= 10.5
    assert grad.filter(pl.col("value") > 200)["step"].to_list() == [143]
    above = (grad["value"] > 30).to_list()
    assert not any(above[i] and above[i + 1] and above[i + 2] for i in range(len(above) - 2))
    val = dict(_metric(t, "val/score").select("step", "value").iter_rows())
    assert val[20] == pytest.approx(0.640) and val[100] == pytest.approx(0.666) and val[180] == pytest.approx(0.682)
    assert all(0.662 <= val[s] <= 0.670 for s in (100, 120, 140, 160))


def test_grpo_leg_grows_longer_and_reads_back_more():
    run = sample("grpo-leg")
    t = tables(run)
    measures = trajectory_measures(classify_calls(t["tool_calls"]), t["trajectories"])
    first, last = measures.filter(pl.col("step") <= 10), measures.filter(pl.col("step") >= 71)
    assert last["num_turns"].mean() > 1.3 * first["num_turns"].mean()
    length = _metric(t, "response_length/mean")["value"]
    assert length.tail(10).mean() > 1.3 * length.head(10).mean()
    per_call = lambda m: m["reasoning_tokens"].sum() / m["num_turns"].sum()  # noqa: E731
    assert 1.15 < per_call(last) / per_call(first) < 1.45  # the seed's +30%
    assert last["readback_share"].mean() > first["readback_share"].mean() + 0.15
    assert last["ran_suite"].mean() > first["ran_suite"].mean() + 0.1
    grouped = recompute(t["trajectories"], estimator="grpo")
    sums = grouped.group_by("group_id").agg(pl.col("advantage").sum().abs())
    assert sums["advantage"].max() < 1e-4


def _channel_frame(trajectories: pl.DataFrame) -> pl.DataFrame:
    return trajectories.with_columns(
        pl.col("reward_channels").list.eval(pl.element().struct.field("value")).list.get(0).alias("format"),
        pl.col("reward_channels").list.eval(pl.element().struct.field("value")).list.get(1).alias("correctness"),
    )


def test_multireward_rel_gain_falls_for_format_only():
    t = tables(sample("multireward"))
    frame = _channel_frame(t["trajectories"])
    spans = frame.group_by("step", "group_id").agg(
        (pl.col(c).max() - pl.col(c).min()).alias(c) for c in ("format", "correctness"))
    rel_gain = spans.group_by("step").agg(pl.col("format").mean(), pl.col("correctness").mean()).sort("step")
    early, late = rel_gain.filter(pl.col("step") <= 20), rel_gain.filter(pl.col("step") > 220)
    assert 0.8 <= early["format"].mean() <= 0.95
    assert late["format"].mean() <= 0.08
    assert 0.4 <= late["correctness"].mean() <= 0.6 and 0.4 <= early["correctness"].mean() <= 0.65
    truth = _per_step(load_truth(sample("multireward")))
    assert np.allclose(rel_gain["format"].to_numpy(), truth["format/rel_gain"].to_numpy(), atol=1e-9)


def test_multireward_advantage_statistics_are_what_the_estimators_give():
    run = sample("multireward")
    t = tables(run)
    truth = _per_step(load_truth(run))
    # The truth is computed in float64. verl's float32 GRPO can give a group of equal rewards that
    # float32 cannot hold exactly (1 + 2/3) advantages of about 0.1 instead of 0: the float32 mean
    # differs from the rewards by an ulp and the std (1e-7) is below eps (1e-6). Hence the looser
    # tolerance for the per-group z-score.
    for estimator, name, tolerance in (("grpo_batch_std", "batch_std", 1e-5), ("grpo", "group_std", 3e-3)):
        out = recompute(t["trajectories"], estimator=estimator)
        stats = out.group_by("step").agg(pl.col("advantage").std().alias("std")).sort("step")
        assert np.allclose(stats["std"].to_numpy(), truth[f"{name}/std"].to_numpy(), atol=tolerance)
        assert stats["std"].max() <= 1.0  # no jump to 4: the bound the README explains
    group = recompute(t["trajectories"], estimator="grpo")
    assert group["advantage"].abs().max() <= 7 / np.sqrt(8) + 1e-6
    gdpo = recompute(_channel_frame(t["trajectories"]).drop("format", "correctness"), estimator="gdpo_trl",
                     channels=["format", "correctness"])
    assert gdpo.group_by("step").agg(pl.col("advantage").std())["advantage"].max() <= 1.0 + 1e-3


def test_multireward_outliers_beyond_8_sigma_at_the_seed_batch_size(tmp_path):
    """At 1024 trajectories per step, summed GRPO with the batch std gives >8-sigma outliers once
    format saturates, and GDPO does not; the std never jumps (see the multireward README)."""
    from trajlens.estimators import advantage_outliers
    from trajlens.synth import generate

    result = generate("multireward", tmp_path / "mr", steps=12, first_step=200, batch=1024,
                      tool_calls_per_trajectory=3, tokens_per_trajectory=100)
    trajectories = tables(result.directory)["trajectories"]
    worst = {}
    for estimator in ("grpo_batch_std", "gdpo_trl", "grpo"):
        frame = _channel_frame(trajectories).drop("format", "correctness")
        options = {"channels": ["format", "correctness"]} if estimator == "gdpo_trl" else {}
        out = recompute(frame, estimator=estimator, **options)
        per_step = []
        for _, batch in out.group_by("step"):
            advantages = torch.tensor(batch["advantage"].to_numpy())
            per_step.append((advantage_outliers(advantages, k=8.0).max_abs_z, float(advantages.std())))
        worst[estimator] = (max(z for z, _ in per_step), max(s for _, s in per_step))
    assert worst["grpo_batch_std"][0] > 8.0
    assert worst["gdpo_trl"][0] < 6.0
    assert worst["grpo"][0] < 3.0
    assert all(std <= 1.0 + 1e-3 for _, std in worst.values())
    truth = _per_step(load_truth(result.directory))
    assert truth["batch_std/max_sigma"].max() == pytest.approx(worst["grpo_batch_std"][0], rel=1e-4)


def test_resume_doubles_the_logged_lr():
    from trajlens.ingest.metrics import load_metrics

    run = sample("resume-lr")
    table = pl.from_arrow(load_metrics(run / "metrics.jsonl", run_id="resume-lr").table)
    lr = table.filter(pl.col("name") == "critic/lr").sort("step")
    configured = json.loads((run / "config.json").read_text())
    history = configured["history"]
    current = [_configured(history, s) for s in lr["step"]]
    ratio = lr["value"].to_numpy() / np.array(current)
    doubled = lr["step"].filter(pl.Series(np.isclose(ratio, 2.0))).to_list()
    assert doubled == list(range(41, 160))
    assert np.isclose(ratio[~np.isclose(ratio, 2.0)], 1.0).all()
    update = table.filter(pl.col("name") == "critic/update_norm").sort("step")
    before = update.filter(pl.col("step").is_between(41, 159))["value"].mean()
    after = update.filter(pl.col("step") >= 160)["value"].mean()
    assert before / after == pytest.approx(1.954, abs=1e-3)


def _configured(history: list[dict], step: int) -> float:
    applicable = [h for h in history if h["from_step"] <= step]
    return applicable[-1]["config"]["critic"]["optim"]["lr"]
