"""Measures per stage, class and estimator, built from the per-step credit of :mod:`.api`.

``class_summary`` (one row per stage x class x estimator x aggregation)
    ``credit`` mean push per call; ``share_pushed_up``; ``relative_credit`` the class's mean
    push minus the mean push over all calls, averaged over the stage's steps weighted by the
    class's calls; ``relative_credit_scaled`` the same in units of the step's mean |push| (so
    estimators of different scale compare); ``reward_relevance`` the Pearson correlation of the
    class's count in a trajectory with the trajectory's reward, with a 95% Fisher-z interval;
    ``superstition`` = max(0, relative_credit_scaled) * (1 - max(0, reward_relevance)): credit a
    class gets beyond what its association with reward explains (0 when it earns no credit, the
    full credit when its count is unrelated or harmful to reward).
``length_bias`` (one row per estimator x aggregation)
    ``elasticity``: least-squares slope of log |push per model token| on log response length
    over trajectories, both centred within each step (so only trajectories of the same batch
    are compared) (0: every token of a long response is pushed as hard as one of a short
    response; -1: a token of a twice-as-long response is pushed half as hard), with a bootstrap
    interval over steps; ``weight_elasticity`` (``weight_low``, ``weight_high``): the part of it
    the aggregation's own weights make (:func:`length_bias`); ``spearman``: the rank correlation
    of length with the signed push per token.
``channels`` (one row per step, runs with two or more reward channels)
    Each channel's mean (``mean:<channel>``), each trajectory's ``dominant`` channel (argmax
    over its stacked per-channel GRPO advantages, as :func:`trajlens.estimators.channel_diagnostics`
    counts it; counted per channel in ``dominant:<channel>``), and ``rank_misalignment``: 1 minus the
    Spearman correlation, within each group, between summed-then-normalised GRPO advantages and
    GDPO's (per-channel normalised, then summed) advantages, averaged over groups with spread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from trajlens.intervals import Z95
from trajlens.run.quarters import quarters


P_FLOOR = 0.001
"""Smallest p-value printed as a number; below it a finding says ``p < 0.001``."""


def p_text(p_value: float) -> str:
    """A p-value in words: ``p < 0.001`` below :data:`P_FLOOR`, else ``p = 0.03`` (two significant digits)."""
    if not math.isfinite(p_value):
        return "p n/a"
    return f"p < {P_FLOOR:g}" if p_value < P_FLOOR else f"p = {p_value:.2g}"


def fisher_interval(r: float, n: int) -> tuple[float, float]:
    """95% interval of a Pearson correlation by the Fisher z transform (NaN when n < 4)."""
    if n < 4 or not math.isfinite(r):
        return float("nan"), float("nan")
    z = math.atanh(max(min(r, 0.999999), -0.999999))
    half = Z95 / math.sqrt(n - 3)
    return math.tanh(z - half), math.tanh(z + half)


def centred_correlation(frame: pl.DataFrame, x: str, y: str, by: str = "step") -> tuple[float, float, float, int]:
    """Pearson correlation of columns ``x`` and ``y``, each centred within its ``by`` value (so a trend
    both share across the run is not read as a relation), over the rows where both are finite, with
    its 95% Fisher interval (n = rows - distinct ``by`` values); NaN when either does not vary."""
    if x not in frame.columns or y not in frame.columns:
        return float("nan"), float("nan"), float("nan"), 0
    rows = frame.select(by, pl.col(x).cast(pl.Float64).alias("x"), pl.col(y).cast(pl.Float64).alias("y")).filter(
        pl.col("x").is_finite() & pl.col("y").is_finite())
    n = rows.height - rows[by].n_unique()
    if rows.height < 4:
        return float("nan"), float("nan"), float("nan"), n
    centred = rows.select((pl.col("x") - pl.col("x").mean().over(by)), (pl.col("y") - pl.col("y").mean().over(by)))
    a, b = centred["x"].to_numpy(), centred["y"].to_numpy()
    if a.std() == 0 or b.std() == 0:
        return float("nan"), float("nan"), float("nan"), n
    r = float(np.corrcoef(a, b)[0, 1])
    return (r, *fisher_interval(r, n), n)


def reward_relevance(trajectory_classes: pl.DataFrame, classes: list[str]) -> pl.DataFrame:
    """Per stage and class: correlation of the class's count in a trajectory with its reward.

    ``trajectory_classes`` has ``stage``, ``reward`` and one ``count:<class>`` column per class.
    """
    rows = []
    for (stage,), part in trajectory_classes.filter(pl.col("reward").is_not_null()).group_by(["stage"], maintain_order=True):
        reward = part["reward"].to_numpy().astype(float)
        for name in classes:
            column = f"count:{name}"
            counts = part[column].to_numpy().astype(float) if column in part.columns else np.zeros_like(reward)
            r = float("nan")
            if reward.size > 2 and counts.std() > 0 and reward.std() > 0:
                r = float(np.corrcoef(counts, reward)[0, 1])
            low, high = fisher_interval(r, reward.size)
            rows.append({"stage": stage, "primary_class": name, "reward_relevance": r,
                         "relevance_low": low, "relevance_high": high, "trajectories": reward.size})
    schema = {"stage": pl.String, "primary_class": pl.String, "reward_relevance": pl.Float64,
              "relevance_low": pl.Float64, "relevance_high": pl.Float64, "trajectories": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def class_summary(class_credit: pl.DataFrame, relevance: pl.DataFrame) -> pl.DataFrame:
    """Stage-level credit, relative credit, reward relevance and superstition (module docstring)."""
    keys = ["stage", "primary_class", "estimator", "aggregation"]
    summary = (
        class_credit.filter(pl.col("calls") > 0)
        .group_by(keys, maintain_order=True)
        .agg(
            pl.col("calls").sum(),
            (pl.col("credit") * pl.col("calls")).sum().truediv(pl.col("calls").sum()).alias("credit"),
            (pl.col("share_pushed_up") * pl.col("calls")).sum().truediv(pl.col("calls").sum()).alias("share_pushed_up"),
            (pl.col("relative_credit") * pl.col("calls")).sum().truediv(pl.col("calls").sum()).alias("relative_credit"),
            (pl.col("relative_credit_scaled") * pl.col("calls")).sum().truediv(pl.col("calls").sum())
            .alias("relative_credit_scaled"),
            pl.col("fallback_share").mean(),
        )
        .join(relevance.drop("trajectories"), on=["stage", "primary_class"], how="left")
    )
    relevance_part = pl.col("reward_relevance").fill_nan(0.0).fill_null(0.0).clip(lower_bound=0.0)
    return summary.with_columns(
        (pl.col("relative_credit_scaled").clip(lower_bound=0.0) * (1.0 - relevance_part)).alias("superstition")
    )


def length_bias(trajectory_push: pl.DataFrame, bootstrap: int = 500, seed: int = 0) -> pl.DataFrame:
    """Per estimator and aggregation: elasticity of |push per token| on length, and its interval;
    and the *weight elasticity*, the part of it the aggregation's weights make.

    ``trajectory_push`` has ``step``, ``estimator``, ``aggregation``, ``length`` (model tokens; NaN
    where the log counts none), ``push_per_token``. Every aggregation of an estimator weighs the
    same advantages, so what the advantages make of length (long responses scoring lower) is in
    every aggregation's elasticity alike; the weight elasticity is the slope of log(per-token
    weight) on log(length) over the same trajectories, the weights the aggregation gives each
    step's lengths (:func:`trajlens.attribution.calls.per_token_weights`; -1 for
    ``seq-mean-token-mean``, 0 for the others), whichever aggregations are compared.
    """
    from trajlens.attribution.calls import per_token_weights

    rng = np.random.default_rng(seed)
    weight_rng = np.random.default_rng([seed, 1])
    rows = []
    usable = trajectory_push.filter(  # a length not counted in model tokens is NaN: left out
        pl.col("length").is_finite() & (pl.col("length") > 0) & pl.col("push_per_token").is_finite()
        & (pl.col("push_per_token") != 0)
    )
    for (estimator, aggregation), part in usable.group_by(["estimator", "aggregation"], maintain_order=True):
        steps = part["step"].to_numpy()
        lengths = part["length"].to_numpy().astype(float)
        signed = part["push_per_token"].to_numpy().astype(float)
        # Within-step: centre both logs by step, so drift between steps does not pose as length bias.
        x = _centred(np.log(lengths), steps)
        slope, low, high = _elasticity(x, _centred(np.log(np.abs(signed)), steps), steps, rng, bootstrap)
        # A weight is a factor of the trajectory's own length (1, or 1 / L) times one of its step's
        # (its batch size, token count, L_max): centred by step, the latter cancels, so the weights
        # of every row at once give the slope the weights of each step give.
        log_weight = np.log(per_token_weights(lengths, int(lengths.max()), (aggregation,))[0])
        weight = _elasticity(x, _centred(log_weight, steps), steps, weight_rng, bootstrap)
        rows.append({"estimator": estimator, "aggregation": aggregation, "trajectories": int(x.size),
                     "elasticity": slope, "elasticity_low": low, "elasticity_high": high,
                     "weight_elasticity": weight[0], "weight_low": weight[1], "weight_high": weight[2],
                     "spearman": _spearman(x, signed)})
    schema = {"estimator": pl.String, "aggregation": pl.String, "trajectories": pl.Int64, "elasticity": pl.Float64,
              "elasticity_low": pl.Float64, "elasticity_high": pl.Float64, "weight_elasticity": pl.Float64,
              "weight_low": pl.Float64, "weight_high": pl.Float64, "spearman": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def _elasticity(x: np.ndarray, y: np.ndarray, steps: np.ndarray, rng: np.random.Generator,
                bootstrap: int) -> tuple[float, float, float]:
    """The least-squares slope of ``y`` on ``x`` (both centred within their step) and its 95%
    bootstrap interval over ``steps`` (NaN with fewer than three steps)."""
    slope = _slope(x, y)
    unique_steps, inverse = np.unique(steps, return_inverse=True)
    # A resample of steps is a multiplicity per step; the slope of the resampled rows is a
    # function of per-step sums (n, sum x, sum y, sum xy, sum x^2), so each draw is a dot product.
    sums = np.stack([np.bincount(inverse, weights=w, minlength=unique_steps.size)
                     for w in (np.ones_like(x), x, y, x * y, x * x)], axis=1)
    draws = np.empty(0)
    if unique_steps.size > 2 and bootstrap:
        chosen = np.stack([rng.integers(0, unique_steps.size, unique_steps.size) for _ in range(bootstrap)])
        multiplicity = np.stack([np.bincount(c, minlength=unique_steps.size) for c in chosen])
        n, sx, sy, sxy, sxx = (multiplicity @ sums).T
        with np.errstate(invalid="ignore", divide="ignore"):
            denominator = sxx - sx * sx / n
            draws = np.where(denominator > 1e-12, (sxy - sx * sy / n) / denominator, np.nan)
    finite = draws[np.isfinite(draws)]
    low, high = (np.quantile(finite, [0.025, 0.975]) if finite.size else (float("nan"), float("nan")))
    return slope, float(low), float(high)


def _centred(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    _, inverse = np.unique(groups, return_inverse=True)
    means = np.bincount(inverse, weights=values) / np.bincount(inverse)
    return values - means[inverse]


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    xc = x - x.mean()
    denominator = float((xc**2).sum())
    return float((xc * (y - y.mean())).sum() / denominator) if denominator > 1e-12 else float("nan")


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3:
        return float("nan")
    rx = np.argsort(np.argsort(x)).astype(float)
    ry = np.argsort(np.argsort(y)).astype(float)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def channel_measures(trajectories: pl.DataFrame) -> pl.DataFrame:
    """Dominant channel counts and sum-vs-GDPO rank misalignment per step (module docstring).

    Empty when the trajectories have fewer than two reward channels.
    """
    from trajlens.run.channels import channel_step_means, channel_values, complete_rows

    long = channel_values(trajectories)
    wide, names = complete_rows(long)  # the rows and channels the watch list counts
    if len(names) < 2:
        return pl.DataFrame()
    advantages, dominant = _channel_advantages(wide, names)
    wide = wide.with_columns(
        pl.sum_horizontal(names).alias("summed"),
        pl.Series("gdpo", advantages.sum(axis=1)),
        pl.Series("dominant", dominant, dtype=pl.String),
    )
    ranked = wide.with_columns(
        pl.col("summed").rank().over("step", "group_id").alias("rank_sum"),
        pl.col("gdpo").rank().over("step", "group_id").alias("rank_gdpo"),
    )
    per_group = (
        ranked.group_by("step", "group_id", maintain_order=True)  # each step's mean in the same order every time
        .agg(pl.corr("rank_sum", "rank_gdpo").alias("rho"), pl.col("summed").std().alias("spread"))
        .filter(pl.col("spread") > 0)
    )
    misalignment = per_group.group_by("step").agg((1.0 - pl.col("rho").fill_nan(None).mean()).alias("rank_misalignment"))
    counts = wide.group_by("step").agg([(pl.col("dominant") == n).sum().alias(f"dominant:{n}") for n in names])
    means = channel_step_means(long).pivot(on="channel", index="step", values="mean").select(
        "step", *[pl.col(n).alias(f"mean:{n}") for n in names])
    counts = counts.join(means, on="step", how="left")
    return counts.join(misalignment, on="step", how="left").sort("step")


def _channel_advantages(wide: pl.DataFrame, names: list[str]) -> tuple[np.ndarray, list[str]]:
    """Each trajectory's per-channel GRPO advantages (rows of ``wide``, in step order) and its
    dominant channel (``none`` when no channel has a value), as the estimators define them
    (:func:`trajlens.estimators.channels.per_channel_advantages`, :func:`~trajlens.estimators.channels.dominant_channels`)."""
    import torch

    from trajlens.estimators._groups import group_index
    from trajlens.estimators.channels import dominant_channels, per_channel_advantages

    advantages, dominant = [], []
    for step in wide.partition_by("step", maintain_order=True):
        rewards = torch.tensor(step.select(names).to_numpy(), dtype=torch.float64)  # a copy: the frame's array may be read-only
        groups = group_index("channel_measures", step["group_id"].to_list(), step.height, rewards.device)
        found = per_channel_advantages(rewards, groups)
        advantages.append(found.numpy())
        dominant.append(dominant_channels(found).numpy())
    labels = np.array([*names, "none"], dtype=object)  # -1, no channel with a value: the last label
    return np.concatenate(advantages), labels[np.concatenate(dominant)].tolist()


SETTLED = 0.9
"""Share of the way from the first stage's share to the last at which a drift has settled: the
end of the stretch that :func:`onset_step` reads back from (and of the verdict's window)."""


def drift_reach(steps: np.ndarray, share: np.ndarray, first: float, last: float, min_change: float) -> float:
    """How far a drift went: the last stage's share ``last``; or, for a share that went further
    and turned back (think rose to 0.98, then fell to 0 late in the run, its last quarter's share
    0.45), the furthest mean over a quarter of the steps (whole windows of per-step shares), when
    the run's final such mean fell back from it by ``min_change`` (a drift's worth) or more. The
    onset and the drift's end are read toward it, so a drift that turned back is not dated by its
    diluted end; a drift that holds, or eases back by less, keeps ``last`` whatever the stages."""
    share = np.asarray(share, dtype=float)
    width = max(int(quarters(steps).last.size), 1)
    if last == first or share.size < width:
        return last
    means = np.convolve(share, np.ones(width), "valid") / width
    sign = 1.0 if last > first else -1.0
    furthest = float(means.max() if sign > 0 else means.min())
    turned_back = sign * (furthest - means[-1]) >= min_change
    return furthest if turned_back and sign * (furthest - last) > 0 else last


def drift_onset(steps: np.ndarray, share: np.ndarray, first: float, last: float, k: int, min_change: float,
                fraction: float = 0.25) -> int:
    """:func:`onset_step` toward the drift's reach (:func:`drift_reach`): the onset of a drift,
    and, at a ``fraction`` of :data:`SETTLED`, its end."""
    return onset_step(steps, share, first, drift_reach(steps, share, first, last, min_change), k, fraction)


def onset_step(steps: np.ndarray, share: np.ndarray, first: float, last: float, k: int, fraction: float = 0.25) -> int:
    """The first step from which the mean share over k steps has moved ``fraction`` of the way
    from ``first`` to ``last``, counted from the last time before the drift settled that the mean
    was back at ``first`` (or short of it): a mean that crosses in the noise of the first stage
    and returns is no onset, while one that wavers about the mark on its way is. The drift has
    settled at the first mean :data:`SETTLED` of the way (``fraction`` of the way, when further)
    that is not back at ``first`` within a quarter of the steps after it: a spike that reaches
    the mark and falls back is no settling, so the onset is not read back from it (the first such
    mean when every one falls back; the last step without one). Without a crossing after that
    return, the last step. The onset at a quarter; the drift's end, for the verdict's window, at 0.9."""
    window = max(k, 1)
    means = np.array([share[i:i + window].mean() for i in range(steps.size)])
    sign = 1.0 if last > first else -1.0 if last < first else 0.0
    if sign == 0.0:
        return int(steps[-1])
    moved = sign * (means - first)

    def crossings(part: float) -> np.ndarray:
        return np.flatnonzero(moved >= sign * part * (last - first))

    settled = crossings(max(fraction, SETTLED))
    back = np.concatenate([[0], np.cumsum(moved <= 0.0)])  # back[i]: means at first before index i
    quarter = max(int(quarters(steps).last.size), 1)
    holds = settled[back[np.minimum(settled + 1 + quarter, steps.size)] == back[settled + 1]]
    end = int(holds[0]) if holds.size else int(settled[0]) if settled.size else steps.size - 1
    returned = np.flatnonzero(moved[:end + 1] <= 0.0)
    after = crossings(fraction)
    onset = after[after > returned[-1]] if returned.size else after
    return int(steps[onset[0]]) if onset.size else int(steps[-1])


def step_shares(trajectory_counts: pl.DataFrame, steps: np.ndarray, classes: Sequence[str]) -> np.ndarray:
    """Each class's share of the calls at each of ``steps`` (rows) from the trajectories'
    ``count:<class>`` columns: the step's calls of the class over all its calls (0 at a step
    without calls)."""
    counted = [c for c in trajectory_counts.columns if c.startswith("count:")]
    total = pl.sum_horizontal(counted) if counted else pl.lit(0.0)
    per_step = trajectory_counts.group_by("step").agg(*(pl.col(c).sum() for c in counted), total.sum().alias("__n"))
    at_steps = pl.DataFrame({"step": steps}, schema={"step": per_step.schema["step"]}).join(per_step, on="step", how="left")
    n = at_steps["__n"].fill_null(0.0).to_numpy().astype(float)
    out = np.zeros((steps.size, len(classes)))
    for c, name in enumerate(classes):
        if f"count:{name}" in counted:
            calls = at_steps[f"count:{name}"].fill_null(0.0).to_numpy().astype(float)
            np.divide(calls, n, out=out[:, c], where=n > 0)
    return out
