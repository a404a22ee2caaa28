"""A progress bar for long commands that stays quiet when output is not a terminal."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


@contextlib.contextmanager
def progress_bar(description: str, total: int | None = None) -> Iterator[Callable[[str], None]]:
    """Yield ``tick(label)``; each call advances the bar by one item."""
    console = Console(stderr=True)
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[label]}", style="dim")]
    with Progress(*columns, console=console, transient=True, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(description, total=total, label="")

        def tick(label: str) -> None:
            bar.update(task, advance=1, label=label[-60:])

        yield tick
