"""How the fused CUDA scan splits a batch among programs (:func:`trajlens.estimators._triton.layout`),
and the Triton kernels themselves through Triton's interpreter on CPU where Triton is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trajlens.estimators import _triton
from trajlens.estimators._triton import CHUNK, MAX_CHUNKS, layout

ROOT = Path(__file__).resolve().parents[2]


def test_rows_that_fill_the_gpu_get_a_program_each():
    assert layout(rows=132, length=131_072, processors=132) == (131_072, 1)
    assert layout(rows=1024, length=7, processors=132) == (7, 1)


def test_fewer_rows_are_cut_into_chunks():
    assert layout(rows=64, length=131_072, processors=132) == (CHUNK, 131_072 // CHUNK)
    assert layout(rows=64, length=CHUNK + 1, processors=132) == (CHUNK, 2)
    assert layout(rows=1, length=10, processors=132) == (CHUNK, 1)


def test_long_rows_get_longer_chunks_never_more_than_the_cap():
    size, chunks = layout(rows=8, length=1 << 20, processors=132)
    assert chunks == MAX_CHUNKS and size * chunks == 1 << 20
    size, chunks = layout(rows=8, length=(1 << 20) + 1, processors=132)
    assert chunks <= MAX_CHUNKS and size * chunks >= (1 << 20) + 1 and size == 1 << 15


def test_an_explicit_chunk_is_kept_and_a_huge_one_means_a_program_a_row():
    assert layout(rows=500, length=1000, processors=132, chunk=64) == (64, 16)
    assert layout(rows=2, length=1000, processors=132, chunk=1 << 30) == (1 << 30, 1)


@pytest.mark.slow
def test_the_triton_kernels_pass_their_checks_in_the_interpreter():
    pytest.importorskip("triton")
    if not _triton.AVAILABLE:
        pytest.skip("Triton is installed but did not import")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--interpret"], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    passed = [line for line in done.stdout.splitlines() if line.startswith("PASS")]
    assert len(passed) == 5 and "FAIL" not in done.stdout
