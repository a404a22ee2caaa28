"""Running the ``trajlens`` command line from the tests: in this process, or in a subprocess.

:func:`run_cli` calls the CLI's own entry point (``trajlens.cli._app.main``, the function the
installed ``trajlens`` script calls) with stdout and stderr captured, and returns what a
subprocess would: the exit status, stdout and stderr. It costs no interpreter start and no
imports. :func:`run_cli_subprocess` starts ``python -m trajlens`` and is kept for what only a
process shows: a traceback, Ctrl-C, import cost, a fresh interpreter's state, concurrency.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: object, cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
            stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``trajlens ARGS`` in this process: its exit status, stdout and stderr.

    ``env`` sets (not replaces) environment variables for the call; ``cwd`` is the working
    directory during it. An exception the CLI does not turn into an exit status propagates, so a
    test sees the traceback where a subprocess would have printed it.
    """
    from trajlens.cli._app import main

    argv = [str(arg) for arg in args]
    out, err = _stream(), _stream()
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        if env:
            stack.enter_context(_environment(env))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        stack.enter_context(_stdin(stdin))
        status = main(argv)
    return subprocess.CompletedProcess(["trajlens", *argv], status, _text(out), _text(err))


def run_cli_subprocess(*args: object, cwd: str | os.PathLike[str] | None = None,
                       env: Mapping[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m trajlens ARGS`` in a fresh interpreter, with this checkout first on the path."""
    environment = {**os.environ, **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "trajlens", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=timeout)


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="\n", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8", errors="replace")


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _stdin(text: str) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved
