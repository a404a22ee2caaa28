"""Which estimator made a run's logged advantages, a step at a time.

:func:`identify_run` reads a stored run a batch of steps at a time, :func:`identify_frames` takes
frames in memory (the checks' batches); both cut them into steps and hand
:func:`trajlens.estimators.identify.identify_batches` the flat step kernels of
:mod:`trajlens.run.step_advantages` (the path attribution takes), so GAE, REINFORCE and
REINFORCE++ are recomputed on flat buffers and the other estimators on the step's frames.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import polars as pl


def identify_run(store: Any, run_id: str, *, progress: Any = None) -> Any:
    """:func:`trajlens.estimators.identify.identify_batches` over ``run_id`` of an open store,
    read a batch of steps at a time (:func:`trajlens.run.batches.step_batches`): memory is
    that of a batch, whatever the length of the run. ``progress``: called with each batch's
    last step."""
    from trajlens.estimators.identify import CANDIDATES, identify_batches
    from trajlens.run.batches import step_batches, train_trajectories
    from trajlens.run.config import run_config_text
    from trajlens.run.facts import stored_facts
    from trajlens.run.reader import RunReader

    trajectories = train_trajectories(store, run_id)
    config = run_config_text(store, run_id)
    facts = stored_facts(RunReader.of(store, run_id), trajectories, config, store).facts
    columns = logged_token_columns(CANDIDATES)

    def steps():
        for batch in step_batches(store, run_id, trajectories, columns):
            tokens = pl.DataFrame(batch.tokens) if batch.tokens is not None and batch.tokens.num_rows else None
            yield from by_step(batch.trajectories, tokens)
            if progress is not None:
                progress(f"step {batch.steps[-1]}")

    return identify_batches(steps(), facts=facts, config=config, flat_step=flat_step)


def identify_frames(trajectories: pl.DataFrame, tokens: pl.DataFrame | None, *, config: Any = None,
                    candidates: tuple[Any, ...] | None = None, medians: bool = True) -> Any:
    """:func:`trajlens.estimators.identify_advantages` of frames in memory (a batch of steps of a
    run, as the checks read it), on the path :func:`identify_run` takes: a step at a time, the
    token estimators on the flat step kernels (``medians`` as ``identify_batches``)."""
    from trajlens.estimators.identify import CANDIDATES, identify_batches
    from trajlens.estimators.registry import run_facts

    return identify_batches(by_step(trajectories, tokens), facts=run_facts(trajectories, tokens, config),
                            config=config, candidates=CANDIDATES if candidates is None else candidates,
                            flat_step=flat_step, medians=medians)


def identify_first_step(trajectories: pl.DataFrame, step_tokens: Callable[[int], pl.DataFrame | None],
                        config: Any = None) -> Any:
    """The estimator a run's logged advantages name when its config names none: the
    :func:`identify_frames` verdict on the run's first training step (the first step of the
    training rows of ``trajectories``) alone, so a run of any size costs one step. The report,
    attribution (:func:`trajlens.run.trained.run_trained_with`) and the checks, which read a run a
    batch at a time, all ask here, so they name one estimator on one piece of evidence.

    ``step_tokens(step)``: that step's token rows (None when the run has none). None when the step
    logs no advantages; raises :class:`~trajlens.estimators.EstimatorInputError` when they cannot
    be recomputed to compare.
    """
    from trajlens.estimators.identify import LOGGED_COLUMNS
    from trajlens.run.splits import TRAIN_SPLIT

    if "split" in trajectories.columns:
        trajectories = trajectories.filter(pl.col("split") == TRAIN_SPLIT)
    if not trajectories.height:
        return None
    first = trajectories.filter(pl.col("step") == trajectories["step"].min())
    tokens = step_tokens(int(first["step"][0]))
    tokens = tokens if tokens is not None and tokens.height else None
    logged = [frame[column] for frame, column in ((first, LOGGED_COLUMNS["trajectories"]), (tokens, LOGGED_COLUMNS["tokens"]))
              if frame is not None and column in frame.columns]
    if not any(values.null_count() < values.len() for values in logged):
        return None
    return identify_frames(first, tokens, config=config, medians=False)


def logged_token_columns(candidates: Sequence[Any]) -> tuple[str, ...]:
    """The token columns that comparing ``candidates`` (:data:`~trajlens.estimators.identify.CANDIDATES`)
    with the logged advantages reads: those their estimators recompute from
    (:func:`trajlens.run.stepwise.choice_token_columns`), and the logged advantages."""
    from trajlens.estimators.identify import LOGGED_COLUMNS
    from trajlens.run.stepwise import choice_token_columns

    columns = choice_token_columns(tuple(candidates)) or ("trajectory_id", "response_mask")
    extra = ("sum_pi_squared",) if "log_probs" in columns else ()
    return ("run_id", "step", *columns, *extra, LOGGED_COLUMNS["tokens"])


def by_step(trajectories: pl.DataFrame, tokens: pl.DataFrame | None) -> Iterator[tuple[pl.DataFrame, pl.DataFrame | None]]:
    """Each step's trajectories and token rows: the flat kernels whiten over a step."""
    steps = trajectories["step"].unique()
    if steps.len() == 1 and (tokens is None or tokens["step"].unique().equals(steps)):
        yield trajectories, tokens  # one step already: nothing to cut or copy
        return
    for (step,), part in trajectories.partition_by("step", as_dict=True, maintain_order=True).items():
        yield part, None if tokens is None else tokens.filter(pl.col("step") == step)


def flat_step(part: pl.DataFrame, tokens: pl.DataFrame | None, candidates: tuple, scans: Any = None) -> dict:
    """The flat step kernels' recomputation of one step's ``candidates`` (the
    :data:`~trajlens.estimators.identify.FlatStep` that identify takes); ``scans``: the step's
    GAE scans a caller already ran (:data:`trajlens.run.stepwise.StepScans`)."""
    from trajlens.run.step_advantages import flat_step_advantages

    return flat_step_advantages(part, None if tokens is None else tokens.to_arrow(), candidates, scans)
