"""What a wheel built from the repository carries, and what a plain install pulls in."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JUPYTER = {"jupyter", "nbclient", "nbformat", "ipykernel"}


def _names(requirements: list[str]) -> set[str]:
    return {requirement.split(">")[0].split("=")[0].split("[")[0].strip() for requirement in requirements}


def test_jupyter_is_an_extra_not_a_runtime_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not JUPYTER & _names(project["dependencies"])
    assert JUPYTER <= _names(project["optional-dependencies"]["notebooks"])
    assert JUPYTER <= _names(project["optional-dependencies"]["test"])


@pytest.mark.slow
def test_wheel_carries_the_saved_queries_and_package_data(tmp_path):
    # Built from a copy of what the build reads, so no build/ folder lands in the repository.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("trajlens", "queries"):
        shutil.copytree(REPO / name, source / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                           "--quiet", "--wheel-dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    wheel = next(tmp_path.glob("trajlens-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    queries = {f"trajlens/queries/{path.name}" for path in (REPO / "queries").glob("*.sql")}
    assert queries and queries <= names
    assert "trajlens/py.typed" in names
    assert "trajlens/cli/shell.py" in names and "trajlens/cli/_options.py" in names
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Requires-Dist: duckdb" in text
    assert not any(line.startswith(f"Requires-Dist: {name}") and "extra ==" not in line
                   for line in text.splitlines() for name in JUPYTER)
