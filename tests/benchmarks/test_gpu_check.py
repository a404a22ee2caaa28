"""The prepared GPU script runs where there is no GPU: its dry run loads the estimators the way it
does on a GPU machine (without the package ``__init__`` files) and passes its parity tests on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_check_dry_run_passes_its_tests_on_cpu():
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--dry-run"], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert not [line for line in lines if line.startswith("FAIL")]
    passed = [line for line in lines if line.startswith("PASS")]
    assert len(passed) == 16  # five shapes x (float32 GAE, float64 GAE, returns), and the refused row
    assert any("a row without model tokens is refused" in line for line in passed)
    assert "verl's loop on cpu" in done.stdout  # the benchmark's table ran too


def test_gpu_check_without_a_gpu_or_dry_run_skips_and_exits_zero():
    if __import__("torch").cuda.is_available():
        pytest.skip("a CUDA device is present: the script would run in full")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--tests"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "GPU check skipped" in done.stdout
