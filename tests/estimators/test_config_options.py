"""A run's config sets its own estimator's options (verl's ``algorithm.gamma`` and ``algorithm.lam``,
GDPO's reward keys and weights): every surface recomputes the run's estimator at those settings."""

from __future__ import annotations

import polars as pl
import pytest

import trajlens
from trajlens.estimators import trained_with

DISCOUNTED = "gae_raw+gamma=0.99+lam=0.95"
"""sao-r6's estimator (verl GAE, not whitened) at the gamma and lambda its config is given below."""


@pytest.mark.parametrize(("config", "label", "options"), [
    ({"algorithm": {"adv_estimator": "gae", "gamma": 0.99, "lam": 0.95}}, "gae_whitened+gamma=0.99+lam=0.95",
     {"gamma": 0.99, "lam": 0.95, "whiten": True}),
    ({"algorithm": {"adv_estimator": "gae", "gamma": 1, "lam": 1.0}}, "gae_whitened", {"gamma": 1.0, "lam": 1.0, "whiten": True}),
    ({"algorithm": {"adv_estimator": "reinforce_plus_plus", "gamma": 0.9}}, "reinforce_plus_plus+gamma=0.9", {"gamma": 0.9}),
    ({"algorithm": {"adv_estimator": "gdpo", "gdpo_reward_keys": ["acc", "format"], "gdpo_reward_weights": [2.0, 0.5]}},
     'gdpo_verl+channels=["acc","format"]+weights=[2.0,0.5]', {"channels": ["acc", "format"], "weights": [2.0, 0.5]}),
    ({"multi_objective_aggregation": "normalize_then_sum", "reward_weights": [1.0, 0.2]}, "trl_gdpo+weights=[1.0,0.2]",
     {"weights": [1.0, 0.2]}),
    # a value of the wrong kind is not the run's setting
    ({"algorithm": {"adv_estimator": "gae", "gamma": "high"}}, "gae_whitened", {"gamma": 1.0, "lam": 1.0, "whiten": True}),
])
def test_the_config_sets_the_own_estimators_options_under_a_label_that_says_so(config, label, options):
    trained = trained_with(config)
    assert trained.label == label
    assert trained.choice is not None and trained.choice.options == options
    assert ("algorithm.gamma=" in trained.evidence) == ("gamma=" in label)


def _discounted_run(tmp_path):
    """A small sao-r6 run (verl GAE with a critic) whose logged config says gamma 0.99 and lambda 0.95."""
    import json

    from trajlens.synth import generate

    generate("sao-r6", tmp_path / "run", steps=4, batch=8, tokens_per_trajectory=600, tool_calls_per_trajectory=5)
    (part,) = (tmp_path / "run" / "runs").glob("*.parquet")
    runs = pl.read_parquet(part)
    config = json.loads(runs["config"][0])
    config["algorithm"].update({"gamma": 0.99, "lam": 0.95})
    runs.with_columns(pl.lit(json.dumps(config)).alias("config")).write_parquet(part)
    trajlens.ingest([tmp_path / "run"], store=tmp_path / "store", run_id="disc")
    return trajlens.open(tmp_path / "store")


def test_report_checks_attribution_and_the_page_recompute_the_run_at_its_gamma_and_lambda(tmp_path):
    """A verl GAE run (not whitened) with gamma 0.99 and lambda 0.95: the report recomputes it under
    its own label beside the registry's gamma-1 variants and names it as the run's; the checks'
    ``advantage:run:mean``, attribution and the trajectory page read the same recomputation."""
    from trajlens.attribution import attribute
    from trajlens.checks import check_run
    from trajlens.checks.spec import parse_checks
    from trajlens.estimators import recompute
    from trajlens.report import report_store
    from trajlens.report.viewer import run_credit

    store = _discounted_run(tmp_path)
    report_store(store, tmp_path / "report", viewers_per_run=0)
    text = (tmp_path / "report" / "disc" / "stage_report.md").read_text()
    assert (f"The run trained with `{DISCOUNTED}` (from its config: algorithm.adv_estimator=gae, "
            "algorithm.whiten_advantages=false, algorithm.gamma=0.99, algorithm.lam=0.95;") in text
    saved = store.sql("SELECT estimator, step, mean FROM advantage_batches WHERE run_id = 'disc' ORDER BY step")
    assert {"gae_raw", "gae_whitened", DISCOUNTED} <= set(saved["estimator"])

    trajectories = store.trajectories.filter(pl.col("run_id") == "disc").collect()
    tokens = store.tokens.filter(pl.col("run_id") == "disc").collect()
    at_own = recompute(trajectories, tokens, "gae", gamma=0.99, lam=0.95, whiten=False)
    at_one = recompute(trajectories, tokens, "gae", gamma=1.0, lam=1.0, whiten=False)
    assert (at_own["advantage"] - at_one["advantage"]).abs().max() > 1e-3, "the discount changes the advantages"

    checks = parse_checks({"checks": {"run_mean": {"measure": "advantage:run:mean", "condition": "threshold",
                                                   "above": 10}}}, "checks.toml")
    (result,) = check_run(tmp_path / "store", checks, "disc").results
    assert result.reason == f"the run's estimator is {DISCOUNTED} (from its config)"
    checked = result.outcomes[0].values.sort("step")
    own = saved.filter(pl.col("estimator") == DISCOUNTED).sort("step")
    assert checked["value"].to_list() == pytest.approx(own["mean"].to_list(), rel=1e-9, abs=1e-12)

    assert attribute(store, "disc").own.label == DISCOUNTED
    credit = run_credit(store, "disc", steps=[2])
    assert credit is not None and credit.label == DISCOUNTED
    by_trajectory = credit.advantages.select("trajectory_id", "advantage").join(
        at_own.select("trajectory_id", pl.col("advantage").alias("expected")), on="trajectory_id")
    assert by_trajectory.height and (by_trajectory["advantage"] - by_trajectory["expected"]).abs().max() < 1e-6
