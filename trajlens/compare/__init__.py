"""Two runs, two stages or two estimators side by side, with intervals, tests and effect sizes.

    from trajlens.compare import compare, describe
    table = compare(store, "sao-r6:Q4", "sao-r7:Q4")    # a Polars DataFrame, largest effect first
    print("\n".join(describe(table)))
"""

from trajlens.compare.sides import Side, parse_side
from trajlens.compare.table import (
    ADJUSTMENT,
    ADVANTAGE_STATISTICS,
    BEHAVIOUR_MEASURES,
    COMPARISON_COLUMNS,
    Measure,
    adjustment_note,
    compare,
    describe,
    p_text,
    title,
)

__all__ = ["compare", "describe", "title", "adjustment_note", "parse_side", "Side", "Measure", "BEHAVIOUR_MEASURES",
           "ADVANTAGE_STATISTICS", "COMPARISON_COLUMNS", "ADJUSTMENT", "p_text"]
