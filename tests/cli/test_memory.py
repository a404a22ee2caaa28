"""The command line keeps the memory a step frees for the next step (trajlens.cli._memory)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="tunes glibc's malloc")

FAULTS = """
import resource, sys
import numpy as np
from trajlens.cli._memory import keep_freed_memory
kept = sys.argv[1] == "kept" and keep_freed_memory()
for _ in range(3):  # one step's arrays, freed before the next step's
    step = np.ones(48 << 20, dtype=np.uint8)
    del step
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step = np.ones(48 << 20, dtype=np.uint8)
    del step
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True)
    kept, faults = out.stdout.split()
    return kept, int(faults)


def test_freed_step_arrays_are_reused_not_faulted_in_again():
    # Arrays of 48 MiB, above the 32 MiB from which glibc always maps a block of its own: by
    # default each is faulted in anew (pages of 4 KiB, or 2 MiB where NumPy asks for huge pages).
    default, default_faults = _faults("default")
    assert default == "False" and default_faults > 1_000
    kept, faults = _faults("kept")
    assert kept == "True" and faults < 100  # the pages of the first arrays are reused


def test_the_command_line_entry_point_keeps_freed_memory():
    script = ("import sys, trajlens.cli._app as app, trajlens.cli._memory as m; "
              "app.main = lambda: print(m.keep_freed_memory()) or 0; app.run()")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "True"


ARROW_POOL = ("import sys, trajlens.cli._app as app; "
              "app.main = lambda: print(__import__('pyarrow').default_memory_pool().backend_name) or 0; app.run()")


def test_the_command_line_entry_point_gives_arrow_s_buffers_to_malloc_unless_the_user_chose_a_pool():
    import os

    environment = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", ARROW_POOL], capture_output=True, text=True, env=environment)
    assert out.returncode == 0 and out.stdout.strip() == "system", out.stderr
    chosen = subprocess.run([sys.executable, "-c", ARROW_POOL], capture_output=True, text=True,
                            env={**environment, "ARROW_DEFAULT_MEMORY_POOL": "mimalloc"})
    assert chosen.returncode == 0 and chosen.stdout.strip() == "mimalloc", chosen.stderr
    pools = [subprocess.run([sys.executable, "-c", f"{imports}; print(pyarrow.default_memory_pool().backend_name)"],
                            capture_output=True, text=True, env=environment).stdout.strip()
             for imports in ("import pyarrow", "import trajlens, trajlens.store, pyarrow")]
    assert pools[0] and pools[1] == pools[0]  # a program that imports trajlens keeps its pool
