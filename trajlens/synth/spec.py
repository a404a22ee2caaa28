"""The parts a scenario is made of, as frozen dataclasses.

A scenario (:class:`Scenario`) is pure data: sizes, the agent harness, behaviour curves, the
outcome model, the critic, training scalars, reward channels and injected events. The
generator (:mod:`trajlens.synth.generate`) reads it; the scenarios themselves are declared in
:mod:`trajlens.synth.scenarios`.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass, field

from trajlens.synth.commands import Harness
from trajlens.synth.curves import Curve, flat


@dataclass(frozen=True)
class Behaviour:
    """What the agent does per trajectory, as curves over the training step."""

    think_share: Curve
    """Expected share of all tool calls that are ``think`` calls."""
    useful_calls: Curve = flat(1.0, "chosen")
    """Multiplier on the number of non-think calls (1.0: ``tool_calls_per_trajectory`` in total at step 0)."""
    turn_spread: float = 0.25
    """Log-normal sigma of the number of calls of a trajectory around its mean."""
    think_run: Curve = flat(1.1, "chosen")
    """Mean length of a run of consecutive think calls."""
    empty_think: Curve = flat(0.2, "chosen")
    """Share of think calls whose thought is empty or a filler ("", "...", "Let me think.")."""
    suite_rate: Curve = flat(0.7, "chosen")
    """Share of trajectories that run the whole test suite at least once."""
    suite_repeats: float = 0.5
    """Mean number of further suite runs in a trajectory that runs it."""
    class_weights: tuple[tuple[str, Curve], ...] = ()
    """Relative weights of the remaining classes (targeted tests, quick checks, scripts, edits,
    views, searches, other) among the calls that are not think, submit or suite runs."""
    readback: Curve = flat(0.1, "chosen")
    """Share of edits followed at once by a read of the edited file."""
    reasoning: Curve = flat(1.0, "chosen")
    """Multiplier on reasoning tokens per call."""
    call_tokens: Curve = flat(1.0, "chosen")
    """Multiplier on the tokens of every call and observation (response length)."""
    response_length: Curve | None = None
    """Multiplier on ``tokens_per_trajectory`` that the expected response length follows step by
    step, whatever the mix of calls (None: lengths move with the mix)."""
    premature_submit: Curve = flat(0.0, "chosen")
    """Share of trajectories that submit after a couple of calls without a fix."""


@dataclass(frozen=True)
class Outcome:
    """How trajectories end and what validation reports."""

    pass_rate: Curve
    """Expected share of training trajectories that resolve their task."""
    partial_credit: float = 0.5
    """Reward of an unresolved trajectory: ``partial_credit * passed / target tests`` (0 to turn off)."""
    timeout_rate: float = 0.03
    """Share of trajectories that stop at the turn limit without submitting (besides those that reach it)."""
    val_score: Curve | None = None
    """``val/score`` at the validation steps."""
    val_every: int = 10
    """Steps between validation runs."""


@dataclass(frozen=True)
class Critic:
    """The value model of a GAE run and the estimator settings."""

    explained_variance: Curve
    """Target ``critic/vf_explained_var``: the values are calibrated to it step by step."""
    bias: Curve
    """Critic offset: the unwhitened token-mean advantage of a batch is about ``-bias``."""
    grad_norm: Curve
    """Median ``critic/grad_norm``."""
    grad_clip: float
    """Critic gradient clip."""
    lr: float
    """Critic learning rate."""
    grad_norm_spread: float = 0.5
    """Log-normal sigma of the grad norm."""
    grad_norm_range: tuple[float, float] = (0.0, float("inf"))
    """Bounds the grad norm is clipped to (the seed's reported range)."""
    grad_norm_tail: float = 0.0
    """Share of steps whose grad norm is drawn from the fat tail 30-70 instead."""
    value_noise: float = 0.15
    """Trajectory-level critic error variance as a share of the return variance."""
    whiten: bool = False
    """Whether the trainer whitened the advantages over the batch."""
    gamma: float = 1.0
    lam: float = 1.0
    ppo_epochs: int = 1


@dataclass(frozen=True)
class Training:
    """Actor-side scalars logged per step."""

    actor_lr: float
    actor_grad_norm: Curve
    """Median ``actor/grad_norm``."""
    entropy: Curve = field(default_factory=lambda: Curve(((0, 0.55), (300, 0.35)), "chosen"))
    warmup_steps: int = 0
    """Linear LR warm-up (``actor/lr`` rises from 0 to ``actor_lr``)."""


@dataclass(frozen=True)
class RewardChannels:
    """Two reward channels, the seed's format (binary) and correctness (0-1) setting."""

    format_rate: Curve
    """Share of trajectories with a well-formed submission (format reward 1)."""
    correctness_spread: Curve
    """Std of correctness between members of one group, before rounding to passed/target tests."""
    correctness_level: Curve
    """Logit of the mean correctness of an average task."""
    weights: tuple[float, float] = (1.0, 1.0)
    """Weights of (format, correctness) in the summed reward."""


@dataclass(frozen=True)
class Event:
    """Something injected at given steps, recorded in the truth file."""

    kind: str
    """``all_negative_batch``, ``grad_norm_spike``, ..."""
    steps: tuple[int, ...]
    value: float | None = None
    doc: str = ""


@dataclass(frozen=True)
class ResumeLR:
    """A run resumed from a checkpoint whose LR scheduler overrode the configured LR."""

    configured_lr: float
    """Critic LR in the config after the resume."""
    checkpoint_lr: float
    """Critic LR stored in the checkpoint's scheduler state (what the run logs)."""
    actor_lr: float
    resume_step: int
    """First step after the resume."""
    fixed_step: int
    """First step after resuming again with only model and optimizer state loaded."""
    weight_delta_ratio: float
    """Ratio of critic weight-update norms at the checkpoint LR vs the configured one."""


@dataclass(frozen=True)
class Scenario:
    """A seeded run recipe; see :data:`trajlens.synth.scenarios.SCENARIOS`."""

    name: str
    title: str
    summary: str
    """What the run is, in a paragraph (README)."""
    findings: tuple[str, ...]
    """What a user should find in it, one line each (README)."""
    steps: int
    batch: int
    """Trajectories per step."""
    group_size: int = 1
    tokens_per_trajectory: int = 2000
    tool_calls_per_trajectory: int = 40
    max_calls: int = 100
    estimator: str | None = None
    harness: Harness = Harness("sao-swe", editor=True, think=True, submit_tool=True)
    behaviour: Behaviour | None = None
    outcome: Outcome | None = None
    critic: Critic | None = None
    training: Training | None = None
    rewards: RewardChannels | None = None
    events: tuple[Event, ...] = ()
    resume: ResumeLR | None = None
    log_probs: bool = False
    """Whether to write per-token log-probabilities."""
    log_advantages: bool = False
    """Whether to write, as ``logged_advantages``, the per-token advantages the run trained with
    (its config's estimator over each step's batch), as a verl dump holds them."""
    config_extra: tuple[tuple[tuple[str, ...], Any], ...] = ()
    """Further entries of the logged run config, as (path of keys, value) pairs."""

    def event_steps(self, kind: str) -> tuple[int, ...]:
        return tuple(s for e in self.events if e.kind == kind for s in e.steps)
