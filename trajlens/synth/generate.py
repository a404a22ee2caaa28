"""The generator: a scenario, a seed and sizes in; a run directory with its truth out.

One step at a time: draw the step's outcomes, tool calls and token arrays with vectorised NumPy,
write them through :class:`trajlens.store.layout.RunDirWriter` and forget them, so memory is
bounded by one step whatever the run's length. Every random draw comes from a generator seeded
by (seed, scenario, step), so the same arguments give byte-identical files.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa

from trajlens.errors import ConfigError
from trajlens.schema import SCHEMAS
from trajlens.store.layout import RunDirWriter
from trajlens.synth import _tokens, multireward
from trajlens.synth._episodes import EMPTY_THINK, StepCalls, step_calls
from trajlens.synth._metrics import MetricSource
from trajlens.synth._outcomes import Outcomes, sample_outcomes
from trajlens.synth._params import step_params, token_scale
from trajlens.synth.commands import CALL_CLASSES, CLASS_INDEX, TEST_SUITE, THINK
from trajlens.synth.scenarios import SCENARIOS
from trajlens.synth.spec import Scenario
from trajlens.synth.tasks import task_pool
from trajlens.synth.truth import TruthRecorder

if TYPE_CHECKING:
    from trajlens.estimators.spec import EstimatorChoice

GENERATOR_VERSION = "1"
CHANNELS = ("format", "correctness")
# Upper bounds of the sizes (checked by :func:`configure`). The largest documented runs are 1,000
# steps (docs/checks.md), 1,024 trajectories a step (the multireward seed batch), 50 tool calls
# and 60,000 tokens a trajectory (benchmarks/bench_synth.py: 64 x 60,000 = 3.8 M tokens a step);
# each bound leaves 10x or more room above them. A step is generated in memory: at the per-step
# bounds (a million tool calls, 50 M tokens) it takes some 4 GB and 25 s.
MAX_STEPS = 100_000
"""Most steps a run may have (100x the longest documented; at the defaults about 15 minutes)."""
MAX_STEP = 2**31 - 1
"""Largest step number a run may reach (``first_step + steps - 1``): far inside int64."""
MAX_BATCH = 16_384
"""Most trajectories a step (16x the multireward seed batch of 1,024)."""
MAX_TOOL_CALLS_PER_TRAJECTORY = 1_000
"""Largest mean number of tool calls a trajectory (20x the documented 50)."""
MAX_TOKENS_PER_TRAJECTORY = 200_000
"""Largest mean number of tokens a trajectory (3x the documented 60,000)."""
MAX_TOOL_CALLS_PER_STEP = 1_000_000
"""Largest batch x mean tool calls a trajectory (300x the documented 64 x 50)."""
MAX_TOKENS_PER_STEP = 50_000_000
"""Largest batch x mean tokens a trajectory (13x the documented 64 x 60,000)."""
MAX_SEED = 2**63 - 1
"""Largest seed: any int64."""


@dataclass(frozen=True)
class SynthResult:
    """What :func:`generate` wrote."""

    scenario: str
    run_id: str
    directory: Path
    """The run directory (canonical layout), with ``truth.json`` inside."""
    truth: Path
    steps: int
    trajectories: int
    tool_calls: int
    tokens: int
    extra_files: tuple[Path, ...] = ()
    """Files beside the tables other than the truth (the resume-lr metrics file and config)."""

    def moved(self, directory: Path) -> SynthResult:
        """The same result once the run directory has been moved to ``directory``."""

        def move(path: Path) -> Path:
            return directory / path.relative_to(self.directory)

        return replace(self, directory=directory, truth=move(self.truth),
                       extra_files=tuple(move(path) for path in self.extra_files))


def generate(
    scenario: str,
    out: Path | str,
    *,
    steps: int | None = None,
    batch: int | None = None,
    seed: int = 0,
    first_step: int = 1,
    tokens_per_trajectory: int | None = None,
    tool_calls_per_trajectory: int | None = None,
    log_probs: bool | None = None,
    log_advantages: bool | None = None,
    progress: bool = False,
    on_step: Callable[[int], None] | None = None,
) -> SynthResult:
    """Generate a run of ``scenario`` into the new directory ``out``.

    Args:
        scenario: a name in :data:`trajlens.synth.SCENARIOS`.
        out: run directory to create (must not exist).
        steps: training steps (default: the scenario's).
        first_step: number of the first step. Steps are independent draws, so steps 280-320 of
            a run started at 280 equal those of a run started at 1 with the same arguments.
        batch: trajectories per step, a multiple of the group size.
        seed: random seed; the same arguments give identical files.
        tokens_per_trajectory: mean tokens of a trajectory at step 1 (model and observation).
        tool_calls_per_trajectory: mean tool calls of a trajectory at step 1.
        log_probs: write per-token log-probabilities (default: the scenario's choice).
        log_advantages: write the per-token advantages the run trained with (its config's
            estimator over each step's batch) as ``logged_advantages``, what ``trajlens
            advantages --identify`` reads (default: the scenario's choice, off).
        progress: show a progress bar on stderr.
        on_step: called with each step number once it is written.

    The directory is written in place; on a failure what was written of it is left (``trajlens
    synth`` writes into a partial sibling folder and moves it into place at the end instead).

    Raises:
        ConfigError: every invalid argument at once (see :func:`configure` for the bounds).
    """
    spec = configure(scenario, out, steps=steps, batch=batch, seed=seed, first_step=first_step,
                     tokens_per_trajectory=tokens_per_trajectory, tool_calls_per_trajectory=tool_calls_per_trajectory,
                     log_probs=log_probs, log_advantages=log_advantages)
    directory = Path(out)
    if spec.resume is not None:
        from trajlens.synth._resume import generate_resume

        return generate_resume(spec, directory, seed)
    callback = on_step
    bar = None
    if progress:
        bar, callback = _progress(spec, on_step)
    try:
        return _generate(spec, directory, seed, first_step, callback)
    finally:
        if bar is not None:
            bar.stop()


PARAMETERS: dict[str, str] = {
    "out": "out", "steps": "steps", "batch": "batch", "seed": "seed", "first_step": "first_step",
    "tokens_per_trajectory": "tokens_per_trajectory", "tool_calls_per_trajectory": "tool_calls_per_trajectory",
}
"""How :func:`configure` names each argument in its errors: as :func:`generate`'s parameters."""
OPTIONS: dict[str, str] = {
    "out": "--out", "steps": "--steps", "batch": "--batch", "seed": "--seed", "first_step": "--first-step",
    "tokens_per_trajectory": "--tokens", "tool_calls_per_trajectory": "--calls",
}
"""How ``trajlens synth`` names them: as its options."""


def configure(
    scenario: str,
    out: Path | str,
    *,
    steps: int | None = None,
    batch: int | None = None,
    seed: int = 0,
    first_step: int = 1,
    tokens_per_trajectory: int | None = None,
    tool_calls_per_trajectory: int | None = None,
    log_probs: bool | None = None,
    log_advantages: bool | None = None,
    names: dict[str, str] = PARAMETERS,
) -> Scenario:
    """Check the arguments of :func:`generate` before any work, the same way for every scenario;
    the scenario with its sizes applied.

    Every size has an upper bound (see the ``MAX_*`` constants), so that a mistyped number fails
    at once rather than running for days, filling the disk or memory, or overflowing a step
    number. ``names`` says how an error names each argument (:data:`PARAMETERS` or the CLI's
    :data:`OPTIONS`).

    Raises:
        ConfigError: every invalid argument at once, one line each.
    """
    problems = []
    if scenario not in SCENARIOS:
        raise ConfigError([f"unknown scenario {scenario!r}: choose one of {', '.join(SCENARIOS)}"])
    spec = SCENARIOS[scenario]
    resume = spec.resume is not None

    def bad(name: str, value: int, low: int, high: int, why: str = "") -> bool:
        if low <= value <= high:
            return False
        problems.append(f"{names[name]} must be between {low:,} and {high:,}{why}, got {value}")
        return True

    if Path(out).exists():
        problems.append(f"{names['out']} {out}: already exists; choose a new folder")
    steps_bad = steps is not None and bad("steps", steps, 1, MAX_STEPS)
    total = spec.steps if steps is None or steps_bad else steps
    if resume and first_step != 1:
        problems.append(f"{names['first_step']} must be 1 for {scenario}, got {first_step}")
    else:
        bad("first_step", first_step, 1, MAX_STEP - total + 1,
            f" (with {total:,} steps, so that the last step is at most {MAX_STEP:,})")
    bad("seed", seed, 0, MAX_SEED)
    batch_bad = False
    if batch is not None:
        low = max(2, spec.group_size)
        if batch % spec.group_size:
            batch_bad = True
            problems.append(f"{names['batch']} must be a multiple of the group size {spec.group_size} and at least "
                            f"{low} for {scenario}, got {batch}")
        else:
            multiple = f" (a multiple of the group size {spec.group_size} for {scenario})" if spec.group_size > 1 else ""
            batch_bad = bad("batch", batch, low, MAX_BATCH, multiple)
    calls_bad = (tool_calls_per_trajectory is not None
                 and bad("tool_calls_per_trajectory", tool_calls_per_trajectory, 3, MAX_TOOL_CALLS_PER_TRAJECTORY))
    tokens_bad = (tokens_per_trajectory is not None
                  and bad("tokens_per_trajectory", tokens_per_trajectory, 50, MAX_TOKENS_PER_TRAJECTORY))
    if not resume:
        if spec.critic is not None and (spec.critic.gamma != 1.0 or spec.critic.lam != 1.0):
            problems.append(f"{scenario}: the value calibration assumes gamma = lambda = 1")
        size = batch if batch is not None else spec.batch
        calls = tool_calls_per_trajectory or spec.tool_calls_per_trajectory
        tokens = tokens_per_trajectory or spec.tokens_per_trajectory
        if not (batch_bad or calls_bad) and size * calls > MAX_TOOL_CALLS_PER_STEP:
            problems.append(f"{names['batch']} x {names['tool_calls_per_trajectory']} ({size:,} x {calls:,}) must be "
                            f"at most {MAX_TOOL_CALLS_PER_STEP:,} tool calls a step")
        if not (batch_bad or tokens_bad) and size * tokens > MAX_TOKENS_PER_STEP:
            problems.append(f"{names['batch']} x {names['tokens_per_trajectory']} ({size:,} x {tokens:,}) must be "
                            f"at most {MAX_TOKENS_PER_STEP:,} tokens a step")
    if problems:
        raise ConfigError(problems)
    changes: dict = {}
    if steps is not None:
        changes["steps"] = steps
    if batch is not None and not resume:
        changes["batch"] = batch
    if tokens_per_trajectory is not None:
        changes["tokens_per_trajectory"] = tokens_per_trajectory
    if tool_calls_per_trajectory is not None:
        changes["tool_calls_per_trajectory"] = tool_calls_per_trajectory
        changes["max_calls"] = max(4, round(spec.max_calls * tool_calls_per_trajectory / spec.tool_calls_per_trajectory))
    if log_probs is not None:
        changes["log_probs"] = log_probs
    if log_advantages is not None:
        changes["log_advantages"] = log_advantages
    return replace(spec, **changes)


def step_rng(seed: int, name: str, step: int) -> np.random.Generator:
    """The random generator of one step: independent of every other step and of the batch size."""
    return np.random.default_rng([seed, zlib.crc32(name.encode()), step])


def run_id(name: str, seed: int) -> str:
    """The scenario name for seed 0 (``sao-r6``), with the seed appended otherwise (``sao-r6-seed3``)."""
    return name if seed == 0 else f"{name}-seed{seed}"


def _generate(spec: Scenario, directory: Path, seed: int, first_step: int, on_step) -> SynthResult:
    pool = task_pool(step_rng(seed, spec.name, 0))
    rid = run_id(spec.name, seed)
    truth = TruthRecorder(_header(spec, seed, rid, first_step))
    metrics = MetricSource(spec)
    totals = np.zeros(3, dtype=np.int64)
    trained = _trained_choice(spec, seed) if spec.log_advantages else None
    with RunDirWriter(directory, _runs_table(spec, seed, rid)) as writer:
        for step in range(first_step, first_step + spec.steps):
            rng = step_rng(seed, spec.name, step)
            params = step_params(spec, step)
            outcomes = sample_outcomes(spec, params, pool, spec.batch, spec.max_calls, rng)
            scale = token_scale(spec, spec.tokens_per_trajectory, step)
            calls = step_calls(outcomes, params, pool, spec.harness, scale, rng)
            tokens = _tokens.layout(calls, outcomes.reward, spec.log_probs, rng)
            row = _step_truth(spec, params, outcomes, calls)
            computed = _computed_metrics(outcomes, calls, tokens)
            if spec.critic is not None:
                row.update(_critic_step(spec, step, outcomes, tokens, rng, computed))
            if spec.rewards is not None:
                lengths = np.bincount(np.repeat(np.arange(spec.batch), np.diff(tokens.offsets))[tokens.response_mask],
                                      minlength=spec.batch)
                stats = multireward.step_statistics(outcomes.channels, outcomes.group, lengths,
                                                    np.asarray(spec.rewards.weights), CHANNELS)
                row.update(stats)
                for k, name in enumerate(CHANNELS):
                    computed[f"reward/{name}/mean"] = float(outcomes.channels[:, k].mean())
                declared = multireward.advantages(multireward.DECLARED, outcomes.channels, outcomes.group, lengths,
                                                  np.asarray(spec.rewards.weights))
                computed["critic/advantages/mean"] = float(np.repeat(declared, lengths).mean())
                computed["critic/advantages/max"] = float(declared.max())
                computed["critic/advantages/min"] = float(declared.min())
            scalars = metrics.step(step, computed, rng)
            row.update({k: v for k, v in scalars.items() if k == "val/score"})
            truth.add(step, row)
            _write_step(writer, spec, rid, step, outcomes, calls, tokens, pool, scalars, trained)
            totals += (spec.batch, calls.codes.size, tokens.offsets[-1])
            if on_step is not None:
                on_step(step)
    path = truth.write(directory, _curves(spec), _events(spec, truth, range(first_step, first_step + spec.steps)))
    return SynthResult(spec.name, rid, directory, path, spec.steps, int(totals[0]), int(totals[1]), int(totals[2]))


def _step_truth(spec: Scenario, params, out: Outcomes, calls: StepCalls) -> dict:
    classes = calls.classes
    counts = np.bincount(classes, minlength=len(CALL_CLASSES))
    trajectory = np.repeat(np.arange(out.calls.size), calls.calls_per_trajectory)
    suite_runs = np.bincount(trajectory[classes == CLASS_INDEX[TEST_SUITE]], minlength=out.calls.size)
    row = {
        "think_share_target": params.think_share,
        "think_share": float(counts[CLASS_INDEX[THINK]] / max(classes.size, 1)),
        "calls": int(classes.size),
        **{f"calls.{c}": int(counts[i]) for i, c in enumerate(CALL_CLASSES)},
        "empty_think": int((calls.codes == EMPTY_THINK).sum()),
        "suite_run_rate_target": params.suite_rate,
        "suite_run_rate": float((suite_runs > 0).mean()),
        "readbacks": int(calls.readbacks.sum()),
        "edits": int(calls.edits.sum()),
        "num_turns_mean": float(out.calls.mean()),
        "reasoning_tokens_mean": float(np.add.reduceat(calls.reasoning_tokens, _starts(calls)).mean()),
        "resolved_rate": float(out.resolved.mean()),
        "reward_mean": float(out.reward.mean()),
        "timeouts": int(sum(s == "timeout" for s in out.exit_status)),
    }
    if spec.rewards is not None:
        row["premature_submits"] = int(out.premature.sum())
    return row


def _critic_step(spec: Scenario, step: int, out: Outcomes, tokens, rng, computed: dict) -> dict:
    c = spec.critic
    target = c.explained_variance.value(step)
    all_negative = step in spec.event_steps("all_negative_batch")
    _tokens.critic_values(tokens, out.reward, target, c.value_noise, c.bias.value(step), all_negative, rng)
    check = _tokens.check_advantages(tokens, out.reward)
    computed["critic/vf_explained_var"] = check.explained_variance
    computed["critic/values/mean"] = float(tokens.values[tokens.response_mask].mean())
    computed["critic/advantages/mean"] = 0.0 if c.whiten else check.token_mean
    return {
        "explained_variance_target": target,
        "explained_variance": check.explained_variance,
        "advantage_token_mean": check.token_mean,
        "advantage_negative_share": check.negative_share,
        "all_negative": check.all_negative,
        "all_positive": check.all_positive,
        "trajectories_negative": check.trajectory_signs[0],
        "trajectories_positive": check.trajectory_signs[1],
    }


def _computed_metrics(out: Outcomes, calls: StepCalls, tokens) -> dict:
    return {
        "critic/score/mean": float(out.reward.mean()),
        "num_turns/mean": float(out.calls.mean()),
        "response_length/mean": float(np.diff(tokens.offsets).mean()),
    }


def _write_step(writer: RunDirWriter, spec: Scenario, rid: str, step: int, out: Outcomes, calls: StepCalls,
                tokens, pool, scalars: dict, trained: EstimatorChoice | None = None) -> None:
    batch = out.calls.size
    ids = [f"s{step:04d}-t{i:04d}" for i in range(batch)]
    per_call = np.repeat(np.arange(batch), calls.calls_per_trajectory)
    model = np.bincount(per_call, calls.model_tokens, minlength=batch).astype(np.int64)
    observation = np.bincount(per_call, calls.observation_tokens, minlength=batch).astype(np.int64)
    reasoning = np.bincount(per_call, calls.reasoning_tokens, minlength=batch).astype(np.int64)
    if out.channels is not None:
        channels = [[{"name": n, "value": float(v)} for n, v in zip(CHANNELS, row)] for row in out.channels]
    else:
        channels = [[] for _ in range(batch)]
    trajectories = pa.table({
        "run_id": pa.array([rid] * batch),
        "step": pa.array(np.full(batch, step, np.int64)),
        "trajectory_id": pa.array(ids),
        "group_id": pa.array([f"s{step:04d}-g{g:03d}" for g in out.group]),
        "task_id": pa.array([pool.task_id[t] for t in out.task]),
        "split": pa.array(["train"] * batch),
        "reward": pa.array(out.reward.astype(np.float64)),
        "reward_channels": pa.array(channels, SCHEMAS["trajectories"].field("reward_channels").type),
        "resolved": pa.array(out.resolved.astype(bool)),
        "exit_status": pa.array(out.exit_status),
        "num_turns": pa.array(out.calls.astype(np.int32)),
        "model_tokens": pa.array(model),
        "observation_tokens": pa.array(observation),
        "reasoning_tokens": pa.array(reasoning),
        "source": pa.nulls(batch, pa.string()),
    })
    writer.write_step("trajectories", trajectories)
    n = calls.codes.size
    call_index = np.arange(n) - np.repeat(np.cumsum(calls.calls_per_trajectory) - calls.calls_per_trajectory,
                                          calls.calls_per_trajectory)
    tool_calls = pa.table({
        "run_id": pa.array([rid] * n),
        "step": pa.array(np.full(n, step, np.int64)),
        "trajectory_id": pa.array([ids[i] for i in per_call]),
        "call_index": pa.array(call_index.astype(np.int32)),
        "turn": pa.array(call_index.astype(np.int32)),
        "tool_name": pa.array(calls.tool_name),
        "arguments": pa.array(calls.arguments),
        "command": pa.array(calls.command, pa.string()),
        "observation": pa.array(calls.observation),
        "return_code": pa.array(calls.return_code, pa.int32()),
        "token_start": pa.array(tokens.token_start.astype(np.int64)),
        "token_end": pa.array(tokens.token_end.astype(np.int64)),
        "format_error": pa.array(np.zeros(n, dtype=bool)),
    })
    writer.write_step("tool_calls", tool_calls)
    arrays = tokens.list_arrays()
    token_table = pa.table({
        "run_id": pa.array([rid] * batch),
        "step": pa.array(np.full(batch, step, np.int64)),
        "trajectory_id": pa.array(ids),
        **arrays,
    })
    if trained is not None:
        token_table = token_table.append_column("logged_advantages", _trained_advantages(trajectories, token_table, trained))
    writer.write_step("tokens", token_table)
    names = sorted(scalars)
    writer.write_step("step_metrics", pa.table({
        "run_id": pa.array([rid] * len(names)),
        "step": pa.array(np.full(len(names), step, np.int64)),
        "name": pa.array(names),
        "value": pa.array([float(scalars[k]) for k in names], pa.float64()),
    }))


def _trained_choice(spec: Scenario, seed: int) -> EstimatorChoice:
    """The estimator and options the run's config says it trained with."""
    from trajlens.estimators.trained import trained_with

    choice = trained_with(config(spec, seed)).choice
    if choice is None:
        raise ConfigError([f"{spec.name}: its config names no estimator, so it has no advantages to log"])
    return choice


def _trained_advantages(trajectories: pa.Table, tokens: pa.Table, trained: EstimatorChoice) -> pa.Array:
    """Per trajectory of ``tokens``, the token advantages ``trained`` gives over the step's batch.

    A token-level estimator (GAE) gives its per-token advantages as they are; a trajectory-level
    one (GRPO, GDPO) gives one advantage per trajectory, put on each of its model tokens and zero
    on the others, as verl applies it (``scores * response_mask``).
    """
    import polars as pl

    from trajlens.estimators import recompute

    recomputed = recompute(pl.from_arrow(trajectories), pl.from_arrow(tokens), trained.estimator, **trained.options)
    per_token = "token_advantages" in recomputed.columns
    column = "token_advantages" if per_token else "advantage"
    order = pl.from_arrow(tokens.select(["trajectory_id"])).join(
        recomputed.select("trajectory_id", column), on="trajectory_id", how="left", maintain_order="left")
    if per_token:
        return order.get_column(column).cast(pl.List(pl.Float32)).to_arrow()
    return _on_model_tokens(order.get_column(column).to_numpy(), tokens.column("response_mask"))


def _on_model_tokens(advantages: np.ndarray, response_mask: pa.ListArray) -> pa.ListArray:
    """One float32 list per trajectory: its advantage (``advantages[i]``, B) on each token its
    ``response_mask`` marks as the model's, zero on the others."""
    from trajlens.estimators.flat import flat_list, list_array

    mask = flat_list(response_mask, bool)
    per_token = np.repeat(advantages.astype(np.float32), mask.lengths)
    return list_array(np.where(mask.values, per_token, np.float32(0.0)), mask.offsets)


def _starts(calls: StepCalls) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(calls.calls_per_trajectory)[:-1]])


def _header(spec: Scenario, seed: int, rid: str, first_step: int = 1) -> dict:
    return {
        "scenario": spec.name,
        "title": spec.title,
        "seed": seed,
        "run_id": rid,
        "generator_version": GENERATOR_VERSION,
        "sizes": {"steps": spec.steps, "first_step": first_step, "batch": spec.batch, "group_size": spec.group_size,
                  "tokens_per_trajectory": spec.tokens_per_trajectory,
                  "tool_calls_per_trajectory": spec.tool_calls_per_trajectory, "max_calls": spec.max_calls},
    }


def _curves(spec: Scenario) -> dict:
    curves = {}
    for part in ("behaviour", "outcome", "critic", "training", "rewards"):
        value = getattr(spec, part)
        if value is None:
            continue
        for field_name, field_value in vars(value).items():
            if hasattr(field_value, "anchors"):
                curves[f"{part}.{field_name}"] = field_value.as_json()
            elif field_name == "class_weights":
                for klass, curve in field_value:
                    curves[f"{part}.class_weights.{klass}"] = curve.as_json()
    return curves


def _events(spec: Scenario, truth: TruthRecorder, steps: range) -> list[dict]:
    events = [{"kind": e.kind, "steps": [s for s in e.steps if s in steps], "value": e.value, "doc": e.doc}
              for e in spec.events if any(s in steps for s in e.steps)]
    columns = truth.per_step
    if "all_negative" in columns:
        found = [s for s, flag in zip(columns["step"], columns["all_negative"]) if flag]
        truth.summary["all_negative_steps"] = found
        truth.summary["all_positive_steps"] = [s for s, flag in zip(columns["step"], columns["all_positive"]) if flag]
    return events


def config(spec: Scenario, seed: int) -> dict:
    """The run's logged configuration, in verl's key layout where one exists."""
    c = spec.critic
    cfg: dict = {
        "algorithm": {"adv_estimator": spec.estimator},
        "data": {"train_batch_size": spec.batch // max(spec.group_size, 1)},
        "actor_rollout_ref": {
            "actor": {"optim": {"lr": spec.training.actor_lr if spec.training else None}},
            "rollout": {"n": spec.group_size, "max_turns": spec.max_calls},
        },
        "trainer": {"total_training_steps": spec.steps},
        "agent": {"scaffold": spec.harness.name,
                  "tools": [t for t, on in (("bash", True), ("str_replace_editor", spec.harness.editor),
                                            ("think", spec.harness.think), ("submit", spec.harness.submit_tool)) if on]},
        "synth": {"scenario": spec.name, "seed": seed, "generator_version": GENERATOR_VERSION,
                  "tokens_per_trajectory": spec.tokens_per_trajectory,
                  "tool_calls_per_trajectory": spec.tool_calls_per_trajectory},
    }
    if c is not None:
        cfg["algorithm"].update({"gamma": c.gamma, "lam": c.lam, "whiten_advantages": c.whiten})
        cfg["critic"] = {"optim": {"lr": c.lr}, "grad_clip": c.grad_clip, "ppo_epochs": c.ppo_epochs}
    if spec.training and spec.training.warmup_steps:
        cfg["actor_rollout_ref"]["actor"]["optim"]["lr_warmup_steps"] = spec.training.warmup_steps
    if spec.rewards is not None:
        cfg["algorithm"]["norm_adv"] = multireward.DECLARED
        cfg["reward"] = {"channels": list(CHANNELS), "weights": list(spec.rewards.weights), "aggregation": "sum_then_normalize"}
    for path, value in spec.config_extra:
        node = cfg
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return cfg


def _runs_table(spec: Scenario, seed: int, rid: str) -> pa.Table:
    return pa.Table.from_pylist([{
        "run_id": rid,
        "name": spec.title,
        "estimator": spec.estimator,
        "config": json.dumps(config(spec, seed), sort_keys=True),
        "source_format": "synth",
        "source": f"trajlens.synth:{spec.name}?seed={seed}",
    }], schema=SCHEMAS["runs"])


def _progress(spec: Scenario, on_step):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn(f"synth {spec.name}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   transient=True)
    task = bar.add_task("steps", total=spec.steps)
    bar.start()

    def tick(step: int) -> None:
        bar.update(task, advance=1)
        if on_step is not None:
            on_step(step)

    return bar, tick
