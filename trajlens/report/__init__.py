"""Reports over a store: stage-sampled behaviour, recomputed advantages, plots."""

from trajlens.report.build import classify_store, report_store

__all__ = ["classify_store", "report_store"]
