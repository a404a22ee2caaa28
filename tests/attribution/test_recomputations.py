"""The recomputations attribution compares come from the estimator registry."""

from __future__ import annotations

import pytest

from trajlens.attribution import RECOMPUTATIONS, parse_recomputations
from trajlens.attribution.recomputations import own_recomputation
from trajlens.run.step_advantages import TOKEN_ESTIMATORS
from trajlens.errors import ConfigError
from trajlens.estimators import trained_with
from trajlens.estimators.registry import ESTIMATOR_REGISTRY, Input, RunFacts


def test_every_registry_estimator_appears_under_its_labels_with_the_registrys_options():
    by_label = {r.label: r for r in RECOMPUTATIONS}
    for spec in ESTIMATOR_REGISTRY.values():
        for variant in spec.variants():
            rec = by_label[variant.label]
            assert rec.estimator == spec.name and rec.options == dict(variant.options)
            assert rec.settings() == {**spec.defaults(), **variant.options}
    gae_raw = by_label["gae_raw"]
    assert gae_raw.estimator == "gae" and gae_raw.options == {"gamma": 1.0, "lam": 1.0, "whiten": False}
    assert len(by_label) == len(RECOMPUTATIONS) == sum(len(s.variants()) for s in ESTIMATOR_REGISTRY.values())


def test_token_level_estimators_and_needs_are_the_registrys():
    assert set(TOKEN_ESTIMATORS) == {n for n, s in ESTIMATOR_REGISTRY.items() if Input.TOKEN_ARRAYS in s.inputs}
    gae = next(r for r in RECOMPUTATIONS if r.estimator == "gae")
    assert gae.missing(RunFacts(trajectories=4, token_arrays=True)) == ["critic values"]
    assert gae.missing(RunFacts(trajectories=4, token_arrays=True, critic_values=True)) == []
    grpo = next(r for r in RECOMPUTATIONS if r.estimator == "grpo")
    assert grpo.missing(RunFacts(trajectories=4, all_rewarded=True, largest_group=1)) == ["groups of two or more"]


def test_own_recomputation_is_found_by_the_registry_label():
    own = own_recomputation(trained_with({"actor_rollout_ref": {"actor": {"loss_agg_mode": "seq-mean-token-mean"}}},
                                         "grpo"), RECOMPUTATIONS)
    assert own.label == "grpo" and own.aggregation == "seq-mean-token-mean" and own.aggregation_logged
    assert own_recomputation(trained_with({"algorithm": {"whiten_advantages": False}}, "gae"), RECOMPUTATIONS).label == "gae_raw"


def test_parse_recomputations_checks_options_against_the_registry():
    (rec,) = parse_recomputations(["mine=gae"], {"mine": {"lam": 0.9}})
    assert rec.settings()["lam"] == 0.9 and rec.settings()["whiten"] is True
    with pytest.raises(ConfigError, match="gae takes no option 'alpha'"):
        parse_recomputations(["mine=gae"], {"mine": {"alpha": 1.0}})


@pytest.mark.parametrize("pairs, options", [
    (["gae_raw=gae"], {"gae_raw": {"whiten": True}}),
    (["grpo=dr_grpo"], {}),
])
def test_a_label_that_names_another_computation_is_refused(pairs, options):
    """Its credit would be saved under that label, and the report and the viewer would read it as
    the labelled computation's."""
    with pytest.raises(ConfigError) as refused:
        parse_recomputations(pairs, options)
    (problem,) = refused.value.problems
    assert problem.startswith(f"--estimator {pairs[0]!r}: {pairs[0].split('=')[0]!r} names ")
    assert parse_recomputations(["mine=dr_grpo"], {})[0].estimator == "dr_grpo"
