"""Values as JSON can hold them: the one rule every JSON file trajlens writes follows (``--out
x.json``, ``check --json``, ``attribute --json``): JSON has no NaN or infinity, so an undefined
number is ``null``.

It stands below everything else in trajlens and imports nothing from it."""

from __future__ import annotations

import math
from typing import Any


def json_values(value: Any) -> Any:
    """``value`` with every NaN or infinite float, at any depth (in dicts, lists and tuples), as
    None; every other value as it is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_values(item) for item in value]
    return value
