"""docs/limits.md gives each limit's default and ceiling as trajlens.limits enforces them."""

from __future__ import annotations

import re
from pathlib import Path

from trajlens.limits import LIMIT_CEILING, Limits

DOC = Path(__file__).resolve().parents[1] / "docs" / "limits.md"


def test_the_table_gives_each_limits_default_and_ceiling():
    rows = dict(re.findall(r"^\| `(\w+)` \| ([\d.,]+ \| [\d.,]+) \|", DOC.read_text(), re.MULTILINE))
    documented = {name: tuple(float(v.replace(",", "")) for v in cells.split(" | ")) for name, cells in rows.items()}
    assert documented == {name: (float(getattr(Limits(), name)), float(ceiling)) for name, ceiling in LIMIT_CEILING.items()}
