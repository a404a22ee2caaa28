"""The README lists every registered format with a command that ingests it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from trajlens.ingest import formats

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Log formats, and what ingest does with a bad log"


def format_rows() -> dict[str, str]:
    """Format name -> its example command, from the table of the README's formats section."""
    text = (ROOT / "README.md").read_text()
    assert SECTION in text, f"the README has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `([^`]+)` \|.*\| `(trajlens ingest [^`]+)` \|$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_every_registered_format_is_in_the_readme_with_an_example():
    rows = format_rows()
    missing = [fmt.name for fmt in formats.registry() if fmt.name not in rows]
    assert not missing, f"formats with no row and example command in the README's formats section: {missing}"
    assert set(rows) <= {fmt.name for fmt in formats.registry()}, "the README names a format the registry lacks"


def test_each_example_that_names_a_shipped_path_is_read_as_its_format():
    checked = 0
    for name, command in format_rows().items():
        words = shlex.split(command)[2:]
        paths = [ROOT / word for word in words[: words.index("--store")] if (ROOT / word).exists()]
        if not paths:
            continue  # an example folder of the user's (swebench_results/, trajectories/)
        planned = {source.format.name for path in paths for source in formats.plan(path)}
        assert name in planned, f"`{command}`: the shipped path is read as {planned}, not {name}"
        checked += 1
    assert checked >= 8
