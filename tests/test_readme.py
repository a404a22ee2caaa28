"""The README's Python tour runs exactly as written, on the shipped sample runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

pytestmark = pytest.mark.slow


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_a_python_tour():
    blocks = python_blocks()
    assert blocks and any("trajlens.ingest" in block for block in blocks)


def test_every_python_example_runs_as_written(tmp_path):
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    for block in python_blocks():
        done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"README example failed:\n{block}\n{done.stderr[-2000:]}"
