"""docs/architecture.md names every package, only paths that exist, and what each kind of change touches."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()


def test_every_package_is_in_the_module_map():
    packages = {f"trajlens/{path.parent.name}/" for path in (ROOT / "trajlens").glob("*/__init__.py")}
    missing = sorted(package for package in packages if f"`{package}`" not in ARCHITECTURE)
    assert not missing


def test_every_path_it_names_exists():
    paths = set(re.findall(r"`((?:trajlens|queries|docs|tests)/[\w./*-]*)`", ARCHITECTURE))
    assert len(paths) > 10
    missing = sorted(path for path in paths if "*" not in path and not (ROOT / path).exists())
    assert not missing


def test_it_says_what_each_kind_of_change_touches():
    section = ARCHITECTURE.split("## What a change touches", 1)[1]
    for change, where in [("A new estimator", "trajlens/estimators/registry.py"),
                          ("A new log format", "trajlens/ingest/"),
                          ("A new behaviour rule", "trajlens/classify/rules.py"),
                          ("A new check", "trajlens/checks/defaults.toml"),
                          ("A new command", "COMMAND_MODULES")]:
        entry = next((line for line in section.split("\n- ") if line.startswith(f"**{change}**")), "")
        assert where in entry, change
