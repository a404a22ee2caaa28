"""Attribution: which estimator rewarded the habit that grew, from when, and would another have stopped it.

``attribute(store, "causal-r6")`` credits every tool call of a run with the advantage of the
model tokens that produced it, under each estimator recomputation and loss aggregation
(table ``call_credit``), measures each behaviour class per step and stage (``class_credit``,
relative credit, reward relevance, superstition, length bias, reward channels) and relates
each estimator's credit to the drift that followed (lagged regression with bootstrap
intervals). See ``docs/attribution.md``.
"""

from __future__ import annotations

from trajlens.attribution.api import (
    CALL_CREDIT_COLUMNS, CLASS_CREDIT_COLUMNS, AttributionResult, attribute,
)
from trajlens.attribution.drift import DriftConfig
from trajlens.attribution.recomputations import (
    AGGREGATIONS, RECOMPUTATIONS, RunEstimator, own_recomputation, parse_recomputations,
)
from trajlens.attribution.render import attribution_html, attribution_markdown, verdict_lines
from trajlens.attribution.verdicts import AGGREGATION_ARTEFACT as AGGREGATION_ARTEFACT_VERDICT
from trajlens.attribution.verdicts import ARTEFACT as ARTEFACT_VERDICT
from trajlens.attribution.verdicts import ARTEFACTS as ARTEFACT_VERDICTS
from trajlens.attribution.verdicts import LEARNING as LEARNING_VERDICT
from trajlens.attribution.verdicts import UNEXPLAINED as UNEXPLAINED_VERDICT
from trajlens.attribution.verdicts import VERDICTS

__all__ = [
    "AGGREGATIONS",
    "AGGREGATION_ARTEFACT_VERDICT",
    "ARTEFACT_VERDICT",
    "ARTEFACT_VERDICTS",
    "CALL_CREDIT_COLUMNS",
    "CLASS_CREDIT_COLUMNS",
    "LEARNING_VERDICT",
    "RECOMPUTATIONS",
    "AttributionResult",
    "DriftConfig",
    "RunEstimator",
    "UNEXPLAINED_VERDICT",
    "VERDICTS",
    "attribute",
    "attribution_html",
    "attribution_markdown",
    "own_recomputation",
    "parse_recomputations",
    "verdict_lines",
]
