"""Which estimator a run trained with: one answer from the config (or identify), on every surface."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

import trajlens.estimators as estimators
from trajlens.attribution import RECOMPUTATIONS, own_recomputation
from trajlens.checks.step_measures import run_label
from trajlens.estimators import EstimatorInputError, identify_advantages, recompute, trained_with
from trajlens.estimators import registry
from trajlens.estimators.adapters import ADAPTERS
from trajlens.estimators.identify import CANDIDATES
from trajlens.estimators.registry import ESTIMATOR_REGISTRY, declared_estimators

VERL_DR_GRPO = {"algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": False},
                "actor_rollout_ref": {"actor": {"loss_agg_mode": "seq-mean-token-sum-norm"}}}
VERL_BATCH_STD = {"algorithm": {"adv_estimator": "grpo", "norm_adv": "batch_std"}}
VERL_GDPO = {"algorithm": {"adv_estimator": "gdpo"}}


def surfaces(config) -> dict[str, object]:
    """The run's estimator as each surface says it."""
    return {
        "trained_with": trained_with(config).label,
        "attribution": own_recomputation(trained_with(config), RECOMPUTATIONS).label,
        "checks": (label.label if (label := run_label(config)) is not None else None),
        "registry": declared_estimators(config),
    }


@pytest.mark.parametrize(("config", "label"), [(VERL_DR_GRPO, "dr_grpo"), (VERL_BATCH_STD, "grpo_batch_std"),
                                               (VERL_GDPO, "gdpo_verl")])
def test_every_surface_gives_the_one_estimator_the_verl_config_declares(config, label):
    assert surfaces(config) == {"trained_with": label, "attribution": label, "checks": label,
                                "registry": frozenset({label})}
    trained = trained_with(config)
    assert trained.source == "config" and trained.estimator == label
    assert "algorithm.adv_estimator=" in trained.evidence


def test_the_config_json_text_and_the_aggregation_are_read_too():
    trained = trained_with('{"algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": false}, '
                           '"actor_rollout_ref": {"actor": {"loss_agg_mode": "seq-mean-token-sum-norm"}}}')
    assert (trained.label, trained.aggregation, trained.aggregation_logged) == ("dr_grpo", "seq-mean-token-sum-norm", True)
    plain = trained_with({"algorithm": {"adv_estimator": "grpo"}})
    assert (plain.label, plain.aggregation, plain.aggregation_logged) == ("grpo", "token-mean", False)


def test_verl_keys_beside_the_estimator_choose_its_label_and_options():
    assert trained_with({"algorithm": {"adv_estimator": "gae", "whiten_advantages": False}}).label == "gae_raw"
    assert trained_with({"algorithm": {"adv_estimator": "gae"}}).label == "gae_whitened"
    vectorized = trained_with({"algorithm": {"adv_estimator": "rloo_vectorized"}}).choice
    assert vectorized is not None and vectorized.label == "verl_rloo_vectorized" and vectorized.settings()["vectorized"]
    grpo_vectorized = trained_with({"algorithm": {"adv_estimator": "grpo_vectorized"}}).choice
    assert grpo_vectorized is not None and (grpo_vectorized.estimator, grpo_vectorized.options) == ("grpo", {"vectorized": True})
    # verl's trainer hands norm_adv_by_std_in_grpo to grpo alone: grpo_vectorized and gdpo still divide
    no_std_vectorized = trained_with({"algorithm": {"adv_estimator": "grpo_vectorized", "norm_adv_by_std_in_grpo": False}})
    assert no_std_vectorized.label == "verl_grpo_vectorized" and "norm_adv_by_std_in_grpo=false" in no_std_vectorized.evidence
    no_std = trained_with({"algorithm": {"adv_estimator": "gdpo", "norm_adv_by_std_in_grpo": False}}).choice
    assert no_std is not None and no_std.estimator == "gdpo_verl" and no_std.settings()["divide_by_std"] is True
    assert trained_with({"algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": False}}).label == "dr_grpo"
    # runs.estimator stands in for algorithm.adv_estimator when the config lacks it
    assert trained_with({"algorithm": {"whiten_advantages": False}}, estimator_column="gae").label == "gae_raw"
    assert trained_with({}, estimator_column="gdpo").label == "gdpo_verl"


def test_trl_keys_name_the_convention_and_the_loss_aggregation():
    group = trained_with({"scale_rewards": "group", "loss_type": "dr_grpo"})
    assert group.label == "trl_grpo_group" and group.choice.settings()["epsilon"] == 1e-4
    assert (group.aggregation, group.aggregation_logged) == ("dr-grpo", True)
    assert trained_with({"scale_rewards": "none"}).label == "trl_grpo_none"
    assert trained_with({"scale_rewards": False}).estimator == "dr_grpo"  # TRL before scale_rewards took text
    assert trained_with({"scale_rewards": "batch"}).estimator == "grpo_batch_std"
    # normalize_then_sum ignores scale_rewards in TRL: it wins over it
    assert trained_with({"scale_rewards": "batch", "multi_objective_aggregation": "normalize_then_sum"}).label == "trl_gdpo"
    assert trained_with({"loss_type": "grpo"}).aggregation == "seq-mean-token-mean"
    # TRL 1.16.0 _compute_loss: sapo averages per sequence as grpo does; cispo and vespo over every token as dapo
    assert [(t.aggregation, t.aggregation_logged) for t in map(trained_with, (
        {"loss_type": "sapo"}, {"loss_type": "cispo"}, {"loss_type": "vespo"}))] == [
        ("seq-mean-token-mean", True), ("token-mean", True), ("token-mean", True)]


def test_a_trl_release_in_the_config_sets_the_convention_of_a_declared_trl_label():
    old = trained_with({"trainer": "trl==1.5.0", "scale_rewards": "group"})
    assert old.label == "trl_grpo_group_1.5" and old.choice.settings()["convention"] == "trl-1.5"
    assert trained_with({"trainer": "trl==1.5.0", "scale_rewards": "none"}).label == "trl_grpo_none_1.5"
    # labels whose convention is the default (trl), not an option of their own, too
    assert trained_with({"trainer": "trl==1.5.0", "scale_rewards": "batch"}).label == "trl_grpo_batch_1.5"
    assert trained_with({"trainer": "trl==1.5.0", "multi_objective_aggregation": "normalize_then_sum"}).label == \
        "trl_gdpo_1.5"
    assert trained_with({"trainer": "trl==1.16.0", "scale_rewards": "group"}).choice.settings()["convention"] == "trl"
    # options that are not the convention stay the declared label's
    raw = trained_with({"trainer": "verl==0.9.1", "algorithm": {"adv_estimator": "gae", "whiten_advantages": False}})
    assert raw.label == "gae_raw" and raw.choice.settings()["whiten"] is False


def test_a_config_naming_its_trainer_release_is_recomputed_as_that_release():
    from trajlens.estimators.trained import run_release

    config = {"algorithm": {"adv_estimator": "reinforce_plus_plus"}, "trainer": "verl==0.8.0"}
    found = trained_with(config)
    assert found.choice.estimator == "reinforce_plus_plus" and found.choice.options["convention"] == "reset"
    assert "trainer=verl==0.8.0" in found.evidence
    assert str(run_release(config)).startswith("verl") and run_release(config).version[:2] == (0, 8)
    current = trained_with({"algorithm": {"adv_estimator": "reinforce_plus_plus"}})
    assert current.choice.settings()["convention"] == "carry"  # verl >= 0.9 carries the return


def test_a_config_that_names_nothing_is_unknown():
    for config in (None, {}, "not json", {"algorithm": {"adv_estimator": "something_else"}}):
        trained = trained_with(config)
        assert trained.choice is None and trained.source == "unknown" and trained.aggregation == "token-mean"
    assert surfaces({})["attribution"] is None and run_label({}) is None and declared_estimators({}) == frozenset()


def _trl_group_run() -> pl.DataFrame:
    """Two steps of groups of four, with the advantages TRL's scale_rewards=group logs."""
    rewards = [1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 1.0, 0.25, 1.0, 1.0, 0.0, 0.5, 0.5, 0.0, 0.0, 1.0]
    trajectories = pl.DataFrame({
        "run_id": ["r"] * 16, "step": [1] * 8 + [2] * 8, "trajectory_id": [f"t{i}" for i in range(16)],
        "group_id": [f"g{i // 4}" for i in range(16)], "split": ["train"] * 16, "reward": rewards,
    })
    logged = recompute(trajectories, None, "grpo", epsilon=1e-4, singleton="zero", convention="trl")["advantage"]
    return trajectories.with_columns(logged.cast(pl.Float32).cast(pl.Float64).alias("logged_advantage"))


def test_a_silent_config_takes_the_identified_estimator():
    found = identify_advantages(_trl_group_run())
    assert found.matched and found.best.candidate.label == "trl_grpo_group"
    trained = trained_with({}, identified=found)
    assert (trained.label, trained.source) == ("trl_grpo_group", "identified")
    assert "TRL >= 1.6 GRPO, scale_rewards=group, eps 1e-4" in trained.evidence
    assert run_label({}, identified=found).label == "trl_grpo_group"
    # the config, when it names an estimator, comes first
    assert trained_with(VERL_DR_GRPO, identified=found).source == "config"


def test_an_identify_verdict_that_matches_nothing_says_nothing():
    run = _trl_group_run().with_columns(pl.col("logged_advantage") + 0.3)
    found = identify_advantages(run)
    assert not found.matched
    assert trained_with({}, identified=found).source == "unknown"


def test_an_unknown_estimator_or_adapter_is_a_one_line_error(monkeypatch):
    run = _trl_group_run()
    with pytest.raises(EstimatorInputError, match="estimator must be one of") as caught:
        recompute(run, None, "not_an_estimator")
    assert "\n" not in str(caught.value)
    monkeypatch.setitem(registry.ESTIMATOR_REGISTRY, "grpo", replace(ESTIMATOR_REGISTRY["grpo"], adapter="nope"))
    with pytest.raises(EstimatorInputError, match="recompute: estimator grpo names input adapter 'nope', not one of"):
        recompute(run, None, "grpo")


def test_the_registry_declares_what_the_code_asks_of_each_estimator():
    for spec in ESTIMATOR_REGISTRY.values():
        assert spec.frame_adapter() in ADAPTERS, spec.name
        labels = {choice.label for choice in spec.choices()}
        assert all(declaration.label in labels for declaration in spec.declared_by)
        for choice in spec.conventions:  # a convention sharing a report label computes the same
            variant = next((v for v in spec.variants() if v.label == choice.label), None)
            assert variant is None or variant.computes_as(choice)
    assert [name for name, spec in ESTIMATOR_REGISTRY.items() if spec.stateful] == ["gdpo_dynamic"]
    assert CANDIDATES == tuple(c for spec in ESTIMATOR_REGISTRY.values() for c in spec.conventions)


def test_the_package_exports_every_registry_function():
    for spec in ESTIMATOR_REGISTRY.values():
        name = spec.function.split(":")[1]
        assert name in estimators.__all__, name
        assert getattr(estimators, name) is spec.tensor_function(), name


def test_a_registry_name_as_the_estimator_declares_that_entry():
    assert trained_with({"algorithm": {"adv_estimator": "sum_then_normalize"}}).label == "sum_then_normalize"
    assert trained_with({}, estimator_column="gdpo_verl").label == "gdpo_verl"
    assert trained_with({"algorithm": {"adv_estimator": "dr_grpo"}}).label == "dr_grpo"


def test_an_estimator_named_by_the_runs_column_alone_is_said_to_be():
    """Where the config lacks algorithm.adv_estimator, the runs table's estimator names it; the
    evidence says which one spoke."""
    from trajlens.estimators.trained import trained_with

    found = trained_with({"algorithm": {"whiten_advantages": False}}, "gae")
    assert (found.label, found.source, found.evidence) == ("gae_raw", "config",
                                                           "runs.estimator=gae, algorithm.whiten_advantages=false")
    declared = trained_with({"algorithm": {"adv_estimator": "grpo"}}, "gae")
    assert (declared.label, declared.evidence) == ("grpo", "algorithm.adv_estimator=grpo")


@pytest.mark.parametrize(("loss_mode", "trainer", "aggregation"), [
    ("sapo", None, "seq-mean-token-mean"), ("sapo", "verl==0.8.0", "seq-mean-token-mean"),
    ("gspo", "verl==0.9.0", "seq-mean-token-mean"), ("gspo", "verl==0.8.0", "seq-mean-token-mean"),
    ("gspo", None, "token-sum"), ("gspo", "verl==0.9.1", "token-sum"), ("vanilla", "verl==0.8.0", "token-sum"),
])
def test_verl_policy_losses_that_ignore_loss_agg_mode_set_the_runs_aggregation(loss_mode, trainer, aggregation):
    """verl's SAPO loss (0.8.0 to 0.9.1) and GSPO loss (to 0.9.0) aggregate seq-mean-token-mean
    whatever ``loss_agg_mode`` says; 0.9.1's GSPO reads it."""
    config = {"algorithm": {"adv_estimator": "grpo"},
              "actor_rollout_ref": {"actor": {"loss_agg_mode": "token-sum", "policy_loss": {"loss_mode": loss_mode}}},
              **({"trainer": trainer} if trainer else {})}
    trained = trained_with(config)
    assert (trained.aggregation, trained.aggregation_logged) == (aggregation, True)
