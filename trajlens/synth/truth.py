"""The ground truth written beside a generated run: ``truth.json``.

It holds what the generator injected (the scenario's curves evaluated at every step, the
events) and what it realised (per-step counts of the calls it generated, by the class it
generated them as; the advantage and explained-variance checks of the values it wrote). Tests
and users compare what trajlens recovers from the tables alone against it.

Layout::

    {"format": "trajlens-synth-truth/1", "scenario": ..., "seed": ..., "run_id": ...,
     "sizes": {...}, "definitions": {name: text},
     "curves": {name: {"anchors": [[step, value], ...], "origin": "seed"|"chosen", "doc": ...}},
     "per_step": {"step": [...], "<quantity>": [...], ...},       # one entry per step
     "events": [{"kind": ..., "steps": [...], "value": ..., "doc": ...}, ...],
     "summary": {...}}
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

TRUTH_FORMAT = "trajlens-synth-truth/1"
TRUTH_FILE = "truth.json"

DEFINITIONS: dict[str, str] = {
    "think_share": "think calls / all tool calls of the step (format_error calls excluded; there are none)",
    "class_counts": "tool calls of the step by the behaviour class they were generated as",
    "suite_run_rate": "share of the step's trajectories with at least one test_suite call",
    "readback_rate": "read-backs / edits, a read-back being a view of the file the edit just before it changed",
    "all_negative_batch": (
        "a step where every model token's unwhitened GAE advantage (gamma 1, lambda 1, observation tokens "
        "skipped) is negative; then every trajectory's mean advantage is negative too"),
    "advantage_token_mean": "mean unwhitened GAE advantage over the model tokens of the step",
    "explained_variance": "verl's 1 - var(R - V) / (var(R) + 1e-5) over model tokens, R the returns",
    "rel_gain": "the seed's per-channel rel_gain: mean over groups of (max - min) of the channel",
    "advantage std": "unbiased std over the step's trajectories of each trajectory's advantage (constant over its tokens)",
    "max_sigma": "largest |A - mean(A)| / std(A) over the step's trajectories",
}


class TruthRecorder:
    """Collects the per-step truth of a run while it is generated."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.header = header
        self.rows: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {}

    def add(self, step: int, values: dict[str, Any]) -> None:
        self.rows.append({"step": step, **values})

    @property
    def per_step(self) -> dict[str, list]:
        """Columns over steps; a quantity a step lacks (validation between runs) is null there."""
        keys = list(dict.fromkeys(k for row in self.rows for k in row))
        return {k: [row.get(k) for row in self.rows] for k in keys}

    def write(self, directory: Path, curves: dict[str, Any], events: list[dict[str, Any]]) -> Path:
        document = {
            "format": TRUTH_FORMAT,
            **self.header,
            "definitions": DEFINITIONS,
            "curves": curves,
            "per_step": self.per_step,
            "events": events,
            "summary": self.summary,
        }
        path = directory / TRUTH_FILE
        path.write_text(json.dumps(_rounded(document), indent=1, sort_keys=False) + "\n")
        return path


def load_truth(path: Path | str) -> dict[str, Any]:
    """Read ``truth.json`` from a run directory (or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / TRUTH_FILE
    return json.loads(path.read_text())


def _rounded(value: Any) -> Any:
    """Floats to 6 significant digits, NaN to null: stable, readable and diff-friendly."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value
