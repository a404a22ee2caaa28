"""Fuzzing the store's own Parquet files: a damaged file is found by ``verify``, named by
every command that fails on it, and repaired from the run's source.

A store of one run (the tiny Parquet run, classified) is written once; each example copies
it, damages one of its table files (cut short, bytes changed or inserted, deleted, replaced
by another table's file, a column dropped, retyped or renamed) and checks that:

- ``verify_store`` finds a problem whenever the file's bytes changed;
- ``trajlens sql`` and ``trajlens classify`` exit 0, or 1 with one line;
- ``verify --repair`` leaves a store that verifies (the run written again from its source,
  a damaged analysis part removed).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_run import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

from _mutations import byte_mutation, column_mutation  # noqa: E402
from _profile import FUZZ  # noqa: E402

import trajlens  # noqa: E402
from trajlens.store.verify import repair_store, verify_store  # noqa: E402

QUERY = ("SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM trajectories) AS trajectories, "
         "(SELECT count(*) FROM tool_calls) AS calls, (SELECT count(*) FROM tokens) AS tokens, "
         "(SELECT count(*) FROM step_metrics) AS metrics, (SELECT count(*) FROM call_classes) AS classes")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(the store, its files) once for the module; examples work on copies of it."""
    from tinyrun import tiny_run

    from trajlens.store.layout import RunDirWriter

    root = tmp_path_factory.mktemp("fuzz-store")
    run = tiny_run()
    with RunDirWriter(root / "tiny", run.runs) as writer:
        writer.write_run(run)
    store = root / "store"
    trajlens.ingest([root / "tiny"], store)
    assert run_cli("classify", store).returncode == 0
    files = sorted(str(p.relative_to(store)) for p in store.rglob("*.parquet"))
    return store, files


def _one_line_or_success(done) -> None:
    assert done.returncode in (0, 1), done.stderr
    if done.returncode == 1:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr


DAMAGE = st.one_of(
    byte_mutation().map(lambda m: ("bytes", m)),
    column_mutation().map(lambda c: ("columns", c)),
    st.just(("delete", None)),
    st.integers(0, 1000).map(lambda i: ("replace", i)),
)


def test_a_damaged_store_file_is_found_named_and_repaired(written):
    store, files = written

    @settings(FUZZ, max_examples=max(4, FUZZ.max_examples // 3))  # about 2 s an example
    @given(index=st.integers(0, len(files) - 1), damage=DAMAGE)
    def target(index, damage):
        kind, how = damage
        with tempfile.TemporaryDirectory(prefix="trajlens-fuzz-store-") as scratch:
            copy = Path(scratch) / "store"
            shutil.copytree(store, copy)
            trajlens.open(copy).close()  # a copied store's views are brought up to date on first open
            file = copy / files[index]
            before = file.read_bytes()
            if kind == "bytes":
                file.write_bytes(how.apply(before))
            elif kind == "columns":
                pq.write_table(how(pq.read_table(file)), file)
            elif kind == "delete":
                file.unlink()
            elif files[how % len(files)] != files[index]:
                shutil.copyfile(copy / files[how % len(files)], file)
            changed = not file.exists() or file.read_bytes() != before
            assert verify_store(copy).ok != changed
            _one_line_or_success(run_cli("sql", copy, QUERY))
            _one_line_or_success(run_cli("classify", copy))
            repair_store(copy)
            assert verify_store(copy).ok, [f.line(copy) for f in verify_store(copy).findings]

    target()
