import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))

LONG_CALLS, LONG_TOKENS = 300, 60_000


@pytest.fixture(scope="session")
def pages(tmp_path_factory):
    """One report (two runs, a comparison in its index), a comparison page and a viewer page of a
    long trajectory, written once for every browser test."""
    import trajlens
    from built_runs import built_run, no_tool_run, write_store
    from trajlens.compare import compare
    from trajlens.report import report_store
    from trajlens.report.compare_page import write_comparison
    from trajlens.report.viewer import run_credit, write_viewer

    root = tmp_path_factory.mktemp("browser")
    store = trajlens.open(write_store(root, [built_run("long", long_trajectory=(LONG_CALLS, LONG_TOKENS)),
                                             built_run("short", steps=4), built_run("valonly", split="val"),
                                             no_tool_run("math")]))
    out = root / "report"
    reports = {r.run_id: r for r in report_store(store, out, comparisons=[("long", "short")])}
    comparison = write_comparison(compare(store, "short:Q1", "short:Q4"), out / "compare", index="../index.html")[2]
    long_page = write_viewer(store, "long", "s3-t0", out / "long-s3-t0.html", run_credit(store, "long", "gae_raw"))
    assert reports["long"].viewers
    return {"index": out / "index.html", "comparison": comparison, "viewer": long_page,
            "validation viewer": reports["valonly"].viewers[0], "report viewer": reports["short"].viewers[0],
            "runs": sorted(reports), "long_calls": LONG_CALLS}


@pytest.fixture(scope="session")
def browser():
    from cdp import Browser

    handle = Browser()
    yield handle
    handle.close()
