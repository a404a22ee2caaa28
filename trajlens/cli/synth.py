"""``trajlens synth``: generate a sample run with known ground truth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._output import folder_output
from trajlens.cli._progress import progress_bar


def _seed(value: int) -> int:
    """The seed, if 0 to 2**63 - 1 (a usage error otherwise). Checked here, not by a range on the
    option, whose bounds would take a column of the help wide enough to cut option names."""
    from trajlens.synth.generate import MAX_SEED

    if not 0 <= value <= MAX_SEED:
        raise typer.BadParameter(f"{value} is not in the range 0<=x<={MAX_SEED}.")
    return value


@app.command()
def synth(
    scenario: Annotated[str, typer.Argument(help="Scenario: sao-r6, sao-r7, grpo-leg, multireward or resume-lr; or a "
                                                 "causal one (causal-r6, causal-r6-whitened, ...: a training loop whose "
                                                 "truth.json names the verdicts attribution should give).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory to create (must not exist).")],
    steps: Annotated[Optional[int], typer.Option("--steps", help="Training steps, at most 100,000; 2,000 for a causal scenario (default: the scenario's).")] = None,
    batch: Annotated[Optional[int], typer.Option("--batch", help="Trajectories per step, a multiple of the group size, at most 16,384; 4,096 for a causal scenario.")] = None,
    seed: Annotated[int, typer.Option("--seed", callback=_seed, help="Random seed, 0 to 2**63 - 1; the same arguments give identical files.")] = 0,
    tokens: Annotated[Optional[int], typer.Option("--tokens", help="Mean tokens per trajectory at the first step (50 to 200,000).")] = None,
    calls: Annotated[Optional[int], typer.Option("--calls", help="Mean tool calls per trajectory at the first step (3 to 1,000).")] = None,
    first_step: Annotated[int, typer.Option("--first-step", help="Number of the first step (steps are independent draws); the last step is at most 2**31 - 1.")] = 1,
    log_probs: Annotated[Optional[bool], typer.Option("--log-probs/--no-log-probs", help="Write per-token log-probabilities.")] = None,
    log_advantages: Annotated[bool, typer.Option("--log-advantages", help="Write the per-token advantages the run trained with (its config's estimator), as a verl dump does: what `trajlens advantages --identify` reads.")] = False,
) -> None:
    """Generate an RL run of a coding agent that reproduces a seed phenomenon, with its ground truth.

    Writes a run directory in the canonical Parquet layout (one step at a time, so large runs fit
    in memory) and truth.json beside its tables: the injected curves and events, and what was
    generated. The run is written beside OUT first and moved into place at the end, so a run that
    fails or is interrupted leaves nothing under OUT. A step holds at most a million tool calls and
    50 million tokens (batch x calls, batch x tokens). A causal scenario's loop sets its own
    tokens, calls, first step, log-probabilities and advantages: it takes --steps, --batch and
    --seed only. `python -m trajlens.synth.regenerate sample_data` rebuilds the shipped samples.

    Example: trajlens synth sao-r6 --out runs/r6

    Example: trajlens synth sao-r7 --steps 200 --batch 64 --calls 50 --tokens 60000 --out runs/r7-large
    """
    from trajlens.errors import ConfigError
    from trajlens.synth import generate
    from trajlens.synth.causal_spec import CAUSAL_SCENARIOS
    from trajlens.synth.generate import OPTIONS, SCENARIOS, configure

    if scenario not in SCENARIOS and scenario not in CAUSAL_SCENARIOS:
        raise ConfigError([f"unknown scenario {scenario!r}: choose one of {', '.join(SCENARIOS)}, "
                           f"or a causal one: {', '.join(CAUSAL_SCENARIOS)}"])
    if scenario in CAUSAL_SCENARIOS:
        given = {"--tokens": tokens, "--calls": calls, "--first-step": None if first_step == 1 else first_step,
                 "--log-probs/--no-log-probs": log_probs, "--log-advantages": log_advantages or None}
        _causal(scenario, out, steps, batch, seed, [name for name, value in given.items() if value is not None])
        return
    sizes = dict(steps=steps, batch=batch, seed=seed, first_step=first_step, tokens_per_trajectory=tokens,
                 tool_calls_per_trajectory=calls, log_probs=log_probs, log_advantages=log_advantages or None)
    spec = configure(scenario, out, **sizes, names=OPTIONS)  # every bad option, before any work
    with folder_output(out) as partial, progress_bar(f"synth {scenario}", total=spec.steps) as tick:
        partial.rmdir()  # the generator makes the run directory itself
        result = generate(scenario, partial, **sizes, on_step=lambda step: tick(f"step {step}")).moved(out)
    _say(result)


def _causal(scenario: str, out: Path, steps: int | None, batch: int | None, seed: int, unsupported: list[str]) -> None:
    """A causal scenario's training loop (:mod:`trajlens.synth.causal`), at its own sizes or ``steps``
    and ``batch`` (a multiple of its group size)."""
    import dataclasses

    from trajlens.errors import ConfigError
    from trajlens.synth.causal import generate_causal
    from trajlens.synth.causal_spec import CAUSAL_SCENARIOS

    spec = CAUSAL_SCENARIOS[scenario]
    problems = [f"{name}: not an option of a causal scenario (its loop sets its tokens, calls, first step, "
                "log-probabilities and advantages; it takes --steps, --batch and --seed)" for name in unsupported]
    if steps is not None and not 1 <= steps <= CAUSAL_MAX_STEPS:
        problems.append(f"--steps: expected 1 to {CAUSAL_MAX_STEPS:,} for a causal scenario, found {steps}")
    if batch is not None and not (spec.group_size <= batch <= CAUSAL_MAX_BATCH and batch % spec.group_size == 0):
        problems.append(f"--batch: expected a multiple of {scenario}'s group size {spec.group_size}, at most "
                        f"{CAUSAL_MAX_BATCH:,}, found {batch}")
    if problems:
        raise ConfigError(problems)
    spec = spec if batch is None else dataclasses.replace(spec, batch=batch)
    total = spec.steps if steps is None else steps
    with folder_output(out) as partial, progress_bar(f"synth {scenario}", total=total) as tick:
        partial.rmdir()  # the generator makes the run directory itself
        result = generate_causal(spec, partial, steps=total, seed=seed, on_step=lambda step: tick(f"step {step}")).moved(out)
    _say(result)


CAUSAL_MAX_STEPS = 2_000
"""The most steps a causal scenario's loop runs from the CLI: each step trains the policy in this process."""
CAUSAL_MAX_BATCH = 4_096
"""The most trajectories per step a causal scenario's loop samples from the CLI."""


def _say(result: Any) -> None:
    """The line that says what a generated run holds and where."""
    typer.echo(f"wrote {result.scenario} ({result.steps} steps, {result.trajectories} trajectories, "
               f"{result.tool_calls} tool calls, {result.tokens} tokens) to {result.directory}; truth in {result.truth}")
