"""One step's advantages under each recomputation, token estimators on flat Arrow buffers.

Attribution credits calls step by step, and ``trajlens advantages --identify`` compares each
candidate with the logged advantages step by step, so both recompute each estimator on one step
at a time, here.
Outcome and channel estimators are recomputed once for the whole run (their inputs are one row
per trajectory, and dynamic GDPO carries its weights from step to step) and each step takes its
rows. Token estimators read the step's token arrays:

- GAE (any gamma and lambda, whitened or not) runs the compiled masked scan of
  :func:`trajlens.run.stepwise.raw_gae` on the buffers as they come from Parquet (no padding);
  labels with the same gamma and lambda share one scan, and whitening is verl's
  ``(A - mean) * rsqrt(var + 1e-8)`` over the step's model tokens with the statistics of
  :func:`trajlens.run.stepwise.step_moments`;
- REINFORCE and REINFORCE++ with the ``carry`` convention are the same scan with the critic at
  zero and lambda 1 (``A_t = r_t + gamma * A_next`` over model tokens, as
  :mod:`trajlens.estimators.reinforce` says), whitened the same way when asked (REINFORCE++
  always); with verl <= 0.8's ``reset`` convention, the compiled loop of
  :func:`trajlens.run.stepwise.raw_reset_returns`, whitened too. Which applies is the registry
  entry's :class:`~trajlens.estimators.spec.FlatScan` for the label's settings;
- every other token estimator (ReMax, the token baselines), and any step whose trajectories do
  not all have token arrays, goes through :func:`trajlens.estimators.adapters` on the step's frames.

Each result is either a flat ``(N,)`` float array aligned with the step's tokens in batch order
(trajectory after trajectory, as :func:`align_tokens` lays them out), or such an array with the
whitening still to apply (:class:`Shifted`), or a frame with ``trajectory_id`` and
``advantage`` / ``token_advantages``, or None.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa

from trajlens.estimators.registry import ESTIMATOR_REGISTRY, Input
from trajlens.estimators.spec import EstimatorChoice

TOKEN_ESTIMATORS: tuple[str, ...] = tuple(
    name for name, spec in ESTIMATOR_REGISTRY.items() if Input.TOKEN_ARRAYS in spec.inputs)
"""Estimators that need the token arrays, from the registry (so a new token-level one is one too)."""


class Shifted(NamedTuple):
    """Token advantages ``(base - shift) * scale``: a whitened label kept as its raw scan.

    Credit is linear in the advantages, so a call's sum over its span is ``scale * (sum of base
    - shift * model tokens)``: the raw and whitened labels of one scan share its prefix sums.
    """

    base: np.ndarray
    shift: float
    scale: float


def align_tokens(batch: pl.DataFrame, tokens: pa.Table | None) -> pa.Table | None:
    """``tokens`` rows in the order of ``batch`` when every trajectory of the batch has one; else None."""
    if tokens is None or tokens.num_rows == 0:
        return None
    ids = tokens.column("trajectory_id").combine_chunks()
    wanted = batch["trajectory_id"]
    if len(ids) == wanted.len() and pl.Series(ids).equals(wanted):
        return tokens
    order = (wanted.to_frame().join(pl.Series("trajectory_id", ids).to_frame().with_row_index("__token"),
                                    on="trajectory_id", how="left", maintain_order="left"))["__token"]
    if order.null_count():
        return None
    return tokens.take(pa.array(order.to_numpy()))


def flat_kernel(rec: EstimatorChoice) -> bool:
    """Whether ``rec`` runs on flat buffers here: compiled kernels available, and its registry
    entry's :class:`~trajlens.estimators.registry.FlatScan` holds for its settings."""
    from trajlens.estimators.flat import flat_scan_of

    return flat_scan_of(rec) is not None


def step_advantages(
    batch: pl.DataFrame,
    tokens: pa.Table | None,
    recs: tuple[EstimatorChoice, ...],
    outcome: dict[str, pl.DataFrame],
    ran: dict[tuple, Any] | None = None,
    mask: Any = None,
) -> list[Any]:
    """Per recomputation, this step's advantages (see the module docstring for the three forms).

    Args:
        batch: the step's training trajectories, in the order the outputs use.
        tokens: the step's token arrays (:data:`trajlens.run.stepwise.TOKEN_COLUMNS`), aligned with ``batch`` by
            :func:`align_tokens` when every trajectory has them, else as read (or None).
        recs: the recomputations.
        outcome: per label of an outcome or channel recomputation, its advantages over the run or
            the step (``trajectory_id``, ``advantage``).
        ran: this step's cut of scans run over several steps at once (:func:`window_scans`).
        mask: the ``flat_list`` of ``tokens``'s response mask, when the caller read it.
    """
    aligned = tokens is not None and _is_aligned(batch, tokens)
    flat = flat_step_advantages(batch, tokens if aligned else None, recs, ran=ran, mask=mask if aligned else None)
    out: list[Any] = []
    for rec in recs:
        if rec.estimator not in TOKEN_ESTIMATORS:
            found = outcome[rec.label]
            if not found["trajectory_id"].equals(batch["trajectory_id"]):  # not the step's rows as they lie
                found = found.join(batch.select("trajectory_id"), on="trajectory_id", how="semi")
            out.append(found)
        elif rec.label in flat:
            found = flat[rec.label]
            if isinstance(found, Exception):
                raise found
            out.append(found)
        else:
            out.append(_framed(batch, tokens, rec))
    return out


def flat_step_advantages(
    batch: pl.DataFrame, tokens: pa.Table | None, recs: tuple[EstimatorChoice, ...], scans: Any = None,
    ran: dict[tuple, Any] | None = None, mask: Any = None,
) -> dict[str, np.ndarray | Shifted | Exception]:
    """Per label of the ``recs`` that run on flat buffers here, this step's token advantages as
    one flat float array over ``batch``'s token rows in its order, or a :class:`Shifted` one
    where whitened (labels of one scan share it, as in :func:`step_advantages`); the input error instead where the step
    refuses that label. Labels of other estimators, and every label when some trajectory of
    ``batch`` has no token row, are left out: they go through the estimators' frames.
    ``scans``: the step's GAE scans a caller already ran (:data:`trajlens.run.stepwise.StepScans`),
    taken rather than run again; ``ran``: the same, keyed by :func:`scan_key` (:func:`window_scans`);
    ``mask``: the ``flat_list`` of ``tokens``'s response mask (in ``batch`` order), when the caller read it."""
    from trajlens.estimators import EstimatorInputError

    aligned = align_tokens(batch, tokens)
    if aligned is None:
        return {}
    shared: dict[tuple, Any] = dict(ran or {})
    if mask is not None and aligned is tokens:
        shared.setdefault(_MASK_KEY, mask)
    for (gamma, lam), (raw, moments) in (scans or {}).items():
        shared[("critic", gamma, lam)], shared[("moments", "critic", gamma, lam)] = raw, moments
    out: dict[str, np.ndarray | Shifted | Exception] = {}
    for rec in recs:
        if rec.estimator not in TOKEN_ESTIMATORS or not flat_kernel(rec):
            continue
        try:
            found = _flat(batch, aligned, rec, shared)
        except EstimatorInputError as error:
            out[rec.label] = error
            continue
        out[rec.label] = found  # a Shifted is (base, shift, scale): whitened where the caller reads it
    return out


_MASK_KEY = ("mask", 0.0, 0.0)
"""Where the step's flat response mask is kept among its scans."""


def _is_aligned(batch: pl.DataFrame, tokens: pa.Table) -> bool:
    ids = tokens.column("trajectory_id").combine_chunks()
    return len(ids) == batch.height and pl.Series(ids).equals(batch["trajectory_id"])


def _flat(batch: pl.DataFrame, tokens: pa.Table, rec: EstimatorChoice, shared: dict) -> np.ndarray | Shifted:
    from trajlens.estimators.flat import flat_list, flat_scan_of
    from trajlens.run.stepwise import raw_gae, raw_reset_returns, step_moments

    settings = rec.settings()  # the registry's defaults, then the recomputation's options
    scan = flat_scan_of(rec)
    whiten = scan is not None and scan.whitened or bool(settings.get("whiten", False))
    key = scan_key(rec)
    kind, gamma, lam = key
    if key not in shared:
        if _MASK_KEY not in shared:  # the step's response mask, read once for every scan
            shared[_MASK_KEY] = flat_list(tokens.column("response_mask"), np.bool_, False)
        mask = shared[_MASK_KEY]
        if kind == "critic":
            shared[key] = raw_gae(batch, tokens, gamma=gamma, lam=lam, mask=mask)
        elif kind == "reset":  # verl <= 0.8's returns
            shared[key] = raw_reset_returns(batch, tokens, gamma=gamma, mask=mask)
        else:  # the returns (REINFORCE, carry): GAE with V = 0 and lambda = 1
            shared[key] = raw_gae(batch, _zero_values(tokens), gamma=gamma, lam=lam, mask=mask)
    raw = shared[key]
    advantages = raw.advantages
    if whiten:
        from trajlens.estimators.whiten import require_two_tokens

        if ("moments", *key) not in shared:
            shared[("moments", *key)] = step_moments(raw.advantages, raw.mask)
        moments = shared[("moments", *key)]
        require_two_tokens("masked_whiten", moments.count, "a step")
        # verl masked_whiten: A' = (A - mean) * rsqrt(var + 1e-8) over the step's model tokens
        return Shifted(advantages, moments.whitening_mean, moments.whitening_scale)
    return advantages


def scan_key(rec: EstimatorChoice) -> tuple[str, float, float]:
    """The flat scan ``rec`` reads (one that runs on flat buffers, :func:`flat_kernel`), which
    recomputations of the same scan share: ``("critic", gamma, lam)`` (GAE), ``("reset", gamma,
    1.0)`` (verl <= 0.8's returns) or ``("returns", gamma, 1.0)`` (REINFORCE's returns)."""
    from trajlens.estimators.flat import flat_scan_of

    settings = rec.settings()
    scan = flat_scan_of(rec)
    gamma = float(settings["gamma"])
    if scan is not None and scan.critic:
        return ("critic", gamma, float(settings["lam"]))
    return ("reset" if scan is not None and scan.reset else "returns", gamma, 1.0)


def window_scans(batches: list[pl.DataFrame], tokens: list[pa.Table], recs: tuple[EstimatorChoice, ...]
                 ) -> list[dict[tuple, Any]] | None:
    """The GAE and returns scans of ``recs`` over consecutive steps at once, cut into each step's
    (for :func:`flat_step_advantages`' ``ran``): each step's ``batches`` and its ``tokens``
    aligned with it (:func:`align_tokens`). The scan runs row by row, so a step's cut is what
    the step alone gives. None when some step's inputs stop a scan: the steps then go one at a
    time and the step at fault says so."""
    from trajlens.estimators import EstimatorInputError
    from trajlens.estimators.flat import flat_list
    from trajlens.run.stepwise import _step_raw, raw_gae

    keys = sorted(key for key in {scan_key(rec) for rec in recs if rec.estimator in TOKEN_ESTIMATORS and flat_kernel(rec)}
                  if key[0] != "reset")
    if not keys or len(batches) < 2:
        return None
    batch = pl.concat(batches, how="vertical_relaxed")
    joined = pa.concat_tables(tokens, promote_options="default")
    bounds = np.cumsum([0, *(b.height for b in batches)])
    mask = flat_list(joined.column("response_mask"), np.bool_, False)
    out: list[dict[tuple, Any]] = [{} for _ in batches]
    for key in keys:
        kind, gamma, lam = key
        try:
            raw = raw_gae(batch, joined if kind == "critic" else _zero_values(joined), gamma=gamma, lam=lam, mask=mask)
        except EstimatorInputError:
            return None
        for index, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:])):
            out[index][key] = _step_raw(raw, int(start), int(stop))
    return out


def _zero_values(tokens: pa.Table) -> pa.Table:
    """``tokens`` with a critic of zeros on every token (same list offsets as the response mask)."""
    mask = tokens.column("response_mask").combine_chunks()
    if pa.types.is_large_list(mask.type):
        mask = mask.cast(pa.list_(mask.type.value_type))
    offsets = mask.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    zeros = pa.ListArray.from_arrays(pa.array(offsets.to_numpy() - first),
                                     pa.array(np.zeros(last - first, dtype=np.float32)))
    if "values" in tokens.column_names:
        return tokens.set_column(tokens.column_names.index("values"), "values", zeros)
    return tokens.append_column("values", zeros)


def _framed(batch: pl.DataFrame, tokens: pa.Table | None, rec: EstimatorChoice) -> pl.DataFrame | None:
    from trajlens.estimators import recompute

    if tokens is None or tokens.num_rows == 0:
        return None
    frame = pl.from_arrow(tokens)
    if "run_id" not in frame.columns:
        frame = frame.with_columns(pl.lit(batch["run_id"][0]).alias("run_id"))
    with_tokens = batch.join(frame.select("trajectory_id"), on="trajectory_id", how="semi")
    if with_tokens.height == 0:
        return None
    result = recompute(with_tokens, frame, rec.estimator, **rec.options)
    return result.select([c for c in ("trajectory_id", "advantage", "token_advantages") if c in result.columns])
