"""Recompute advantages over a stored run a batch of steps at a time, in memory bounded by one step.

:func:`trajlens.run.advantages.recompute_run` reads a whole run's token arrays and pads each
step to its longest trajectory; on a run of hundreds of millions of tokens that costs more
memory than the machine has and far more time than reading the arrays. Here each step's
partition is read on its own (the store keeps one directory per step), GAE runs on the Arrow
buffers as they come from Parquet (flat values plus row offsets, no padding, no Python loop
over rows or tokens: :mod:`trajlens.estimators.flat`),
and the results are written back as list columns that reuse the same offsets. Memory is that of
one step, whatever the number of steps.

- :func:`gae_step`: GAE (raw or whitened) of one step's trajectories, as
  :func:`trajlens.estimators.adapters` returns it, plus the model-token advantages;
- :func:`recompute_steps`: those frames step after step for a stored run (any estimator);
- :func:`batch_choice_diagnostics`: the per-step batch diagnostics of several estimator choices
  over one batch of whole steps; the one computation behind the engines' step function, the
  whole-run :func:`trajlens.run.stepwise.labelled_diagnostics`, the report's pass and the checks;
- :func:`diagnostics_by_step`: the per-step batch diagnostics of several estimator choices,
  as :func:`trajlens.run.stepwise.labelled_diagnostics` gives them stacked, reading each
  step once for all choices and computing GAE once for its raw and whitened labels.

GAE needs numba (a dependency); without it, and for every other estimator, each step goes
through :func:`trajlens.estimators.adapters` on that step's frames, still one step at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from trajlens.errors import ConfigError
from trajlens.estimators.registry import reads_counts_alone, reads_tokens
from trajlens.estimators.spec import KEY_COLUMNS, EstimatorChoice

if TYPE_CHECKING:
    from trajlens.run.advantages import RunFrames

TOKEN_COLUMNS: tuple[str, ...] = ("trajectory_id", "response_mask", "values", "token_rewards")


class StepResult(NamedTuple):
    """One step's recomputed GAE."""

    frame: pl.DataFrame
    """One row per trajectory, as :func:`trajlens.estimators.adapters` returns it."""
    model_advantages: np.ndarray
    """(N_model,) the advantages at model tokens, row after row (what the actor loss sees)."""


def run_steps(store: Any, run_id: str) -> list[int]:
    """Steps of ``run_id`` with training trajectories, in order."""
    store.require_runs([run_id])
    steps = store.sql(
        "SELECT DISTINCT step FROM trajectories WHERE run_id = $run AND split = 'train' ORDER BY step", {"run": run_id}
    )["step"].to_list()
    if not steps:
        raise ConfigError([f"run {run_id!r} has no trajectories of split 'train' to recompute"])
    return steps


def read_step(store: Any, run_id: str, table: str, step: int, columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of one step of a stored table, read from the partitions that may hold it only
    (its ``step=N`` directory and any packed range around it)."""
    from trajlens.run.partitions import partition_files
    from trajlens.store.layout import read_parquet_file, rows_of_step

    partitions = partition_files(store, run_id, table, [step])
    if partitions is not None:
        files, _ = partitions.files([step])
        if not files:
            from trajlens.schema import SCHEMAS

            empty = SCHEMAS[table].empty_table()
            return empty if columns is None else empty.select([c for c in columns if c in empty.column_names])
        rows, _ = rows_of_step(files, step, columns, pq.read_schema(files[0]).names,
                               lambda path, wanted, packed: read_parquet_file(path, wanted))
        return rows
    frame = getattr(store, table).filter((pl.col("run_id") == run_id) & (pl.col("step") == step)).collect()
    return frame.select([c for c in (columns or frame.columns) if c in frame.columns]).to_arrow()


def gae_step(
    trajectories: pl.DataFrame, tokens: pa.Table, *, gamma: float = 1.0, lam: float = 1.0, whiten: bool = True,
    raw: "RawGAE | None" = None,
) -> StepResult:
    """GAE of one step's ``trajectories`` from that step's ``tokens`` (Arrow), without padding.

    Same result and errors as ``recompute(trajectories, tokens, "gae", gamma=..., lam=...,
    whiten=...)`` on a single step (up to float rounding of the whitening statistics). ``raw``
    reuses an earlier :func:`raw_gae` of the same inputs (raw and whitened labels share it).
    """
    import torch

    from trajlens.estimators.flat import one_intra_op_thread
    from trajlens.estimators.flat import list_array
    from trajlens.estimators.flat import row_summaries
    from trajlens.estimators.whiten import masked_whiten

    if raw is None:
        raw = raw_gae(trajectories, tokens, gamma=gamma, lam=lam)
    advantages, label = raw.advantages, "none"
    if whiten:
        with one_intra_op_thread():
            result = masked_whiten(torch.from_numpy(advantages)[None], torch.from_numpy(raw.mask)[None])
        advantages, label = result.advantages[0].numpy(), result.normalisation
    rows = raw.offsets.shape[0] - 1
    mean, first, last = (np.empty(rows) for _ in range(3))
    row_summaries(advantages, raw.mask, raw.offsets, mean, first, last)
    frame = raw.keys.with_columns(
        pl.Series("advantage", mean), pl.Series("advantage_first", first), pl.Series("advantage_last", last),
        pl.lit(label).alias("normalisation"),
        pl.Series("token_advantages", list_array(advantages.astype(np.float32, copy=False), raw.offsets)),
        pl.Series("token_returns", list_array(raw.returns, raw.offsets)),
        pl.lit("gae").alias("estimator"),
    )
    return StepResult(frame, advantages[raw.mask])


class RawGAE(NamedTuple):
    """Unwhitened GAE of one step on flat buffers (see :func:`raw_gae`)."""

    keys: pl.DataFrame
    advantages: np.ndarray
    returns: np.ndarray
    mask: np.ndarray
    offsets: np.ndarray


def raw_gae(trajectories: pl.DataFrame, tokens: pa.Table, *, gamma: float = 1.0, lam: float = 1.0,
            mask: Any = None) -> RawGAE:
    """Unwhitened GAE of one step, flat: advantages, returns, mask and row offsets (tokens of
    the trajectories in ``trajectories`` order). ``mask``: the caller's ``flat_list`` of
    ``tokens``'s response mask, used when no row needs reordering."""
    from trajlens.estimators import EstimatorInputError
    from trajlens.estimators.flat import unit_interval
    from trajlens.estimators.flat import flat_list
    from trajlens.estimators.flat import last_model_token
    from trajlens.estimators.flat import flat_masked_scan

    fn = "recompute"
    gamma = unit_interval(fn, "gamma", gamma)
    lam = unit_interval(fn, "lam", lam)
    aligned = _aligned(fn, trajectories, tokens)
    if mask is None or aligned is not tokens:
        mask = flat_list(aligned.column("response_mask"), np.bool_, False)
    tokens = aligned
    ids = trajectories["trajectory_id"]
    lengths = mask.lengths
    offsets = mask.offsets
    if "values" not in tokens.column_names or tokens.column("values").null_count:
        row = int(np.nonzero(~tokens.column("values").is_valid().to_numpy(zero_copy_only=False))[0][0]) \
            if "values" in tokens.column_names else 0
        raise EstimatorInputError(f"{fn}: gae needs critic values; trajectory {ids[row]!r} has none")
    values = flat_list(tokens.column("values"), np.float32, 0.0)
    _same_lengths(fn, ids, "values", lengths, values.lengths, np.ones(len(lengths), bool))
    rewards = _rewards(fn, trajectories, tokens, mask, last_model_token)
    scan = flat_masked_scan(rewards, values.values, mask.values, offsets, gamma, gamma * lam)
    if scan.empty_row:
        last = np.empty(len(lengths), dtype=np.int64)
        last_model_token(mask.values, offsets, last)
        row = int(np.nonzero(last < 0)[0][0])
        raise EstimatorInputError(
            f"{fn}: trajectory {ids[row]!r} has no model tokens in its response_mask "
            f"(step {trajectories['step'][row]}); drop it first"
        )
    if scan.nonfinite:
        bad = ~(np.isfinite(rewards) & np.isfinite(values.values)) & mask.values
        row = int(np.searchsorted(offsets, int(np.argmax(bad)), side="right") - 1)
        raise EstimatorInputError(f"{fn}: token_rewards or values hold a non-finite number at a model token "
                                        f"(step {trajectories['step'][row]})")
    keys = trajectories.select([c for c in KEY_COLUMNS if c in trajectories.columns])
    return RawGAE(keys, scan.scanned, scan.plus_values, mask.values, offsets)


def raw_reset_returns(trajectories: pl.DataFrame, tokens: pa.Table, *, gamma: float = 1.0, mask: Any = None) -> RawGAE:
    """verl <= 0.8's discounted returns of one step, flat, laid out as :func:`raw_gae` lays GAE
    (its advantages and returns both the returns): ``G_t = r_t + gamma G_{t+1}`` at every token,
    the running sum reset after every token outside the mask. Errors as the padded estimator's;
    ``mask`` as :func:`raw_gae`'s."""
    from trajlens.estimators import EstimatorInputError
    from trajlens.estimators.flat import flat_list, last_model_token, reset_returns_rows, unit_interval

    fn = "recompute"
    gamma = unit_interval(fn, "gamma", gamma)
    aligned = _aligned(fn, trajectories, tokens)
    if mask is None or aligned is not tokens:
        mask = flat_list(aligned.column("response_mask"), np.bool_, False)
    tokens = aligned
    last = np.empty(len(mask.lengths), dtype=np.int64)
    last_model_token(mask.values, mask.offsets, last)
    if (last < 0).any():
        row = int(np.nonzero(last < 0)[0][0])
        raise EstimatorInputError(
            f"{fn}: trajectory {trajectories['trajectory_id'][row]!r} has no model tokens in its response_mask "
            f"(step {trajectories['step'][row]}); drop it first")
    rewards = _rewards(fn, trajectories, tokens, mask, last_model_token)
    returns = np.empty_like(rewards)
    reset_returns_rows(rewards, mask.values, mask.offsets, float(gamma), returns)
    keys = trajectories.select([c for c in KEY_COLUMNS if c in trajectories.columns])
    return RawGAE(keys, returns, returns, mask.values, mask.offsets)


def _aligned(fn: str, trajectories: pl.DataFrame, tokens: pa.Table) -> pa.Table:
    """``tokens`` rows in the order of ``trajectories`` (a take only when the orders differ)."""
    from trajlens.estimators import EstimatorInputError

    token_ids = tokens.column("trajectory_id")
    wanted = trajectories["trajectory_id"]
    if token_ids.length() == wanted.len() and pl.Series(token_ids.combine_chunks()).equals(wanted):
        return tokens
    order = (
        wanted.to_frame().with_row_index("__row")
        .join(pl.Series("trajectory_id", token_ids.combine_chunks()).to_frame().with_row_index("__token"),
              on="trajectory_id", how="left", maintain_order="left")
    )
    missing = order.filter(pl.col("__token").is_null())
    if missing.height:
        run = trajectories["run_id"][0] if "run_id" in trajectories.columns else None
        raise EstimatorInputError(
            f"{fn}: trajectory {missing['trajectory_id'][0]!r} (run {run!r}) has no row in tokens"
        )
    return tokens.take(pa.array(order["__token"].to_numpy()))


def _rewards(fn: str, trajectories: pl.DataFrame, tokens: pa.Table, mask, last_model_token) -> np.ndarray:
    """Flat token rewards aligned with ``mask``; the trajectory reward on the last model token of
    rows without token rewards (how verl places an outcome reward)."""
    from trajlens.estimators import EstimatorInputError
    from trajlens.estimators.flat import flat_list

    ids = trajectories["trajectory_id"]
    lengths = mask.lengths
    rows = len(lengths)
    if "token_rewards" in tokens.column_names:
        given = flat_list(tokens.column("token_rewards"), np.float32, 0.0)
        present = given.present
        _same_lengths(fn, ids, "token_rewards", lengths, given.lengths, present)
        if present.all():
            return given.values
        rewards = np.zeros(mask.values.shape[0], dtype=np.float32)
        # the present rows' entries, in order, go to those rows' positions in the mask layout
        starts = np.repeat(mask.offsets[:-1][present], lengths[present])
        within = np.arange(starts.size) - np.repeat(np.cumsum(lengths[present]) - lengths[present], lengths[present])
        rewards[starts + within] = given.values
    else:
        present = np.zeros(rows, dtype=bool)
        rewards = np.zeros(mask.values.shape[0], dtype=np.float32)
    absent = np.nonzero(~present)[0]
    reward = (trajectories["reward"] if "reward" in trajectories.columns
              else pl.Series([None] * rows, dtype=pl.Float64)).fill_null(float("nan")).to_numpy()
    missing = absent[np.isnan(reward[absent])]
    if missing.size:
        raise EstimatorInputError(
            f"{fn}: trajectory {ids[int(missing[0])]!r} has neither token_rewards nor a reward"
        )
    last = np.empty(rows, dtype=np.int64)
    last_model_token(mask.values, mask.offsets, last)
    rewards[last[absent]] = reward[absent].astype(np.float32)
    return rewards


def _same_lengths(fn: str, ids: pl.Series, name: str, lengths: np.ndarray, other: np.ndarray,
                  present: np.ndarray) -> None:
    from trajlens.estimators import EstimatorInputError

    bad = np.nonzero(present & (other != lengths))[0]
    if bad.size:
        i = int(bad[0])
        raise EstimatorInputError(
            f"recompute: trajectory {ids[i]!r}: {name} has {int(other[i])} entries but response_mask has "
            f"{int(lengths[i])}"
        )


class StepMoments(NamedTuple):
    """Float64 moments of a step's raw advantages over model tokens (see ``_compiled._masked_moments``)."""

    count: int
    mean: float
    m2: float
    m3: float
    m4: float
    positive: int
    negative: int
    above_whitening_mean: int
    below_whitening_mean: int
    whitening_mean: float
    whitening_scale: float
    low: float = float("nan")
    """Smallest raw advantage over model tokens (NaN without one)."""
    high: float = float("nan")
    """Largest raw advantage over model tokens (NaN without one)."""


def step_moments(advantages: np.ndarray, mask: np.ndarray) -> StepMoments:
    """The moments both GAE labels need, and verl's whitening statistics, from one compiled call.

    verl whitens with ``mean = sum / (count + 1e-8)`` and ``var = sum((A - mean)^2) /
    (count + 1e-8) * count / (count - 1)``, ``A' = (A - mean) * rsqrt(var + 1e-8)``; the sign
    counts of A' are those of ``A - mean``, counted in the kernel's second pass.
    """
    from trajlens.estimators.flat import masked_moments
    from trajlens.estimators.whiten import whitening_of_moments

    out = np.empty(11)
    masked_moments(advantages, mask, out)
    n, mean, m2 = out[0], out[1], out[2]
    whitening = whitening_of_moments(int(n), float(mean), float(m2))
    return StepMoments(int(n), float(mean), float(m2), float(out[3]), float(out[4]), int(out[5]), int(out[6]),
                       int(out[7]), int(out[8]), whitening.mean, whitening.scale, float(out[9]), float(out[10]))


def model_token_stats(moments: StepMoments, whitened: bool):
    """:func:`trajlens.estimators.advantage_stats` of the raw or whitened advantages of a step,
    from its :class:`StepMoments` (same formulas; whitening shifts and scales the moments and
    leaves skew, kurtosis and bimodality as they are)."""
    import math

    from trajlens.estimators import AdvantageStats
    from trajlens.estimators.diagnostics import moment_shape

    n = moments.count
    mean, m2, m3, m4 = moments.mean, moments.m2, moments.m3, moments.m4
    positive, negative = moments.positive, moments.negative
    if whitened:
        s = moments.whitening_scale
        mean, m2, m3, m4 = (mean - moments.whitening_mean) * s, m2 * s**2, m3 * s**3, m4 * s**4
        positive, negative = moments.above_whitening_mean, moments.below_whitening_mean
    std = math.sqrt(m2 * n / (n - 1)) if n > 1 else float("nan")
    skew, kurtosis, bimodality = moment_shape(n, m2, m3, m4)
    return AdvantageStats(count=n, mean=mean, std=std, skew=skew, kurtosis=kurtosis, bimodality=bimodality,
                          positive_share=positive / n if n else float("nan"),
                          negative_share=negative / n if n else float("nan"),
                          all_negative=n > 0 and negative == n, all_positive=n > 0 and positive == n)


def _uses_flat_gae(choice: EstimatorChoice) -> bool:
    """Whether the choice is GAE with the critic on flat buffers (its registry entry's flat scan)."""
    from trajlens.estimators.flat import flat_scan_of

    scan = flat_scan_of(choice)
    return scan is not None and scan.critic


def choice_token_columns(choices: Sequence[EstimatorChoice]) -> tuple[str, ...] | None:
    """The token columns ``choices`` read (None when none reads token arrays). An estimator that
    reads only each trajectory's model-token count reads the response mask (and the token
    rewards when it scores by them), not the critic's values."""
    from trajlens.estimators.registry import Input, estimator_spec

    if not any(reads_tokens(c.estimator) for c in choices):
        return None
    read = {"trajectory_id", "response_mask"}
    for choice in choices:
        inputs = estimator_spec(choice.estimator).inputs
        if inputs & Input.TOKEN_ARRAYS:
            read.update(TOKEN_COLUMNS, ("log_probs",) if inputs & Input.LOG_PROBS else ())
        elif choice.settings().get("score") == "token_rewards":
            read.add("token_rewards")
    return tuple(name for name in (*TOKEN_COLUMNS, "log_probs") if name in read)


def _step_raw(raw: RawGAE, start: int, stop: int) -> RawGAE:
    """Rows ``[start, stop)`` (one step) of a batch's :class:`RawGAE`."""
    first, last = int(raw.offsets[start]), int(raw.offsets[stop])
    return RawGAE(raw.keys.slice(start, stop - start), raw.advantages[first:last], raw.returns[first:last],
                  raw.mask[first:last], raw.offsets[start:stop + 1] - first)


def _gae_options(choice: EstimatorChoice) -> tuple[float, float, bool]:
    """GAE's options, checked as :func:`trajlens.estimators.recompute` checks every estimator's."""
    from trajlens.estimators import EstimatorInputError

    problems = choice.spec().option_problems(choice.options)
    if problems:
        raise EstimatorInputError("recompute: " + "; ".join(problems))
    settings = choice.settings()  # the registry's defaults, then the choice's options
    return float(settings["gamma"]), float(settings["lam"]), bool(settings["whiten"])


def recompute_steps(
    store: Any, run_id: str, estimator: str, *, steps: Sequence[int] | None = None, **options: Any
) -> Iterator[pl.DataFrame]:
    """Recomputed advantages of ``run_id`` a batch of steps at a time (frames as ``recompute``
    returns them, in step order); every estimator normalises within a step, and gdpo_dynamic's
    moving averages are carried from batch to batch."""
    from trajlens.estimators import recompute
    from trajlens.run.batches import step_batches, step_bounds, train_trajectories

    choice = EstimatorChoice(estimator, estimator, dict(options))
    carry: dict[str, Any] = {}
    trajectories = train_trajectories(store, run_id, steps)
    for batch in step_batches(store, run_id, trajectories, choice_token_columns([choice])):
        if _uses_flat_gae(choice):
            gamma, lam, whiten = _gae_options(choice)
            raw = raw_gae(batch.trajectories, batch.tokens, gamma=gamma, lam=lam)
            starts, stops = step_bounds(batch.trajectories["step"].to_numpy())
            yield pl.concat([gae_step(batch.trajectories.slice(a, b - a), batch.tokens, whiten=whiten,
                                      raw=_step_raw(raw, a, b)).frame for a, b in zip(starts, stops)])
            continue
        tokens = pl.from_arrow(batch.tokens) if reads_tokens(estimator) else None
        yield recompute(batch.trajectories, tokens, estimator, carry=carry, **options)


StepScans = dict[tuple[float, float], tuple[RawGAE, StepMoments]]
"""One step's flat GAE scans as the advantage pass ran them: (gamma, lam) -> the raw scan of the
step's trajectories (in their order) and its moments."""


class BatchFeed(Protocol):
    """Something else that reads a run's batches as :func:`advantage_pass` reads them."""

    @property
    def token_columns(self) -> tuple[str, ...]:
        """The token columns it reads."""

    def add(self, trajectories: pl.DataFrame, tokens: pl.DataFrame | None,
            scans: Sequence[StepScans] | None = None) -> Any:
        """Take one batch of whole steps: its training trajectories, their token rows, and each
        step's scans the pass already ran (in step order)."""


class AdvantagePass(NamedTuple):
    """What :func:`advantage_pass` read and computed over a run."""

    diagnostics: pl.DataFrame
    """Per-step diagnostics of every choice that raised nothing, stacked in choice order."""
    errors: dict[str, Exception]
    """Label -> the input error that stopped that choice (at its first failing step)."""
    trajectories: pl.DataFrame
    """The run's training trajectories."""
    token_rows: pl.DataFrame
    """One row per token row read: ``trajectory_id``, ``response_mask`` (one entry: whether
    the row holds a model token), ``values`` and ``log_probs`` (null where the row has none);
    what :func:`trajlens.estimators.registry.run_facts` reads of a tokens frame."""
    token_arrays: int
    """Token rows read (every token row of the training steps)."""
    with_model_tokens: int
    """Of those, the rows whose response mask holds a model token."""
    empty_arrays: int
    """Of those, the rows with no token at all."""


def advantage_pass(
    store: Any, run_id: str, choices: Sequence[EstimatorChoice], *, steps: Sequence[int] | None = None,
    out: Path | str | None = None, trajectories: pl.DataFrame | None = None,
    token_columns: Sequence[str] | None = None, extremes: bool = False, feeds: Sequence[BatchFeed] = (),
) -> AdvantagePass:
    """Per-step batch diagnostics of each choice (``label``, ``estimator``, ``options``) in one
    read of the run, a batch of steps at a time (:mod:`trajlens.run.batches`), with the
    facts of its token arrays gathered on the way.

    A choice whose inputs fail at some step (an :class:`EstimatorInputError`) is stopped there
    and its error kept in ``errors``: the caller raises it, or drops the choice when the run's
    facts rule it out. ``trajectories``: the run's training trajectories when the caller has
    read them (:func:`trajlens.run.batches.train_trajectories`); ``token_columns``: the
    token columns the facts read (beside the choices' own; alone when no choice reads any); ``extremes``: with
    ``min`` and ``max`` columns (:func:`batch_choice_diagnostics`). With ``out``, each step's recomputed frame of each choice is written to
    ``out/<label>/step=NNNNNN.parquet``. ``feeds``: what else reads the same batches (each
    batch's trajectories and token rows, with the columns it asks beside the choices' own), so
    that the run is read once for both.

    GAE statistics come from one compiled pass over the model tokens (float64 moments); the
    whitened label's are those of ``(A - mean) * rsqrt(var + 1e-8)`` with verl's whitening
    statistics, computed on the fly, so the whitened token arrays are only built for ``out``.
    They agree with ``labelled_diagnostics`` to float32 rounding.

    The choices that read nothing of the token arrays (outcome and channel estimators scored by
    the trajectory's reward) are recomputed on the run's trajectories at once, before the pass,
    and those that read only each response's model-token count after it, on the counts the pass
    took of the response masks: every estimator works within a step, so each step's rows are
    what that step alone gives, and the per-batch cost of preparing them is paid once. A channel
    estimator's channels are named and ordered over the run (their first appearance), as
    attribution names them, not over whichever steps a batch happened to hold.
    """
    from trajlens.estimators.flat import flat_list
    from trajlens.run.batches import step_batches, train_trajectories

    choices = list(choices)
    if trajectories is None:
        trajectories = train_trajectories(store, run_id, steps)
    # the choices' token columns, the facts' beside them and what the feeds ask (None: no token is read)
    asked = [*(choice_token_columns(choices) or ()), *(token_columns or ()),
             *(c for feed in feeds for c in feed.token_columns)]
    columns = tuple(dict.fromkeys(asked)) or None
    errors: dict[str, Exception] = {}
    carry: dict[str, dict[str, Any]] = {c.label: {} for c in choices}
    whole = [c for c in choices if not reads_tokens(c.estimator)]
    parts: list[pl.DataFrame] = batch_choice_diagnostics(
        run_id, trajectories, None, whole, carry=carry, errors=errors, out=out, extremes=extremes) \
        if whole and trajectories.height else []
    counted = [c for c in choices if reads_counts_alone(c.estimator, c.settings())]
    stepwise = [c for c in choices if reads_tokens(c.estimator) and c not in counted]
    facts: list[pl.DataFrame] = []
    for batch in step_batches(store, run_id, trajectories, columns):
        mask = None
        if batch.tokens is not None:
            mask = flat_list(batch.tokens.column("response_mask"), np.bool_, False)
            facts.append(_token_facts(batch.tokens, mask))
        scans: list[StepScans] | None = [] if feeds else None
        parts.extend(batch_choice_diagnostics(run_id, batch.trajectories, batch.tokens, stepwise, carry=carry,
                                              errors=errors, mask=mask, out=out, extremes=extremes, scans=scans))
        if feeds:
            frame = None if batch.tokens is None else pl.from_arrow(batch.tokens)
            for feed in feeds:
                feed.add(batch.trajectories, frame, scans)  # type: ignore[arg-type]
    if counted and trajectories.height:
        counts = pl.concat(facts).select(pl.lit(run_id).alias("run_id"), "trajectory_id", pl.col("model_tokens").alias("count")) \
            if facts else None
        parts += batch_choice_diagnostics(run_id, trajectories, None, counted, carry=carry, errors=errors, out=out,
                                          extremes=extremes, mask_counts=counts)
    failed = set(errors)
    parts = [p for p in parts if p.height and p["estimator"][0] not in failed]
    diagnostics = pl.DataFrame()
    if parts:
        order = {c.label: i for i, c in enumerate(choices)}
        stacked = pl.concat(parts, how="diagonal_relaxed").filter(~pl.col("estimator").is_in(list(failed)))
        diagnostics = (stacked.with_columns(pl.col("estimator").replace_strict(order, return_dtype=pl.Int64)
                                            .alias("__order")).sort("__order", "step").drop("__order"))
    token_rows = _token_rows(facts)
    counts = pl.concat(facts).select(pl.len(), pl.col("model").sum(), (pl.col("length") == 0).sum()).row(0) \
        if facts else (0, 0, 0)
    return AdvantagePass(diagnostics, errors, trajectories, token_rows, int(counts[0]), int(counts[1] or 0),
                         int(counts[2] or 0))


def batch_choice_diagnostics(
    run_id: str, trajectories: pl.DataFrame, tokens: pa.Table | None, choices: Sequence[EstimatorChoice], *,
    carry: dict[str, dict[str, Any]], errors: dict[str, Exception], mask: Any = None,
    out: Path | str | None = None, extremes: bool = False, scans: list[StepScans] | None = None,
    mask_counts: pl.DataFrame | None = None,
) -> list[pl.DataFrame]:
    """Per-step batch diagnostics of each choice over one batch of whole steps (``trajectories``
    in step order, ``tokens`` their token rows as Arrow): the frames to stack, each with an
    ``estimator`` column holding the choice's label.

    ``carry``: label -> the state a stateful estimator carries from batch to batch (updated);
    ``errors``: label -> the input error that stopped a choice (choices already in it are
    skipped; a new error is added, not raised); ``mask``: the caller's ``flat_list`` of the
    response mask. GAE runs on the flat buffers once per (gamma, lam) for its raw and whitened
    labels; every other estimator through :func:`trajlens.estimators.recompute` on the batch (one
    :class:`~trajlens.estimators.adapters.Recomputer` for them all).
    With ``out``, each step's recomputed frame is written to ``out/<label>/step=NNNNNN.parquet``.
    ``extremes``: with ``min`` and ``max`` columns, of the values each step's statistics describe.
    ``scans``: filled with each step's :data:`StepScans` (in step order), for the caller to share.
    ``mask_counts``: each response's model-token count (``run_id``, ``trajectory_id``, ``count``),
    given without ``tokens``, for the choices that read the counts alone.
    """
    from trajlens.run.batches import step_bounds

    starts, stops = step_bounds(trajectories["step"].to_numpy())
    if not choices:  # the token facts alone (``trajlens view``): no estimator, so torch is never loaded
        if scans is not None:
            scans[:] = [{} for _ in starts]
        return []
    from trajlens.estimators import EstimatorInputError
    from trajlens.estimators.adapters import Recomputer
    from trajlens.estimators.whiten import require_two_tokens
    from trajlens.run.advantages import DIAGNOSTIC_COLUMNS, diagnostics_of
    from trajlens.store.layout import step_dir

    def write(label: str, step: int, frame: pl.DataFrame) -> None:
        target = Path(out) / label  # type: ignore[arg-type]
        target.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(target / f"{step_dir(step)}.parquet")

    if mask is None and tokens is not None and "response_mask" in tokens.column_names:
        from trajlens.estimators.flat import flat_list

        mask = flat_list(tokens.column("response_mask"), np.bool_, False)
    columnar: dict[str, list[Any]] = {name: [] for name in ("step", *DIAGNOSTIC_COLUMNS, "estimator")}
    if extremes:
        columnar.update(min=[], max=[])
    parts: list[pl.DataFrame] = []
    step_values = trajectories["step"].to_numpy()[starts]
    tokens_frame: pl.DataFrame | None = None
    recomputer: Recomputer | None = None
    shared: dict[tuple[float, float], tuple[RawGAE, list[StepMoments]]] = {}
    for choice in choices:
        if choice.label in errors:
            continue
        try:
            if _uses_flat_gae(choice) and tokens is not None:
                gamma, lam, whiten = _gae_options(choice)
                if (gamma, lam) not in shared:
                    raw = raw_gae(trajectories, tokens, gamma=gamma, lam=lam, mask=mask)
                    shared[(gamma, lam)] = raw, [
                        step_moments(raw.advantages[raw.offsets[a]:raw.offsets[b]], raw.mask[raw.offsets[a]:raw.offsets[b]])
                        for a, b in zip(starts, stops)]
                raw, moments = shared[(gamma, lam)]
                for a, b, step, step_moment in zip(starts, stops, step_values, moments):
                    step = int(step)
                    if whiten:
                        require_two_tokens("masked_whiten", step_moment.count, f"step {step}")
                    stats = model_token_stats(step_moment, whiten)
                    columnar["step"].append(step)
                    for name in DIAGNOSTIC_COLUMNS:
                        columnar[name].append(getattr(stats, name))
                    columnar["estimator"].append(choice.label)
                    if extremes:
                        low, high = _model_token_extremes(step_moment, whiten)
                        columnar["min"].append(low)
                        columnar["max"].append(high)
                    if out is not None:
                        write(choice.label, step, gae_step(trajectories.slice(a, b - a), tokens, whiten=whiten,
                                                           raw=_step_raw(raw, a, b)).frame)
                continue
            if recomputer is None:  # the batch prepared once for every choice recomputed on it
                if tokens is not None and any(reads_tokens(c.estimator) for c in choices):
                    tokens_frame = pl.from_arrow(tokens)  # type: ignore[assignment]
                recomputer = Recomputer(trajectories, tokens_frame, readers_only=True, mask_counts=mask_counts)
            recomputed = recomputer.recompute(choice.estimator, carry=carry.setdefault(choice.label, {}),
                                              **choice.options)
            parts.append(diagnostics_of(choice.estimator, recomputed, tokens_frame, extremes=extremes)
                         .with_columns(pl.lit(choice.label).alias("estimator")))
            if out is not None:
                for (step,), part in recomputed.partition_by("step", as_dict=True, maintain_order=True).items():
                    write(choice.label, int(step), part)
        except EstimatorInputError as error:
            errors[choice.label] = error
    if columnar["step"]:
        parts.append(pl.DataFrame({"run_id": [run_id] * len(columnar["step"]), **columnar}))
    if scans is not None:
        scans[:] = [{key: (_step_raw(raw, a, b), moments[i]) for key, (raw, moments) in shared.items()}
                    for i, (a, b) in enumerate(zip(starts, stops))]
    return parts


def _model_token_extremes(moments: StepMoments, whitened: bool) -> tuple[float, float]:
    """Smallest and largest advantage at a step's model tokens, raw or whitened (whitening is
    increasing: ``(A - mean) * scale``)."""
    low, high = moments.low, moments.high
    if whitened:
        low, high = (low - moments.whitening_mean) * moments.whitening_scale, \
            (high - moments.whitening_mean) * moments.whitening_scale
    return low, high


def _token_facts(tokens: pa.Table, mask: Any) -> pl.DataFrame:
    """Per token row: its id, whether its response ``mask`` (``flat_list`` of the column) holds
    a model token and how many (``model_tokens``, as ``list.sum`` counts them: null for a row
    without a mask), its length, and whether it carries ``values`` and ``log_probs``."""
    lengths = mask.lengths
    counts = np.zeros(lengths.size, dtype=np.int64)
    filled = np.flatnonzero(lengths > 0)
    if filled.size:
        counts[filled] = np.add.reduceat(mask.values, mask.offsets[filled], dtype=np.int64)
    columns = {
        "trajectory_id": pl.Series(tokens.column("trajectory_id").combine_chunks()).cast(pl.String),
        "model": counts > 0,
        "model_tokens": pl.Series(counts).scatter(np.flatnonzero(~mask.present), None),
        "length": lengths,
    }
    for name in ("values", "log_probs"):
        if name in tokens.column_names:
            columns[f"has_{name}"] = tokens.column(name).is_valid().to_numpy(zero_copy_only=False)
    return pl.DataFrame(columns)


def _token_rows(facts: list[pl.DataFrame]) -> pl.DataFrame:
    """The facts of :func:`_token_facts` as the tokens frame ``run_facts`` reads."""
    if not facts:
        return pl.DataFrame()
    frame = pl.concat(facts, how="diagonal_relaxed")
    present = [name for name in ("values", "log_probs") if f"has_{name}" in frame.columns]
    return frame.select(
        "trajectory_id", pl.concat_list("model").alias("response_mask"),
        *(pl.when(pl.col(f"has_{name}")).then(pl.concat_list(pl.lit(0.0, dtype=pl.Float32))).alias(name)
          for name in present),
    )


def diagnostics_by_step(
    store: Any, run_id: str, choices: Sequence[EstimatorChoice], *, steps: Sequence[int] | None = None,
    out: Path | str | None = None,
) -> pl.DataFrame:
    """Per-step batch diagnostics of each choice (``label``, ``estimator``, ``options``), stacked
    with an ``estimator`` column holding the label, as ``labelled_diagnostics`` gives them
    (:func:`advantage_pass`, raising the first choice's input error)."""
    result = advantage_pass(store, run_id, choices, steps=steps, out=out)
    for choice in choices:
        if choice.label in result.errors:
            raise result.errors[choice.label]
    return result.diagnostics


def labelled_diagnostics(store: Any, run_id: str, estimator: str, label: str, *,
                         frames: RunFrames | None = None, **options: Any) -> pl.DataFrame:
    """Per-step batch diagnostics of one recomputation, with ``estimator`` set to ``label``.

    The statistics run over what the estimator's registry entry says its loss sees: model
    tokens (token advantages, or each trajectory's advantage once per model token) or
    trajectories. They are those of :func:`trajlens.run.stepwise.batch_choice_diagnostics`,
    the step-wise path, here over the whole of ``frames`` at once.
    """
    from trajlens.run.advantages import read_run, require_inputs

    if frames is None:
        frames = read_run(store, run_id, tokens=reads_tokens(estimator))
    carry = options.pop("carry", {})
    require_inputs(run_id, estimator, frames, options)
    trajectories = frames.trajectories.sort("step", maintain_order=True)
    tokens = frames.tokens.to_arrow() if frames.tokens is not None and reads_tokens(estimator) else None
    errors: dict[str, Exception] = {}
    parts = batch_choice_diagnostics(run_id, trajectories, tokens, [EstimatorChoice(label, estimator, options)],
                                     carry={label: carry}, errors=errors)
    if label in errors:
        raise errors[label]
    return pl.concat(parts, how="diagonal_relaxed").sort("run_id", "step")
