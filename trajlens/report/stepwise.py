"""The report's recomputation choices; the step-wise recomputation itself is
:mod:`trajlens.run.stepwise` (its names are re-exported here for the benchmarks and notebooks
that import them from this module)."""

from __future__ import annotations

from typing import Any, NamedTuple

from trajlens.run.stepwise import (  # noqa: F401 - the old import path of these names
    KEY_COLUMNS, TOKEN_COLUMNS, AdvantagePass, RawGAE, StepMoments, StepResult, advantage_pass, diagnostics_by_step,
    gae_step, model_token_stats, raw_gae, read_step, recompute_steps, run_steps, step_moments,
)


class Choice(NamedTuple):
    """One recomputation to summarise: its label in the output, estimator and options."""

    label: str
    estimator: str
    options: dict[str, Any]
