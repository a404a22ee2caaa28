"""Hand-built ``class_credit`` and ``step_flags`` frames: the drift rules on series chosen by hand."""

from __future__ import annotations

import numpy as np
import polars as pl


def class_credit_frame(shares: dict[str, np.ndarray], credit: dict[str, dict[str, np.ndarray]],
                       calls_per_step: int = 400, aggregation: str = "token-mean") -> pl.DataFrame:
    """``class_credit`` rows: ``shares[class]`` per step (steps 1..T), ``credit[estimator][class]`` the
    class's scaled relative credit per step (the step mean is 0, every call of a class gets its
    class's credit plus a spread of 0.1)."""
    steps = len(next(iter(shares.values())))
    rows = []
    for label, per_class in credit.items():
        for t in range(steps):
            counts = {name: int(round(share[t] * calls_per_step)) for name, share in shares.items()}
            total = sum(counts.values())
            for name, count in counts.items():
                value = float(per_class[name][t])
                rows.append({
                    "run_id": "hand", "step": t + 1, "stage": f"q{t * 4 // steps + 1}", "stage_index": t * 4 // steps,
                    "primary_class": name, "estimator": label, "aggregation": aggregation, "calls": count,
                    "step_calls": total, "class_share": count / total, "credit": value,
                    "share_pushed_up": float(value > 0), "relative_credit": value, "relative_credit_scaled": value,
                    "push_sum_scaled": count * value, "push_sumsq_scaled": count * (value**2 + 0.01),
                    "step_mean_scaled": 0.0, "fallback_share": 0.0,
                })
    return pl.DataFrame(rows)


def no_flags() -> pl.DataFrame:
    return pl.DataFrame(schema={"step": pl.Int64, "estimator": pl.String, "all_negative": pl.Boolean,
                                "all_positive": pl.Boolean})
