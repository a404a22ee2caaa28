"""A scenario's curves evaluated at one step, and the token scale of a run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trajlens.synth.commands import (
    EDIT, OTHER, QUICK_CHECK, RUN_SCRIPT, SEARCH, SUBMIT, TEST_SUITE, TEST_TARGETED, THINK, VIEW,
)
from trajlens.synth.spec import Behaviour, Scenario

REST_CLASSES: tuple[str, ...] = (TEST_TARGETED, QUICK_CHECK, RUN_SCRIPT, EDIT, VIEW, SEARCH, OTHER)
"""Classes drawn from the behaviour's ``class_weights`` (all but think, submit and suite runs)."""

# Typical token counts of a call in a real run (the generator scales them to the run's size):
# (median model tokens of the action itself, median observation tokens).
CALL_TOKENS: dict[str, tuple[float, float]] = {
    SUBMIT: (15, 60), TEST_SUITE: (25, 900), TEST_TARGETED: (35, 300), QUICK_CHECK: (80, 60),
    RUN_SCRIPT: (20, 200), EDIT: (150, 60), VIEW: (30, 500), SEARCH: (30, 250), THINK: (60, 8), OTHER: (15, 80),
}
EMPTY_THINK_TOKENS = 6.0
REASONING_TOKENS = 110.0  # median reasoning tokens before a non-think call
TOKEN_SIGMA = 0.5  # log-normal spread of every token count


@dataclass(frozen=True)
class StepParams:
    """Behaviour curves of a scenario at one step."""

    step: int
    think_share: float
    think_run: float
    empty_think: float
    useful_calls: float
    """Mean number of non-think calls per trajectory."""
    suite_rate: float
    suite_repeats: float
    weights: np.ndarray
    """Probabilities over :data:`REST_CLASSES`."""
    readback: float
    reasoning: float
    call_tokens: float
    premature_submit: float
    turn_spread: float


def step_params(scenario: Scenario, step: int) -> StepParams:
    b = scenario.behaviour
    assert b is not None
    think = b.think_share.value(step) if scenario.harness.think else 0.0
    useful0 = scenario.tool_calls_per_trajectory * (1.0 - _think0(scenario))
    return StepParams(
        step=step,
        think_share=think,
        think_run=max(1.0, b.think_run.value(step)),
        empty_think=b.empty_think.value(step),
        useful_calls=useful0 * b.useful_calls.value(step),
        suite_rate=b.suite_rate.value(step),
        suite_repeats=b.suite_repeats,
        weights=_weights(b, step),
        readback=b.readback.value(step),
        reasoning=b.reasoning.value(step),
        call_tokens=b.call_tokens.value(step),
        premature_submit=b.premature_submit.value(step),
        turn_spread=b.turn_spread,
    )


def token_scale(scenario: Scenario, tokens_per_trajectory: int, step: int = 0) -> float:
    """Factor from real token counts to this run's at ``step``.

    A step-0 trajectory has about ``tokens_per_trajectory`` tokens. When the behaviour sets a
    ``response_length`` curve, the factor is recomputed per step so the expected length follows
    it whatever the mix of calls; otherwise it is the step-0 factor, and lengths move with the mix.
    """
    length = scenario.behaviour.response_length
    if length is None:
        return tokens_per_trajectory / expected_tokens(step_params(scenario, 0))
    return tokens_per_trajectory * length.value(step) / expected_tokens(step_params(scenario, step))


def expected_tokens(p: StepParams) -> float:
    """Expected real tokens of a trajectory under the step's behaviour."""
    n = p.useful_calls / (1.0 - p.think_share)
    spread = np.exp(TOKEN_SIGMA**2 / 2)

    def call_total(klass: str) -> float:
        model, obs = CALL_TOKENS[klass]
        return (model + obs) * spread * p.call_tokens

    suite_calls = p.suite_rate * (1 + p.suite_repeats)
    rest = max(p.useful_calls - 1 - suite_calls, 0.0)
    empty = (EMPTY_THINK_TOKENS + CALL_TOKENS[THINK][1]) * spread * p.call_tokens
    think_tokens = (1 - p.empty_think) * call_total(THINK) + p.empty_think * empty
    return (
        n * p.think_share * think_tokens
        + call_total(SUBMIT)
        + suite_calls * call_total(TEST_SUITE)
        + rest * sum(w * call_total(c) for c, w in zip(REST_CLASSES, p.weights))
        + p.useful_calls * REASONING_TOKENS * p.reasoning * spread
    )


def _think0(scenario: Scenario) -> float:
    assert scenario.behaviour is not None
    return scenario.behaviour.think_share.value(0) if scenario.harness.think else 0.0


def _weights(behaviour: Behaviour, step: int) -> np.ndarray:
    given = dict(behaviour.class_weights)
    raw = np.array([given[c].value(step) if c in given else 0.0 for c in REST_CLASSES])
    if raw.sum() <= 0:
        raw = np.ones(len(REST_CLASSES))
    return raw / raw.sum()
