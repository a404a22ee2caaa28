"""Recompute advantages over a stored run one step at a time, in memory bounded by one step.

:func:`trajlens.report.advantages.recompute_run` reads a whole run's token arrays and pads each
step to its longest trajectory; on a run of hundreds of millions of tokens that costs more
memory than the machine has and far more time than reading the arrays. Here each step's
partition is read on its own (the store keeps one directory per step), GAE runs on the Arrow
buffers as they come from Parquet (flat values plus row offsets, no padding, no Python loop
over rows or tokens: :mod:`trajlens.estimators._arrays`, :mod:`trajlens.estimators._compiled`),
and the results are written back as list columns that reuse the same offsets. Memory is that of
one step, whatever the number of steps.

- :func:`gae_step`: GAE (raw or whitened) of one step's trajectories, as
  :func:`trajlens.estimators.recompute` returns it, plus the model-token advantages;
- :func:`recompute_steps`: those frames step after step for a stored run (any estimator);
- :func:`diagnostics_by_step`: the per-step batch diagnostics of several estimator choices,
  as :func:`trajlens.report.advantages.labelled_diagnostics` gives them stacked, reading each
  step once for all choices and computing GAE once for its raw and whitened labels.

GAE needs numba (a dependency); without it, and for every other estimator, each step goes
through :func:`trajlens.estimators.recompute` on that step's frames, still one step at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from trajlens.errors import ConfigError

TOKEN_COLUMNS: tuple[str, ...] = ("trajectory_id", "response_mask", "values", "token_rewards")
KEY_COLUMNS: tuple[str, ...] = ("run_id", "step", "trajectory_id", "group_id")


class Choice(NamedTuple):
    """One recomputation to summarise: its label in the output, estimator and options."""

    label: str
    estimator: str
    options: dict[str, Any]


class StepResult(NamedTuple):
    """One step's recomputed GAE."""

    frame: pl.DataFrame
    """One row per trajectory, as :func:`trajlens.estimators.recompute` returns it."""
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
    """The rows of one step of a stored table, read from that step's partition only."""
    from trajlens.store.layout import step_dir

    directory = Path(store.path) / "runs" / run_id / table / step_dir(step)
    files = sorted(directory.glob("*.parquet")) if directory.is_dir() else []
    if files:
        schema = pq.read_schema(files[0])
        wanted = None if columns is None else [c for c in columns if c in schema.names]
        return pa.concat_tables([pq.read_table(f, columns=wanted) for f in files]) if len(files) > 1 \
            else pq.read_table(files[0], columns=wanted)
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

    from trajlens.estimators import _scan
    from trajlens.estimators._arrays import list_array
    from trajlens.estimators._compiled import row_summaries
    from trajlens.estimators.whiten import masked_whiten

    if raw is None:
        raw = raw_gae(trajectories, tokens, gamma=gamma, lam=lam)
    advantages, label = raw.advantages, "none"
    if whiten:
        with _scan._one_intra_op_thread():
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


def raw_gae(trajectories: pl.DataFrame, tokens: pa.Table, *, gamma: float = 1.0, lam: float = 1.0) -> RawGAE:
    """Unwhitened GAE of one step, flat: advantages, returns, mask and row offsets (tokens of
    the trajectories in ``trajectories`` order)."""
    from trajlens.estimators import _validate as check
    from trajlens.estimators._arrays import flat_list
    from trajlens.estimators._compiled import last_model_token
    from trajlens.estimators._scan import flat_masked_scan

    fn = "recompute"
    gamma = check.unit_interval(fn, "gamma", gamma)
    lam = check.unit_interval(fn, "lam", lam)
    tokens = _aligned(fn, trajectories, tokens)
    ids = trajectories["trajectory_id"]
    step = trajectories["step"][0] if trajectories.height else None
    mask = flat_list(tokens.column("response_mask"), np.bool_, False)
    lengths = mask.lengths
    offsets = mask.offsets
    if "values" not in tokens.column_names or tokens.column("values").null_count:
        row = int(np.nonzero(~tokens.column("values").is_valid().to_numpy(zero_copy_only=False))[0][0]) \
            if "values" in tokens.column_names else 0
        raise check.EstimatorInputError(f"{fn}: gae needs critic values; trajectory {ids[row]!r} has none")
    values = flat_list(tokens.column("values"), np.float32, 0.0)
    _same_lengths(fn, ids, "values", lengths, values.lengths, np.ones(len(lengths), bool))
    rewards = _rewards(fn, trajectories, tokens, mask, last_model_token)
    scan = flat_masked_scan(rewards, values.values, mask.values, offsets, gamma, gamma * lam)
    if scan.empty_row:
        last = np.empty(len(lengths), dtype=np.int64)
        last_model_token(mask.values, offsets, last)
        raise check.EstimatorInputError(
            f"{fn}: trajectory {ids[int(np.nonzero(last < 0)[0][0])]!r} has no model tokens in its response_mask "
            f"(step {step}); drop it first"
        )
    if scan.nonfinite:
        raise check.EstimatorInputError(f"{fn}: token_rewards or values hold a non-finite number at a model token "
                                        f"(step {step})")
    keys = trajectories.select([c for c in KEY_COLUMNS if c in trajectories.columns])
    return RawGAE(keys, scan.scanned, scan.plus_values, mask.values, offsets)


def _aligned(fn: str, trajectories: pl.DataFrame, tokens: pa.Table) -> pa.Table:
    """``tokens`` rows in the order of ``trajectories`` (a take only when the orders differ)."""
    from trajlens.estimators import _validate as check

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
        raise check.EstimatorInputError(
            f"{fn}: trajectory {missing['trajectory_id'][0]!r} (run {run!r}) has no row in tokens"
        )
    return tokens.take(pa.array(order["__token"].to_numpy()))


def _rewards(fn: str, trajectories: pl.DataFrame, tokens: pa.Table, mask, last_model_token) -> np.ndarray:
    """Flat token rewards aligned with ``mask``; the trajectory reward on the last model token of
    rows without token rewards (how verl places an outcome reward)."""
    from trajlens.estimators import _validate as check
    from trajlens.estimators._arrays import flat_list

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
        raise check.EstimatorInputError(
            f"{fn}: trajectory {ids[int(missing[0])]!r} has neither token_rewards nor a reward"
        )
    last = np.empty(rows, dtype=np.int64)
    last_model_token(mask.values, mask.offsets, last)
    rewards[last[absent]] = reward[absent].astype(np.float32)
    return rewards


def _same_lengths(fn: str, ids: pl.Series, name: str, lengths: np.ndarray, other: np.ndarray,
                  present: np.ndarray) -> None:
    from trajlens.estimators import _validate as check

    bad = np.nonzero(present & (other != lengths))[0]
    if bad.size:
        i = int(bad[0])
        raise check.EstimatorInputError(
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


def step_moments(advantages: np.ndarray, mask: np.ndarray) -> StepMoments:
    """The moments both GAE labels need, and verl's whitening statistics, from one compiled call.

    verl whitens with ``mean = sum / (count + 1e-8)`` and ``var = sum((A - mean)^2) /
    (count + 1e-8) * count / (count - 1)``, ``A' = (A - mean) * rsqrt(var + 1e-8)``; the sign
    counts of A' are those of ``A - mean``, counted in the kernel's second pass.
    """
    import math

    from trajlens.estimators._compiled import masked_moments
    from trajlens.estimators.whiten import WHITEN_EPS

    out = np.empty(9)
    masked_moments(advantages, mask, out)
    n, mean, m2 = out[0], out[1], out[2]
    verl_mean = mean * n / (n + 1e-8) if n else float("nan")
    var = (n * m2 + n * (mean - verl_mean) ** 2) / (n + 1e-8) * (n / (n - 1)) if n > 1 else float("nan")
    scale = 1.0 / math.sqrt(var + WHITEN_EPS) if n > 1 else float("nan")
    return StepMoments(int(n), float(mean), float(m2), float(out[3]), float(out[4]), int(out[5]), int(out[6]),
                       int(out[7]), int(out[8]), float(verl_mean), float(scale))


def model_token_stats(moments: StepMoments, whitened: bool):
    """:func:`trajlens.estimators.advantage_stats` of the raw or whitened advantages of a step,
    from its :class:`StepMoments` (same formulas; whitening shifts and scales the moments and
    leaves skew, kurtosis and bimodality as they are)."""
    import math

    from trajlens.estimators import AdvantageStats

    n = moments.count
    mean, m2, m3, m4 = moments.mean, moments.m2, moments.m3, moments.m4
    positive, negative = moments.positive, moments.negative
    if whitened:
        s = moments.whitening_scale
        mean, m2, m3, m4 = (mean - moments.whitening_mean) * s, m2 * s**2, m3 * s**3, m4 * s**4
        positive, negative = moments.above_whitening_mean, moments.below_whitening_mean
    std = math.sqrt(m2 * n / (n - 1)) if n > 1 else float("nan")
    if m2 > 0.0:
        skew = m3 / m2**1.5
        kurtosis = m4 / m2**2 - 3.0
    else:
        skew, kurtosis = float("nan"), float("nan")
    if n > 3 and not math.isnan(skew):
        bimodality = (skew**2 + 1.0) / (kurtosis + 3.0 * (n - 1) ** 2 / ((n - 2) * (n - 3)))
    else:
        bimodality = float("nan")
    return AdvantageStats(count=n, mean=mean, std=std, skew=skew, kurtosis=kurtosis, bimodality=bimodality,
                          positive_share=positive / n if n else float("nan"),
                          negative_share=negative / n if n else float("nan"),
                          all_negative=negative == n, all_positive=positive == n)


def _uses_flat_gae(choice: Choice) -> bool:
    from trajlens.estimators._compiled import AVAILABLE

    return choice.estimator == "gae" and AVAILABLE


def _train_step(store: Any, run_id: str, step: int) -> pl.DataFrame:
    frame = pl.from_arrow(read_step(store, run_id, "trajectories", step))
    return frame.filter((pl.col("run_id") == run_id) & (pl.col("split") == "train"))


def recompute_steps(
    store: Any, run_id: str, estimator: str, *, steps: Sequence[int] | None = None, **options: Any
) -> Iterator[pl.DataFrame]:
    """Recomputed advantages of ``run_id`` one step at a time (frames as ``recompute`` returns them)."""
    from trajlens.estimators import recompute
    from trajlens.estimators.frame import TOKEN_ESTIMATORS

    choice = Choice(estimator, estimator, dict(options))
    for step in steps if steps is not None else run_steps(store, run_id):
        trajectories = _train_step(store, run_id, step)
        if trajectories.is_empty():
            continue
        if _uses_flat_gae(choice):
            opts = dict(options)
            yield gae_step(trajectories, _step_tokens(store, run_id, step), gamma=opts.pop("gamma", 1.0),
                           lam=opts.pop("lam", 1.0), whiten=opts.pop("whiten", True)).frame
            continue
        needs_tokens = estimator in TOKEN_ESTIMATORS or estimator == "gdpo_verl"
        tokens = pl.from_arrow(_step_tokens(store, run_id, step, with_keys=True)) if needs_tokens else None
        yield recompute(trajectories, tokens, estimator, **options)


def _step_tokens(store: Any, run_id: str, step: int, with_keys: bool = False) -> pa.Table:
    columns = (("run_id",) if with_keys else ()) + TOKEN_COLUMNS
    table = read_step(store, run_id, "tokens", step, columns)
    if with_keys and "run_id" not in table.column_names:
        table = table.append_column("run_id", pa.array([run_id] * table.num_rows))
    return table


def _read_ahead(
    store: Any, run_id: str, steps: list[int], needs_tokens: bool
) -> Iterator[tuple[int, pl.DataFrame, pa.Table | None]]:
    """Each step's trajectories and tokens, the next step read on a background thread while the
    caller works on this one (two steps in memory at most)."""
    from concurrent.futures import ThreadPoolExecutor

    def read(step: int) -> tuple[int, pl.DataFrame, pa.Table | None]:
        tokens = _step_tokens(store, run_id, step, with_keys=True) if needs_tokens else None
        return step, _train_step(store, run_id, step), tokens

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="trajlens-read") as reader:
        pending = reader.submit(read, steps[0]) if steps else None
        for following in steps[1:] + [None]:
            current = pending.result()
            pending = reader.submit(read, following) if following is not None else None
            yield current


def diagnostics_by_step(
    store: Any, run_id: str, choices: Sequence[Choice | Any], *, steps: Sequence[int] | None = None,
    out: Path | str | None = None,
) -> pl.DataFrame:
    """Per-step batch diagnostics of each choice (``label``, ``estimator``, ``options``), stacked
    with an ``estimator`` column holding the label, as ``labelled_diagnostics`` gives them.

    Each step is read once for all choices; GAE choices with the same gamma and lambda share one
    scan. With ``out``, each step's recomputed frame of each choice is written to
    ``out/<label>/step=NNNNNN.parquet``.

    GAE statistics come from one compiled pass over the model tokens (float64 moments); the
    whitened label's are those of ``(A - mean) * rsqrt(var + 1e-8)`` with verl's whitening
    statistics, computed on the fly, so the whitened token arrays are only built for ``out``.
    They agree with ``labelled_diagnostics`` to float32 rounding.
    """
    from trajlens.estimators import _validate as check
    from trajlens.estimators import recompute
    from trajlens.estimators.frame import TOKEN_ESTIMATORS
    from trajlens.report.advantages import DIAGNOSTIC_COLUMNS, batch_diagnostics

    choices = [Choice(c.label, c.estimator, dict(c.options)) for c in choices]
    needs_tokens = any(c.estimator in TOKEN_ESTIMATORS or c.estimator == "gdpo_verl" for c in choices)
    rows: list[dict[str, Any]] = []
    parts: list[pl.DataFrame] = []
    steps = list(steps) if steps is not None else run_steps(store, run_id)
    for step, trajectories, tokens in _read_ahead(store, run_id, steps, needs_tokens):
        if trajectories.is_empty():
            continue
        tokens_frame: pl.DataFrame | None = None
        shared: dict[tuple[float, float], RawGAE] = {}
        raw_moments: dict[tuple[float, float], StepMoments] = {}
        for choice in choices:
            if _uses_flat_gae(choice):
                opts = dict(choice.options)
                gamma, lam = float(opts.get("gamma", 1.0)), float(opts.get("lam", 1.0))
                if (gamma, lam) not in shared:
                    shared[(gamma, lam)] = raw_gae(trajectories, tokens, gamma=gamma, lam=lam)
                raw = shared[(gamma, lam)]
                whiten = bool(opts.get("whiten", True))
                if (gamma, lam) not in raw_moments:
                    raw_moments[(gamma, lam)] = step_moments(raw.advantages, raw.mask)
                moments = raw_moments[(gamma, lam)]
                if whiten and moments.count < 2:
                    raise check.EstimatorInputError(
                        f"masked_whiten: step {step} has {moments.count} model tokens; whitening needs at least two")
                stats = model_token_stats(moments, whiten)
                rows.append({"run_id": run_id, "step": step,
                             **{name: getattr(stats, name) for name in DIAGNOSTIC_COLUMNS}, "estimator": choice.label})
                recomputed = gae_step(trajectories, tokens, whiten=whiten, raw=raw).frame if out is not None else None
            else:
                uses_tokens = choice.estimator in TOKEN_ESTIMATORS or choice.estimator == "gdpo_verl"
                if uses_tokens and tokens_frame is None:
                    tokens_frame = pl.from_arrow(tokens)
                recomputed = recompute(trajectories, tokens_frame if uses_tokens else None, choice.estimator,
                                       **choice.options)
                token_level = tokens_frame if choice.estimator in TOKEN_ESTIMATORS else None
                parts.append(batch_diagnostics(recomputed, token_level).with_columns(
                    pl.lit(choice.label).alias("estimator")))
            if out is not None and recomputed is not None:
                from trajlens.store.layout import step_dir

                target = Path(out) / choice.label
                target.mkdir(parents=True, exist_ok=True)
                recomputed.write_parquet(target / f"{step_dir(step)}.parquet")
    if rows:
        parts.append(pl.DataFrame(rows))
    if not parts:
        return pl.DataFrame()
    order = {c.label: i for i, c in enumerate(choices)}
    stacked = pl.concat(parts, how="diagonal_relaxed")
    return (stacked.with_columns(pl.col("estimator").replace_strict(order, return_dtype=pl.Int64).alias("__order"))
            .sort("__order", "step").drop("__order"))
