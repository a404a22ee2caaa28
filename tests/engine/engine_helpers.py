"""Running trajlens in a subprocess, for the engine tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN_ID = "sao-r6"


def trajlens_env(**extra: str) -> dict[str, str]:
    """The environment of a trajlens subprocess: this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trajlens", *args], capture_output=True, text=True,
                          env=env or trajlens_env(), timeout=timeout)
