"""`trajlens report` on degenerate runs, end to end through the CLI: many tiny steps cost per
step in time and memory, and token arrays without a model token are said, not failed on."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import run_cli

from built_runs import built_run, degenerate_store, write_store

SMALL, LARGE = 250, 4_000
GROWTH_BOUND_MB = 60
"""Most the report's peak RSS may grow from SMALL to LARGE steps. Measured: 636 -> 653 MB (some
5 KB a step: the per-step figures the checks and plots keep). A file per step and table, or
checks holding the whole run, cost 40 KB a step or more and fail."""
TIME_RATIO_BOUND = 8.0
"""Most the report's time may grow from SMALL to LARGE steps (16x the steps: the fixed start-up
cost dominates both today, 6.6 and 7.0 s; per step squared would give far more)."""

_MEASURE = """
import resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run([sys.executable, "-m", "trajlens", "report", sys.argv[1], "--out", sys.argv[2]],
                      capture_output=True, text=True)
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(__import__("json").dumps({"rc": done.returncode, "seconds": seconds, "peak": peak,
                                 "stderr": done.stderr[-2000:]}))
"""


def _report(store: Path, out: Path) -> dict:
    """Run `trajlens report` in a child of a fresh process: exit status, seconds and peak RSS."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(store), str(out)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


@pytest.mark.slow
def test_memory_and_time_of_many_tiny_steps_grow_with_the_steps_not_faster(tmp_path):
    small = _report(degenerate_store(tmp_path / "small", SMALL), tmp_path / "out-small")
    large = _report(degenerate_store(tmp_path / "large", LARGE), tmp_path / "out-large")
    assert small["rc"] == 0, small["stderr"]
    assert large["rc"] == 0, large["stderr"]
    growth = (large["peak"] - small["peak"]) / 1e6
    assert growth < GROWTH_BOUND_MB, f"peak RSS {small['peak'] / 1e6:.0f} MB -> {large['peak'] / 1e6:.0f} MB"
    assert large["seconds"] < TIME_RATIO_BOUND * small["seconds"], (small["seconds"], large["seconds"])
    markdown = (tmp_path / "out-large" / "degenerate" / "stage_report.md").read_text()
    assert f"| gae_raw | {LARGE} |" in markdown


@pytest.mark.slow
@pytest.mark.parametrize(("mask", "said"), [("all_false", "every response mask is false"),
                                            ("empty", "every token array is empty")])
def test_token_arrays_without_a_model_token_are_said(tmp_path, mask, said):
    store = write_store(tmp_path, [built_run("nomodel", mask=mask)])
    done = run_cli("report", store, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    findings = (tmp_path / "out" / "README.md").read_text()
    assert f"token arrays hold no model token ({said}, 12 arrays)" in findings
    assert said in (tmp_path / "out" / "index.html").read_text()
    markdown = (tmp_path / "out" / "nomodel" / "stage_report.md").read_text()
    assert "gae_raw" not in markdown


def test_many_tiny_steps_are_read_in_few_batches(tmp_path):
    """The step-wise recomputation shares each read among many tiny steps."""
    import trajlens
    from trajlens.run.batches import plan_batches, train_trajectories

    store = trajlens.open(degenerate_store(tmp_path / "store", 1_000, chunk=250))
    trajectories = train_trajectories(store, "degenerate")
    assert trajectories.height == 1_000
    assert plan_batches(trajectories, max_steps=256) == [(0, 256), (256, 512), (512, 768), (768, 1_000)]
    started = time.perf_counter()
    from trajlens.run.choices import report_advantages

    advantages = report_advantages(store, "degenerate")
    assert [c.label for c in advantages.choices] == ["gae_raw", "gae_whitened"]
    assert advantages.diagnostics.height == 2 * 1_000
    assert time.perf_counter() - started < 60
