"""The attribution section of a run in the HTML report (registered in :mod:`trajlens.report.sections`).

Attribution recomputes every estimator the run allows and credits each tool call; the report
shows it for a run once ``trajlens attribute`` has saved its ``class_credit`` there, so the
report's cost does not grow by a recomputation per estimator for runs nobody asked about.
"""

from __future__ import annotations

from typing import Any


def run_section(store: Any, run_id: str) -> str | None:
    """Attribution of ``run_id`` as HTML, when the store holds an attribution of it; else None."""
    import polars as pl

    from trajlens.attribution.api import attribute
    from trajlens.attribution.render import attribution_html

    if "class_credit" not in store.tables():
        return None
    if store.table("class_credit").filter(pl.col("run_id") == run_id).select(pl.len()).collect().item() == 0:
        return None
    return attribution_html(attribute(store, run_id, write=False))
