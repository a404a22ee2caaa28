"""The ``trajlens`` command line: a thin layer over the library.

Each command group lives in its own module and registers itself on :data:`app`; user errors
(:class:`trajlens.errors.TrajlensError`) print one line and exit 1, without a traceback.
"""

from __future__ import annotations

from trajlens.cli._app import app, main

__all__ = ["app", "main"]
