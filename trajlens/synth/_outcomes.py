"""How a step's trajectories end: tasks, lengths in calls, exit status, resolution and rewards.

Rewards:

* single-channel runs (``sao-*``, ``grpo-leg``): 1.0 when the task is resolved, else partial
  credit ``partial_credit * passed / target`` with ``passed`` drawn below the target;
* ``multireward``: format (1 for a well-formed submission) plus correctness (share of target
  tests passing, in steps of 1/target), weights from the scenario. A trajectory that hits the
  turn limit submits nothing: format 0 and correctness 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trajlens.synth._params import StepParams
from trajlens.synth.spec import Scenario
from trajlens.synth.tasks import TaskPool

SUBMITTED = "submitted"
TIMEOUT = "timeout"
SANDBOX_ERROR = "sandbox_error"


@dataclass
class Outcomes:
    """Per-trajectory outcome columns of one step (B entries each)."""

    task: np.ndarray
    """Index into the task pool."""
    group: np.ndarray
    """Group number within the step."""
    calls: np.ndarray
    """Total tool calls (turns)."""
    think: np.ndarray
    """Of which think calls."""
    exit_status: list[str]
    resolved: np.ndarray
    reward: np.ndarray
    channels: np.ndarray | None
    """(B, 2) format and correctness, for multi-channel runs."""
    premature: np.ndarray
    """Submitted after a couple of calls without a fix."""
    shell: np.ndarray
    """Empty shells: the sandbox vanished after the first call."""

    @property
    def submitted(self) -> np.ndarray:
        return np.array([s == SUBMITTED for s in self.exit_status])


def sample_outcomes(scenario: Scenario, params: StepParams, pool: TaskPool, batch: int,
                    max_calls: int, rng: np.random.Generator) -> Outcomes:
    step = params.step
    group_size = scenario.group_size
    groups = batch // group_size
    all_negative = step in scenario.event_steps("all_negative_batch")
    shells_event = step in scenario.event_steps("grad_norm_spike")

    # tasks: distinct per group; an all-negative batch draws from the hardest quarter of the pool
    candidates = np.argsort(pool.difficulty)[-len(pool) // 4:] if all_negative else np.arange(len(pool))
    task_of_group = rng.choice(candidates, size=groups, replace=len(candidates) < groups)
    task = np.repeat(task_of_group, group_size)
    group = np.repeat(np.arange(groups), group_size)

    total_mean = params.useful_calls / max(1.0 - params.think_share, 0.05)
    calls = np.clip(np.rint(total_mean * rng.lognormal(0.0, params.turn_spread, batch)), 3, max_calls).astype(np.int64)
    timeout = (calls >= max_calls) | (rng.random(batch) < scenario.outcome.timeout_rate)
    premature = np.zeros(batch, dtype=bool)
    shell = np.zeros(batch, dtype=bool)
    channels = None

    if scenario.rewards is not None:
        fmt_ok = rng.random(batch) < scenario.rewards.format_rate.value(step)
        premature = fmt_ok & (rng.random(batch) < params.premature_submit)
        timeout = ~fmt_ok
        calls = np.where(timeout, max_calls, calls)
        calls = np.where(premature, rng.integers(2, 4, batch), calls)
    if shells_event:
        shell = rng.random(batch) < 0.25
        if not shell.any():  # a batch of empty shells holds one at least, however small the batch
            shell[rng.integers(batch)] = True
        timeout = timeout & ~shell
    calls = np.where(timeout & ~premature, max_calls, calls)
    calls = np.where(shell, 1, calls)

    think = rng.binomial(calls, params.think_share)
    think = np.minimum(think, calls - 1)
    think = np.where(shell | premature, 0, think)
    status = [SANDBOX_ERROR if s else (TIMEOUT if t else SUBMITTED) for s, t in zip(shell, timeout)]
    submitted = ~timeout & ~shell

    if scenario.rewards is not None:
        reward, channels, resolved = _channel_rewards(scenario, step, pool, task, submitted, premature, rng)
    else:
        reward, resolved = _single_reward(scenario, params, pool, task, submitted, all_negative, rng)
    return Outcomes(task, group, calls, think, status, resolved, reward, channels, premature, shell)


def _single_reward(scenario: Scenario, params: StepParams, pool: TaskPool, task: np.ndarray,
                   submitted: np.ndarray, all_negative: bool, rng: np.random.Generator):
    batch = task.size
    p = _sigmoid(_logit(scenario.outcome.pass_rate.value(params.step)) - 0.8 * pool.difficulty[task])
    resolved = submitted & (rng.random(batch) < p)
    if all_negative:
        resolved[:] = False
    elif scenario.critic is not None and batch >= 2:
        # a critic run must not stumble into an all-resolved or all-failed batch by chance: the
        # all-negative batches are the injected events only (see the scenario's events)
        if not resolved.any() and submitted.any():
            resolved[int(rng.choice(np.flatnonzero(submitted)))] = True
        if resolved.all():
            resolved[rng.integers(batch)] = False
    target = pool.tests[task]
    passed = rng.binomial(target - 1, 0.25)
    credit = scenario.outcome.partial_credit * passed / target
    if all_negative and np.ptp(credit) == 0 and scenario.outcome.partial_credit > 0:
        credit[0] = scenario.outcome.partial_credit / target[0]  # keep var(R) > 0: verl's EV needs it
        if np.ptp(credit) == 0:
            credit[0] = 0.0
    reward = np.where(resolved, 1.0, np.where(submitted, credit, 0.0))
    return reward, resolved


def _channel_rewards(scenario: Scenario, step: int, pool: TaskPool, task: np.ndarray,
                     submitted: np.ndarray, premature: np.ndarray, rng: np.random.Generator):
    spec = scenario.rewards
    batch = task.size
    level = spec.correctness_level.value(step) - 1.2 * pool.difficulty[task]
    mean = _sigmoid(level)
    raw = np.clip(mean + spec.correctness_spread.value(step) * rng.standard_normal(batch), 0.0, 1.0)
    target = pool.tests[task]
    correctness = np.rint(raw * target) / target
    correctness = np.where(submitted & ~premature, correctness, 0.0)
    fmt = submitted.astype(np.float64)
    channels = np.stack([fmt, correctness], axis=1)
    reward = channels @ np.asarray(spec.weights)
    resolved = submitted & (correctness >= 1.0)
    return reward, channels, resolved


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return float(np.log(p / (1 - p)))
