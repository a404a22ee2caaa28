"""The attribution section of a run in the HTML report (registered in :mod:`trajlens.report.sections`).

Attribution recomputes every estimator the run allows and credits each tool call; the report
shows it for a run once ``trajlens attribute`` has saved it in the store, and reads the saved
tables (:func:`trajlens.attribution.saved.load_attribution`) rather than recomputing, so the
report pays for no recomputation at all. A store attributed before the summary tables existed
(``class_credit`` alone) is attributed again for the section, without writing.
"""

from __future__ import annotations

from typing import Any


def run_section(store: Any, run_id: str) -> str | None:
    """Attribution of ``run_id`` as HTML, when the store holds an attribution of it; else None."""
    import polars as pl

    from trajlens.attribution.render import attribution_html
    from trajlens.attribution.saved import load_attribution

    saved = load_attribution(store, run_id)
    if saved is not None:
        return attribution_html(saved)
    if "class_credit" not in store.tables():
        return None
    if store.table("class_credit").filter(pl.col("run_id") == run_id).select(pl.len()).collect().item() == 0:
        return None
    from trajlens.attribution.api import attribute

    return attribution_html(attribute(store, run_id, write=False))
