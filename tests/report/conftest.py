import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory):
    """Every sample run, ingested once for the report and comparison tests."""
    import trajlens

    root = tmp_path_factory.mktemp("sample")
    trajlens.ingest([SAMPLE], root / "store")
    return trajlens.open(root / "store")
