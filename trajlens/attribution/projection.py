"""Would another estimator have stopped it? The class shares each estimator's pushes would have produced.

A behaviour-level approximation on the logged calls. The policy over the competing
(non-structural) classes is a softmax over class logits, started at the log of each class's
mean share over the run's first ``k`` steps. At every step each class's logit moves by

    theta_c += gain * credit_c(t)

with ``credit_c(t)`` the class's competing relative credit at step t under the estimator (mean
scaled push of its calls minus that of the competing calls, 0 where it has no call; the unit
is the step's mean |push|, so every estimator takes steps of the same size). This is the
natural-gradient step of a softmax policy, ``theta_c += lr * (total push of c) / pi_c``, whose
size per call is the class's mean push. The one free number, ``gain`` (learning rate times
calls per step times the push scale), is fitted by least squares of the projected shares on the
shares the run actually had under its own estimator, then kept for every other estimator.

The approximation keeps the run's logged calls: a counterfactual estimator's credit is that of
the calls the run made, not of the calls its own policy would have sampled; where the
counterfactual policy moves far from the run's, the credit of the rarer calls is less certain.
The interval of each projected share is a parametric bootstrap over calls: every step's credit
redrawn from a normal with its within-step standard error, :data:`DRAWS` times.

``projection`` has one row per class and estimator: the share at the start (over the calls of
the first ``k`` steps), the share the run ended with and the projected final share (over the
calls of the last quarter of the steps, :func:`trajlens.run.quarters.quarters`), the projected
share's 95% interval, and the fitted gain. Shares over several steps are pooled, as every other
share is (:func:`pooled_share`): the class's calls over all calls, and a projected share is the
per-step projections weighted by each step's calls.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from trajlens.run.quarters import quarters

DRAWS = 200
"""Parametric bootstrap draws of the projected shares."""
GAINS = np.logspace(-3, 1.5, 46)
"""Gains tried by the fit (then refined around the best by a finer grid)."""

PROJECTION_SCHEMA: dict[str, pl.DataType] = {
    "primary_class": pl.String, "estimator": pl.String, "aggregation": pl.String, "own": pl.Boolean,
    "share_start": pl.Float64, "share_end": pl.Float64, "projected_end": pl.Float64, "projected_low": pl.Float64,
    "projected_high": pl.Float64, "gain": pl.Float64, "fit_error": pl.Float64,
}


def _matrices(credit: pl.DataFrame, label: str, steps: list[int], classes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(T, C) competing credit and its standard error under ``label`` (0 where a class has no call)."""
    part = credit.filter(pl.col("estimator") == label)
    position = {s: i for i, s in enumerate(steps)}
    column = {c: i for i, c in enumerate(classes)}
    mean = np.zeros((len(steps), len(classes)))
    se = np.zeros_like(mean)
    for step, name, value, calls, total, squares in part.select(
            "step", "primary_class", "competing_credit", "calls", "push_sum_scaled", "push_sumsq_scaled").iter_rows():
        if name not in column or step not in position or value is None or not calls:
            continue
        mean[position[step], column[name]] = value
        variance = max(squares / calls - (total / calls) ** 2, 0.0)
        se[position[step], column[name]] = np.sqrt(variance / calls)
    return mean, se


def simulate(start: np.ndarray, credit: np.ndarray, gain: float | np.ndarray) -> np.ndarray:
    """(..., T, C) shares from the (C,) start shares under per-step (..., T, C) credit and a gain
    (a number, or an array of gains over the leading dimensions: one projection per gain); the
    share at step t is the policy before step t's update."""
    gain = np.asarray(gain, dtype=float)
    lead = np.broadcast_shapes(credit.shape[:-2], gain.shape)
    theta = np.broadcast_to(np.log(np.clip(start, 1e-3, None)), lead + start.shape[-1:]).copy()
    shares = np.empty(lead + credit.shape[-2:])
    for t in range(credit.shape[-2]):
        z = np.exp(theta - theta.max(axis=-1, keepdims=True))
        shares[..., t, :] = z / z.sum(axis=-1, keepdims=True)
        theta = theta + gain[..., None] * credit[..., t, :]
    return shares


def fit_gain(start: np.ndarray, credit: np.ndarray, observed: np.ndarray) -> tuple[float, float]:
    """The gain whose projection is closest to the observed shares (least squares) and its RMS error."""
    def errors(gains: np.ndarray) -> np.ndarray:
        # every gain's projection in one pass over the steps
        return np.sqrt(np.mean((simulate(start, credit, gains) - observed) ** 2, axis=(-2, -1)))

    best = int(np.argmin(errors(GAINS)))
    fine = np.linspace(GAINS[max(best - 1, 0)], GAINS[min(best + 1, GAINS.size - 1)], 21)
    refined = errors(fine)
    return float(fine[int(np.argmin(refined))]), float(refined.min())


def pooled_share(shares: np.ndarray, calls: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """(..., C) share of each class over the calls of the chosen ``steps`` (a (T,) mask): the
    (..., T, C) per-step ``shares`` weighted by each step's number of calls (``calls``, (T, C)), so
    observed shares pool to the class's calls over all calls; the plain mean where the steps hold none."""
    weights = calls.sum(axis=1) * steps
    if weights.sum() == 0:
        weights = steps.astype(float)
    return np.tensordot(weights, shares, axes=([0], [-2])) / weights.sum()


def project(credit: pl.DataFrame, own_label: str | None, aggregation: str, structural: list[str], k: int,
            seed: int = 0) -> pl.DataFrame:
    """The projection table (module docstring) from ``class_credit`` with ``competing_credit``."""
    part = credit.filter((pl.col("aggregation") == aggregation) & ~pl.col("primary_class").is_in(structural))
    labels = part["estimator"].unique(maintain_order=True).to_list() if part.height else []
    if not labels:
        return pl.DataFrame(schema=PROJECTION_SCHEMA)
    reference = own_label if own_label in labels else labels[0]
    steps = sorted(part["step"].unique().to_list())
    classes = sorted(part["primary_class"].unique().to_list())
    counts = (part.filter(pl.col("estimator") == reference).pivot(on="primary_class", index="step", values="calls")
              .sort("step").fill_null(0))
    calls = np.stack([counts[c].to_numpy().astype(float) if c in counts.columns else np.zeros(counts.height)
                      for c in classes], axis=1)
    observed = calls / np.maximum(calls.sum(axis=1, keepdims=True), 1.0)
    first = np.arange(len(steps)) < max(k, 1)
    start = pooled_share(observed, calls, first)
    own_credit, _ = _matrices(part, reference, steps, classes)
    gain, fit_error = fit_gain(start, own_credit, observed)
    _, last = quarters(steps).masks(steps)  # rows of the (T, C) matrices in the last quarter
    end = pooled_share(observed, calls, last)
    rng = np.random.default_rng(seed)
    rows = []
    for label in labels:
        mean, se = _matrices(part, label, steps, classes)
        projected = pooled_share(simulate(start, mean, gain), calls, last)
        draws = simulate(start, mean[None] + se[None] * rng.standard_normal((DRAWS, *mean.shape)), gain)
        low, high = np.quantile(pooled_share(draws, calls, last), [0.025, 0.975], axis=0)
        for c, name in enumerate(classes):
            rows.append({"primary_class": name, "estimator": label, "aggregation": aggregation,
                         "own": label == own_label, "share_start": float(start[c]),
                         "share_end": float(end[c]), "projected_end": float(projected[c]),
                         "projected_low": float(low[c]), "projected_high": float(high[c]), "gain": gain,
                         "fit_error": fit_error})
    return pl.DataFrame(rows, schema=PROJECTION_SCHEMA)
