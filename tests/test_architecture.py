"""docs/architecture.md names every package, only paths that exist, and what each kind of change
touches; the package's imports keep to the layers the README's table draws."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
README = (ROOT / "README.md").read_text()


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


def readme_layers() -> list[set[str]]:
    """The modules of each layer of the README's *How the code is laid out* table, top first, by
    their first name under ``trajlens`` (``cli``, ``schema``, ...)."""
    section = README.split("## How the code is laid out", 1)[1].splitlines()
    table = section[next(i for i, line in enumerate(section) if line.startswith("|")):]
    table = table[:next((i for i, line in enumerate(table) if not line.startswith("|")), len(table))]
    rows = [line.split("|")[2] for line in table[2:]]
    return [{re.sub(r"\.py$", "", name) for name in re.findall(r"`trajlens/([\w.]+?)/?`", row)} for row in rows]


def trajlens_imports(path: Path) -> list[tuple[int, str]]:
    """Every ``trajlens.X`` module ``path`` imports, at its top or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("trajlens.")]


def test_no_module_imports_from_a_layer_above_its_own():
    layers = readme_layers()
    assert len(layers) >= 6 and {"cli"} == layers[0] and {"estimators", "classify"} <= layers[-1]

    def layer(module: str) -> int:  # a module the table does not name is in the core, the bottom layer
        first = module.split(".")[1]
        return next((rank for rank, names in enumerate(layers) if first in names), len(layers) - 1)

    upward = []
    for path in sorted((ROOT / "trajlens").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module in ("trajlens.__init__", "trajlens.__main__"):  # the package's lazy names, the entry point
            continue
        upward += [f"{path.relative_to(ROOT)}:{line} imports {name}"
                   for line, name in trajlens_imports(path) if layer(name) < layer(module)]
    assert not upward


def test_the_layer_check_sees_an_import_back_up(tmp_path):
    lower = tmp_path / "lower.py"
    lower.write_text("def f():\n    from trajlens.report.build import report_store\n")
    assert trajlens_imports(lower) == [(2, "trajlens.report.build")]
