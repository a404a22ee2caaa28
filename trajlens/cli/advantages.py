"""``trajlens advantages``: recomputed (or identified) advantages of a run, per-step batch statistics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._output import check_output, console_table, write_text_atomically
from trajlens.cli._options import (
    EngineOption, RayAddressOption, parse_options, parse_trainer_option, utf8_argument,
)
from trajlens.cli._progress import progress_bar
from trajlens.errors import ConfigError
from trajlens.estimators.registry import ESTIMATOR_REGISTRY, release_conventions
from trajlens.estimators.spec import CURRENT_RELEASES, label_problem

if TYPE_CHECKING:
    from trajlens.engine.session import EngineSession
    from trajlens.estimators.spec import TrainerRelease

_ESTIMATOR_HELP = ("Required unless --identify. One of: " + ", ".join(ESTIMATOR_REGISTRY)
                   + " (options and references: docs/estimators.md). "
                   + ", ".join(name for name, spec in ESTIMATOR_REGISTRY.items() if not spec.from_store)
                   + " read inputs no store holds: recompute them in Python on frames that carry them.")
_OPTION_HELP = "Estimator option NAME=VALUE, repeatable; values read as JSON. " + "; ".join(
    f"{spec.name}: {', '.join(option.name for option in spec.options)}"
    for spec in ESTIMATOR_REGISTRY.values() if spec.options
) + "."
_TRAINER_HELP = ("Recompute as this trainer release did, e.g. verl==0.8.0 or trl==1.5: every estimator takes the "
                 "convention that release computes (--option values still win); an estimator the release does not compute "
                 "(reinforce_plus_plus under trl) is refused. Default: the current release of "
                 "the trainer the run came from (its format or config), else the current verl ("
                 + ", ".join(f"{name} {version}" for name, version in CURRENT_RELEASES.items())
                 + "). Release-dependent conventions: " + "; ".join(release_conventions()) + ".")


@app.command()
def advantages(
    store: Annotated[str, typer.Argument(help="Store directory (with --engine ray, also a URI: file://..., s3://...).")],
    run: Annotated[str, typer.Option("--run", "-r", help="Run id.")],
    estimator: Annotated[Optional[str], typer.Option("--estimator", "-e", help=_ESTIMATOR_HELP)] = None,
    option: Annotated[Optional[list[str]], typer.Option("--option", help=_OPTION_HELP)] = None,
    trainer: Annotated[Optional[str], typer.Option("--trainer", help=_TRAINER_HELP)] = None,
    label: Annotated[Optional[str], typer.Option("--label", help="Name of this recomputation in the advantage_batches table (default: the estimator, followed by the release and each --option where they make it differ from the report's: grpo@trl==1.5+epsilon=0.001). A report label (gae_raw) or an estimator's name is taken only for the computation the report and compare read under it.")] = None,
    identify: Annotated[bool, typer.Option("--identify", help="Recompute the run's logged advantages under every estimator and convention, and name the one that produced them.")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="With --identify: write the verdict and every candidate's fit to this JSON file.")] = None,
    engine: EngineOption = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Recompute the advantages an estimator would have given a run, and print per-step batch stats.

    Saves the per-step statistics in the store table advantage_batches (one label per choice),
    so estimators can be compared with SQL. With --identify, compares the advantages the trainer
    logged with every candidate estimator and convention instead, prints each one's max and
    median absolute difference, and names the closest with a verdict.

    Example: trajlens advantages store --run sao-r6 --estimator gae --option whiten=false --label gae_raw

    Example: trajlens advantages store --run sao-r6 --estimator reinforce_plus_plus --trainer verl==0.8.0

    Example: trajlens advantages store --run sao-r6 --estimator gae --engine ray --ray-address auto
    """
    if identify and (engine != "local" or ray_address is not None):
        raise ConfigError(["--identify runs on the local engine; drop --engine and --ray-address"])
    recomputing = {"--estimator": estimator, "--option": option, "--trainer": trainer, "--label": label}
    if identify and any(recomputing.values()):
        named = ", ".join(flag for flag, value in recomputing.items() if value)
        raise ConfigError([f"--identify tries every estimator and convention itself; drop {named}"])
    if json_out is not None and not identify:
        raise ConfigError(["--json writes the verdict of --identify; pass --identify, or drop --json"])
    if identify:
        _identify(store, run, json_out)
        return
    if estimator is None:
        raise ConfigError(["--estimator is required (or pass --identify)"])

    import polars as pl

    from trajlens.engine.advantages import recompute_diagnostics_on, save_advantage_batches_on
    from trajlens.engine.session import engine_session
    from trajlens.estimators import sign_streaks

    from trajlens.estimators import EstimatorInputError
    from trajlens.estimators.registry import convention_options, estimator_spec, label_mismatch, saved_label

    if label is not None:
        utf8_argument(label, "--label")
        if (problem := label_problem(label)) is not None:
            raise ConfigError([f"--label: {problem}"])
    options = parse_options(option or [])
    release = parse_trainer_option(trainer) if trainer is not None else None
    try:
        spec = estimator_spec(estimator)
    except EstimatorInputError as error:
        raise ConfigError([f"--estimator: {error}"]) from None
    if problems := spec.option_problems(options):  # before any label is judged on them
        raise EstimatorInputError("recompute: " + "; ".join(problems))
    if release is not None and not spec.computed_by(release):
        raise ConfigError([_not_computed_by(trainer or "", release, estimator, spec.trainers())])
    with engine_session(engine, ray_address, store) as session, progress_bar("recomputing") as tick:
        session.require_runs([run])
        own = _run_release(session, run)
        default = saved_label(estimator, options, release, own)
        decided = convention_options(estimator, options, own if release is None else release)
        if label is not None and (mismatch := label_mismatch(label, estimator, decided)) is not None:
            raise ConfigError([f"--label: {mismatch}; name it otherwise, or drop --label to save it as {default!r}"])
        label = label or default
        options = decided
        diagnostics = recompute_diagnostics_on(session.engine, session.location, run, estimator, label,
                                               options, progress=tick)
        save_advantage_batches_on(session.store, session.location, run, diagnostics)
        alone = session.store is not None and _groups_of_one(session.store, run, estimator, options)
    shown = diagnostics.sort("step")
    streaks = sign_streaks(shown["step"].to_list(), shown["all_negative"].to_list(), shown["all_positive"].to_list())
    typer.echo(console_table(shown.drop("run_id", "estimator"), rows=12))
    typer.echo(f"all-negative batches: {list(streaks.negative_steps) or 'none'}; "
               f"all-positive batches: {list(streaks.positive_steps) or 'none'}")
    flat = shown.filter((pl.col("std") == 0) & pl.col("skew").is_nan())["step"].to_list()
    if flat:  # every advantage of the step alike (0 where each group's rewards are equal): no shape to measure
        typer.echo(f"note: {len(flat)} of {shown.height} steps, from step {flat[0]}, give every trajectory the same "
                   "advantage (0 when each group's rewards are equal), so their skew, kurtosis and bimodality are "
                   "undefined (nan)", err=True)
    undefined = shown.filter(pl.col("mean").is_nan())["step"].to_list()
    if undefined:
        typer.echo(f"note: {len(undefined)} of {shown.height} steps have advantages that are not numbers (NaN), from step "
                   f"{undefined[0]}: with epsilon=0 a group whose rewards are all equal divides 0 by 0, as the trainer "
                   "would", err=True)
    if alone:
        typer.echo(f"note: every group of run {run!r} has one trajectory, so {estimator} compares none with another: "
                   "each has its advantage for a group of one (docs/estimators.md), and the report recomputes no "
                   "group estimator on such a run", err=True)


def _not_computed_by(trainer: str, release: Any, estimator: str, trainers: tuple[str, ...]) -> str:
    """Why ``--trainer`` cannot pick a convention of ``estimator``: its trainer has none."""
    from trajlens.estimators.registry import ESTIMATOR_REGISTRY
    from trajlens.estimators.spec import TRAINERS

    name = TRAINERS[release.trainer]
    others = " and ".join(TRAINERS[t] for t in trainers)
    theirs = [spec.name for spec in ESTIMATOR_REGISTRY.values() if release.trainer in spec.trainers()]
    return (f"--trainer {trainer}: {name} computes no {estimator} (its conventions are {others}'s); drop --trainer, "
            f"or choose an estimator with a convention of {name}'s: {', '.join(theirs)}")


def _groups_of_one(store: object, run: str, estimator: str, options: dict) -> bool:
    """Whether ``estimator`` compares trajectories within groups and every group of the run has one."""
    from trajlens.estimators.registry import Input, estimator_spec
    from trajlens.estimators.spec import GROUPS_OF_TWO, EstimatorChoice
    from trajlens.run.choices import stored_lacks

    if Input.GROUPS not in estimator_spec(estimator).inputs:
        return False
    return GROUPS_OF_TWO in stored_lacks(store, run, EstimatorChoice(estimator, estimator, options))


def _run_release(session: EngineSession, run: str) -> TrainerRelease:
    """The current release of the trainer ``run`` came from (its format or config), else the current verl."""
    from trajlens.estimators.trained import run_release

    if session.store is None:
        return run_release(None)
    row = session.store.sql("SELECT config, source_format FROM runs WHERE run_id = $run", {"run": run})
    return run_release(row["config"][0], row["source_format"][0]) if row.height else run_release(None)


def _identify(store: Path, run: str, json_out: Path | None) -> None:
    import polars as pl

    import trajlens
    from trajlens.run.identify import identify_run

    if json_out is not None:
        check_output(json_out, flag="--json", store=store)
    handle = trajlens.open(store)
    with progress_bar("identifying") as tick:
        found = identify_run(handle, run, progress=tick)
    table = pl.DataFrame([
        {"candidate": fit.candidate.label, "max_abs_diff": fit.max_abs_diff if fit.n else None,
         "median_abs_diff": fit.median_abs_diff if fit.n else None, "n": fit.n, "note": fit.error or ""}
        for fit in found.candidates
    ])
    typer.echo(console_table(table))
    typer.echo(("match: " if found.matched else "") + found.verdict)
    if json_out is not None:
        document = json.dumps(found.to_dict(), indent=2) + "\n"
        write_text_atomically(json_out, document, flag="--json")
        typer.echo(f"wrote {json_out}")
