"""Properties of the code as a whole: one CLI vocabulary, no global state, no dead names,
generators that branch on data. Each scan reads the source; none imports torch."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "trajlens"
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --- one CLI vocabulary ---------------------------------------------------------------------------


def _cli_options() -> dict[str, set[str]]:
    import typer

    from trajlens.cli._app import _register, app

    _register()
    group = typer.main.get_command(app)
    return {name: {opt for param in command.params for opt in getattr(param, "opts", ()) if opt.startswith("--")}
            for name, command in group.commands.items()}


def test_a_run_is_named_with_run_on_every_command():
    options = _cli_options()
    assert {"ingest", "sql", "sample", "advantages", "classify", "attribute", "view", "check"} <= set(options)
    other_spellings = {f"{command} {opt}" for command, opts in options.items() for opt in opts
                       if re.fullmatch(r"--(runs?|run[-_]?ids?|run[-_]?name)", opt) and opt != "--run"}
    assert not other_spellings
    takes_one_run = {"sample", "advantages", "attribute", "view"}
    assert all("--run" in options[command] for command in takes_one_run)


def test_files_are_written_with_out_and_bound_values_with_param_or_option():
    options = _cli_options()
    other_spellings = {f"{command} {opt}" for command, opts in options.items() for opt in opts
                       if opt in {"--output", "--out-file", "--outfile", "--params", "--set", "--options"}}
    assert not other_spellings


def test_each_command_is_defined_in_the_module_of_its_name():
    import typer

    from trajlens.cli._app import COMMAND_MODULES, _register, app

    _register()
    commands = typer.main.get_command(app).commands
    defined_in = {name: command.callback.__module__ for name, command in commands.items()}
    assert {name: module for name, module in defined_in.items() if module != f"trajlens.cli.{name.replace('-', '_')}"} == {}
    assert set(defined_in.values()) == set(COMMAND_MODULES)


# --- no global state --------------------------------------------------------------------------------


def _matplotlib_global_calls(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "use" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in {"matplotlib", "mpl"}:
            found.append(f"line {node.lineno}: matplotlib.use")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            names = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
            if any(m == "matplotlib.pyplot" for m in modules) or (modules == ["matplotlib"] and "pyplot" in names):
                found.append(f"line {node.lineno}: pyplot")
    return sorted(found)


def test_the_library_never_calls_matplotlib_use_or_pyplot():
    offenders = {_name(path): calls for path in SOURCES if (calls := _matplotlib_global_calls(_tree(path)))}
    assert not offenders


def test_the_scan_finds_matplotlib_use_and_pyplot():
    tree = ast.parse("import matplotlib\nmatplotlib.use('Agg')\nfrom matplotlib import pyplot\n")
    assert _matplotlib_global_calls(tree) == ["line 2: matplotlib.use", "line 3: pyplot"]


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize(
    "notebook",
    NOTEBOOKS,
    ids=lambda path: path.name,
)
def test_notebooks_keep_the_inline_backend(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    code = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    assert not [line for block in code for line in block.splitlines() if re.search(r"\b(matplotlib|mpl)\.use\(", line)]


def _unbounded_caches(tree: ast.AST) -> list[str]:
    """Functions taking arguments under ``functools.cache`` or ``lru_cache(maxsize=None)``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        takes_arguments = bool(node.args.args or node.args.kwonlyargs or node.args.vararg or node.args.kwarg)
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            unbounded = name == "cache" or (name == "lru_cache" and (
                not isinstance(decorator, ast.Call)
                or any(k.arg == "maxsize" and isinstance(k.value, ast.Constant) and k.value.value is None
                       for k in decorator.keywords)
                or (decorator.args and isinstance(decorator.args[0], ast.Constant) and decorator.args[0].value is None)))
            if unbounded and takes_arguments:
                found.append(node.name)
    return found


def test_module_level_caches_are_bounded():
    found = {_name(path): names for path in SOURCES if (names := _unbounded_caches(_tree(path)))}
    assert found == {}


def test_the_cache_scan_finds_unbounded_caches():
    tree = ast.parse("import functools\n@functools.cache\ndef a(x): ...\n@functools.lru_cache(maxsize=None)\n"
                     "def b(x): ...\n@functools.lru_cache(maxsize=8)\ndef c(x): ...\n@functools.cache\ndef d(): ...\n")
    assert _unbounded_caches(tree) == ["a", "b"]


# --- generators branch on data -----------------------------------------------------------------------

# The sample READMEs (readme.py, and regenerate.py choosing the extra section of one) describe a
# named sample; every other module of trajlens/synth generates, and reads only the scenario's data.
DESCRIBES_NAMED_SAMPLES = {"readme.py", "regenerate.py", "scenarios.py", "causal_spec.py"}


def _compared_strings(tree: ast.AST) -> set[str]:
    strings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                strings |= {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}
    return strings


def test_generators_branch_on_data_not_on_scenario_names():
    from trajlens.synth.causal_spec import CAUSAL_SCENARIOS
    from trajlens.synth.scenarios import SCENARIOS

    names = set(SCENARIOS) | set(CAUSAL_SCENARIOS)
    assert {"sao-r6", "causal-r6"} <= names
    offenders = {_name(path): sorted(_compared_strings(_tree(path)) & names)
                 for path in sorted((PACKAGE / "synth").glob("*.py")) if path.name not in DESCRIBES_NAMED_SAMPLES}
    assert not {path: found for path, found in offenders.items() if found}


# --- no dead names ------------------------------------------------------------------------------------

# This file names the dead ones, so it is not a reader.
READERS = [*SOURCES, *sorted(set((ROOT / "tests").rglob("*.py")) - {Path(__file__).resolve()}),
           *sorted((ROOT / "benchmarks").rglob("*.py")), *NOTEBOOKS, *sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

def _defined_names(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
    return [name for name in names if not name.startswith("__")]


def test_every_module_level_name_is_read_somewhere():
    """A name is read when it occurs more than once in the package, tests, benchmarks, notebooks
    and docs together (its definition is one occurrence; ``__all__`` lists count)."""
    text = "\n".join(path.read_text(encoding="utf-8") for path in READERS)
    counts: dict[str, int] = {}
    for word in re.findall(r"\w+", text):
        counts[word] = counts.get(word, 0) + 1
    dead = {f"{_name(path)}:{name}" for path in SOURCES for name in _defined_names(_tree(path)) if counts.get(name, 0) <= 1}
    assert dead == set(), "module-level names nothing reads"


# --- declared dependencies are used -------------------------------------------------------------------

IMPORT_NAMES = {"pyyaml": "yaml", "markdown-it-py": "markdown_it"}


def test_every_runtime_dependency_is_imported_by_the_package():
    import tomllib

    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower() for requirement in requirements}
    imported = set()
    for path in SOURCES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    assert "polars" in declared
    unused = sorted(name for name in declared if IMPORT_NAMES.get(name, name) not in imported)
    assert not unused
