"""Known numbers on the real fixtures: the share of test-runner calls and of think calls, per
agent-log format, over behaviour calls (rejected calls excluded).

The counts were checked by reading the commands, not taken from the classifier:

* mini-swe-agent v1 (gemini3pro, 8 tasks): 282 calls of which 10 are rejected turns (not one
  bash block). The 20 test runs are pytest on a file in astropy (3), matplotlib (2),
  requests (6, one after a newline-chained backup and git checkout), pylint (4, python3 -m
  pytest), scikit-learn (2) and sphinx (1), plus Django's ./tests/runtests.py with a label (2).
  ``pytest --version`` runs no test. No think tool.
* mini-swe-agent v2 (deepseek, 3 runs of 8 tasks; the reasoner folder has no harness summary
  and is left out by the loader): 1,535 calls. 118 mention pytest, unittest or a runner: 30
  of those are ``pip install pytest``, ``python -c "import pytest"`` probes, inline unittest
  suites or greps over test files; the other 88 run pytest or unittest on files, node ids or a
  -k selection, and one more runs a test module directly (``python -m
  pydicom.tests.test_json``): 89. No think tool.
* SWE-agent (demonstrations and test data, 22 trajectories): 232 calls; reproductions are run
  as scripts, never through a test runner; no think tool.
* OpenHands V0 (4 runtime test trajectories): 11 calls, no tests, no think.
* OpenHands V1 (OpenAgentSafety, 45 workplace tasks): 391 calls, no tests, 7 think calls.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from trajlens.classify import TEST_RUNNER_CLASSES, classify_calls

REAL = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "real"

KNOWN = {
    # format: (folder, behaviour calls, rejected calls, test-runner calls, think calls)
    "mini-swe-agent-v1": ("mini-swe-agent-gemini3pro", 272, 10, 20, 0),
    "mini-swe-agent-v2": ("mini-swe-agent-deepseek-pr816", 1535, 0, 89, 0),
    "swe-agent": ("SWE-agent", 232, 0, 0, 0),
    "openhands-v0": ("OpenHands", 11, 0, 0, 0),
    "openhands-v1": ("openhands-benchmarks-openagentsafety", 391, 0, 0, 7),
}

pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="real fixtures not present")


@pytest.mark.parametrize("fmt", list(KNOWN))
def test_test_runner_and_think_shares(fmt):
    load_agent_logs = pytest.importorskip("trajlens.ingest.agents").load_agent_logs
    folder, behaviour, rejected, runners, thinks = KNOWN[fmt]
    run = load_agent_logs([REAL / folder], format=fmt)
    calls = classify_calls(pl.from_arrow(run.tool_calls))
    classes = calls["primary_class"]
    assert (classes.is_not_null().sum(), classes.is_null().sum()) == (behaviour, rejected)
    counted = (classes.is_in(list(TEST_RUNNER_CLASSES)).sum(), (classes == "think").sum())
    assert counted == (runners, thinks)
    runner_share, think_share = runners / behaviour, thinks / behaviour
    print(f"\n{fmt}: test-runner share {runner_share:.4f} ({runners}/{behaviour}), "
          f"think share {think_share:.4f} ({thinks}/{behaviour})")
