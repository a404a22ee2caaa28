"""The classification benchmark runs small: labels checked against the reference, and with
``--stages`` the time of each classifier step, the steps inside the shell step within its time
(its speed target is the benchmark's to judge at full size, not this test's)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_classify_checks_labels_and_times_each_step():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_classify.py"), "--calls", "6000", "--reference-calls", "600",
         "--stages", "--batch", "1500"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    # Exit 1 for a failed target: the labels must pass; the speed target is one a run this small
    # beside other tests cannot judge.
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "PASS  labels identical to the per-row reference on a 600-call subsample" in done.stdout
    assert done.returncode == 0 or "FAIL  vectorised >= 10x the per-row reference" in done.stdout
    assert "1 thread)" in done.stdout  # one Polars thread unless asked
    steps = dict(re.findall(r"^  (\S.*?|  \S.*?)\s+(\d+\.\d\d) s$", done.stdout, re.MULTILINE))
    shell = float(steps.pop("shell commands, each distinct one once:"))
    inside = [float(value) for label, value in steps.items() if label.startswith("  ")]
    assert len(inside) == 7 and all(value >= 0 for value in inside)
    assert sum(inside) <= shell + 0.01
    assert float(steps["  each stage's first rule and class"]) > 0
    assert re.search(r"^in batches of 1,500 \(4 passes\): \d+\.\d\d s = [\d,]+ calls/s", done.stdout, re.MULTILINE)
