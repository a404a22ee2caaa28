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
    from trajlens.run.config import run_declared
    from trajlens.run.facts import stored_facts
    from trajlens.run.reader import RunReader

    trajectories = train_trajectories(store, run_id)
    config, estimator = run_declared(store, run_id)
    facts = stored_facts(RunReader.of(store, run_id), trajectories, config, store, estimator).facts
    columns = logged_token_columns(CANDIDATES)

    def steps():
        for batch in step_batches(store, run_id, trajectories, columns):
            tokens = pl.DataFrame(batch.tokens) if batch.tokens is not None and batch.tokens.num_rows else None
            yield from by_step(batch.trajectories, tokens)
            if progress is not None:
                progress(f"step {batch.steps[-1]}")

    return identify_batches(steps(), facts=facts, config=config, flat_step=flat_step, run=trajectories)


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


IDENTIFY_STEPS = 16
"""Training steps, at most, :class:`LoggedEstimator` tries before it names no estimator:
the first that logs advantages and tells the candidates apart decides, so this bounds the reads
of a run whose logged advantages never do (every group's rewards alike, every advantage 0)."""


class LoggedEstimator:
    """The estimator a run's logged advantages name when its config names none, fed the run a
    batch of steps at a time (:meth:`add`): the :func:`identify_frames` verdict on the first
    training step (in step order) that logs advantages and tells the candidates apart. A step
    where every candidate recomputed matches (all its groups' rewards alike: every advantage 0)
    decides nothing, and a step that logs none is passed over; a step that matches no candidate
    decides (the verdict says so). A run of any size costs the steps read up to that one (at most
    :data:`IDENTIFY_STEPS`), and the verdict is the same however the run is cut into batches. The
    report, attribution (:func:`trajlens.run.trained.run_trained_with`, step after step) and the
    checks (batch after batch) all ask one, so they name one estimator on one piece of evidence.
    A step is tried once, so a batch fed again (by each measure that asks for the run's
    estimator) costs nothing more."""

    def __init__(self, config: Any = None) -> None:
        self.config = config
        self.tried: set[int] = set()
        """Training steps tried so far."""
        self.found: Any = None
        """The verdict, once a step decided."""
        self.error: Exception | None = None
        """Why a step's advantages could not be recomputed to compare: raised again at each :meth:`add`."""

    @property
    def done(self) -> bool:
        """Whether a step decided (or failed), or every step there is to try was tried."""
        return self.found is not None or self.error is not None or len(self.tried) >= IDENTIFY_STEPS

    def add(self, trajectories: pl.DataFrame, step_tokens: Callable[[int], pl.DataFrame | None]) -> Any:
        """Try the batch's training steps not tried yet, in step order, while any are left to
        try; returns the verdict, None until a step decides. ``step_tokens(step)``: that step's
        token rows (None when the run has none), asked only for a step whose trajectories log no
        advantage, as the advantages logged per token are then compared. Raises
        :class:`~trajlens.estimators.EstimatorInputError` when a step's advantages cannot be
        recomputed to compare (and again at each later call)."""
        from trajlens.estimators import EstimatorInputError
        from trajlens.estimators.identify import LOGGED_COLUMNS
        from trajlens.run.splits import TRAIN_SPLIT

        if self.error is not None:
            raise self.error
        if "split" in trajectories.columns:
            trajectories = trajectories.filter(pl.col("split") == TRAIN_SPLIT)
        per_trajectory, per_token = LOGGED_COLUMNS["trajectories"], LOGGED_COLUMNS["tokens"]
        for step in trajectories.get_column("step").unique().sort().to_list() if trajectories.height else []:
            if self.done:
                break
            if step in self.tried:
                continue
            self.tried.add(step)
            part = trajectories.filter(pl.col("step") == step)
            tokens = None
            if per_trajectory not in part.columns or part[per_trajectory].null_count() == part.height:
                tokens = step_tokens(step)
                if tokens is None or not tokens.height or per_token not in tokens.columns \
                        or tokens[per_token].null_count() == tokens.height:
                    continue  # this step logs none
            try:
                found = identify_frames(part, tokens, config=self.config, medians=False)
            except EstimatorInputError as error:
                self.error = error
                raise
            if _decides(found):
                self.found = found
        return self.found


def _decides(found: Any) -> bool:
    """Whether a step's verdict tells the candidates apart: it matches none, or some candidate
    recomputed on it does not match."""
    if not found.matched:
        return True
    compared = [fit for fit in found.candidates if fit.error is None and fit.n]
    return len(compared) > 1 + len(found.equivalent)


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


def flat_step(part: pl.DataFrame, tokens: pl.DataFrame | None, candidates: tuple, scans: Any = None, *,
              mask: Any = None) -> dict:
    """The flat step kernels' recomputation of one step's ``candidates`` (the
    :data:`~trajlens.estimators.identify.FlatStep` that identify takes); ``scans``: the step's
    GAE scans a caller already ran (:data:`trajlens.run.stepwise.StepScans`); ``mask``: the
    ``flat_list`` of ``tokens``'s response mask, when the caller read it."""
    from trajlens.run.step_advantages import flat_step_advantages

    return flat_step_advantages(part, None if tokens is None else tokens.to_arrow(), candidates, scans, mask=mask)
