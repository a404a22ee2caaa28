"""The z of the two-sided 95% intervals every trajlens surface prints."""

from __future__ import annotations

Z95 = 1.959963984540054
"""Two-sided 95% standard-normal quantile: the 0.975 quantile of N(0, 1)."""
