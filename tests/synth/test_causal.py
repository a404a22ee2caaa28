"""The causal generator: deterministic, twins share their draws, and drift emerges where it should."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from synth_helpers import assert_same_as_shipped

from trajlens.errors import ConfigError
from trajlens.synth.causal import generate_causal, simulate_causal
from trajlens.synth.causal_spec import CAUSAL_R6, CAUSAL_SCENARIOS
from trajlens.synth.truth import load_truth

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def test_twins_differ_only_in_whitening_and_share_their_first_draws():
    raw, whitened = CAUSAL_SCENARIOS["causal-r6"], CAUSAL_SCENARIOS["causal-r6-whitened"]
    differing = {k for k in raw.__dict__ if raw.__dict__[k] != whitened.__dict__[k]}
    assert differing == {"name", "title", "summary", "expected", "estimator_options", "twin_of", "truth", "control"}
    assert {k for k in raw.estimator_options if raw.estimator_options[k] != whitened.estimator_options[k]} == {"whiten"}
    a = simulate_causal("causal-r6", steps=3)
    b = simulate_causal("causal-r6-whitened", steps=3)
    calls = [k for k in a[0] if k.startswith("calls.")]
    assert [a[0][k] for k in calls] == [b[0][k] for k in calls]  # same policy at step 1, same draws
    assert a[0]["mean_reward"] == b[0]["mean_reward"]


def test_simulation_is_deterministic_and_matches_the_shipped_run(tmp_path):
    assert simulate_causal("causal-grpo-length", steps=4) == simulate_causal("causal-grpo-length", steps=4)
    fresh = generate_causal("causal-multireward", tmp_path / "run", steps=2)
    for table in ("trajectories", "tool_calls", "tokens"):
        part = Path(table) / "step=000002" / "part-0.parquet"
        assert_same_as_shipped(fresh.directory / part, SAMPLE / "causal-multireward" / part)
    with pytest.raises(ConfigError, match="already exists"):
        generate_causal("causal-r6", fresh.directory, steps=1)
    with pytest.raises(ConfigError, match="unknown causal scenario"):
        generate_causal("sao-r6", tmp_path / "x", steps=1)


def test_the_estimator_causes_the_drift():
    """With whitening the same loop keeps think where it was; without, the all-negative steps set it off."""
    short = replace(CAUSAL_R6, steps=75)
    raw = simulate_causal(short)
    whitened = simulate_causal(replace(short, estimator_options={**short.estimator_options, "whiten": True}))
    negative = [r["step"] for r in raw if r["all_negative"]]
    assert set(negative) <= set(range(58, 65)) and len(negative) >= 3
    assert not any(r["all_negative"] for r in whitened)
    late = slice(68, 75)
    assert np.mean([r["policy.think"] for r in raw[late]]) > 0.3
    assert np.mean([r["policy.think"] for r in whitened[late]]) < 0.1


def test_shipped_causal_runs_show_their_outcomes_in_the_tables():
    from trajlens.classify import classify_calls

    def think_share(name, steps):
        calls = pl.read_parquet(SAMPLE / name / "tool_calls" / "**" / "*.parquet").filter(pl.col("step").is_in(steps))
        return float((classify_calls(calls)["primary_class"] == "think").mean())

    early, late = list(range(1, 23)), list(range(69, 91))
    assert think_share("causal-r6", early) < 0.15 and think_share("causal-r6", late) > 0.5
    assert think_share("causal-r6-whitened", early) < 0.15 and think_share("causal-r6-whitened", late) < 0.15
    truth = load_truth(SAMPLE / "causal-r6")
    assert truth["causal"] and truth["summary"]["all_negative_steps"]
    assert "*descriptive*, not causal" in (SAMPLE / "sao-r6" / "README.md").read_text()
    assert "## Causal runs" in (SAMPLE / "README.md").read_text()


def test_a_forced_final_call_ends_every_trajectory_and_moves_no_logit():
    from trajlens.synth.causal_spec import CAUSAL_RPP_RESET

    rows = simulate_causal(CAUSAL_RPP_RESET, steps=6)
    batch = CAUSAL_RPP_RESET.batch
    assert all(row["calls.submit"] == batch for row in rows)  # one submit per trajectory, whatever the policy
    assert all(row["policy.submit"] == 0.0 for row in rows)  # never the policy's choice
    chosen = [k for k in rows[0] if k.startswith("policy.") and k != "policy.submit"]
    assert abs(sum(rows[-1][k] for k in chosen) - 1.0) < 1e-9
    assert rows[-1]["policy.think"] != rows[0]["policy.think"]  # the chosen classes still learn


def test_only_the_shipped_scenarios_are_sample_runs():
    from trajlens.synth.regenerate import CAUSAL_SAMPLES

    assert set(CAUSAL_SAMPLES) == {p.name for p in SAMPLE.iterdir() if p.name.startswith("causal-")}
    assert {"causal-null", "causal-reward-driven", "causal-rpp-reset"} <= set(CAUSAL_SCENARIOS) - set(CAUSAL_SAMPLES)


def test_truth_names_the_classes_the_loop_moved_that_no_drift_declares():
    """A shipped causal run's truth.json lists the classes whose policy moved though the scenario
    declares no drift of them, as the loop's own per-step policy says."""
    from trajlens.synth.causal import moved_undeclared
    from trajlens.synth.regenerate import CAUSAL_SAMPLES

    for name in CAUSAL_SAMPLES:
        truth = load_truth(SAMPLE / name)
        rows = [dict(zip(truth["per_step"], values)) for values in zip(*truth["per_step"].values())]
        shipped, found = truth["summary"]["moved_undeclared"], moved_undeclared(CAUSAL_SCENARIOS[name], rows)
        # truth.json keeps six significant digits, of the policy and of these means alike
        assert [(m["primary_class"], m["direction"]) for m in shipped] == [(m["primary_class"], m["direction"]) for m in found]
        assert [m["policy_last"] for m in shipped] == pytest.approx([m["policy_last"] for m in found], rel=1e-5), name
    moved = {m["primary_class"]: m for m in load_truth(SAMPLE / "causal-r6")["summary"]["moved_undeclared"]}
    # think takes over causal-r6: the classes it displaced fall with it; think itself is declared
    assert set(moved) == {"search", "view", "edit", "test_suite"} and moved["edit"]["direction"] == "decayed"
    assert moved["edit"]["policy_first"] > 0.1 > moved["edit"]["policy_last"]
    assert load_truth(SAMPLE / "causal-r6-whitened")["summary"]["moved_undeclared"] == []
