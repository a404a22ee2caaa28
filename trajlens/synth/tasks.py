"""The synthetic task pool: SWE-style issues in a few Python repositories.

Tasks are invented (ids look like SWE-bench ones, ``sqlfluff__sqlfluff-2417``, but do not
name real issues); what matters is that each task gives the generated commands consistent
paths, module names, symbols and tests, and carries a difficulty that moves its pass rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Module:
    """One source module of a repository, with the test file that covers it."""

    path: str
    """Path of the module from the repository root."""
    test: str
    """Path of its test file."""
    symbols: tuple[str, ...]
    """Functions or classes an issue can be about."""

    @property
    def dotted(self) -> str:
        parts = self.path.removesuffix(".py").split("/")
        if parts[0] in ("src", "lib"):
            parts = parts[1:]
        return ".".join(parts)


@dataclass(frozen=True)
class Repo:
    """A repository the tasks come from."""

    slug: str
    """GitHub-style ``owner/name``."""
    package_dir: str
    """Directory of the importable package."""
    modules: tuple[Module, ...]


REPOS: tuple[Repo, ...] = (
    Repo("sqlfluff/sqlfluff", "src/sqlfluff", (
        Module("src/sqlfluff/core/parser/lexer.py", "test/core/parser/test_lexer.py", ("Lexer", "lex_match", "StringLexer")),
        Module("src/sqlfluff/rules/layout.py", "test/rules/test_layout.py", ("reflow_spacing", "indent_points")),
        Module("src/sqlfluff/core/templaters/jinja.py", "test/core/templaters/test_jinja.py", ("JinjaTemplater", "slice_file")),
    )),
    Repo("pylint-dev/astroid", "astroid", (
        Module("astroid/brain/brain_namedtuple_enum.py", "tests/brain/test_namedtuple.py", ("infer_named_tuple", "_get_renamed_namedtuple_attributes")),
        Module("astroid/nodes/node_classes.py", "tests/test_nodes.py", ("Const", "Call", "FormattedValue")),
        Module("astroid/inference.py", "tests/test_inference.py", ("infer_attribute", "infer_binop")),
    )),
    Repo("pydicom/pydicom", "pydicom", (
        Module("pydicom/valuerep.py", "tests/test_valuerep.py", ("DSfloat", "PersonName", "IS")),
        Module("pydicom/dataset.py", "tests/test_dataset.py", ("Dataset", "to_json_dict")),
        Module("pydicom/filewriter.py", "tests/test_filewriter.py", ("write_dataset", "correct_ambiguous_vr")),
    )),
    Repo("pvlib/pvlib-python", "pvlib", (
        Module("pvlib/irradiance.py", "pvlib/tests/test_irradiance.py", ("get_total_irradiance", "haydavies", "perez")),
        Module("pvlib/temperature.py", "pvlib/tests/test_temperature.py", ("sapm_cell", "faiman")),
    )),
    Repo("marshmallow-code/marshmallow", "src/marshmallow", (
        Module("src/marshmallow/fields.py", "tests/test_fields.py", ("TimeDelta", "Nested", "DateTime")),
        Module("src/marshmallow/schema.py", "tests/test_schema.py", ("Schema", "_invoke_field_validators")),
    )),
    Repo("pallets/flask", "src/flask", (
        Module("src/flask/blueprints.py", "tests/test_blueprints.py", ("Blueprint", "register_blueprint")),
        Module("src/flask/config.py", "tests/test_config.py", ("Config", "from_file")),
    )),
    Repo("psf/requests", "src/requests", (
        Module("src/requests/models.py", "tests/test_requests.py", ("PreparedRequest", "prepare_body")),
        Module("src/requests/utils.py", "tests/test_utils.py", ("get_encoding_from_headers", "requote_uri")),
    )),
    Repo("pydata/xarray", "xarray", (
        Module("xarray/core/dataset.py", "xarray/tests/test_dataset.py", ("Dataset", "merge", "update")),
        Module("xarray/core/variable.py", "xarray/tests/test_variable.py", ("Variable", "as_compatible_data")),
    )),
)


@dataclass(frozen=True)
class TaskPool:
    """Columns of the task pool (one entry per task), drawn once per run from its seed."""

    task_id: tuple[str, ...]
    repo: np.ndarray
    """Index into :data:`REPOS`."""
    module: np.ndarray
    """Index into the repository's modules."""
    symbol: np.ndarray
    """Index into the module's symbols (modulo their count)."""
    difficulty: np.ndarray
    """Standard-normal difficulty: a logit offset on the pass rate (higher is harder)."""
    tests: np.ndarray
    """Number of target tests (FAIL_TO_PASS) of the task, 2-6."""

    def __len__(self) -> int:
        return len(self.task_id)


def task_pool(rng: np.random.Generator, size: int = 400) -> TaskPool:
    """Draw ``size`` tasks; each repository's issue numbers are distinct and increasing."""
    repo = rng.integers(0, len(REPOS), size)
    module = np.array([rng.integers(0, len(REPOS[r].modules)) for r in repo])
    symbol = rng.integers(0, 6, size)
    difficulty = rng.standard_normal(size)
    tests = rng.integers(2, 7, size)
    numbers = rng.choice(np.arange(800, 9000), size=size, replace=False)
    ids = tuple(f"{REPOS[r].slug.replace('/', '__')}-{n}" for r, n in zip(repo, numbers))
    return TaskPool(ids, repo, module, symbol, difficulty, tests)
