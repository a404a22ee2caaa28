"""The causal generator: a behaviour-level training loop in which drift emerges from the estimator.

Each step of a :class:`~trajlens.synth.causal_spec.CausalScenario`:

1. samples ``batch`` trajectories from the current policy: every call's class is drawn from
   ``softmax(theta)`` (until the stop class, where the scenario has one), with token lengths
   per class (lognormal around the class medians);
2. scores them with the scenario's reward model: success logit
   ``base - difficulty + sum_c effect_c * min(count_c, cap_c) - penalty * max(0, calls - budget)``,
   a Bernoulli outcome (or two channels: format and correctness);
3. for GAE, writes critic values ``V = level + quality * (p - level) + noise`` on every token;
4. computes advantages with the run's estimator through :func:`trajlens.estimators.adapters`
   and the loss weights of its aggregation through :func:`trajlens.estimators.aggregation_weights`;
5. gives every call its push, ``sum over its credited tokens of w_t * A_t`` (the token rule of
   :mod:`trajlens.attribution._spans`), and updates the logits by policy gradient through the
   softmax: ``theta += lr * sum_calls push * (onehot(class) - softmax(theta))``;
6. moves the critic level towards the batch mean reward by the critic's learning rate.

A scenario with a ``forced_final`` class ends every trajectory with one call of it (a final
submit): the policy never chooses it, and its calls move no logit.

Nothing of the drift is injected: the scenario sets the inputs (policy at step 1, lengths,
reward model, hard steps, critic quality, estimator, aggregation, learning rate), and the run
writes what the loop did. Random draws come from generators seeded by ``(seed, step)`` (not by
the scenario), and classes are drawn by inverse CDF from shared uniforms, so two twins with the
same seed see the same tasks and draw the same calls until their policies differ.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import polars as pl
import pyarrow as pa

from trajlens.errors import ConfigError
from trajlens.run.quarters import quarters
from trajlens.steps import steps_text
from trajlens.store.layout import RunDirWriter
from trajlens.synth import commands as cmd
from trajlens.synth._tokens import VALUE_QUANTUM
from trajlens.synth.causal_spec import CAUSAL_SCENARIOS, CausalScenario
from trajlens.synth.generate import SynthResult
from trajlens.synth.tasks import task_pool
from trajlens.synth.truth import TRUTH_FILE, TRUTH_FORMAT, _rounded

CAUSAL_GENERATOR_VERSION = "1"
LENGTH_SIGMA = 0.3
"""Lognormal sigma of token lengths around each class's medians."""
TASK_POOL_SIZE = 400
CONVERGED_BATCH = 4096
"""Trajectories (or groups) sampled once to set a converged critic's starting level."""

CAUSAL_DEFINITIONS: dict[str, str] = {
    "policy.<class>": "probability of the class under the policy's softmax at the start of the step",
    "calls.<class>": "calls of the class generated at the step",
    "think_share": "think calls / all calls of the step",
    "mean_reward": "mean trajectory reward of the step",
    "critic_level": "the critic's level at the step (GAE runs)",
    "all_negative": "every model-token advantage of the step under the run's estimator is negative",
    "advantage_token_mean": "mean advantage over the step's model tokens under the run's estimator",
    "mean_calls": "mean calls per trajectory",
    "mean_model_tokens": "mean model tokens per trajectory",
    "format_rate": "share of trajectories whose format channel is 1 (two-channel runs)",
    "correctness_mean": "mean correctness channel (two-channel runs)",
}


@dataclass
class _Step:
    """One sampled step, flat over its calls and tokens."""

    calls: np.ndarray  # (B,) calls per trajectory
    classes: np.ndarray  # (C,) class index per call, trajectory by trajectory
    call_trajectory: np.ndarray  # (C,)
    reasoning: np.ndarray
    call_tokens: np.ndarray
    observation: np.ndarray
    token_start: np.ndarray  # within the trajectory
    token_end: np.ndarray
    offsets: np.ndarray  # (B + 1,) trajectory starts in the flat token arrays
    model_mask: np.ndarray  # flat bool
    success_probability: np.ndarray  # (B,)
    reward: np.ndarray  # (B,)
    channels: np.ndarray | None  # (B, 2) format, correctness
    truncated: np.ndarray  # (B,) bool
    task: np.ndarray  # (B,) index into the task pool


def generate_causal(
    scenario: str | CausalScenario,
    out: Path | str,
    *,
    steps: int | None = None,
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
) -> SynthResult:
    """Run the training loop of ``scenario`` and write the run directory ``out`` with ``truth.json``."""
    spec = _scenario(scenario)
    total_steps = spec.steps if steps is None else steps
    if total_steps < 1:
        raise ConfigError([f"steps must be at least 1, found {total_steps}"])
    out = Path(out)
    if out.exists():
        raise ConfigError([f"{out} already exists; choose a new directory"])
    rows: list[dict[str, Any]] = []
    counts = {"trajectories": 0, "tool_calls": 0, "tokens": 0}
    with RunDirWriter(out, _runs_table(spec, seed)) as writer:
        for state in _training_loop(spec, total_steps, seed):
            for table, frame in _tables(spec, state.step, seed, state.sample, state.frames, state.pool).items():
                writer.write_step(table, frame)
            writer.write_step("step_metrics", _metrics(spec, state.step, state.sample, state.values, state.level))
            rows.append(state.truth)
            counts["trajectories"] += len(state.sample.calls)
            counts["tool_calls"] += len(state.sample.classes)
            counts["tokens"] += int(state.sample.offsets[-1])
            if on_step is not None:
                on_step(state.step)
    truth = _write_truth(out, spec, seed, total_steps, rows)
    return SynthResult(spec.name, spec.name, out, truth, total_steps, counts["trajectories"], counts["tool_calls"],
                       counts["tokens"])


def simulate_causal(scenario: str | CausalScenario, *, steps: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """Run the training loop without writing a run: the per-step truth rows (policy, calls, reward...)."""
    spec = _scenario(scenario)
    return [state.truth for state in _training_loop(spec, spec.steps if steps is None else steps, seed)]


@dataclass
class _LoopState:
    step: int
    sample: _Step
    frames: dict[str, pl.DataFrame]
    values: np.ndarray | None
    level: float | None
    """The critic level the step's values were drawn with."""
    truth: dict[str, Any]
    pool: Any


def _training_loop(spec: CausalScenario, steps: int, seed: int) -> Iterator[_LoopState]:
    """Sample, score, estimate, push and update, step after step (the module docstring's six stages)."""
    pool = task_pool(np.random.default_rng([seed, 0, 7]), TASK_POOL_SIZE)
    theta = np.array([c.logit for c in spec.classes], dtype=np.float64)
    forced = spec.class_names.index(spec.forced_final) if spec.forced_final else None
    if forced is not None:
        theta[forced] = -np.inf  # never chosen by the policy; the loop appends it to every trajectory
    level = None
    if spec.critic is not None:
        level = spec.critic.initial_level
        if level is None:  # a converged critic at the start: the initial policy's mean reward
            wide = replace(spec, batch=CONVERGED_BATCH * spec.group_size, hard_steps=None)
            level = float(_sample_step(wide, 0, seed, _softmax(theta), pool).reward.mean())
    for step in range(1, steps + 1):
        policy = _softmax(theta)
        sample = _sample_step(spec, step, seed, policy, pool)
        values = _critic_values(spec, step, seed, sample, level) if spec.critic else None
        frames = _frames(spec, step, sample, values)
        advantages, all_negative, token_mean = _advantages(spec, frames, sample)
        push = _pushes(spec, sample, advantages)
        chosen = sample.classes != forced if forced is not None else slice(None)
        theta = theta + spec.learning_rate * _natural_gradient(sample.classes[chosen], push[chosen], policy, forced)
        truth = _truth_row(spec, step, policy, sample, level, all_negative, token_mean)
        yield _LoopState(step, sample, frames, values, level, truth, pool)
        if spec.critic:
            level += spec.critic.learning_rate * (float(sample.reward.mean()) - level)


def _scenario(scenario: str | CausalScenario) -> CausalScenario:
    if isinstance(scenario, CausalScenario):
        return scenario
    if scenario not in CAUSAL_SCENARIOS:
        raise ConfigError([f"unknown causal scenario {scenario!r} (known: {', '.join(CAUSAL_SCENARIOS)})"])
    return CAUSAL_SCENARIOS[scenario]


def _natural_gradient(classes: np.ndarray, push: np.ndarray, policy: np.ndarray, fixed: int | None = None) -> np.ndarray:
    """Natural gradient of ``sum_j push_j * log softmax(theta)[c_j]`` over the class logits.

    The Fisher matrix of a softmax is ``diag(pi) - pi pi^T``; preconditioning the plain gradient
    ``sum_j push_j (onehot(c_j) - pi)`` by it gives ``sum_{j in c} push_j / pi_c`` up to a shift
    common to all logits (removed, so the logits stay centred). Each class's logit moves by the
    total push of its calls per unit of probability: about (calls in the batch) x (the class's
    mean push per call), so a rare class is moved by its credit, not by its rarity.
    """
    totals = np.bincount(classes, weights=push, minlength=policy.size)
    step = totals / np.maximum(policy, 1e-12)  # F^+ g for the softmax Fisher F = diag(pi) - pi pi^T
    if fixed is None:
        return step - step.mean()
    # a forced class (``fixed``) is outside the policy's choice: its calls move no logit, its logit stays put
    chosen = np.arange(policy.size) != fixed
    return np.where(chosen, step - step[chosen].mean(), 0.0)


def _softmax(theta: np.ndarray) -> np.ndarray:
    z = np.exp(theta - theta.max())
    return z / z.sum()


def _sample_step(spec: CausalScenario, step: int, seed: int, policy: np.ndarray, pool) -> _Step:
    task_rng = np.random.default_rng([seed, step, 1])
    rng = np.random.default_rng([seed, step, 2])
    batch, group = spec.batch, spec.group_size
    prompts = batch // group
    task = np.repeat(task_rng.choice(len(pool), size=prompts, replace=prompts > len(pool)), group)
    difficulty = np.repeat(task_rng.normal(0.0, spec.task_spread, prompts), group)
    if spec.hard_steps and step in spec.hard_steps.steps:
        difficulty = difficulty + spec.hard_steps.offset
    width = spec.calls_per_trajectory
    uniforms = rng.random((batch, width))
    drawn = np.minimum(np.searchsorted(np.cumsum(policy), uniforms), len(policy) - 1)
    if spec.forced_final is not None:  # the policy chooses all but the last call, which is the forced class
        drawn[:, -1] = spec.class_names.index(spec.forced_final)
    if spec.stop_class is not None:
        stop = spec.class_names.index(spec.stop_class)
        is_stop = drawn == stop
        stopped = is_stop.any(axis=1)
        calls = np.where(stopped, is_stop.argmax(axis=1) + 1, width)
        truncated = ~stopped
    else:
        calls = np.full(batch, width)
        truncated = np.zeros(batch, dtype=bool)
    keep = np.arange(width)[None, :] < calls[:, None]
    classes = drawn[keep]
    call_trajectory = np.repeat(np.arange(batch), calls)
    effect = np.array([c.success_effect for c in spec.classes])
    cap = np.array([c.effect_cap for c in spec.classes])
    per_class = np.zeros((batch, len(policy)))
    np.add.at(per_class, (call_trajectory, classes), 1.0)
    logit = spec.success_base - difficulty + (effect * np.minimum(per_class, cap)).sum(axis=1)
    logit = logit - spec.length_penalty * np.maximum(0, calls - spec.length_budget)
    probability = 1.0 / (1.0 + np.exp(-logit))
    if spec.stop_class is not None:
        probability = np.where(truncated, 0.0, probability)
    lengths = rng.lognormal(0.0, LENGTH_SIGMA, (3, classes.size))
    medians = np.array([[c.reasoning_tokens, c.call_tokens, c.observation_tokens] for c in spec.classes], dtype=float)
    reasoning = np.round(medians[classes, 0] * lengths[0]).astype(np.int64)
    call_tokens = np.maximum(1, np.round(medians[classes, 1] * lengths[1]).astype(np.int64))
    observation = np.maximum(1, np.round(medians[classes, 2] * lengths[2]).astype(np.int64))
    last = np.cumsum(calls) - 1
    observation[last] = 0  # the last call's output is not fed back: the episode ends on a model token
    channels = None
    if spec.channels is not None:
        c = spec.channels
        noise = rng.normal(0.0, c.correctness_noise, batch)
        correctness = c.correctness_scale / (1.0 + np.exp(-(logit + noise)))
        submitted = per_class[:, spec.class_names.index("submit")] > 0
        channels = np.stack([submitted.astype(float), np.round(correctness, 3)], axis=1)
        reward = c.format_weight * channels[:, 0] + c.correctness_weight * channels[:, 1]
    else:
        tests = pool.tests[task]
        passed = (rng.random((batch, int(tests.max()))) < probability[:, None]) & (np.arange(int(tests.max()))[None, :] < tests[:, None])
        reward = (passed.sum(axis=1) / tests).astype(float)  # share of the task's target tests that pass
        if spec.truncation_reward is not None:
            reward = np.where(truncated, spec.truncation_reward, reward)
    segment = np.stack([reasoning + call_tokens, observation], axis=1).ravel()
    per_trajectory = np.bincount(call_trajectory, weights=reasoning + call_tokens + observation, minlength=batch)
    offsets = np.concatenate([[0], np.cumsum(per_trajectory)]).astype(np.int64)
    model_mask = np.repeat(np.tile([True, False], classes.size), segment)
    call_start_flat = np.concatenate([[0], np.cumsum(segment)])[0::2][:-1]
    token_start = call_start_flat - offsets[call_trajectory] + reasoning
    token_end = token_start + call_tokens
    return _Step(calls, classes, call_trajectory, reasoning, call_tokens, observation, token_start, token_end,
                 offsets, model_mask, probability, reward, channels, truncated, task)


def _critic_values(spec: CausalScenario, step: int, seed: int, sample: _Step, level: float) -> np.ndarray:
    """Flat per-token values: the trajectory's value plus a small step at every call."""
    critic = spec.critic
    assert critic is not None
    rng = np.random.default_rng([seed, step, 3])
    batch = len(sample.calls)
    trajectory_value = level + critic.quality * (sample.success_probability - level) + rng.normal(0.0, critic.noise, batch)
    call_step = rng.normal(0.0, critic.call_noise, sample.classes.size)
    call_value = trajectory_value[sample.call_trajectory] + call_step
    lengths = np.diff(sample.offsets)
    per_call_tokens = sample.reasoning + sample.call_tokens + sample.observation
    values = np.repeat(call_value, per_call_tokens)
    assert values.size == lengths.sum()
    return (np.round(values / VALUE_QUANTUM) * VALUE_QUANTUM).astype(np.float32)


def _list(flat: np.ndarray, offsets: np.ndarray, kind: pa.DataType) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat, kind))


def _frames(spec: CausalScenario, step: int, sample: _Step, values: np.ndarray | None) -> dict[str, pl.DataFrame]:
    """The step's trajectories and tokens as the estimators read them."""
    batch = len(sample.calls)
    ids = [f"{spec.name}-s{step:04d}-t{i:03d}" for i in range(batch)]
    groups = [f"{spec.name}-s{step:04d}-g{i // spec.group_size:03d}" for i in range(batch)]
    model_tokens = np.bincount(sample.call_trajectory, weights=sample.reasoning + sample.call_tokens, minlength=batch)
    channel_names = ("format", "correctness")
    channels = [
        [{"name": n, "value": float(v)} for n, v in zip(channel_names, row)] for row in sample.channels
    ] if sample.channels is not None else [[] for _ in range(batch)]
    trajectories = pl.DataFrame({
        "run_id": [spec.name] * batch, "step": [step] * batch, "trajectory_id": ids, "group_id": groups,
        "reward": sample.reward.astype(float), "reward_channels": channels,
        "model_tokens": model_tokens.astype(np.int64),
    })
    last_model = sample.offsets[1:] - 1  # the last token of every trajectory is a model token
    token_rewards = np.zeros(int(sample.offsets[-1]), dtype=np.float32)
    token_rewards[last_model] = sample.reward
    tokens = {
        "run_id": pa.array([spec.name] * batch), "step": pa.array([step] * batch, pa.int64()),
        "trajectory_id": pa.array(ids),
        "response_mask": _list(sample.model_mask, sample.offsets, pa.bool_()),
        "values": _list(values, sample.offsets, pa.float32()) if values is not None else pa.nulls(batch, pa.list_(pa.float32())),
        "token_rewards": _list(token_rewards, sample.offsets, pa.float32()),
    }
    return {"trajectories": trajectories, "tokens": pl.from_arrow(pa.table(tokens))}


def _advantages(spec: CausalScenario, frames: dict[str, pl.DataFrame], sample: _Step) -> tuple[np.ndarray, bool, float]:
    """Flat per-token advantages under the run's estimator, and whether all model tokens are negative."""
    from trajlens.estimators import recompute

    options = dict(spec.estimator_options)
    if spec.channels is not None:
        options["channels"] = ["format", "correctness"]
    result = recompute(frames["trajectories"], frames["tokens"], spec.estimator, **options)
    if "token_advantages" in result.columns:
        flat = result["token_advantages"].explode().to_numpy().astype(np.float64)
    else:
        flat = np.repeat(result["advantage"].to_numpy().astype(np.float64), np.diff(sample.offsets))
    model = flat[sample.model_mask]
    return flat, bool((model < 0).all()), float(model.mean())


def _pushes(spec: CausalScenario, sample: _Step, advantages: np.ndarray) -> np.ndarray:
    """Each call's push: per-token loss weight of its trajectory times the sum of its tokens' advantages."""
    import torch

    from trajlens.attribution._spans import credited_spans, span_sums
    from trajlens.estimators import aggregation_weights

    lengths = np.diff(sample.offsets)
    width = int(lengths.max())
    padded = np.zeros((len(lengths), width), dtype=bool)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    position = np.arange(sample.offsets[-1]) - np.repeat(sample.offsets[:-1], lengths)
    padded[rows, position] = sample.model_mask
    weights = aggregation_weights(torch.from_numpy(padded), spec.aggregation).per_token_weight.numpy()
    spans = credited_spans(sample.call_trajectory, sample.token_end)
    sums, _ = span_sums(advantages, sample.model_mask, sample.offsets, sample.call_trajectory, spans)
    return weights[sample.call_trajectory] * sums


def _runs_table(spec: CausalScenario, seed: int) -> pa.Table:
    algorithm: dict[str, Any] = {"adv_estimator": spec.estimator, **spec.estimator_options}
    if "whiten" in algorithm:
        algorithm["whiten_advantages"] = algorithm.pop("whiten")
    config = {  # verl's key layout, as the curve-driven runs write it
        "algorithm": algorithm,
        "actor_rollout_ref": {"actor": {"loss_agg_mode": spec.aggregation},
                              "rollout": {"n": spec.group_size, "max_turns": spec.calls_per_trajectory}},
        "data": {"train_batch_size": spec.batch // spec.group_size},
        "synth": {"generator": f"trajlens.synth.causal/{CAUSAL_GENERATOR_VERSION}", "scenario": spec.name,
                  "seed": seed, "policy_learning_rate": spec.learning_rate},
        **({"trainer": spec.trainer} if spec.trainer else {}),
        **({"critic": {"level_learning_rate": spec.critic.learning_rate, "quality": spec.critic.quality,
                       "noise": spec.critic.noise}} if spec.critic else {}),
    }
    return pa.table({
        "run_id": [spec.name], "name": [spec.title], "estimator": [spec.estimator],
        "config": [json.dumps(config, sort_keys=True)], "source_format": ["synth-causal"], "source": [spec.name],
    })


def _tables(spec: CausalScenario, step: int, seed: int, sample: _Step, frames: dict[str, pl.DataFrame], pool) -> dict[str, pa.Table]:
    trajectories = frames["trajectories"]
    batch = len(sample.calls)
    ids = trajectories["trajectory_id"].to_list()
    observation_tokens = np.bincount(sample.call_trajectory, weights=sample.observation, minlength=batch).astype(np.int64)
    resolved = sample.reward >= 0.5 if sample.channels is None else sample.channels[:, 1] >= 0.5 * spec.channels.correctness_scale
    exit_status = np.where(sample.truncated, "max_calls", "submitted")
    trajectory_table = pa.table({
        "run_id": pa.array([spec.name] * batch), "step": pa.array([step] * batch, pa.int64()),
        "trajectory_id": pa.array(ids), "group_id": pa.array(trajectories["group_id"].to_list()),
        "task_id": pa.array([pool.task_id[i] for i in sample.task]), "split": pa.array(["train"] * batch),
        "reward": pa.array(sample.reward.astype(float)),
        "reward_channels": trajectories["reward_channels"].to_arrow(),
        "resolved": pa.array(resolved.tolist()), "exit_status": pa.array(exit_status.tolist()),
        "num_turns": pa.array(sample.calls.astype(np.int32)), "model_tokens": trajectories["model_tokens"].to_arrow(),
        "observation_tokens": pa.array(observation_tokens), "reasoning_tokens": pa.array(
            np.bincount(sample.call_trajectory, weights=sample.reasoning, minlength=batch).astype(np.int64)),
        "source": pa.array([f"{spec.name}/step={step}"] * batch),
    })
    rng = np.random.default_rng([seed, step, 4])
    draws = rng.integers(0, 2**31, size=sample.classes.size)
    names = spec.class_names
    rendered = []
    first_call = np.concatenate([[0], np.cumsum(sample.calls)[:-1]])
    for b in range(batch):
        t = sample.task[b]
        ctx = cmd.context(int(pool.repo[t]), int(pool.module[t]), int(pool.symbol[t]), int(pool.tests[t]),
                          bool(resolved[b]), int(draws[first_call[b]]))
        for j in range(first_call[b], first_call[b] + sample.calls[b]):
            klass = names[sample.classes[j]]
            empty = spec.classes[sample.classes[j]].empty_thought
            rendered.append(cmd.render(klass, ctx, spec.harness, int(draws[j]), empty))
    call_index = np.arange(sample.classes.size) - np.repeat(first_call, sample.calls)
    call_table = pa.table({
        "run_id": pa.array([spec.name] * sample.classes.size), "step": pa.array([step] * sample.classes.size, pa.int64()),
        "trajectory_id": pa.array([ids[b] for b in sample.call_trajectory]),
        "call_index": pa.array(call_index.astype(np.int32)), "turn": pa.array(call_index.astype(np.int32)),
        "tool_name": pa.array([r.tool_name for r in rendered]), "arguments": pa.array([r.arguments for r in rendered]),
        "command": pa.array([r.command for r in rendered], pa.string()),
        "observation": pa.array([r.observation for r in rendered]),
        "return_code": pa.array([r.return_code for r in rendered], pa.int32()),
        "token_start": pa.array(sample.token_start.astype(np.int64)), "token_end": pa.array(sample.token_end.astype(np.int64)),
        "format_error": pa.array([False] * sample.classes.size),
    })
    tokens = frames["tokens"].to_arrow()
    tokens = tokens.append_column("log_probs", pa.nulls(batch, pa.list_(pa.float32())))
    if spec.critic is None:  # outcome estimators: the mask gives the spans; rewards sit in trajectories
        tokens = tokens.set_column(tokens.schema.get_field_index("token_rewards"), "token_rewards",
                                   pa.nulls(batch, pa.list_(pa.float32())))
    return {"trajectories": trajectory_table, "tool_calls": call_table, "tokens": tokens}


def _metrics(spec: CausalScenario, step: int, sample: _Step, values: np.ndarray | None, level: float | None) -> pa.Table:
    # verl's response length counts the response's attention mask: the model's tokens and the
    # observations between them (the trajectories' model_tokens count the first alone).
    lengths = np.diff(sample.offsets)
    metrics = {
        "response_length/mean": float(lengths.mean()),
        "num_turns/mean": float(sample.calls.mean()),
        "critic/score/mean": float(sample.reward.mean()),
    }
    if values is not None and level is not None:
        metrics["critic/values/mean"] = float(values[sample.model_mask].mean())
    names = sorted(metrics)
    return pa.table({"run_id": [spec.name] * len(names), "step": pa.array([step] * len(names), pa.int64()),
                     "name": names, "value": [metrics[n] for n in names]})


def _truth_row(spec: CausalScenario, step: int, policy: np.ndarray, sample: _Step, level: float | None,
               all_negative: bool, token_mean: float) -> dict[str, Any]:
    names = spec.class_names
    counts = np.bincount(sample.classes, minlength=len(names))
    row: dict[str, Any] = {"step": step, **{f"policy.{n}": float(p) for n, p in zip(names, policy)}}
    row.update({f"calls.{n}": int(c) for n, c in zip(names, counts)})
    row["calls"] = int(counts.sum())
    row["think_share"] = float(counts[names.index("think")] / counts.sum()) if "think" in names else 0.0
    row["mean_reward"] = float(sample.reward.mean())
    row["mean_calls"] = float(sample.calls.mean())
    row["mean_model_tokens"] = float(sample.model_mask.sum() / len(sample.calls))
    row["all_negative"] = all_negative
    row["advantage_token_mean"] = token_mean
    if spec.critic is not None:
        row["critic_level"] = float(level) if level is not None else None
    if sample.channels is not None:
        row["format_rate"] = float(sample.channels[:, 0].mean())
        row["correctness_mean"] = float(sample.channels[:, 1].mean())
    return row


def unmoved(spec: CausalScenario, rows: list[dict[str, Any]]) -> dict[str, str]:
    """The drifts ``spec`` declares (:attr:`CausalScenario.truth`) that the loop's own truth
    ``rows`` did not make, each with what stood still: ``policy`` (the class's own probability
    moved less than attribution's drift threshold, first quarter of the steps to last),
    ``length`` (the mean model tokens moved less than its length threshold) or ``channel`` (a
    reward channel's rate did not fall by attribution's collapse ratio). A seed or size that
    does not reach a scenario's drift has none to find."""
    from trajlens.attribution.causes import CHANNEL_PREFIX, COLLAPSE_RULE, LENGTH_RULE
    from trajlens.attribution.drift import DriftConfig
    from trajlens.run.change import ratio

    steps = [row["step"] for row in rows]
    split = quarters(steps)  # attribution's first and last quarter
    still = {}
    for expected in spec.truth:
        name = expected.primary_class
        if rows and f"policy.{name}" in rows[0]:
            first, last = split.means(steps, [row[f"policy.{name}"] for row in rows])
            if abs(last - first) < DriftConfig().min_change:
                still[name] = "policy"
        elif rows and name == "response length":
            first, last = split.means(steps, [row["mean_model_tokens"] for row in rows])
            if ratio(last, first, "increase" if last > first else "decrease") < LENGTH_RULE.min_ratio:
                still[name] = "length"
        elif rows and name.startswith(CHANNEL_PREFIX) and f"{name.removeprefix(CHANNEL_PREFIX)}_rate" in rows[0]:
            first, last = split.means(steps, [row[f"{name.removeprefix(CHANNEL_PREFIX)}_rate"] for row in rows])
            if len(set(steps)) < 2 or ratio(last, first, "decrease") < COLLAPSE_RULE.min_ratio:
                still[name] = "channel"
    return still


def moved_undeclared(spec: CausalScenario, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The classes the loop's policy moved though ``spec`` declares no drift of them: each class's
    own probability in the loop's truth ``rows`` moved by attribution's drift threshold or more,
    first quarter of the steps to last (as :func:`unmoved` reads the declared ones). A control
    run makes none by design; at some seeds its policy drifts all the same (a class that earns
    reward grows), and attribution is right to find that drift."""
    from trajlens.attribution.drift import DriftConfig

    declared = {expected.primary_class for expected in spec.truth}
    steps = [row["step"] for row in rows]
    split = quarters(steps)
    moved = []
    for name in spec.class_names:
        if name in declared or name == spec.forced_final or not rows or f"policy.{name}" not in rows[0]:
            continue
        first, last = split.means(steps, [row[f"policy.{name}"] for row in rows])
        if abs(last - first) >= DriftConfig().min_change:
            moved.append({"primary_class": name, "direction": "grew" if last > first else "decayed",
                          "policy_first": float(first), "policy_last": float(last)})
    return moved


def _write_truth(out: Path, spec: CausalScenario, seed: int, steps: int, rows: list[dict[str, Any]]) -> Path:
    per_step = {k: [row.get(k) for row in rows] for k in dict.fromkeys(k for row in rows for k in ["step", *row])}
    per_step["step"] = list(range(1, steps + 1))
    events = []
    if spec.hard_steps:
        events.append({"kind": "hard_tasks", "steps": [s for s in spec.hard_steps.steps if s <= steps],
                       "value": spec.hard_steps.offset, "doc": spec.hard_steps.doc})
    negative = [row_step for row_step, flag in zip(per_step["step"], per_step["all_negative"]) if flag]
    still = unmoved(spec, rows)
    document = {
        "format": TRUTH_FORMAT, "scenario": spec.name, "seed": seed, "run_id": spec.name, "causal": True,
        "generator": f"trajlens.synth.causal/{CAUSAL_GENERATOR_VERSION}",
        "sizes": {"steps": steps, "batch": spec.batch, "group_size": spec.group_size,
                  "calls_per_trajectory": spec.calls_per_trajectory},
        "inputs": {
            "estimator": spec.estimator, "estimator_options": spec.estimator_options, "aggregation": spec.aggregation,
            "learning_rate": spec.learning_rate, "classes": [c.__dict__ for c in spec.classes],
            "success_base": spec.success_base, "task_spread": spec.task_spread, "stop_class": spec.stop_class,
            "length_penalty": spec.length_penalty, "length_budget": spec.length_budget,
            "critic": spec.critic.__dict__ if spec.critic else None,
            "channels": spec.channels.__dict__ if spec.channels else None, "twin_of": spec.twin_of,
            **({"forced_final": spec.forced_final} if spec.forced_final else {}),
        },
        "definitions": CAUSAL_DEFINITIONS,
        "curves": {},
        "per_step": per_step,
        "events": events,
        "summary": {"all_negative_steps": negative, "expected": list(spec.expected),
                    # what attribution should say of the drifts the loop caused; a control run's may be no artefact
                    "verdicts": [asdict(v) for v in spec.truth if v.primary_class not in still],
                    # the scenario's drifts this seed and size did not make: nothing there to find
                    "not_moved": [{**asdict(v), "unmoved": still[v.primary_class]}
                                  for v in spec.truth if v.primary_class in still],
                    # the classes this seed's policy moved though the scenario declares no drift of them
                    "moved_undeclared": moved_undeclared(spec, rows),
                    "control": spec.control},
    }
    path = out / TRUTH_FILE
    path.write_text(json.dumps(_rounded(document), indent=1) + "\n")
    return path


def causal_readme(directory: Path, truth: dict[str, Any]) -> str:
    """The README of a causal run: inputs chosen, what emerged (read from ``truth.json``)."""
    spec = _scenario(truth["scenario"])
    ps = truth["per_step"]
    steps = np.array(ps["step"])
    sizes = truth["sizes"]

    def window(key: str, lo: int, hi: int) -> float:
        mask = (steps >= lo) & (steps <= hi)
        return float(np.mean(np.array(ps[key], dtype=float)[mask]))

    last = int(steps.max())
    quarter = max(1, last // 4)
    lines = [f"# {spec.name}: {spec.title}", "", spec.summary, "",
             "This run is *causal*: nothing of its behaviour is drawn from a curve. A behaviour-level training "
             "loop (`trajlens/synth/causal.py`) sampled every call from the policy, scored it, computed advantages "
             "with the estimator below through `trajlens.estimators`, and updated the policy by each call's push.",
             "", "## Inputs (chosen)", "",
             f"- {sizes['steps']} steps, {sizes['batch']} trajectories per step"
             + (f" in groups of {sizes['group_size']}" if sizes["group_size"] > 1 else " (one rollout per task)")
             + (f", calls until `{spec.stop_class}` (at most {spec.calls_per_trajectory})" if spec.stop_class
                else f", {spec.calls_per_trajectory} calls per trajectory"),
             f"- estimator `{spec.estimator}` with options `{json.dumps(spec.estimator_options)}`, "
             f"aggregation `{spec.aggregation}`, learning rate {spec.learning_rate} (natural gradient over the class logits)",
             "- classes (initial logit, median call / reasoning / observation tokens, success effect x cap): "
             + "; ".join(f"`{c.name}` {c.logit:+.1f}, {c.call_tokens}/{c.reasoning_tokens}/{c.observation_tokens}, "
                         f"{c.success_effect} x {c.effect_cap}" for c in spec.classes)]
    if spec.critic:
        lines.append(f"- critic: level moves {spec.critic.learning_rate:.0%} a step towards the batch reward; "
                     f"quality {spec.critic.quality}, noise {spec.critic.noise}")
    if spec.hard_steps:
        lines.append(f"- hard steps {spec.hard_steps.steps[0]}-{spec.hard_steps.steps[-1]}: {spec.hard_steps.doc}")
    if spec.twin_of:
        lines.append(f"- the twin of `{spec.twin_of}`: same seed, same tasks, same draws until the policies differ")
    lines += ["", "## What emerged (from truth.json)", ""]
    first = (1, quarter)
    final = (last - quarter + 1, last)
    if "think_share" in ps and any(ps["think_share"]):
        lines.append(f"- think share {window('think_share', *first):.2f} over steps {first[0]}-{first[1]}, "
                     f"{window('think_share', *final):.2f} over steps {final[0]}-{final[1]}")
    negative = truth["summary"]["all_negative_steps"]
    lines.append(f"- all-negative batches under the run's estimator: {steps_text(negative) or 'none'}")
    lines.append(f"- mean calls per trajectory {window('mean_calls', *first):.1f} -> {window('mean_calls', *final):.1f}; "
                 f"model tokens {window('mean_model_tokens', *first):.0f} -> {window('mean_model_tokens', *final):.0f}")
    lines.append(f"- mean reward {window('mean_reward', *first):.2f} -> {window('mean_reward', *final):.2f}")
    if "format_rate" in ps:
        lines.append(f"- format rate {window('format_rate', *first):.2f} -> {window('format_rate', *final):.2f}")
    lines += ["", "## What attribution should find", ""] + [f"- {e}" for e in spec.expected]
    lines += ["", "`truth.json` holds, per step, the policy (`policy.<class>`), the calls drawn (`calls.<class>`), the "
              "reward, the critic level and whether the batch was all-negative; `inputs` holds every setting above. "
              "Attribute it with `trajlens attribute STORE --run " + spec.name + "`.", ""]
    return "\n".join(lines)


def causal_index(entries: list[tuple[str, int, dict[str, Any]]]) -> str:
    """The causal section of ``sample_data/README.md``: (directory name, bytes, truth) per run."""
    total = sum(size for _, size, _ in entries)
    lines = ["## Causal runs", "",
             "Runs trained by a behaviour-level loop (`trajlens/synth/causal.py`): the policy is a softmax over "
             "call classes, updated by the push each call received from the run's estimator and loss aggregation. "
             "Drift in them is caused by the estimator, so attribution can be tested against it honestly "
             "(`trajlens attribute`, `docs/attribution.md`).", "",
             "| run | what it shows | steps x trajectories | size |", "|---|---|---|---|"]
    for name, size, truth in entries:
        spec = _scenario(truth["scenario"])
        lines.append(f"| [`{name}`]({name}/README.md) | {spec.title} | {truth['sizes']['steps']} x "
                     f"{truth['sizes']['batch']} | {size / 1e6:.1f} MB |")
    lines += ["", f"Causal runs total: {total / 1e6:.1f} MB.", ""]
    return "\n".join(lines)
