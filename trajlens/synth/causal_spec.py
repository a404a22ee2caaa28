"""Causal scenarios as data: a behaviour-level training loop whose drift is caused, not drawn.

The curve-driven scenarios of :mod:`trajlens.synth.scenarios` draw behaviour from injected
curves: they describe a phenomenon, and any link between advantages and drift in them is
drawn. A causal scenario instead declares a *policy* (a softmax over per-class logits), what
each class of call costs in tokens, how calls earn reward, a critic of a given quality, an
estimator with its options, a loss aggregation and a learning rate. The loop of
:mod:`trajlens.synth.causal` then trains the policy on its own samples, so every change of
behaviour in the run is caused by the advantages the estimator gave.

What is chosen here (inputs) and what emerges (outputs) is listed in each sample's README.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trajlens.synth.commands import Harness


@dataclass(frozen=True)
class CallClassSpec:
    """One behaviour class the policy can choose for a call."""

    name: str
    """Behaviour class of the taxonomy (:data:`trajlens.classify.rules.BEHAVIOUR_CLASSES`)."""
    logit: float
    """Initial logit of the class in the policy's softmax."""
    call_tokens: int
    """Median model tokens of the call itself (tool name and arguments)."""
    reasoning_tokens: int
    """Median model tokens of reasoning before the call, in the same turn."""
    observation_tokens: int
    """Median tokens of tool output fed back after the call."""
    success_effect: float = 0.0
    """Added to the success logit per call of this class, up to ``effect_cap`` calls."""
    effect_cap: int = 0
    """Calls of the class that count towards success (diminishing returns beyond)."""
    empty_thought: bool = False
    """For think calls: the thought is empty or filler (a no-op)."""


@dataclass(frozen=True)
class CriticSpec:
    """A critic of a chosen quality: ``V = level + quality * (p - level) + noise`` per trajectory.

    ``level`` tracks the batch reward with rate ``learning_rate`` (a starved critic learns
    slowly and lags); ``p`` is the trajectory's true success probability.
    """

    learning_rate: float
    """How far the critic level moves towards the batch mean reward each step."""
    quality: float
    """0: the critic knows nothing about the trajectory; 1: it knows its success probability."""
    noise: float
    """Standard deviation of the per-trajectory value noise."""
    call_noise: float = 0.01
    """Standard deviation of the value's step at every call inside a trajectory."""
    initial_level: float | None = None
    """Starting level (default: the success rate of the initial policy, a converged critic)."""


@dataclass(frozen=True)
class HardSteps:
    """Steps whose tasks are much harder (a batch none resolves): a difficulty offset."""

    steps: tuple[int, ...]
    offset: float
    doc: str


@dataclass(frozen=True)
class ChannelSpec:
    """Two reward channels: ``format`` (a submit call present) and ``correctness`` (0 to ``scale``)."""

    format_weight: float
    correctness_weight: float
    correctness_scale: float
    """Correctness is ``scale * sigmoid(success logit + noise)``."""
    correctness_noise: float


@dataclass(frozen=True)
class ExpectedVerdict:
    """What the loop caused for one class: the direction it drifted and the verdict that names the cause."""

    primary_class: str
    """A behaviour class, or ``response length``, or ``reward channel NAME``."""
    direction: str
    """``grew`` or ``decayed`` (a class), ``grew`` or ``shrank`` (length), ``collapsed`` (a channel)."""
    verdict: str
    """One of :data:`trajlens.attribution.VERDICTS`."""


@dataclass(frozen=True)
class CausalScenario:
    """A behaviour-level training run: policy, reward, critic, estimator, update."""

    name: str
    title: str
    summary: str
    expected: tuple[str, ...]
    """What the run should show, in words; the tests check each from the data alone."""
    classes: tuple[CallClassSpec, ...]
    steps: int
    batch: int
    group_size: int
    calls_per_trajectory: int
    """Calls of every trajectory; with ``stop_class`` the most calls before truncation."""
    estimator: str
    """Name in :data:`trajlens.estimators.ESTIMATORS`."""
    estimator_options: dict[str, Any]
    aggregation: str
    """Loss aggregation (:data:`trajlens.estimators.AGGREGATION_MODES`)."""
    learning_rate: float
    """Step size of the logit update ``theta += lr * sum_calls push * (onehot - pi)``."""
    success_base: float
    """Success logit of a trajectory with no useful calls on an average task."""
    task_spread: float = 1.0
    """Standard deviation of the task difficulty (a logit offset shared by a group)."""
    stop_class: str | None = None
    """A class whose call ends the trajectory (its length is then the policy's choice)."""
    truncation_reward: float | None = None
    """Reward of a trajectory truncated before ``stop_class`` (default: no success possible)."""
    length_penalty: float = 0.0
    """Subtracted from the success logit per call beyond ``length_budget``."""
    length_budget: int = 0
    critic: CriticSpec | None = None
    hard_steps: HardSteps | None = None
    channels: ChannelSpec | None = None
    harness: Harness = field(default_factory=lambda: Harness("sao-swe", editor=True, think=True, submit_tool=True))
    twin_of: str | None = None
    """The scenario this one copies except for the estimator options (same seed, same tasks)."""
    forced_final: str | None = None
    """A class every trajectory calls once, last, whatever the policy (a final submit): the policy
    never chooses it and the update leaves its logit alone."""
    truth: tuple[ExpectedVerdict, ...] = ()
    """The verdict attribution should give each drift the loop caused (``scripts/verdicts.py`` checks them)."""
    control: bool = False
    """True: no drift of this run may be called an artefact, of the estimator or of the aggregation (a twin, a null run, a reward-driven run)."""
    shipped: bool = True
    """Whether ``sample_data`` ships the run (the others exist only in the generator)."""
    trainer: str | None = None
    """The trainer release whose convention the loop's estimator follows (``verl==0.8.0``), written
    into the run's config as its ``trainer`` key; None: the current release."""

    @property
    def class_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.classes)


_R6_CLASSES = (
    CallClassSpec("think", -1.0, 6, 0, 6, empty_thought=True),
    CallClassSpec("search", 0.0, 18, 30, 5, 0.4, 2),
    CallClassSpec("view", 0.0, 16, 30, 9, 0.4, 2),
    CallClassSpec("edit", 0.0, 70, 60, 3, 0.4, 2),
    CallClassSpec("test_targeted", -0.7, 22, 40, 6, 0.4, 1),
    CallClassSpec("quick_check", -0.7, 45, 40, 3, 0.4, 1),
    CallClassSpec("test_suite", -0.7, 10, 30, 7, 0.4, 1),
)

CAUSAL_R6 = CausalScenario(
    name="causal-r6",
    title="Causal r6: unwhitened single-rollout GAE with a starved critic takes off into think calls",
    summary=(
        "One rollout per task, token-level GAE (gamma 1, lambda 1) without whitening, token-mean loss. The "
        "critic is starved: it tracks the batch reward at 2% a step and knows little about each trajectory. "
        "Think calls are empty, short and reward-neutral, and take a call slot from useful work. At steps "
        "58-64 the batch is of tasks none resolves; the lagging critic values every token above its "
        "return, so every advantage is negative, and the short think calls are pushed down least. The think "
        "share then takes off: fewer useful calls, lower reward, a critic still lagging above it, more "
        "all-negative batches."
    ),
    expected=(
        "all-negative batches under the run's estimator at the hard steps, before the think share grows",
        "think share below 0.2 before the hard steps and above 0.5 at the end",
        "under the run's estimator think calls have the highest relative credit at the all-negative steps",
        "whitened GAE gives the same think calls no positive relative credit",
    ),
    classes=_R6_CLASSES,
    steps=90,
    batch=16,
    group_size=1,
    calls_per_trajectory=10,
    estimator="gae",
    estimator_options={"gamma": 1.0, "lam": 1.0, "whiten": False},
    aggregation="token-mean",
    learning_rate=1.0,
    success_base=-3.0,
    task_spread=0.3,
    critic=CriticSpec(learning_rate=0.02, quality=0.2, noise=0.04),
    hard_steps=HardSteps((58, 59, 60, 61, 62, 63, 64), 6.0,
                         "a batch of tasks that none resolves (hard repositories); chosen, like the seed's steps 119-121"),
    truth=(ExpectedVerdict("think", "grew", "estimator artefact"),),
)

CAUSAL_R6_WHITENED = CausalScenario(
    **{**CAUSAL_R6.__dict__,
       "name": "causal-r6-whitened",
       "title": "Causal r6 with whitening: the same run, seed and tasks, with advantage whitening on",
       "summary": (
           "Everything as causal-r6 (seed, tasks, hard steps 58-64, starved critic, learning rate) except that "
           "the GAE advantages are whitened over the batch's model tokens, as verl does with whitening on. "
           "Whitening removes the batch mean, so no batch is all-negative and no call gains from being short: "
           "the think share stays where it started."),
       "expected": (
           "no all-negative batch under the run's estimator",
           "think share below 0.15 at every stage; no class share changes between stages",
       ),
       "estimator_options": {"gamma": 1.0, "lam": 1.0, "whiten": True},
       "twin_of": "causal-r6", "truth": (), "control": True},
)

_LENGTH_CLASSES = (
    CallClassSpec("search", 0.4, 18, 40, 6, 0.3, 2),
    CallClassSpec("view", 0.6, 16, 40, 9, 0.3, 2),
    CallClassSpec("edit", 0.6, 70, 60, 3, 0.5, 2),
    CallClassSpec("test_targeted", 0.2, 22, 50, 6, 0.4, 1),
    CallClassSpec("submit", 0.0, 8, 40, 20),
)

CAUSAL_GRPO_LENGTH = CausalScenario(
    name="causal-grpo-length",
    title="Causal GRPO length: sequence-mean aggregation lets responses grow past what pays",
    summary=(
        "Groups of 8 rollouts, GRPO advantages, seq-mean-token-mean loss (GRPO as published). The agent ends "
        "a trajectory by submitting; too few calls before the submission fail, and every call past a budget "
        "of 8 lowers the success odds. Under sequence-mean aggregation each token of a long response weighs "
        "1/L: a failing long response is pushed down less per token than a failing short one, so the submit "
        "decision is pushed down more in short failures than in long ones and responses grow past the length "
        "that pays."
    ),
    expected=(
        "mean calls and model tokens per trajectory growing over the run",
        "length bias (per-token push against length) under seq-mean-token-mean and none under token-mean",
    ),
    classes=_LENGTH_CLASSES,
    steps=60,
    batch=32,
    group_size=8,
    calls_per_trajectory=24,
    estimator="grpo",
    estimator_options={},
    aggregation="seq-mean-token-mean",
    learning_rate=0.12,
    success_base=-1.6,
    task_spread=0.8,
    stop_class="submit",
    length_penalty=0.25,
    length_budget=8,
    truth=(ExpectedVerdict("response length", "grew", "aggregation artefact"),),
)

_MULTI_CLASSES = (
    CallClassSpec("search", 0.3, 18, 30, 5, 0.25, 2),
    CallClassSpec("view", 0.3, 16, 30, 8, 0.25, 2),
    CallClassSpec("edit", 0.5, 60, 50, 3, 0.45, 3),
    CallClassSpec("test_targeted", 0.2, 22, 40, 6, 0.35, 2),
    CallClassSpec("submit", 0.0, 8, 20, 20),
)

CAUSAL_MULTIREWARD = CausalScenario(
    name="causal-multireward",
    title="Causal two-channel GRPO: summed-then-normalised advantages let the format channel collapse",
    summary=(
        "Groups of 8 with two reward channels: format (1 when the trajectory submits before its 8 calls run "
        "out) and correctness (0-10, rising with edits, views, searches and tests). The trainer sums the "
        "channels, then normalises in the group. Correctness varies far more than format, so the sum is ranked "
        "by correctness; submitting ends the work early, the submit call is pushed down, and the format rate "
        "collapses."
    ),
    expected=(
        "format rate falling from about 0.7 to below 0.1",
        "the same run under GDPO (causal-multireward-gdpo) keeps its format rate above 0.5",
    ),
    classes=_MULTI_CLASSES,
    steps=60,
    batch=32,
    group_size=8,
    calls_per_trajectory=8,
    estimator="sum_then_normalize",
    estimator_options={},
    aggregation="token-mean",
    learning_rate=0.25,
    success_base=-1.5,
    task_spread=0.8,
    stop_class="submit",
    channels=ChannelSpec(format_weight=1.0, correctness_weight=1.0, correctness_scale=10.0, correctness_noise=0.3),
    harness=Harness("mini-swe-agent", editor=False, think=False, submit_tool=False),
    truth=(ExpectedVerdict("reward channel format", "collapsed", "estimator artefact"),),
)

CAUSAL_MULTIREWARD_GDPO = CausalScenario(
    **{**CAUSAL_MULTIREWARD.__dict__,
       "name": "causal-multireward-gdpo",
       "title": "Causal two-channel GDPO: the same run with each channel normalised in its group first",
       "summary": (
           "Everything as causal-multireward (seed, tasks, learning rate) except the estimator: GDPO as verl "
           "implements it (each channel normalised in its group, weighted sum, then normalised over the batch). "
           "Format keeps an equal say, and the format rate rises instead of collapsing."),
       "expected": ("format rate above 0.5 throughout the second half",),
       "estimator": "gdpo_verl",
       "twin_of": "causal-multireward", "truth": (), "control": True},
)

_REWARD_CLASSES = (
    CallClassSpec("think", 0.0, 6, 0, 6, empty_thought=True),
    CallClassSpec("search", 0.0, 18, 30, 5, 0.05, 2),
    CallClassSpec("view", 0.0, 16, 30, 9, 0.05, 2),
    CallClassSpec("edit", 0.0, 70, 60, 3, 0.05, 2),
    CallClassSpec("test_targeted", -1.5, 22, 40, 6, 0.9, 4),
)

CAUSAL_REWARD_DRIVEN = CausalScenario(
    name="causal-reward-driven",
    title="Causal control: targeted tests grow because they earn reward",
    summary=(
        "Groups of 8, GRPO advantages, token-mean loss. Targeted tests raise the success odds strongly (up to four "
        "per trajectory); every other class barely matters. The test share grows because trajectories with more "
        "tests resolve more often: every estimator credits them alike, so the growth is learning."),
    expected=("test_targeted share growing from about 0.06",),
    classes=_REWARD_CLASSES,
    steps=50,
    batch=32,
    group_size=8,
    calls_per_trajectory=8,
    estimator="grpo",
    estimator_options={},
    aggregation="token-mean",
    learning_rate=0.15,
    success_base=-2.5,
    task_spread=0.5,
    truth=(ExpectedVerdict("test_targeted", "grew", "learning"),),
    control=True,
    shipped=False,
)

CAUSAL_NULL = CausalScenario(
    **{**CAUSAL_REWARD_DRIVEN.__dict__,
       "name": "causal-null",
       "title": "Causal null run: reward owes nothing to behaviour",
       "summary": ("As causal-reward-driven, but no class changes the success odds: advantages are noise around "
                   "zero within each group and no class share should move."),
       "expected": ("no class share changes between stages",),
       "classes": tuple(CallClassSpec(c.name, c.logit if c.name != "test_targeted" else 0.0, c.call_tokens,
                                      c.reasoning_tokens, c.observation_tokens, empty_thought=c.empty_thought)
                        for c in _REWARD_CLASSES),
       "success_base": -0.5,
       "truth": (), "control": True, "shipped": False},
)

_DECAY_CLASSES = (
    CallClassSpec("search", 0.0, 18, 30, 5, 0.3, 2),
    CallClassSpec("view", 0.0, 16, 30, 9, 0.3, 2),
    CallClassSpec("edit", 0.5, 90, 120, 3, 0.5, 3),
    CallClassSpec("test_targeted", 0.0, 22, 40, 6, 0.3, 1),
)

CAUSAL_CRITIC_DECAY = CausalScenario(
    name="causal-critic-decay",
    title="Causal decay: an optimistic critic makes unwhitened GAE push long, useful edits down",
    summary=(
        "One rollout per task, unwhitened GAE (gamma 1, lambda 1), token-mean loss. The critic starts far above the "
        "reward the policy earns and learns slowly, so for many steps nearly every advantage is negative and a "
        "call is pushed down in proportion to its tokens: edits, the longest calls and the most useful, decay."),
    expected=("edit share decaying while the critic stays above the reward",),
    classes=_DECAY_CLASSES,
    steps=60,
    batch=16,
    group_size=1,
    calls_per_trajectory=8,
    estimator="gae",
    estimator_options={"gamma": 1.0, "lam": 1.0, "whiten": False},
    aggregation="token-mean",
    learning_rate=0.2,
    success_base=-2.0,
    task_spread=0.3,
    critic=CriticSpec(learning_rate=0.01, quality=0.2, noise=0.04, initial_level=0.9),
    truth=(ExpectedVerdict("edit", "decayed", "estimator artefact"),),
    shipped=False,
)

CAUSAL_CRITIC_DECAY_WHITENED = CausalScenario(
    **{**CAUSAL_CRITIC_DECAY.__dict__,
       "name": "causal-critic-decay-whitened",
       "title": "Causal decay with whitening: the same optimistic critic, advantages whitened",
       "summary": "As causal-critic-decay with whitened advantages: the critic's offset is removed and edits keep their share.",
       "expected": ("no class share changes between stages, or a change that earns reward",),
       "estimator_options": {"gamma": 1.0, "lam": 1.0, "whiten": True},
       "twin_of": "causal-critic-decay", "truth": (), "control": True},
)

_RESET_CLASSES = (
    CallClassSpec("think", -1.5, 6, 0, 6, empty_thought=True),
    CallClassSpec("search", 0.0, 18, 30, 5, 0.3, 2),
    CallClassSpec("view", 0.0, 16, 30, 9, 0.3, 2),
    CallClassSpec("edit", 0.0, 70, 60, 3, 0.4, 2),
    CallClassSpec("test_targeted", -0.5, 22, 40, 6, 0.3, 1),
    CallClassSpec("submit", 0.0, 8, 10, 1),
)

CAUSAL_RPP_RESET = CausalScenario(
    name="causal-rpp-reset",
    title="Causal REINFORCE++ with the return reset at observations: every call but the last pushed down",
    summary=(
        "verl's REINFORCE++ up to v0.8.0 (return reset at every observation token, then whitened over the batch), "
        "token-mean "
        "loss, multi-turn trajectories that always end with a submit. Only the final segment sees the reward; every "
        "earlier call gets the same negative advantage per token, so a call is pushed down in proportion to its "
        "tokens and short, useless think calls grow. The forced submit absorbs the positive push."),
    expected=("think share growing from about 0.05", "submit a structural call (one per trajectory)"),
    classes=_RESET_CLASSES,
    steps=60,
    batch=32,
    group_size=1,
    calls_per_trajectory=10,
    estimator="reinforce_plus_plus",
    estimator_options={"convention": "reset"},
    trainer="verl==0.8.0",
    aggregation="token-mean",
    learning_rate=0.5,
    success_base=-2.0,
    task_spread=0.5,
    forced_final="submit",
    truth=(ExpectedVerdict("think", "grew", "estimator artefact"),),
    shipped=False,
)

CAUSAL_SCENARIOS: dict[str, CausalScenario] = {
    s.name: s for s in (CAUSAL_R6, CAUSAL_R6_WHITENED, CAUSAL_GRPO_LENGTH, CAUSAL_MULTIREWARD, CAUSAL_MULTIREWARD_GDPO,
                        CAUSAL_REWARD_DRIVEN, CAUSAL_NULL, CAUSAL_CRITIC_DECAY, CAUSAL_CRITIC_DECAY_WHITENED,
                        CAUSAL_RPP_RESET)
}
"""Every causal scenario by name."""
