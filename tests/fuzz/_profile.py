"""How long the fuzz targets run: a few seconds each by default (CI), far longer on demand.

``HYPOTHESIS_PROFILE=long pytest tests/fuzz -p no:xdist`` runs each target for 1,000 new
random examples; the default (``ci``) runs a fixed, derandomized handful, so CI is fast and
sees the same examples on every run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
          HealthCheck.function_scoped_fixture, HealthCheck.large_base_example]

PROFILES: dict[str, settings] = {
    "ci": settings(max_examples=12, deadline=None, derandomize=True, database=None, suppress_health_check=_QUIET),
    "long": settings(max_examples=1000, deadline=None, derandomize=False, suppress_health_check=_QUIET),
}

FUZZ = PROFILES.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), PROFILES["ci"])
"""The settings every fuzz target runs under."""
