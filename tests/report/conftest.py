import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="session")
def sample_store(samples_store_path, tmp_path_factory):
    """Every sample run, for the report and comparison tests: a copy of the session's ingested
    store, since these tests write their analysis tables into it."""
    import trajlens
    from stores import copy_store

    return trajlens.open(copy_store(samples_store_path, tmp_path_factory.mktemp("sample") / "store"))
