"""Shared fixtures: a tiny hand-made run, the sample runs ingested once, paths to the real fixture logs."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from stores import copy_store
from tinyrun import tiny_run

# A suite started in the background by a shell without job control (`bash scripts/test &`)
# inherits SIGINT ignored, and so would every trajlens process a test starts: the Ctrl-C tests
# would see commands run to their end. A user's trajlens starts with Python's own handler; so
# do the tests' processes (each pytest worker runs this; its children start with the default).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# No property test has a deadline: a test example that takes 260 ms on a busy machine (CI's, or
# one beside a trainer) is no failure; times are the benchmarks' to judge (benchmarks/).
settings.register_profile("trajlens", deadline=None)
settings.load_profile("trajlens")

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"
REAL_FIXTURES = REPO.parent / "shared" / "fixtures" / "real"


@pytest.fixture
def tiny():
    return tiny_run()


@pytest.fixture
def tiny_run_dir(tmp_path, tiny):
    """The tiny run written as a canonical Parquet run directory."""
    from trajlens.store.layout import RunDirWriter

    directory = tmp_path / "tiny-run"
    with RunDirWriter(directory, tiny.runs) as writer:
        writer.write_run(tiny)
    return directory


@pytest.fixture(scope="session")
def samples_store_path(tmp_path_factory) -> Path:
    """Every run in sample_data/, ingested once for the whole test session. Read it, never write it.

    With pytest-xdist the workers share one copy: the first to need it ingests it under a lock in
    the session's common temporary folder, the others wait and open it. A test that writes
    analysis tables works on ``samples_store_copy`` (or copies this folder itself).
    """
    import trajlens

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the folder above every worker's own
    store = shared / "samples-store"
    with _exclusive(shared / "samples-store.lock"):
        if not (store / ".ingested").exists():
            shutil.rmtree(store, ignore_errors=True)
            trajlens.ingest([SAMPLE_DATA], store)
            (store / ".ingested").touch()
    return store


@pytest.fixture
def samples_store_copy(samples_store_path, tmp_path) -> Path:
    """A fresh copy of the ingested sample runs, for a test that writes into its store."""
    return copy_store(samples_store_path, tmp_path / "samples-store")


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


SLOWEST_FIRST = (
    "tests/test_readme.py",
    "tests/engine/test_ray_cluster.py",
    "tests/notebooks/test_notebooks.py",
    "tests/notebooks/test_notebook_numbers.py",
    "tests/checks/test_check_watch.py",
    "tests/report/test_report.py",
    "tests/report/test_degenerate.py",
    "tests/store/test_publish_faults.py",
    "tests/fuzz/test_logs.py",
    "tests/report/test_html_report.py",
    "tests/report/test_kinds.py",
    "tests/attribution/test_causal_runs.py",
    "tests/attribution/test_first_screen.py",
    "tests/browser/test_pages.py",
)
"""Modules whose tests or module fixtures take longest (pytest --durations): under pytest-xdist
they start first, so that no worker is left running one of them alone at the end."""


def pytest_collection_modifyitems(config, items):
    """In pytest-xdist's workers the slowest modules come first; with ``--dist loadfile
    --no-loadscope-reorder`` (scripts/test) they are handed out first, one file per worker."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {path: position for position, path in enumerate(SLOWEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
